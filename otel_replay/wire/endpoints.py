"""The three model endpoints the wire commands serve, as plain data: which step a request is, how its stream is
framed, and the tool calls an answer asks for and the next request answers.

Why it exists: the recording proxy (:mod:`otel_replay.wire.proxy`) and the replay server read and write the same
wire: OpenAI chat completions (``POST /v1/chat/completions``), the OpenAI Responses API (``POST /v1/responses``)
and the Anthropic Messages API (``POST /v1/messages``), each answered with one JSON body or a stream of
server-sent events. A step recorded here has the name, request and answer shape the SDK instrumentors give the
same call (``openai.chat.completions`` and its request's keyword arguments, a streamed answer as its chunks), so
a run recorded at the wire and one recorded in a Python SDK read alike.

What it must never do: trust what it parses (a body that is no JSON object, an event stream that never ends a
frame, a tool call without an id) beyond returning nothing for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .. import streams

STREAM_ENVELOPE: Final = "otel_replay.stream"
"""Key of a recorded streamed answer: ``{"otel_replay.stream": 1, "chunks": [...], "response": {...},
"complete": bool, "model": ..., "usage": ...}`` (as the SDK instrumentors record one; ``done`` too for a chat
stream that ended with ``data: [DONE]``)."""

MAX_FRAME: Final = 8 << 20
"""Bytes one server-sent event may hold before the parser gives up on the stream (no frame end in sight)."""


@dataclass(frozen=True)
class Endpoint:
    """One model endpoint."""

    path: str
    """What the client posts to (``/v1/chat/completions``)."""
    provider: str
    """``openai`` or ``anthropic``: which ``--*-upstream`` it is forwarded to."""
    suffix: str
    """What is added to the upstream base URL (OpenAI's ends in ``/v1``, as its SDK takes it; Anthropic's not)."""
    step: str
    """The model step's name (the SDK instrumentors' for the same call)."""
    named_events: bool
    """Whether each server-sent event carries an ``event:`` line (its data's ``type``)."""
    assemble: Callable[[list[Any]], dict[str, Any] | None]
    delta_slots: Callable[[Any], Iterator[tuple[Any, Any, str]]]
    split: Callable[[Mapping[str, Any]], list[dict[str, Any]]]
    """The events a whole answer is streamed as (for a client that streams a call recorded whole)."""


ENDPOINTS: Final = {
    e.path: e
    for e in (
        Endpoint(
            "/v1/chat/completions",
            "openai",
            "/chat/completions",
            "openai.chat.completions",
            False,
            streams.assemble_chat,
            streams.chat_delta_slots,
            streams.chat_stream,
        ),
        Endpoint(
            "/v1/responses",
            "openai",
            "/responses",
            "openai.responses",
            True,
            streams.assemble_responses,
            streams.responses_delta_slots,
            streams.responses_stream,
        ),
        Endpoint(
            "/v1/messages",
            "anthropic",
            "/v1/messages",
            "anthropic.messages",
            True,
            streams.assemble_message,
            streams.message_delta_slots,
            streams.message_stream,
        ),
    )
}


def endpoint_for(path: str) -> Endpoint | None:
    """The endpoint a request path (query and trailing slash aside) posts to, or None."""
    return ENDPOINTS.get(path.split("?", 1)[0].rstrip("/") or "/")


# ------------------------------------------------------------------------------------------- event streams


class EventParser:
    """Server-sent events out of the bytes of a stream, as they arrive: each complete frame's ``(event, data)``
    (``event`` None when the frame has no ``event:`` line; ``data`` its ``data:`` lines joined)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[tuple[str | None, str]]:
        self._buffer += data.replace(b"\r\n", b"\n")
        frames: list[tuple[str | None, str]] = []
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                if len(self._buffer) > MAX_FRAME:
                    raise ValueError(f"an event of the stream is over {MAX_FRAME} bytes")
                return frames
            raw, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
            event, lines = None, []
            for line in raw.decode("utf-8", errors="replace").split("\n"):
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    event = value
                elif name == "data":
                    lines.append(value)
            if lines or event is not None:
                frames.append((event, "\n".join(lines)))


def frame(endpoint: Endpoint, data: Any) -> bytes:
    """One server-sent event of ``endpoint`` carrying ``data`` (a chunk or event dict)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    event = data.get("type") if endpoint.named_events and isinstance(data, Mapping) else None
    head = f"event: {event}\n" if isinstance(event, str) and "\n" not in event else ""
    return f"{head}data: {text}\n\n".encode()


DONE_FRAME: Final = b"data: [DONE]\n\n"
"""The last event of an OpenAI chat completions stream."""


def envelope(endpoint: Endpoint, chunks: list[Any], *, complete: bool, done: bool) -> dict[str, Any]:
    """A streamed answer as the recording keeps it (:data:`STREAM_ENVELOPE`)."""
    try:
        response = endpoint.assemble(chunks)
    except Exception:  # noqa: BLE001 - chunks of a shape the assembler does not know: the chunks still count
        response = None
    out: dict[str, Any] = {
        STREAM_ENVELOPE: 1,
        "chunks": chunks,
        "complete": complete,
        "response": response,
        "model": response.get("model") if isinstance(response, Mapping) else None,
        "usage": response.get("usage") if isinstance(response, Mapping) else None,
    }
    if done:
        out["done"] = True
    return out


# ------------------------------------------------------------------------------------- tool calls and results


@dataclass(frozen=True)
class ToolCall:
    """A tool call an answer asked for."""

    call_id: str
    name: str
    arguments: Any


def asked(endpoint: Endpoint, answer: Any) -> list[ToolCall]:
    """The tool calls an answer (a JSON body, or a stream's assembled response) asks for, in order."""
    if isinstance(answer, Mapping) and STREAM_ENVELOPE in answer:
        answer = answer.get("response")
    if not isinstance(answer, Mapping):
        return []
    found: list[ToolCall] = []
    if endpoint.step == "openai.chat.completions":
        for choice in _list(answer.get("choices")):
            message = choice.get("message") if isinstance(choice, Mapping) else None
            for call in _list(message.get("tool_calls") if isinstance(message, Mapping) else None):
                function = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping):
                    _add(found, call.get("id"), function.get("name"), _json_or_text(function.get("arguments")))
    elif endpoint.step == "openai.responses":
        for item in _list(answer.get("output")):
            if isinstance(item, Mapping) and item.get("type") == "function_call":
                _add(found, item.get("call_id"), item.get("name"), _json_or_text(item.get("arguments")))
    else:
        for block in _list(answer.get("content")):
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                _add(found, block.get("id"), block.get("name"), block.get("input"))
    return found


def returned(endpoint: Endpoint, request: Any) -> dict[str, Any]:
    """The tool results a request sends back, by call id (chat ``tool`` messages, Responses
    ``function_call_output`` items, Anthropic ``tool_result`` blocks)."""
    out: dict[str, Any] = {}
    if not isinstance(request, Mapping):
        return out
    if endpoint.step == "openai.chat.completions":
        for message in _list(request.get("messages")):
            if isinstance(message, Mapping) and message.get("role") == "tool":
                _put(out, message.get("tool_call_id"), message.get("content"))
    elif endpoint.step == "openai.responses":
        for item in _list(request.get("input")):
            if isinstance(item, Mapping) and item.get("type") == "function_call_output":
                _put(out, item.get("call_id"), item.get("output"))
    else:
        for message in _list(request.get("messages")):
            content = message.get("content") if isinstance(message, Mapping) else None
            for block in _list(content):
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    result = {"content": block.get("content")}
                    if block.get("is_error"):
                        result["is_error"] = True
                    _put(out, block.get("tool_use_id"), result)
    return out


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _add(found: list[ToolCall], call_id: Any, name: Any, arguments: Any) -> None:
    if isinstance(call_id, str) and call_id and isinstance(name, str) and name:
        found.append(ToolCall(call_id, name, arguments))


def _put(out: dict[str, Any], call_id: Any, value: Any) -> None:
    if isinstance(call_id, str) and call_id:
        out[call_id] = value
