"""Replay-session hooks of the recording API: where a replay answers a step instead of its function.

``replaying(session)`` makes a replay session answer this context's calls; ``begin_call`` enters a step and
asks that session how the call is answered (``Served``: a recorded value, a mock's, or an exception);
``ReplayInterrupt`` / ``DivergenceStop`` stop a replayed agent. They are defined here, low in the layers, so
instrumentors raise them without importing the replay package.

It must never import the replay package, run a step's function itself, or let a failure to answer a call
during a replay fall through to executing it (it stops the replay instead).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

from .. import semconv
from ..semconv import StepKind
from ..snapshots import RawJSON
from .encoding import record_exception
from .lifecycle import enter_step, finish_step
from .state import Step, current_replay, replays_running


@dataclass(frozen=True, slots=True)
class Served:
    """A step answered without running its function (during a replay): a value, or an exception to raise."""

    how: str
    """``recording`` (answered from the recorded run) or ``mock`` (answered by a given mock)."""
    value: Any = None
    error: BaseException | None = None


@dataclass(eq=False, slots=True)
class Call:
    """A step call in progress: its span, what was encoded before the call, and how it is answered."""

    step: Step
    state: dict[str, Any]
    tokens: tuple[Any, Any]
    served: Served | None = None
    live: str | None = None
    """During a replay, for a call the session lets execute: what its real call may do under the side-effect
    guard (``network``: a whatif model call's connection; ``all``: a tool a lab's policy runs live)."""


class ReplayInterrupt(BaseException):
    """Stops a replayed agent at a call (approval missing, unanswerable divergence).

    A BaseException, so the agent's own ``except Exception`` blocks do not swallow it; the replay engine
    catches it and turns it into its result.
    """


class DivergenceStop(ReplayInterrupt):
    """The replay cannot go on without guessing (deterministic mismatch, or a call nothing can answer).

    Defined here, beside :class:`ReplayInterrupt`, so instrumentors raise it without importing the replay
    package; :mod:`otel_replay.replay.session` re-exports it."""


def interrupt_in(exc: BaseException, depth: int = 0) -> ReplayInterrupt | None:
    """The :class:`ReplayInterrupt` that ``exc`` is, or that an exception group holds (asyncio and anyio task
    groups, as the ``mcp`` client's transports use, wrap what their body raised in a group), else None."""
    if isinstance(exc, ReplayInterrupt):
        return exc
    inner = getattr(exc, "exceptions", None)
    if depth > 16 or not isinstance(inner, tuple):
        return None
    return next((found for e in inner if isinstance(e, BaseException) and (found := interrupt_in(e, depth + 1))), None)


@contextlib.contextmanager
def replaying(session: Any) -> Iterator[None]:
    """Make ``session`` answer the calls made in this context (used by the replay engine)."""
    token = current_replay.set(session)
    replays_running.add(1)
    try:
        yield
    finally:
        replays_running.add(-1)
        current_replay.reset(token)


def begin_call(step: Step, state: dict[str, Any], key: str | None) -> Call:
    """Enter the step and, during a replay, ask the session how the call is answered."""
    call = Call(step=step, state=state, tokens=enter_step(step))
    session = current_replay.get()
    if session is not None:
        try:
            arguments = state.get("arguments")
            arguments = arguments.text if isinstance(arguments, RawJSON) else arguments
            # What the call sends, as recorded: a model's request, else its arguments (for a readable diff).
            sent = state.get("request") if step.kind is StepKind.MODEL else arguments
            markers = state.get("markers")
            call.served = session.intercept(
                step=step,
                key=key,
                arguments=arguments,
                sent=sent if isinstance(sent, str) else None,
                **({"markers": markers} if markers else {}),
            )
        except BaseException as exc:  # noqa: BLE001 - any failure to answer stops the replay
            stop = (
                exc
                if isinstance(exc, ReplayInterrupt)
                else ReplayInterrupt(
                    f"replay stopped at {step.kind.value} {step.name!r}: answering it failed "
                    f"({type(exc).__name__}: {exc}); nothing was executed"
                )
            )
            step.span.set_attribute(semconv.REPLAY_SERVED, "refused")
            end = state.get("end")
            if callable(end):  # its snapshot too: what the refused call sent (the diff of the stored replay shows it)
                end(call, exc=stop)
            else:
                record_exception(step.run.rt, step.span, stop, f"{step.kind.value}.replay")
                finish_step(step, failed=True, step_token=call.tokens[0], ctx_token=call.tokens[1])
            raise stop from (None if stop is exc else exc)
        step.span.set_attribute(semconv.REPLAY_SERVED, call.served.how if call.served else "executed")
        if call.served is None:
            permits = getattr(session, "permits", None)
            call.live = permits(step) if permits is not None else None
    return call


unguarded_call: ContextVar[Call | None] = ContextVar("otel_replay_unguarded_call", default=None)
"""The call whose real execution the replay's side-effect guard lets through (see :attr:`Call.live`)."""


_NOTHING: Final[contextlib.AbstractContextManager[None]] = contextlib.nullcontext()
"""What :func:`unguarded` returns for every call that is not let through (all of them while recording): one
shared context manager that does nothing, instead of a generator-based one made per call."""


def unguarded(call: Any) -> contextlib.AbstractContextManager[None]:
    """Around the real execution of ``call`` (a :class:`Call`, or anything else: nothing happens): when the
    replay let it execute with a ``live`` permission, the side-effect guard lets that call's own effects
    through (:mod:`otel_replay.replay.safety.guard` reads it)."""
    if type(call) is not Call or call.live is None:
        return _NOTHING
    return _let_through(call)


@contextlib.contextmanager
def _let_through(call: Call) -> Iterator[None]:
    """:func:`unguarded` for a call the replay lets execute: that call is the one the guard lets through."""
    token = unguarded_call.set(call)
    try:
        yield
    finally:
        unguarded_call.reset(token)


def permit(call: Any) -> None:
    """:func:`unguarded` for the rest of the current context, for a step kept in a context of its own while it
    runs (a stream consumed item by item): call it as ``ctx.run(permit, call)``; the permission ends with that
    context and never reaches the consumer's."""
    if type(call) is Call and call.live is not None:
        unguarded_call.set(call)


def answer_of(served: Served) -> Any:
    """The value a served call returns, or the exception it raises."""
    if served.error is not None:
        raise served.error
    return served.value
