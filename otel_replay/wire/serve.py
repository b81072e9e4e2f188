"""The replay server (``otel-replay serve TRACE_ID``): an agent in any language, pointed at it, gets the recorded
run's answers, and the exchange is a replay like any other.

Why it exists: the recording proxy records agents otel-replay cannot run; this serves their recorded model
answers back, by trace id, to the same three endpoints, streamed exactly as recorded when the client streams.
The server is the replay's agent (:func:`otel_replay.replay.engine.replay_external`): each request it serves is
a model step of the replay run, matched and answered by the replay session (``mock``: in order whatever was
asked, the differences kept; ``deterministic``: a request that differs from the recorded one stops the replay
and is answered with HTTP 409 and the divergence), and the tool results the agent sends back are observed tool
steps, compared with the recorded ones. The replay ends when the agent has made as many model calls as were
recorded (or on :meth:`ReplayServer.stop`, or after ``exit_after_s``), and is stored, audited and diffed as any.

What it must never do: answer a call from the recording after the replay stopped, restore a redacted value, or
answer a bad request with a traceback.
"""

from __future__ import annotations

import contextvars
import json
import threading
from collections.abc import Callable
from typing import Any, Final

from ..recording import ReplayInterrupt, current_replay, end_call
from ..runs import Run
from .endpoints import DONE_FRAME, STREAM_ENVELOPE, Endpoint, ToolCall, asked, frame
from .forward import Forwarder
from .httpd import Handler, Server, stderr_line
from .recorded import begin_model, observe

STOPPED: Final = "the replay stopped"


class ReplayServer:
    """Serves one recorded run's model answers; :meth:`run` is the replay's agent."""

    name = "otel-replay serve"

    def __init__(
        self,
        original: Run,
        *,
        host: str = "127.0.0.1",
        port: int = 8788,
        exit_after_s: float | None = None,
        ready: Callable[[str], None] | None = None,
        warn: Callable[[str], None] = stderr_line,
        then_live: Forwarder | None = None,
    ) -> None:
        self.expected = sum(1 for s in original.steps if s.kind == "model")
        """Model calls the recording has: the replay ends when the agent has made as many."""
        self.exit_after_s = exit_after_s
        self.warn = warn
        self._ready = ready
        self.server = Server(self, host, port)
        self.url = self.server.url
        self.done = threading.Event()
        self.answered = 0
        self.stopped: dict[str, Any] | None = None
        """The divergence that stopped the replay (answered to every later call), or None."""
        self.pending: dict[str, ToolCall] = {}
        self._lock = threading.Lock()
        self._context: contextvars.Context | None = None
        self.then_live = then_live
        """Where the calls go once the recording cannot answer them (``--then-live``), or None (409)."""
        self.forwarded = 0

    # --------------------------------------------------------------------------------------------- agent

    def run(self) -> None:
        """Serve until the replay is done (called by the replay engine, inside the replay's run)."""
        self._context = contextvars.copy_context()
        thread = threading.Thread(target=self.server.serve, name="otel-replay-serve", daemon=True)
        thread.start()
        if self._ready is not None:
            self._ready(self.url)
        try:
            if self.expected or self.then_live is not None:
                self.done.wait(self.exit_after_s)
        finally:
            self.server.stop()
            thread.join(timeout=5)
        session = current_replay.get()
        if self.forwarded and session is not None:
            where = (
                f"after the replay stopped at step {self.stopped.get('step')}" if self.stopped else "past the recording"
            )
            session.note(
                f"--then-live: {self.forwarded} call{'s' if self.forwarded != 1 else ''} {where} went to the real API"
            )

    def stop(self) -> None:
        """End the replay now (SIGINT, SIGTERM): the calls not made are missing."""
        self.done.set()

    # ------------------------------------------------------------------------------------------ requests

    def exchange(self, handler: Handler, endpoint: Endpoint, body: bytes, request: dict[str, Any]) -> None:
        if self._context is None or self.done.is_set():
            handler.fail(409, f"{STOPPED}: it is over", divergence=self.stopped)
            return
        if self.then_live is not None and (self.stopped is not None or self.answered >= self.expected):
            self._live(handler, endpoint, body, request)
            return
        if self.stopped is not None:
            handler.fail(409, f"{STOPPED} at step {self.stopped.get('step')}", divergence=self.stopped)
            return
        self._context.copy().run(self._answer, handler, endpoint, request, body)

    def _live(self, handler: Handler, endpoint: Endpoint, body: bytes, request: dict[str, Any]) -> None:
        """``--then-live``: the call goes to the real API, recorded in the replay's run as it would be while
        recording (the replay session answers nothing more)."""
        assert self.then_live is not None and self._context is not None
        forwarder = self.then_live

        def forward() -> None:
            current_replay.set(None)  # in this copy of the context only
            forwarder.exchange(handler, endpoint, body, request, self.pending, self._lock)

        with self._lock:
            self.forwarded += 1
        self._context.copy().run(forward)

    def _answer(self, handler: Handler, endpoint: Endpoint, request: dict[str, Any], body: bytes) -> None:
        try:
            observe(self.name, endpoint, request, self.pending, self._lock)
            call = begin_model(self.name, endpoint, request)
        except ReplayInterrupt as stop:
            self._stop(handler, stop)
            if self.then_live is not None:  # the call the recording could not answer goes to the real API
                self._live(handler, endpoint, body, request)
            return
        served = call.served if call is not None else None
        if served is None:
            end_call(call)
            handler.fail(500, "the replay did not answer this call")
            return
        if served.error is not None:
            end_call(call, exc=served.error)
            self._recorded_error(handler, served.error)
        else:
            end_call(call, result=served.value)
            self._respond(handler, endpoint, request, served.value)
            calls = asked(endpoint, served.value)
            with self._lock:
                self.pending.update({c.call_id: c for c in calls})
        with self._lock:
            self.answered += 1
            if self.answered >= self.expected and self.then_live is None:
                self.done.set()

    def _stop(self, handler: Handler, stop: ReplayInterrupt) -> None:
        """A call the replay could not answer from the recording: the replay stops here (409)."""
        session = current_replay.get()
        divergences = list(getattr(session, "divergences", ()) or ())
        last = divergences[-1] if divergences else None
        body = {
            "step": getattr(last, "step_index", None),
            "kind": getattr(last, "kind", "unanswerable"),
            "reason": getattr(last, "reason", str(stop)),
            "diff": getattr(last, "diff", None),
        }
        with self._lock:
            if self.stopped is None:
                self.stopped = body
        if self.then_live is not None:
            return  # the call and every later one go to the real API until the replay is ended
        handler.fail(409, f"{STOPPED}: {body['reason']}", divergence=body)
        self.done.set()  # no later call is answered from the recording

    def _respond(self, handler: Handler, endpoint: Endpoint, request: dict[str, Any], value: Any) -> None:
        """The recorded answer as the client asked for it: its events when it streams, else one JSON body."""
        if not isinstance(value, dict):  # a call recorded without its answer (content not captured)
            handler.fail(409, "the recorded call has no answer to serve: its content was not recorded")
            return
        streamed = STREAM_ENVELOPE in value
        if request.get("stream"):
            if streamed:
                chunks = value.get("chunks") or []
            else:
                chunks = endpoint.split(value)
                session = current_replay.get()
                if session is not None:
                    session.note("calls recorded whole were streamed to the agent as events built from their answers")
            handler.start_stream(200, None, [("Content-Type", "text/event-stream")])
            for chunk in chunks:
                handler.stream(frame(endpoint, chunk))
            if endpoint.step == "openai.chat.completions":
                handler.stream(DONE_FRAME)
            handler.end_stream()
            return
        body = value.get("response") if streamed else value
        payload = json.dumps(body, ensure_ascii=False, default=str).encode()
        handler.answer(200, None, [("Content-Type", "application/json")], payload)

    def _recorded_error(self, handler: Handler, error: BaseException) -> None:
        """The error the recorded call ended with: the upstream's status and body when it answered one."""
        text = str(error)
        status, _, rest = text.partition(": ")
        if status.startswith("HTTP ") and status[5:].isdigit():
            handler.answer(int(status[5:]), None, [("Content-Type", "application/json")], rest.encode())
            return
        handler.fail(502, f"the recorded call failed: {type(error).__name__}: {text[:500]}")
