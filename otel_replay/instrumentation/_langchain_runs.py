"""Implicit runs of the LangChain instrumentor, and how a step it wraps ends.

A LangGraph graph, an LCEL sequence or a legacy chain invoked outside a run (and a model, tool or retriever
called alone) begins an implicit run (``sync_in_run``, ``async_in_run``, ``iter_in_run``,
``aiter_in_run``; ``entry_wrappers`` patch the top-level invocations); ``ran`` / ``served_answer`` end a
step that ran or that the replay answered. The instrumentor's bookkeeping guards (``guards``, which carry its
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
from ._langchain_codecs import arg

log = logging.getLogger("otel_replay")
guards = Guards("LangChain")
langchain_warn, langchain_safely, langchain_begin = guards.warn, guards.safely, guards.begin
NAME: Final = "langchain"  # otel_replay.step.instrumentation of the steps recorded here


def _unbuildable(kind: str, name: str, exc: BaseException) -> ReplayInterrupt:
    """The replay stops: the recorded answer cannot be rebuilt into LangChain objects (never a guess)."""

    return DivergenceStop(
        f"replay stopped: the recorded answer of {kind} {name!r} cannot be rebuilt as "
        f"LangChain objects ({type(exc).__name__}: {exc}); pass a mock for it"
    )


def ran(call: Any, output: Any, what: str, plain: Callable[[Any], Any]) -> Any:
    """Finish a step whose call really ran, recording ``plain(output)``; returns the output."""
    if call is not None:
        end_call(call, result=langchain_safely(f"encode the {what}", plain, output, default=output))
    return output


def served_answer(
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


def name_of(instance: Any, default: str) -> str:
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
    return guards.begin_run(name, arguments=arguments, config=_run_config(config))


def _begin_implicit(
    name: str,
    arguments: Callable[[], dict[str, Any]],
    config: Any,
    ctx: contextvars.Context | None,
    nested: bool = False,
) -> Any:
    """The handle of an implicit run begun for a call (in ``ctx`` when given: a stream's own context), or None
    when a run is current already or none could be begun (the call then runs as it is). ``nested``: inside a
    run, the call is an ``agent`` step of it (a LangGraph subgraph: an agent of a multi-agent graph)."""
    if in_run() and not nested:
        return None
    values = langchain_safely("read the input", arguments, default={})
    return _implicit_run(name, values, config) if ctx is None else ctx.run(_implicit_run, name, values, config)


def control_flow(exc: BaseException) -> bool:
    """Whether ``exc`` is LangGraph's control flow rather than a failure: a ``GraphBubbleUp`` (``ParentCommand``,
    a subgraph handing off to its parent graph; ``GraphInterrupt``), recognised by its class's name and module so
    LangGraph is not imported here."""
    return any(cls.__name__ == "GraphBubbleUp" and cls.__module__.startswith("langgraph") for cls in type(exc).__mro__)


class _Ending:
    """Ends an implicit run with the outcome of a ``with`` block: ``result`` as last set, or the exception the
    block raised. For a stream (``ctx`` given, the context the run was begun in and is ended in), a stream closed
    before its end ends the run with the last item it gave."""

    __slots__ = ("ctx", "handle", "result")

    def __init__(self, handle: Any, ctx: contextvars.Context | None = None) -> None:
        self.handle = handle
        self.ctx = ctx
        self.result: Any = None

    def __enter__(self) -> _Ending:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        closed = self.ctx is not None and isinstance(exc, GeneratorExit)
        # LangGraph's own control flow (a handoff to the parent graph, an interrupt) ends an agent as it meant to:
        # not a failure, and its exception (holding the whole state) is not one to record
        handed = exc is not None and control_flow(exc)
        outcome: dict[str, Any] = {"result": self.result} if exc is None or closed or handed else {"exc": exc}
        if self.ctx is None:
            end_run(self.handle, **outcome)
        else:
            self.ctx.run(end_run, self.handle, **outcome)


def sync_in_run(
    name: str, arguments: Callable[[], dict[str, Any]], config: Any, body: Callable[[], Any], nested: bool = False
) -> Any:
    """``body()`` inside a run: the current one, or an implicit one begun here and ended with its outcome
    (``nested``: inside a run, an agent step of it)."""
    handle = _begin_implicit(name, arguments, config, None, nested)
    if handle is None:
        return body()
    with _Ending(handle) as ending:
        ending.result = body()
    return ending.result


async def async_in_run(
    name: str, arguments: Callable[[], dict[str, Any]], config: Any, body: Callable[[], Any], nested: bool = False
) -> Any:
    """The async twin of :func:`sync_in_run`: ``body()`` is awaited."""
    handle = _begin_implicit(name, arguments, config, None, nested)
    if handle is None:
        return await body()
    with _Ending(handle) as ending:
        ending.result = await body()
    return ending.result


def iterate_in(ctx: contextvars.Context, iterator: Iterator[Any]) -> Iterator[Any]:
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


async def aiterate_in(ctx: contextvars.Context, iterator: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """The async twin of :func:`iterate_in`. An awaitable cannot be run inside another context before
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
            log.warning("otel-replay: a LangChain stream's context could not be reset", exc_info=True)
            if token.old_value is not contextvars.Token.MISSING:
                token.var.set(token.old_value)


def iter_in_run(
    name: str,
    arguments: Callable[[], dict[str, Any]],
    config: Any,
    body: Callable[[], Iterator[Any]],
    nested: bool = False,
) -> Iterator[Any]:
    """A generator run inside a run (implicit when none is current, kept in a context of its own); the run
    ends when the generator is exhausted or closed, its output being the last item."""
    ctx = contextvars.copy_context()
    handle = _begin_implicit(name, arguments, config, ctx, nested)
    if handle is None:
        yield from body()
        return
    with _Ending(handle, ctx) as ending:
        for item in iterate_in(ctx, ctx.run(body)):
            ending.result = item
            yield item


async def aiter_in_run(
    name: str,
    arguments: Callable[[], dict[str, Any]],
    config: Any,
    body: Callable[[], AsyncIterator[Any]],
    nested: bool = False,
) -> AsyncIterator[Any]:
    """The async twin of :func:`iter_in_run` (the run's context is entered around each item, see
    :func:`aiterate_in`)."""
    ctx = contextvars.copy_context()
    handle = _begin_implicit(name, arguments, config, ctx, nested)
    if handle is None:
        async for item in body():
            yield item
        return
    with _Ending(handle, ctx) as ending:
        async for item in aiterate_in(ctx, body()):
            ending.result = item
            yield item


_IN_RUN: Final = (sync_in_run, async_in_run, iter_in_run, aiter_in_run)
"""How a call runs inside a run, by the shape of the call: invoke, ainvoke, stream, astream."""


def entry_wrappers(nested: bool = False) -> tuple[Callable[..., Any], ...]:
    """Wrappers of a graph's / chain's top-level invoke, ainvoke, stream, astream: implicit runs only, and with
    ``nested`` (LangGraph graphs) an agent step for each invocation inside a run (a subgraph)."""
    return tuple(_entry_wrapper(in_run_as, nested) for in_run_as in _IN_RUN)


_graph_now: contextvars.ContextVar[Any] = contextvars.ContextVar("otel_replay_langgraph_now", default=None)
"""The LangGraph graph whose invocation runs in this context: its own inner calls (``invoke`` runs ``stream``)
are no agent steps of their own."""


def _as_current(instance: Any, in_run_as: Callable[..., Any], call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` (an invocation of the graph ``instance``, of the shape of ``in_run_as``) with the graph as
    :data:`_graph_now` wherever its body runs (a coroutine's or generator's body, not where it is made)."""
    if in_run_as is sync_in_run:

        def sync() -> Any:
            token = _graph_now.set(instance)
            try:
                return call()
            finally:
                _graph_now.reset(token)

        return sync
    if in_run_as is async_in_run:

        async def coroutine() -> Any:
            token = _graph_now.set(instance)
            try:
                return await call()
            finally:
                _graph_now.reset(token)

        return coroutine
    if in_run_as is iter_in_run:

        def generator() -> Iterator[Any]:
            token = _graph_now.set(instance)
            try:
                yield from call()
            finally:
                try:
                    _graph_now.reset(token)
                except ValueError:  # closed from another context: nothing of this one to undo there
                    pass

        return generator

    async def agenerator() -> AsyncIterator[Any]:
        token = _graph_now.set(instance)
        try:
            async for item in call():
                yield item
        finally:
            try:
                _graph_now.reset(token)
            except ValueError:  # closed from another context: nothing of this one to undo there
                pass

    return agenerator


def _entry_wrapper(in_run_as: Callable[..., Any], nested: bool) -> Callable[..., Any]:
    """The wrapper of one top-level invocation: outside a run (and with the instrumentor enabled), the call runs
    inside an implicit run as ``in_run_as`` runs it, named after the graph or chain, its input the first
    argument and its config the second. With ``nested`` (LangGraph graphs), an invocation inside a run by another
    graph is an agent step of the run, named after the graph, its input the first argument: each agent of a
    multi-agent graph (a supervisor's workers, a swarm's agents, any subgraph) holds its own model and tool
    steps. A graph called inside a run by other code (an ``@orp.agent`` function) is not one."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled():
            return wrapped(*args, **kwargs)
        inside = in_run()
        body: Callable[[], Any] = lambda: wrapped(*args, **kwargs)  # noqa: E731
        if nested:
            current = _graph_now.get()
            body = _as_current(instance, in_run_as, body)
            if inside and current is None:  # a graph called by the run's own code: its subgraphs are agents
                return body()
            if inside and current is instance:  # the graph's own inner call (invoke runs stream)
                return wrapped(*args, **kwargs)
        elif inside:
            return wrapped(*args, **kwargs)
        return in_run_as(
            name_of(instance, type(instance).__name__),
            (lambda: {"input": arg(args, kwargs, 0, "input")}) if inside else (lambda: entry_arguments(args, kwargs)),
            arg(args, kwargs, 1, "config"),
            body,
            inside,
        )

    return wrapper


def entry_arguments(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments an implicit run records for ``invoke(input, config)``: the input, and the config's
    ``configurable`` values when there are some (a checkpointer's ``thread_id``), so a replay calls the graph
    as it was called (a graph compiled with a checkpointer refuses a call without its thread id)."""
    values = {"input": arg(args, kwargs, 0, "input")}
    kept = _run_config(arg(args, kwargs, 1, "config")) or {}
    if kept.get("configurable"):
        values["config"] = {"configurable": kept["configurable"]}
    return values
