"""The public decorators of the recording API: ``@agent`` (and its ``with`` form), ``@tool``, ``@retriever``,
``@model``.

Each wraps a sync or async function once (``_wrap``) so a call records a run or a step, keeps the function's
signature (``ParamSpec``) and carries a marker (``__otel_replay__``) saying what it was marked as.

It must never change what the wrapped function returns or raises (a replay's ``ReplayInterrupt`` aside), nor
run the real function during a replay when recording its call failed.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal, ParamSpec, TypeVar, cast, overload

from .. import semconv
from ..risk import DEFAULT_RISK, RiskLevel, checked_risk, effective_risk
from ..snapshots import qualname_of
from .arguments import ArgNames, entrypoint_of, signature_of
from .calls import ToolMeta, end_call, model_begin, retrieval_begin, tool_begin
from .hooks import Call, ReplayInterrupt, answer_of, unguarded
from .lifecycle import AgentMeta, finish_run, start_run
from .state import current_replay, log, log_failure

P = ParamSpec("P")
R = TypeVar("R")


def _wrap(
    func: Callable[P, R],
    before: Callable[[tuple[Any, ...], dict[str, Any]], Any],
    after: Callable[..., None],
    overridable: str | None = None,
) -> Callable[P, R]:
    """Wrap sync or async ``func`` so ``before(args, kwargs)`` runs first and ``after(handle, result=, exc=)``
    runs last; the function's own result and exceptions pass through unchanged. ``overridable`` (a model
    step's name): during a replay given a policy, the session may override the call's arguments
    (``override_call``) before they are recorded and passed."""

    def rewrite(args: Any, kwargs: Any) -> tuple[Any, Any]:
        session = current_replay.get()
        override = getattr(session, "override_call", None) if session is not None else None
        if override is None or overridable is None:
            return args, kwargs
        try:
            new_args, new_kwargs = override(overridable, func, tuple(args), dict(kwargs))
        except Exception as exc:  # fail closed: never send a call the replay meant to change unchanged
            raise ReplayInterrupt(
                f"replay stopped at {qualname_of(func)}: applying the model overrides failed "
                f"({type(exc).__name__}: {exc}); nothing was executed"
            ) from exc
        return new_args, new_kwargs

    def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return before(args, kwargs)
        except ReplayInterrupt:
            raise
        except Exception as exc:
            if current_replay.get() is not None:
                # During a replay a call that cannot be recorded cannot be answered either: fail closed,
                # never run the real function unchecked.
                raise ReplayInterrupt(
                    f"replay stopped at {qualname_of(func)}: recording the call failed "
                    f"({type(exc).__name__}: {exc}); nothing was executed"
                ) from exc
            log.warning("otel-replay: could not start recording %s", qualname_of(func), exc_info=True)
            return None

    def finish(handle: Any, result: Any = None, exc: BaseException | None = None) -> None:
        try:
            after(handle, result=result, exc=exc)
        except Exception:  # noqa: BLE001
            log.warning("otel-replay: could not finish recording %s", qualname_of(func), exc_info=True)

    if inspect.iscoroutinefunction(func):
        async_func = cast("Callable[P, Awaitable[Any]]", func)

        @functools.wraps(func)
        async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            if overridable is not None:
                args, kwargs = rewrite(args, kwargs)
            handle = start(args, kwargs)
            served = handle.served if type(handle) is Call else None
            try:
                if served is not None:
                    result = answer_of(served)
                elif type(handle) is Call and handle.live is not None:
                    with unguarded(handle):
                        result = await async_func(*args, **kwargs)
                else:
                    result = await async_func(*args, **kwargs)
            except BaseException as exc:
                finish(handle, exc=exc)
                raise
            finish(handle, result=result)
            return result

        # an async function wrapped by an async function with the same parameters: R is its coroutine type
        return cast("Callable[P, R]", async_wrapper)

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if overridable is not None:
            args, kwargs = rewrite(args, kwargs)
        handle = start(args, kwargs)
        served = handle.served if type(handle) is Call else None
        try:
            if served is not None:
                result = answer_of(served)
            elif type(handle) is Call and handle.live is not None:
                with unguarded(handle):
                    result = func(*args, **kwargs)
            else:
                result = func(*args, **kwargs)
        except BaseException as exc:
            finish(handle, exc=exc)
            raise
        finish(handle, result=result)
        return cast("R", result)

    return wrapper


def _name_of(func: Callable[..., Any]) -> str:
    name: str = getattr(func, "__name__", "anonymous")
    return name


_MARKER: Final = "__otel_replay__"
"""The attribute a decorated function carries: what it was marked as (kind, name, and the decorator's options)."""


def _mark(wrapped: Callable[P, R], marker: dict[str, Any]) -> Callable[P, R]:
    setattr(wrapped, _MARKER, marker)
    return wrapped


def _decorator(
    name_or_func: str | Callable[..., Any] | None, build: Callable[[Callable[..., Any], str], Callable[..., Any]]
) -> Any:
    """Support ``@deco``, ``@deco()`` and ``@deco("name")``."""
    if callable(name_or_func) and not isinstance(name_or_func, str):
        func = name_or_func
        return build(func, _name_of(func))
    if name_or_func is not None and not isinstance(name_or_func, str):
        raise TypeError("the name must be a string")
    step_name: str | None = name_or_func

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        return build(func, step_name or _name_of(func))

    return decorate


_NO_INPUT: Final = object()


class AgentBlock:
    """What ``orp.agent("name")`` returns: a decorator, and a context manager for code with no single function
    to decorate (``with orp.agent("sql-agent", input=question) as run: ...``).

    As a ``with`` (or ``async with``) block, the block is one run (a nested ``agent`` step inside another run):
    ``input`` is recorded as the run's one positional argument, ``run.output = value`` sets the output it
    records, and an exception leaving the block ends the run with status error and propagates unchanged. A
    run recorded this way names no entrypoint: replay it with ``--app module:function``, a function that runs
    the same block and returns its output (it is called with the recorded ``input``). Never raises from its
    own bookkeeping. Make one per block (``orp.agent(...)`` in the ``with`` statement): ``output``, ``run_id``
    and ``trace_id`` belong to the object, so one object shared by concurrent blocks would mix them.
    """

    def __init__(self, name: str | None, *, config: Any = None, input: Any = _NO_INPUT) -> None:  # noqa: A002
        self.name = name
        self.config = config
        self._input = input
        self._handles: list[Any] = []
        self.output: Any = None
        """The output the block's run records (set it inside the block)."""
        self.run_id: str | None = None
        """Run id of the block's run while it is open (None outside a run, or when recording is unavailable)."""
        self.trace_id: str | None = None
        """Trace id (32 hex digits) of the block's run while it is open."""

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Decorate ``func`` (as ``@orp.agent("name")``)."""
        if self._input is not _NO_INPUT:
            raise TypeError("input= is for the with-form of orp.agent; a decorated function records its arguments")
        return _build_agent(func, self.name or _name_of(func), self.config)

    def __enter__(self) -> AgentBlock:
        handle = None
        try:
            meta = AgentMeta(name=self.name or "agent", config=self.config, sig=None, entrypoint="", script=None)
            args = () if self._input is _NO_INPUT else (self._input,)
            handle = start_run(meta, args, {})
        except ReplayInterrupt:
            raise
        except Exception:  # noqa: BLE001 - never into the agent
            log_failure("run start")
        self._handles.append(handle)
        if handle is not None:
            run = handle[1].run if handle[0] == "step" else handle[1]
            self.run_id = run.run_id
            self.trace_id = f"{run.span.get_span_context().trace_id:032x}"
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        handle = self._handles.pop() if self._handles else None
        try:
            finish_run(handle, result=self.output if exc is None else None, exc=exc)
        except Exception:  # noqa: BLE001
            log_failure("run end")
        return False

    async def __aenter__(self) -> AgentBlock:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        return self.__exit__(exc_type, exc, tb)


def _build_agent(func: Callable[P, R], agent_name: str, config: Any) -> Callable[P, R]:
    entrypoint, script = entrypoint_of(func)
    meta = AgentMeta(name=agent_name, config=config, sig=signature_of(func), entrypoint=entrypoint, script=script)
    wrapped = _wrap(func, lambda a, k: start_run(meta, a, k), finish_run)
    return _mark(wrapped, {"kind": "agent", "name": agent_name, "entrypoint": entrypoint})


@overload
def agent(name: Callable[P, R], /, *, config: Any = None) -> Callable[P, R]: ...
@overload
def agent(name: str | None = None, *, config: Any = None, input: Any = _NO_INPUT) -> AgentBlock: ...
def agent(
    name: str | Callable[..., Any] | None = None,
    *,
    config: Any = None,
    input: Any = _NO_INPUT,  # noqa: A002
) -> Callable[..., Any] | AgentBlock:
    """Mark a function (sync or async) as an agent entrypoint: each call outside a run records one run.

    The call becomes the root span ``invoke_agent {name}`` of a new trace, with input, config and output
    snapshots; a call inside another run becomes a nested ``agent`` step of that run. ``config`` (a dict,
    a pydantic model, a dataclass, or a callable returning one) is recorded as the config snapshot.
    An exception ends the run with status error and a redacted exception event, then propagates unchanged.

    ``orp.agent("name", input=...)`` (without a function) is also a context manager, for code with no single
    function to decorate: ``with orp.agent("sql-agent", input=question) as run: ...; run.output = answer``
    records the block as one run (see :class:`AgentBlock`; replays of such a run need ``--app``).
    """
    if callable(name) and not isinstance(name, str):
        if input is not _NO_INPUT:
            raise TypeError("input= is for the with-form of orp.agent; a decorated function records its arguments")
        return _build_agent(name, _name_of(name), config)
    if name is not None and not isinstance(name, str):
        raise TypeError("the name must be a string")
    return AgentBlock(name, config=config, input=input)


@overload
def tool(
    name: Callable[P, R], /, *, risk: RiskLevel | semconv.Risk = DEFAULT_RISK, schema_version: str | None = None
) -> Callable[P, R]: ...
@overload
def tool(
    name: str | None = None, *, risk: RiskLevel | semconv.Risk = DEFAULT_RISK, schema_version: str | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def tool(
    name: str | Callable[..., Any] | None = None,
    *,
    risk: RiskLevel | semconv.Risk = DEFAULT_RISK,
    schema_version: str | None = None,
) -> Any:
    """Mark a function (sync or async) as a tool: each call inside a run records an ``execute_tool`` step.

    ``risk`` is ``read``, ``write`` or ``high``; replay never executes a write or high tool without a fresh
    approval. A tool declared without a risk whose name says it sends messages, deletes, writes, pays or
    transfers, or runs commands is treated (and recorded) as ``high``. The tool snapshot holds the arguments, the
    result, their hashes and the approval in force.
    """
    checked_risk(risk)

    def build(func: Callable[..., Any], tool_name: str) -> Callable[..., Any]:
        name_args = ArgNames(func)
        meta = ToolMeta(
            name=tool_name,
            risk=effective_risk(tool_name, declared_risk),
            schema_version=schema_version,
            function=qualname_of(func),
        )
        wrapped = _wrap(func, lambda args, kwargs: tool_begin(meta, name_args(args, kwargs)), end_call)
        marker = {"kind": "tool", "name": tool_name, "risk": meta.risk, "function": meta.function}
        return _mark(wrapped, {**marker, "schema_version": schema_version})

    declared_risk = risk
    return _decorator(name, build)


@overload
def retriever(name: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def retriever(name: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def retriever(name: str | Callable[..., Any] | None = None) -> Any:
    """Mark a function (sync or async) as a retriever: each call inside a run records a ``retrieval`` step.

    The query is the argument named ``query``/``q``/``question``/``text`` (or the first one); arguments named
    ``rewritten_query``, ``filters``/``filter``/``where`` and ``top_k``/``k``/``limit`` are recorded as such.
    Returned documents may be dicts or objects with ``id``, ``content``/``text``/``page_content``, ``score``,
    ``rerank_score`` and ``citation``/``source``/``url``/``metadata.source``.
    """

    def build(func: Callable[..., Any], retriever_name: str) -> Callable[..., Any]:
        name_args = ArgNames(func)
        wrapped = _wrap(func, lambda args, kwargs: retrieval_begin(retriever_name, name_args(args, kwargs)), end_call)
        return _mark(wrapped, {"kind": "retrieval", "name": retriever_name})

    return _decorator(name, build)


@overload
def model(name: Callable[P, R], /, *, provider: str | None = None, model: str | None = None) -> Callable[P, R]: ...
@overload
def model(
    name: str | None = None, *, provider: str | None = None, model: str | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def model(
    name: str | Callable[..., Any] | None = None, *, provider: str | None = None, model: str | None = None
) -> Any:
    """Mark a function (sync or async) that performs one model call: each call inside a run records a
    ``chat {model}`` step with the request, response, usage tokens and request hash (deterministic replay
    matches on the hash). Usage is read from ``usage.input_tokens``/``prompt_tokens`` and
    ``output_tokens``/``completion_tokens`` of a dict or object response; ``cost_usd`` when reported.
    """
    model_name = model

    def build(func: Callable[..., Any], step_name: str) -> Callable[..., Any]:
        name_args = ArgNames(func)
        wrapped = _wrap(
            func,
            lambda args, kwargs: model_begin(step_name, provider, model_name, name_args(args, kwargs)),
            end_call,
            step_name,
        )
        return _mark(wrapped, {"kind": "model", "name": step_name, "provider": provider, "model": model_name})

    return _decorator(name, build)
