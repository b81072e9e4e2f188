"""Run context of the recording API: the run and step in progress, and the context variables that hold them.

A run's bookkeeping (``Run``: its root span, runtime, counters, usage totals, pending approvals, attached
files) and a step's (``Step``) live in context variables, so nested agents, threads and concurrent asyncio
tasks each build their own, separate tree. The identity in force and the replay answering this context's
calls (``current_replay``) are context variables too: each is defined here once, and every other module of
the recording API imports it from here. ``guard`` / ``log_failure`` are how recording bookkeeping fails:
logged, never raised.

It must never start or end a span, encode a value, or hold state outside a context variable, except the one
process-wide count of replays running (``replays_running``), which only ever makes a call refuse.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from opentelemetry import trace

from ..runtime import Runtime
from ..semconv import StepKind

log = logging.getLogger("otel_replay")


@dataclass(eq=False)
class Run:
    """Bookkeeping of one run (one trace), shared by every step of it across threads and tasks."""

    run_id: str
    agent: str
    entrypoint: str
    span: trace.Span
    rt: Runtime
    start_ns: int
    config: dict[str, Any] | None = None
    input_payload: dict[str, Any] = field(default_factory=dict)
    input_redactions: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)
    safety: list[Any] = field(default_factory=list)
    pending_approvals: dict[str, tuple[str, str]] = field(default_factory=dict)
    last_child: dict[int, tuple[str, str, bool, int]] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    input_seq: int = 0
    ended: bool = False
    """Set when the run ends: a thread it started that outlives it records nothing into it (see :func:`run_now`)."""
    carried: bool = False
    """Whether this run holds the thread wrappers of :mod:`otel_replay.recording.threads` in place."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    step_counter: Iterator[int] = field(default_factory=itertools.count)
    snapshot_seq: Iterator[int] = field(default_factory=itertools.count)


@dataclass(eq=False)
class Step:
    """A step in progress: which span it is and what kind."""

    run: Run
    span: trace.Span
    kind: StepKind
    name: str
    index: int
    attempt: int
    attrs: dict[str, Any] = field(default_factory=dict)
    """The attributes the step started with (readable even when its span is not recording)."""


current_run: ContextVar[Run | None] = ContextVar("otel_replay_run", default=None)
current_step: ContextVar[Step | None] = ContextVar("otel_replay_step", default=None)
identity_var: ContextVar[Mapping[str, str]] = ContextVar("otel_replay_identity", default=MappingProxyType({}))


def run_now() -> Run | None:
    """The run this context records into: None outside a run, and None once the run has ended (a thread or
    pool work item the run started, still running after it, carries a copy of its context: what it records
    then is outside any run, so a decorated step is not recorded and an instrumentor begins a run of its own)."""
    run = current_run.get()
    if run is None or run.ended:
        return None
    return run


def log_failure(what: str) -> None:
    log.warning("otel-replay: recording %s failed; the run continues unrecorded there", what, exc_info=True)


@contextlib.contextmanager
def guard(what: str) -> Iterator[None]:
    """Log and swallow any failure of recording bookkeeping: the agent must never see it.

    (Hot paths spell the same try/except out: a generator-based context manager costs microseconds.)
    """
    try:
        yield
    except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
        log_failure(what)


current_replay: ContextVar[Any] = ContextVar("otel_replay_replay_session", default=None)
"""The replay answering the calls of this context: the replay's state (no process-wide registry of replays).
Threads and executor work started during a replay get it with the replay's context (``recording.threads``)."""


class _ReplayCount:
    """How many replays run in this process now: the one piece of process-wide replay state, kept so that a
    ``write``/``high`` tool called outside any run, in a thread that carries no replay (started by
    ``_thread.start_new_thread``, a native library's thread, an executor that bypasses ``submit``), is refused
    while a replay runs rather than executed. It answers no call and records nothing: it only makes one refuse."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def add(self, n: int) -> None:
        with self._lock:
            self._count += n

    def __bool__(self) -> bool:
        return self._count > 0


replays_running = _ReplayCount()
