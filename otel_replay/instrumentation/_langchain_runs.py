"""Implicit runs of the LangChain instrumentor, and how a step it wraps ends.

A LangGraph graph, an LCEL sequence or a legacy chain invoked outside a run (and a model, tool or retriever
called alone) begins an implicit run (``_sync_in_run``, ``_async_in_run``, ``_iter_in_run``,
``_aiter_in_run``; ``_entry_wrappers`` patch the top-level invocations); ``_ran`` / ``_served_answer`` end a
step that ran or that the replay answered. The instrumentor's bookkeeping guards (``_guards``, which carry its
``tracer_provider=`` binding) are defined here once. Part of :mod:`otel_replay.instrumentation.langchain`.

It must never raise into the host program from its own bookkeeping, swallow or wrap the host's exceptions,
begin a run inside a run, or end a run in another context than the one it began in.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Final

from ..recording import DivergenceStop, ReplayInterrupt, end_call, end_run, in_run
from ._guarded import Guards
from ._guarded import enabled as _enabled
from ._langchain_codecs import _arg

_log = logging.getLogger("otel_replay")
_guards = Guards("LangChain")
_warn, _safely, _begin = _guards.warn, _guards.safely, _guards.begin
_NAME: Final = "langchain"  # otel_replay.step.instrumentation of the steps recorded here


def _unbuildable(kind: str, name: str, exc: BaseException) -> ReplayInterrupt:
    """The replay stops: the recorded answer cannot be rebuilt into LangChain objects (never a guess)."""

    return DivergenceStop(
        f"replay stopped: the recorded answer of {kind} {name!r} cannot be rebuilt as "
        f"LangChain objects ({type(exc).__name__}: {exc}); pass a mock for it"
    )


def _ran(call: Any, output: Any, what: str, plain: Callable[[Any], Any]) -> Any:
    """Finish a step whose call really ran, recording ``plain(output)``; returns the output."""
    if call is not None:
        end_call(call, result=_safely(f"encode the {what}", plain, output, default=output))
    return output


def _served_answer(
    call: Any, kind: str, name: str, served: Any, build: Callable[[Any], Any], end: Callable[..., Any] = end_call
) -> Any:
    """What LangChain expects for a call answered from the recording: ``build(recorded value)``, or the
    recorded error raised. A recording that cannot be rebuilt stops the replay. ``end`` ends the step."""
    if served.error is not None:
        end(call, exc=served.error)
        raise served.error
    try:
        value = build(served.value)
    except Exception as exc:  # a recording that cannot answer stops the replay
        stop = _unbuildable(kind, name, exc)
        end(call, exc=stop)
        raise stop from exc
    end(call, result=served.value)
    return value


def _name_of(instance: Any, default: str) -> str:
    try:
        name = instance.get_name()
    except Exception:  # noqa: BLE001
        name = getattr(instance, "name", None)
    return name if isinstance(name, str) and name else default


def _run_config(config: Any) -> dict[str, Any] | None:
    """The plain part of a RunnableConfig worth keeping (thread id and such; no callbacks, no internals)."""
    if not isinstance(config, Mapping):
        return None
    kept: dict[str, Any] = {}
    configurable = config.get("configurable")
    if isinstance(configurable, Mapping):
        kept["configurable"] = {k: v for k, v in configurable.items() if not str(k).startswith("__")}
    for key in ("tags", "metadata", "run_name", "recursion_limit"):
        if config.get(key) is not None:
            kept[key] = config[key]
    return kept or None


def _implicit_run(name: str, arguments: dict[str, Any], config: Any = None) -> Any:
    return _guards.begin_run(name, arguments=arguments, config=_run_config(config))


def _sync_in_run(name: str, arguments: Callable[[], dict[str, Any]], config: Any, body: Callable[[], Any]) -> Any:
    """``body()`` inside a run: the current one, or an implicit one begun here and ended with its outcome."""
    if in_run():
        return body()
    handle = _implicit_run(name, _safely("read the input", arguments, default={}), config)
    if handle is None:
        return body()
    try:
        result = body()
    except BaseException as exc:
        end_run(handle, exc=exc)
        raise
    end_run(handle, result=result)
    return result


async def _async_in_run(
    name: str, arguments: Callable[[], dict[str, Any]], config: Any, body: Callable[[], Any]
) -> Any:
    if in_run():
        return await body()
    handle = _implicit_run(name, _safely("read the input", arguments, default={}), config)
    if handle is None:
        return await body()
    try:
        result = await body()
    except BaseException as exc:
        end_run(handle, exc=exc)
        raise
    end_run(handle, result=result)
    return result


def _iterate_in(ctx: contextvars.Context, iterator: Iterator[Any]) -> Iterator[Any]:
    """Yield from ``iterator``, advancing it inside ``ctx``: a run or step kept open across the yields of a
    stream lives there, so the consumer's own context is left as it was between items."""
    try:
        while True:
            try:
                item = ctx.run(next, iterator)
            except StopIteration:
                return
            yield item
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            ctx.run(close)


async def _aiterate_in(ctx: contextvars.Context, iterator: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """The async twin of :func:`_iterate_in`. An awaitable cannot be run inside another context before
    Python 3.11, so each step of ``iterator`` runs in the consumer's context with the values ``ctx`` holds
    that differ from it (the open step, its span as the current OTel context) set before and reset after it:
    the model's own calls see the step (an SDK call inside it is left to it), and none of the step's values is
    in the consumer's context between items. Values the stream itself sets stay in the consumer's context, as
    they would without otel-replay (``stream`` keeps them in the step's context instead)."""
    try:
        while True:
            tokens = _enter(ctx)
            try:
                item = await iterator.__anext__()
            except StopAsyncIteration:
                return
            finally:
                _leave(tokens)
            yield item
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            tokens = _enter(ctx)
            try:
                await aclose()
            finally:
                _leave(tokens)


def _enter(ctx: contextvars.Context) -> list[contextvars.Token[Any]]:
    """Set in the current context the variables whose value in ``ctx`` differs from it; the tokens undo it."""
    missing = object()
    return [var.set(value) for var, value in ctx.items() if var.get(missing) is not value]


def _leave(tokens: list[contextvars.Token[Any]]) -> None:
    """Undo :func:`_enter`. A token that cannot be reset (the item ran on in another context) puts its old value
    back by hand, so no value of the step (its replay permission above all) stays in the consumer's context."""
    for token in reversed(tokens):
        try:
            token.var.reset(token)
        except (RuntimeError, ValueError):
            _log.warning("otel-replay: a LangChain stream's context could not be reset", exc_info=True)
            if token.old_value is not contextvars.Token.MISSING:
                token.var.set(token.old_value)


def _iter_in_run(
    name: str, arguments: Callable[[], dict[str, Any]], config: Any, body: Callable[[], Iterator[Any]]
) -> Iterator[Any]:
    """A generator run inside a run (implicit when none is current, kept in a context of its own); the run
    ends when the generator is exhausted or closed, its output being the last item."""
    if in_run():
        yield from body()
        return
    ctx = contextvars.copy_context()
    handle = ctx.run(_implicit_run, name, _safely("read the input", arguments, default={}), config)
    if handle is None:
        yield from body()
        return
    last = None
    try:
        for item in _iterate_in(ctx, ctx.run(body)):
            last = item
            yield item
    except GeneratorExit:
        ctx.run(end_run, handle, result=last)
        raise
    except BaseException as exc:
        ctx.run(end_run, handle, exc=exc)
        raise
    ctx.run(end_run, handle, result=last)


async def _aiter_in_run(
    name: str, arguments: Callable[[], dict[str, Any]], config: Any, body: Callable[[], AsyncIterator[Any]]
) -> AsyncIterator[Any]:
    """The async twin of :func:`_iter_in_run` (the run's context is entered around each item, see
    :func:`_aiterate_in`)."""
    if in_run():
        async for item in body():
            yield item
        return
    ctx = contextvars.copy_context()
    handle = ctx.run(_implicit_run, name, _safely("read the input", arguments, default={}), config)
    if handle is None:
        async for item in body():
            yield item
        return
    last = None
    try:
        async for item in _aiterate_in(ctx, body()):
            last = item
            yield item
    except GeneratorExit:
        ctx.run(end_run, handle, result=last)
        raise
    except BaseException as exc:
        ctx.run(end_run, handle, exc=exc)
        raise
    ctx.run(end_run, handle, result=last)


def _entry_wrappers() -> tuple[Callable[..., Any], ...]:
    """Wrappers of a graph's / chain's top-level invoke, ainvoke, stream, astream: implicit runs only."""

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        return lambda: {"input": _arg(args, kwargs, 0, "input")}

    def invoke(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        return _sync_in_run(
            _name_of(instance, type(instance).__name__),
            arguments(args, kwargs),
            _arg(args, kwargs, 1, "config"),
            lambda: wrapped(*args, **kwargs),
        )

    def ainvoke(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        return _async_in_run(
            _name_of(instance, type(instance).__name__),
            arguments(args, kwargs),
            _arg(args, kwargs, 1, "config"),
            lambda: wrapped(*args, **kwargs),
        )

    def stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        return _iter_in_run(
            _name_of(instance, type(instance).__name__),
            arguments(args, kwargs),
            _arg(args, kwargs, 1, "config"),
            lambda: wrapped(*args, **kwargs),
        )

    def astream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        return _aiter_in_run(
            _name_of(instance, type(instance).__name__),
            arguments(args, kwargs),
            _arg(args, kwargs, 1, "config"),
            lambda: wrapped(*args, **kwargs),
        )

    return invoke, ainvoke, stream, astream
