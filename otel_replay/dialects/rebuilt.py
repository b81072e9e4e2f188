"""A chat-completions request reduced to what a recording in another dialect keeps of it, so a request the reader
rebuilt (``request_exact`` false) can be compared with the one a replayed call sends.

Why it exists: a GenAI-convention recording holds a model call's messages as role + parts, its model and the
parameters the instrumentation captured, never the SDK call's own arguments: an assistant message's
``content: null``, a ``refusal`` key, the JSON text of tool-call arguments, ``stream`` and other transport
options are not in it. Compared as they are, every replay of such a run would diverge at the first request that
carries one of them, though nothing changed. Both sides are reduced alike here: each message to its role, its
text (absent when empty), its tool calls (id, name, arguments parsed) and the id of the call it answers; the
request to its messages, its model, and the other keys the recording has (a parameter the instrumentation did
not capture cannot be compared, and is not).

What it must never do: hide a change of what the recording holds (a message's text, a tool call's arguments,
the model, a recorded parameter), or change its input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

_NOT_RECORDED: Final = frozenset({"stream", "stream_options"})
"""Transport options no dialect records reliably: never compared."""

_SAME_PARAMETER: Final = {"max_completion_tokens": "max_tokens"}
"""Request keys an instrumentation records under another parameter's name."""


def as_rebuilt(request: Any, *, like: Any = None) -> Any:
    """``request`` (chat-completions arguments) as a rebuilt recording of it would read; with ``like`` (the
    rebuilt recorded request), only the keys besides ``messages`` and ``model`` that ``like`` has are kept.
    Anything that is no such request comes back as it is."""
    if not isinstance(request, Mapping) or not isinstance(request.get("messages"), list):
        return request
    if _anthropic(request):
        request = _chat_of_anthropic(request)
    keep = set(like) if isinstance(like, Mapping) else None
    out: dict[str, Any] = {}
    for given, value in request.items():
        key = _SAME_PARAMETER.get(str(given), str(given))
        if key in _NOT_RECORDED or value is None:
            continue
        if key == "messages":
            out[key] = [_message(m) for m in value]
        elif key == "model" or keep is None or key in keep:
            out[key] = int(value) if isinstance(value, float) and value.is_integer() else value
    return out


def _anthropic(request: Mapping[str, Any]) -> bool:
    """Whether a request is Anthropic Messages arguments (a top-level ``system``, or tool-use / tool-result
    blocks), which the conventions record as chat messages."""
    if "system" in request:
        return True
    return any(
        isinstance(block, Mapping) and block.get("type") in ("tool_use", "tool_result")
        for message in request["messages"]
        if isinstance(message, Mapping) and isinstance(message.get("content"), list)
        for block in message["content"]
    )


def _chat_of_anthropic(request: Mapping[str, Any]) -> dict[str, Any]:
    """Anthropic Messages arguments as the chat messages a GenAI-convention recording of them reads as: the
    system prompt first, each tool-use block a tool call, each tool-result block a ``tool`` message."""
    messages: list[Any] = []
    system = _text(request.get("system"))
    if system not in (None, ""):
        messages.append({"role": "system", "content": system})
    for message in request["messages"]:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            messages.append(message)
            continue
        texts, calls = [], []
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "tool_result":
                result = _text(block.get("content"))
                messages.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": result})
            elif kind == "tool_use":
                function = {"name": block.get("name"), "arguments": block.get("input")}
                calls.append({"id": block.get("id"), "type": "function", "function": function})
            elif kind == "text":
                texts.append(str(block.get("text", "")))
        if texts or calls:
            messages.append({"role": message.get("role"), "content": "".join(texts), "tool_calls": calls})
    return {**{k: v for k, v in request.items() if k != "system"}, "messages": messages}


def _message(message: Any) -> Any:
    if not isinstance(message, Mapping):
        return message
    out: dict[str, Any] = {"role": message.get("role")}
    text = _text(message.get("content"))
    if text not in (None, ""):
        out["content"] = text
    calls = [_call(c) for c in message.get("tool_calls") or () if isinstance(c, Mapping)]
    if calls:
        out["tool_calls"] = calls
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _text(content: Any) -> Any:
    """A message's content as its text: a list of text parts joined (the conventions join them too)."""
    if isinstance(content, list) and all(isinstance(p, Mapping) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return content


def _call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
    assert isinstance(function, Mapping)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    return {"id": call.get("id"), "name": function.get("name"), "arguments": arguments}
