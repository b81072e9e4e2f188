"""The messages of a model call as each dialect records them (GenAI parts, flattened ``llm.*`` keys, legacy
prompt events), turned into one chat-message list.

It must never invent a message that was not recorded.
"""

from __future__ import annotations

import json
from typing import Any

from ..records import SpanRecord
from .keys import arguments_text, json_or_none

# ------------------------------------------------------------------------------------------ messages


def from_genai_parts(messages: Any) -> list[dict[str, Any]] | None:
    """New-style ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (role + parts) as OpenAI chat messages."""
    if not isinstance(messages, list):
        return None
    out: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role") or "user"
        parts = message.get("parts")
        if not isinstance(parts, list):  # old-style {"role", "content"} objects in the same keys
            msg: dict[str, Any] = {k: v for k, v in message.items() if k != "finish_reason"}
            out.append(msg)
            continue
        texts: list[str] = []
        tool_calls: list[dict[str, Any]] = []
        responses: list[dict[str, Any]] = []
        others: list[Any] = []
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("content", "")))
            elif kind == "tool_call":
                tool_calls.append(
                    {
                        "id": part.get("id"),
                        "type": "function",
                        "function": {"name": part.get("name"), "arguments": arguments_text(part.get("arguments"))},
                    }
                )
            elif kind == "tool_call_response":
                response = part.get("response")
                responses.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.get("id"),
                        "content": response if isinstance(response, str) else json.dumps(response, ensure_ascii=False),
                    }
                )
            else:
                others.append(part)
        if responses:
            out.extend(responses)
            continue
        msg = {"role": role}
        if texts or not tool_calls:
            msg["content"] = "".join(texts) if not others else [{"type": "text", "text": t} for t in texts] + others
        if tool_calls:
            msg["tool_calls"] = tool_calls
        out.append(msg)
    return out


def system_messages(instructions: Any) -> list[dict[str, Any]]:
    if isinstance(instructions, str):
        return [{"role": "system", "content": instructions}]
    if isinstance(instructions, list):
        text = "".join(
            str(p.get("content", "")) for p in instructions if isinstance(p, dict) and p.get("type", "text") == "text"
        )
        return [{"role": "system", "content": text}]
    return []


def from_flat(messages: Any, *, wrapper: str | None) -> list[dict[str, Any]] | None:
    """Flattened OpenInference (``message.role`` …, wrapper ``message``) or Traceloop (``role`` …) messages."""
    if not isinstance(messages, list):
        return None
    out: list[dict[str, Any]] = []
    for item in messages:
        m = item.get(wrapper) if wrapper and isinstance(item, dict) else item
        if not isinstance(m, dict):
            continue
        msg: dict[str, Any] = {"role": m.get("role") or "user"}
        content = m.get("content")
        if content is None and isinstance(m.get("contents"), list):  # OpenInference multi-part content
            parts = [c.get("message_content", c) for c in m["contents"] if isinstance(c, dict)]
            content = "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
        if isinstance(content, str) and content[:1] == "[":  # Traceloop stores list content as JSON text
            parsed = json_or_none(content)
            content = parsed if isinstance(parsed, list) else content
        calls = []
        for call in m.get("tool_calls") or []:
            c = call.get("tool_call", call) if isinstance(call, dict) else {}
            given = c.get("function")
            function = given if isinstance(given, dict) else {}
            calls.append(
                {
                    "id": c.get("id"),
                    "type": "function",
                    "function": {
                        "name": function.get("name", c.get("name")),
                        "arguments": arguments_text(function.get("arguments", c.get("arguments", ""))),
                    },
                }
            )
        if content is not None or not calls:
            msg["content"] = content
        if calls:
            msg["tool_calls"] = calls
        for key in ("tool_call_id", "name"):
            if m.get(key) is not None:
                msg[key] = m[key]
        if m.get("finish_reason") is not None:
            msg["finish_reason"] = m["finish_reason"]
        out.append(msg)
    return out


def event_attr(span: SpanRecord, name: str, key: str) -> str | None:
    for event in span.events:
        if event.name == name and event.attributes.get(key):
            return event.attributes[key]
    return None
