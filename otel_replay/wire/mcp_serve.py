"""The MCP replay server (``otel-replay mcp-serve TRACE_ID``): a stdio MCP server that answers a session from
the run ``mcp-proxy`` recorded, starting no process.

Why it exists: a replay of an agent in any language should not run its MCP tools for real. Configured to start
``otel-replay mcp-serve TRACE_ID`` in place of the server, the agent gets the recorded ``initialize``, tool list,
resources and prompts, and each ``tools/call`` answered from the recording in order: the server is the
replay's agent (:func:`otel_replay.replay.engine.replay_external`), each request a step the replay session
matches and answers (deterministic: a call with other arguments, or one the recording does not have, is
answered with an MCP error naming the divergence, and no later step is answered from the recording). The
replay ends when the client closes the session, and is stored and audited as any.

What it must never do: start the recorded server, write anything but MCP messages on stdout, or answer a step
from the recording after the replay stopped.
"""

from __future__ import annotations

import contextvars
import json
import sys
from collections.abc import Callable
from typing import IO, Any, Final

from ..recording import ReplayInterrupt, current_replay, end_call
from .httpd import stderr_line
from .mcp_steps import ClientLines, SessionEnded, begin, is_request, is_step, parse, risks_of

STOPPED_CODE: Final = -32000
"""JSON-RPC error code of a request the replay cannot answer (a divergence)."""


class McpServe:
    """Answers one stdio MCP session from a recording; :meth:`run` is the replay's agent."""

    name = "otel-replay mcp-serve"

    def __init__(
        self,
        *,
        server: str | None = None,
        stdin: IO[bytes] | None = None,
        stdout: IO[bytes] | None = None,
        warn: Callable[[str], None] = stderr_line,
    ) -> None:
        self.server = server
        self.lines = ClientLines(stdin or sys.stdin.buffer)
        """The client's messages; ``lines.end`` (SIGINT, SIGTERM) ends the session as closing stdin does."""
        self._out = stdout or sys.stdout.buffer
        self.warn = warn
        self.stopped: str | None = None
        self._risks: dict[str, str] = {}

    def run(self) -> None:
        """Answer the session's requests until the client closes it (called inside the replay's run)."""
        try:
            self._session(contextvars.copy_context())
        except SessionEnded:
            pass

    def _session(self, context: contextvars.Context) -> None:
        for line in self.lines:
            message = parse(line)
            if message is None:
                self._reply(None, error={"code": -32700, "message": "otel-replay mcp-serve: not a JSON object"})
                continue
            if not is_request(message):
                continue  # notifications and responses need no answer
            request_id = message.get("id")
            if not is_step(message):
                if message.get("method") == "ping":
                    self._reply(request_id, result={})
                else:
                    method = str(message.get("method"))[:100]
                    reason = f"otel-replay mcp-serve: {method} was not recorded and is not answered"
                    self._reply(request_id, error={"code": -32601, "message": reason})
                continue
            if self.stopped is not None:
                self._reply(request_id, error={"code": STOPPED_CODE, "message": self.stopped})
                continue
            context.copy().run(self._answer, message)

    def _answer(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        try:
            call = begin(self.name, message, dict(self._risks), self.server)
        except ReplayInterrupt as stop:
            session = current_replay.get()
            divergences = list(getattr(session, "divergences", ()) or ())
            reason = getattr(divergences[-1], "reason", None) if divergences else None
            self.stopped = f"otel-replay: the replay stopped: {reason or stop}"
            self.warn(f"{self.name}: {self.stopped}")
            self._reply(request_id, error={"code": STOPPED_CODE, "message": self.stopped})
            return
        served = call.served if call is not None else None
        if served is None:
            end_call(call)
            self._reply(request_id, error={"code": -32603, "message": "otel-replay mcp-serve: not answered"})
            return
        if served.error is not None:
            end_call(call, exc=served.error)
            self._reply(request_id, error={"code": -32603, "message": str(served.error)[:2000]})
            return
        end_call(call, result=served.value)
        if message.get("method") == "tools/list":
            self._risks.update(risks_of(served.value))
        self._reply(request_id, result=served.value)

    def _reply(self, request_id: Any, *, result: Any = None, error: dict[str, Any] | None = None) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            reply["error"] = error
        else:
            reply["result"] = result
        self._out.write(json.dumps(reply, ensure_ascii=False, default=str).encode() + b"\n")
        self._out.flush()
