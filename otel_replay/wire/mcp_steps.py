"""MCP at the wire: the JSON-RPC messages of a stdio MCP session, and the step each request is.

Why it exists: ``otel-replay mcp-proxy`` records the session between any MCP client and the stdio server it
starts, and ``otel-replay mcp-serve`` answers that session from the recording; both read the same
newline-delimited JSON-RPC 2.0 messages and see each request as the same step: ``tools/call`` a tool step named
after the tool (its risk from the server's tool annotations, as the MCP instrumentor gives it), ``initialize``,
``tools/list``, ``resources/list``, ``resources/read``, ``prompts/list`` and ``prompts/get`` retrieval steps named
``mcp <method>``. Notifications and other requests (``ping``, ``completion/complete``...) are no steps.

What it must never do: trust a message (anything that is no JSON object, or a request without a method, is no
step), or record a step's span attributes from anything but the message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import IO, Any, Final

from .. import semconv
from ..recording import begin_retrieval_call, begin_tool_call
from .httpd import safely
from .recorded import INSTRUMENTATION

RETRIEVALS: Final = frozenset(
    {"initialize", "server/discover", "tools/list", "resources/list", "resources/read", "prompts/list", "prompts/get"}
)
"""MCP methods recorded as retrieval steps ``mcp <method>``."""


class SessionEnded(Exception):
    """The session was ended by a signal while it waited for the client's next message."""


class ClientLines:
    """The client's messages, line by line, until it closes stdin or :meth:`end` is called.

    MCP clients end a stdio server by closing its stdin, then SIGTERM after a grace period (two seconds in the
    official SDKs): the commands call :meth:`end` from their SIGINT/SIGTERM handlers, so a session ended either
    way winds down alike (the run ended, the replay stored). A signal that arrives while the session waits for
    a message ends the wait (:class:`SessionEnded`, raised out of the iteration); one that arrives while a
    message is handled lets that message finish first."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._waiting = False
        self.ended = False

    def __iter__(self) -> Iterator[bytes]:
        while not self.ended:
            self._waiting = True
            try:
                line = self._stream.readline()
            finally:
                self._waiting = False
            if not line:
                return
            yield line

    def end(self, *_: Any) -> None:
        self.ended = True
        if self._waiting:
            raise SessionEnded


def parse(line: bytes | str) -> dict[str, Any] | None:
    """One JSON-RPC message of a line, or None when it is no JSON object."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def is_request(message: Mapping[str, Any]) -> bool:
    return isinstance(message.get("method"), str) and "id" in message


def is_step(message: Mapping[str, Any]) -> bool:
    """Whether a request is recorded (and answered in a replay) as a step."""
    method = message.get("method")
    if method == "tools/call":
        params = message.get("params")
        return isinstance(params, Mapping) and isinstance(params.get("name"), str)
    return method in RETRIEVALS


def annotated_risk(tool: Any) -> str:
    """The risk a listed tool's annotations give: ``readOnlyHint`` read, ``destructiveHint`` high, else write."""
    annotations = tool.get("annotations") if isinstance(tool, Mapping) else None
    if isinstance(annotations, Mapping):
        if annotations.get("readOnlyHint") is True:
            return "read"
        if annotations.get("destructiveHint") is True:
            return "high"
    return "write"


def risks_of(result: Any) -> dict[str, str]:
    """The risk of each tool a ``tools/list`` result lists."""
    tools = result.get("tools") if isinstance(result, Mapping) else None
    return {
        t["name"]: annotated_risk(t) for t in tools or () if isinstance(t, Mapping) and isinstance(t.get("name"), str)
    }


def begin(name: str, message: Mapping[str, Any], risks: Mapping[str, str], server: str | None) -> Any:
    """Begin the step of one request (see :func:`is_step`); a replay answers it in ``call.served`` or raises
    its interrupt. None when recording is unavailable."""
    method = str(message.get("method"))
    params = message.get("params") if isinstance(message.get("params"), Mapping) else {}
    assert isinstance(params, Mapping)
    if method == "tools/call":
        tool = str(params.get("name"))
        given = params.get("arguments")
        arguments = dict(given) if isinstance(given, Mapping) else ({} if given is None else {"arguments": given})
        call = safely(
            name,
            "begin the tool step",
            begin_tool_call,
            tool,
            arguments,
            risk=risks.get(tool, "write"),
            instrumentation=INSTRUMENTATION,
        )
    else:
        arguments = {k: v for k, v in params.items() if k != "_meta"}
        call = safely(
            name, "begin the step", begin_retrieval_call, f"mcp {method}", arguments, instrumentation=INSTRUMENTATION
        )
    if call is not None:
        attributes = {semconv.MCP_METHOD_NAME: method, semconv.MCP_SERVER: server}
        if method == "resources/read" and isinstance(params.get("uri"), str):
            attributes[semconv.MCP_RESOURCE_URI] = params["uri"]
        safely(name, "mark the step", call.step.span.set_attributes, {k: v for k, v in attributes.items() if v})
    return call
