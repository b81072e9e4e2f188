"""The scripted answers of the demo's local fake LLM server in the OpenAI chat completions wire format: one JSON
body, or the API's server-sent events (text and tool-call arguments streamed in pieces).
:class:`~otel_replay.demo.fake_llm.FakeLLMServer` takes them from ``ChatWire``, its base class; which tool is
called, with which arguments and ids, is the server's (``tool_call``, ``make_id``, ``created_at``), and so are
the HTTP server and its routes. The helpers (``text_of``, ``terse_answer``, ``split_text``) serve every wire
format built on this one.

It must never reach the network or depend on anything but the standard library.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

TERSE_PREFIX = "terse-"
"""Models named with this prefix ask for no tool and answer ``terse: <first word of the last user text>``."""


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def terse_answer(body: dict[str, Any], user: str) -> str | None:
    """The answer of a ``terse-`` model (:data:`TERSE_PREFIX`), else None."""
    model = body.get("model")
    if not (isinstance(model, str) and model.startswith(TERSE_PREFIX)):
        return None
    words = user.split()
    return f"terse: {words[0] if words else ''}"


def split_text(text: str, parts: int = 3) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class ChatWire:
    """The chat-completions part of :class:`~otel_replay.demo.fake_llm.FakeLLMServer`."""

    if TYPE_CHECKING:  # defined by FakeLLMServer

        def make_id(self, fixed: str) -> str: ...

        def created_at(self) -> int: ...

        def tool_call(self, tools: Any, name_of: Any) -> tuple[str, dict[str, Any]]: ...

    def tool_calls(self, tools: Any, name_of: Any) -> list[tuple[str, dict[str, Any]]]:
        """The tool calls of an answer that calls tools: one here (a server built on this one may ask for
        several at once, as parallel tool calls)."""
        return [self.tool_call(tools, name_of)]

    def scripted_text(self, messages: list[dict[str, Any]]) -> str | None:
        """The answer scripted for this conversation, replacing the usual one (none here: a server built on this
        one may script answers)."""
        return None

    def tool_result(self, messages: list[dict[str, Any]], tools: Any) -> Any:
        """The tool result this answer reports on (the last tool message's content), or None when the model
        should call a tool first. A server built on this one may decide otherwise."""
        return next((m.get("content") for m in reversed(messages) if m.get("role") == "tool"), None)

    # ------------------------------------------------------------------------------------------ chat

    def answer_chat(self, h: Any, body: dict[str, Any]) -> None:
        """Answer one ``/chat/completions`` request on handler ``h``: one JSON body, or server-sent events with
        ``stream``."""
        messages = body.get("messages") or []
        tool_result = self.tool_result(messages, body.get("tools"))
        user = next((text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        terse = terse_answer(body, user)
        call = body.get("tools") and tool_result is None and terse is None
        text = (
            None if call else (f"The weather: {text_of(tool_result)}" if tool_result is not None else f"echo: {user}")
        )
        text = terse if terse is not None else text
        scripted = self.scripted_text(messages)
        if scripted is not None:
            call, text = False, scripted
        usage = {"prompt_tokens": 11 + len(messages), "completion_tokens": 7, "total_tokens": 18 + len(messages)}
        base = {
            "id": self.make_id("chatcmpl-fake-1"),
            "created": self.created_at(),
            "model": body.get("model", "gpt-fake"),
            "system_fingerprint": self.make_id("fp_fake"),
        }
        tool_calls: list[dict[str, Any]] = [
            {
                "id": self.make_id(f"call_fake_{i + 1}"),
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(self.tool_calls(body.get("tools"), lambda t: t["function"]["name"]))
        ]
        finish = "tool_calls" if call else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
            if call:
                message["tool_calls"] = tool_calls
            h.send_json(
                200,
                {
                    **base,
                    "object": "chat.completion",
                    "usage": usage,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                },
            )
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        frames: list[tuple[str | None, Any]] = [
            (
                None,
                {
                    **chunk,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                },
            )
        ]
        if call:
            for index, tool_call in enumerate(tool_calls):
                function = {"name": tool_call["function"]["name"], "arguments": ""}
                opened = {"index": index, "id": tool_call["id"], "type": "function", "function": function}
                frames.append(
                    (
                        None,
                        {
                            **chunk,
                            "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [opened]}}],
                        },
                    )
                )
                for piece in split_text(tool_call["function"]["arguments"]):
                    delta = {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                    frames.append((None, {**chunk, "choices": [{"index": 0, "finish_reason": None, "delta": delta}]}))
        else:
            for piece in split_text(text or ""):
                frames.append(
                    (None, {**chunk, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
                )
        frames.append((None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
        if (body.get("stream_options") or {}).get("include_usage"):
            frames.append((None, {**chunk, "choices": [], "usage": usage}))
        frames.append((None, "[DONE]"))
        h.send_events(frames)
