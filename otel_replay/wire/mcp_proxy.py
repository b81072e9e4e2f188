"""The MCP recording proxy (``otel-replay mcp-proxy -- COMMAND ARGS...``): between any MCP client and the stdio
server it starts, every message relayed as it is, the session recorded as one run.

Why it exists: an agent in any language that uses MCP tools starts its servers as processes and talks to them
over stdio. Configured to start ``otel-replay mcp-proxy -- <the server's command>`` instead, it gets the same
server, and each of its requests (:mod:`otel_replay.wire.mcp_steps`) is a step of the session's run, begun when
the request passes and ended with the server's response (a JSON-RPC error as the step's error). The run is named
``--name`` (default ``mcp-proxy``), carries ``otel_replay.run.boundary = wire``, begins at the session's first
step (in the agent's trace when that request's ``_meta`` carries a ``traceparent``) and ends when the client
closes the session.

What it must never do: change, drop or reorder a message, write anything but the server's messages on stdout,
or let a recording failure break the session.
"""

from __future__ import annotations

import contextvars
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any, Final

from opentelemetry import trace

from .. import semconv
from ..recording import begin_run, end_call, end_run
from .httpd import safely, stderr_line
from .mcp_steps import ClientLines, SessionEnded, begin, is_request, is_step, parse, risks_of
from .runs import BOUNDARY, parent_of

DEFAULT_AGENT: Final = "mcp-proxy"


class McpError(Exception):
    """The server answered a request with a JSON-RPC error: recorded as the step's error."""


def describe(command: list[str]) -> str:
    """``stdio: python weather_server.py``: the server's command, paths by their last part."""
    return " ".join(["stdio:", *(os.path.basename(a) if os.sep in a else a for a in command)])


GRACE_S: Final = 2.0
"""Seconds a server has to exit after its input closed, and again after SIGTERM."""


class McpProxy:
    """Relays one stdio MCP session and records it; :meth:`run` returns the server's exit code."""

    name = "otel-replay mcp-proxy"

    def __init__(
        self,
        command: list[str],
        *,
        agent: str = DEFAULT_AGENT,
        stdin: IO[bytes] | None = None,
        stdout: IO[bytes] | None = None,
        warn: Callable[[str], None] = stderr_line,
    ) -> None:
        self.command = command
        self.agent = agent
        self.server = describe(command)
        self.lines = ClientLines(stdin or sys.stdin.buffer)
        """The client's messages; ``lines.end`` (SIGINT, SIGTERM) ends the session as closing stdin does."""
        self._out = stdout or sys.stdout.buffer
        self.warn = warn
        self._pending: dict[Any, tuple[contextvars.Context, Any, str]] = {}
        self._risks: dict[str, str] = {}
        self._lock = threading.Lock()
        self._handle: Any = None
        """The session's run, once its first step began it."""

    def run(self) -> int:
        context = contextvars.Context()
        server = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert server.stdin is not None and server.stdout is not None
        answers = threading.Thread(target=self._answers, args=(server.stdout,), name="mcp-proxy-answers", daemon=True)
        answers.start()
        try:
            self._requests(context, server.stdin)
        except SessionEnded:
            pass
        finally:
            safely(self.name, "close the server's input", server.stdin.close)
            code = _stop(server)
            answers.join(timeout=30)
            for call_context, call, _ in list(self._pending.values()):  # never answered
                call_context.run(end_call, call, exc=McpError("the session ended before the server answered"))
            if self._handle is not None:
                context.run(end_run, self._handle)
        return code

    def _begin_run(self, context: contextvars.Context, message: dict[str, Any]) -> None:
        """The session's run, begun at its first step: in the trace of that request's ``_meta.traceparent``
        when it carries one (an MCP client puts the agent's trace there), else a trace of its own."""
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        traceparent = meta.get("traceparent") if isinstance(meta, dict) else None
        join = parent_of(traceparent if isinstance(traceparent, str) else None)
        self._handle = context.run(begin_run, self.agent, arguments={}, join=join)
        if self._handle is not None:
            root = context.run(trace.get_current_span)
            safely(self.name, "mark the run", root.set_attribute, semconv.RUN_BOUNDARY, BOUNDARY)

    def _requests(self, context: contextvars.Context, server_in: IO[bytes]) -> None:
        """Client → server: each line relayed, each request that is a step begun."""
        for line in self.lines:
            message = parse(line)
            if message is not None and is_request(message) and is_step(message):
                if self._handle is None:
                    self._begin_run(context, message)
                own = context.copy()
                call = own.run(begin, self.name, message, dict(self._risks), self.server)
                if call is not None:
                    with self._lock:
                        self._pending[_key(message.get("id"))] = (own, call, str(message.get("method")))
            try:
                server_in.write(line)
                server_in.flush()
            except (BrokenPipeError, OSError):
                self.warn(f"{self.name}: the server's input is closed; the session ends")
                return

    def _answers(self, server_out: IO[bytes]) -> None:
        """Server → client: each line relayed, each response ending its step."""
        for line in server_out:
            try:
                self._out.write(line)
                self._out.flush()
            except (BrokenPipeError, OSError):
                return
            message = parse(line)
            if message is None or "id" not in message or "method" in message:
                continue
            with self._lock:
                pending = self._pending.pop(_key(message.get("id")), None)
            if pending is None:
                continue
            own, call, method = pending
            if isinstance(message.get("error"), dict):
                error = message["error"]
                own.run(end_call, call, exc=McpError(f"{error.get('code')}: {error.get('message')}"))
                continue
            result = message.get("result")
            if method == "tools/list":
                self._risks.update(risks_of(result))
            own.run(end_call, call, result=result)


def _stop(server: subprocess.Popen[bytes]) -> int:
    """The server's exit code once its input is closed: given the time the MCP SDKs give a stdio server (two
    seconds), then SIGTERM, then after two more SIGKILL."""
    for wait, then in ((GRACE_S, server.terminate), (GRACE_S, server.kill)):
        try:
            return server.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            then()
    return server.wait()


def _key(request_id: Any) -> Any:
    """A JSON-RPC id as a dict key (ids are strings or numbers)."""
    return ("s", request_id) if isinstance(request_id, str) else ("n", request_id)
