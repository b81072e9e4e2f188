"""The runs a wire command records: requests grouped into runs, each run open in a context of its own.

Why it exists: a proxy sees requests, not agents. Requests whose ``traceparent`` carries one trace id form one
run in that trace (so the agent's own spans and the proxy's steps are one trace); requests with the same
``x-otel-replay-run: NAME`` form one run named NAME, closed when a request names another run or when none came
for ``idle_s`` seconds; any other request is a run of its own. Each run lives in a ``contextvars.Context`` of its
own (the recording API keeps the current run there); a request records its steps in a copy of it, so concurrent
requests of one run never share a current step.

What it must never do: close a run while a request of it is in flight, or let a closing error reach a request.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import SpanContext, TraceFlags

from .. import semconv
from ..recording import begin_run, end_run
from .endpoints import ToolCall

log = logging.getLogger("otel_replay")

RUN_HEADER: Final = "x-otel-replay-run"
"""Request header naming the run a request belongs to (when it carries no ``traceparent``)."""
AGENT_HEADER: Final = "x-otel-replay-agent"
"""Request header naming the agent of a run the proxy opens (default ``proxy``, or the run's NAME)."""
DEFAULT_AGENT: Final = "proxy"
BOUNDARY: Final = "wire"
"""``otel_replay.run.boundary`` of a run recorded at the wire."""


def parent_of(traceparent: str | None) -> SpanContext | None:
    """The span context a W3C ``traceparent`` header names (version 00), or None when it names none."""
    if not traceparent:
        return None
    parts = traceparent.strip().split("-")
    if len(parts) < 4 or parts[0] != "00" or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3][:2], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags & 1))


@dataclass
class WireRun:
    """One open run: its context, its recording handle, and what its requests left pending."""

    key: tuple[str, str]
    agent: str
    context: contextvars.Context
    handle: Any
    trace_id: str | None
    """The run's trace (None when recording was unavailable)."""
    last: float
    in_flight: int = 0
    pending: dict[str, ToolCall] = field(default_factory=dict)
    """Tool calls the run's last answers asked for whose results no request has sent back yet."""
    lock: threading.Lock = field(default_factory=threading.Lock)


class WireRuns:
    """The runs open now, by group (see the module's docstring). ``closed`` is called with each run closed
    (after it ended), outside the lock: the proxy flushes the spans there."""

    def __init__(
        self,
        *,
        idle_s: float,
        closed: Callable[[WireRun], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle_s = idle_s
        self._closed = closed
        self._clock = clock
        self._runs: dict[tuple[str, str], WireRun] = {}
        self._named: tuple[str, str] | None = None
        self._lock = threading.Lock()

    def enter(self, headers: Mapping[str, str]) -> WireRun:
        """The run of a request (opened for it when none is), counted in flight until :meth:`leave`."""
        parent = parent_of(headers.get("traceparent"))
        name = (headers.get(RUN_HEADER) or "").strip()
        agent = (headers.get(AGENT_HEADER) or "").strip()
        if parent is not None:
            key = ("trace", f"{parent.trace_id:032x}")
        elif name:
            key = ("name", name)
        else:
            key = ("single", uuid.uuid4().hex)
        superseded: WireRun | None = None
        with self._lock:
            if key[0] == "name" and self._named is not None and self._named != key:
                # a request naming another run closes the named run before it (once nothing of it is in flight)
                superseded = self._runs.get(self._named)
                if superseded is not None and superseded.in_flight == 0:
                    del self._runs[self._named]
                else:
                    superseded = None
            if key[0] == "name":
                self._named = key
            run = self._runs.get(key)
            if run is None:
                run = self._open(key, agent or (name if key[0] == "name" else "") or DEFAULT_AGENT, parent)
                self._runs[key] = run
            run.in_flight += 1
            run.last = self._clock()
        if superseded is not None:
            self._close(superseded)
        return run

    def leave(self, run: WireRun) -> None:
        """A request of ``run`` is answered; a run of one request closes now."""
        with self._lock:
            run.in_flight -= 1
            run.last = self._clock()
            done = run.key[0] == "single" and run.in_flight == 0 and self._runs.pop(run.key, None) is not None
        if done:
            self._close(run)

    def close_idle(self) -> int:
        """Close every run with nothing in flight and no request for ``idle_s`` seconds; how many closed."""
        now = self._clock()
        with self._lock:
            idle = [r for r in self._runs.values() if r.in_flight == 0 and now - r.last >= self.idle_s]
            for run in idle:
                del self._runs[run.key]
                if self._named == run.key:
                    self._named = None
        for run in idle:
            self._close(run)
        return len(idle)

    def close_all(self) -> None:
        """Close every open run (the command is stopping)."""
        with self._lock:
            runs, self._runs, self._named = list(self._runs.values()), {}, None
        for run in runs:
            self._close(run)

    def _open(self, key: tuple[str, str], agent: str, parent: SpanContext | None) -> WireRun:
        context = contextvars.Context()
        handle = context.run(begin_run, agent, arguments={}, join=parent)
        trace_id = None
        if handle is not None:
            root = context.run(trace.get_current_span)
            root.set_attribute(semconv.RUN_BOUNDARY, BOUNDARY)
            trace_id = f"{root.get_span_context().trace_id:032x}"
        return WireRun(key=key, agent=agent, context=context, handle=handle, trace_id=trace_id, last=self._clock())

    def _close(self, run: WireRun) -> None:
        try:
            if run.handle is not None:
                run.context.run(end_run, run.handle)
            if self._closed is not None:
                self._closed(run)
        except Exception:  # a run that cannot close must not stop the others
            log.warning("otel-replay: could not close the run %s", run.key, exc_info=True)
