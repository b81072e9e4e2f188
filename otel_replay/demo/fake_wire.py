"""The scripted answers of the local fake LLM server in each API's wire format: OpenAI chat completions, OpenAI
responses and Anthropic messages, as one JSON body or as the API's server-sent events (text and tool-call
arguments streamed in pieces). :class:`~otel_replay.demo.fake_llm.FakeLLMServer` takes them from
``_WireFormats``, its base class; which tool is called, with which arguments and ids, is the server's
(``_call``, ``_id``, ``_created``), and so are the HTTP server and its routes.

It must never reach the network or depend on anything but the standard library.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

TERSE_PREFIX = "terse-"
"""Models named with this prefix ask for no tool and answer ``terse: <first word of the last user text>``."""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _terse(body: dict[str, Any], user: str) -> str | None:
    """The answer of a ``terse-`` model (:data:`TERSE_PREFIX`), else None."""
    model = body.get("model")
    if not (isinstance(model, str) and model.startswith(TERSE_PREFIX)):
        return None
    words = user.split()
    return f"terse: {words[0] if words else ''}"


def _split(text: str, parts: int = 3) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class _WireFormats:
    """The wire-format part of :class:`~otel_replay.demo.fake_llm.FakeLLMServer`."""

    if TYPE_CHECKING:  # defined by FakeLLMServer

        def _id(self, fixed: str) -> str: ...

        def _created(self) -> int: ...

        def _call(self, tools: Any, name_of: Any) -> tuple[str, dict[str, Any]]: ...

        chat_texts: dict[str, list[str]]

    # ------------------------------------------------------------------------------------------ chat

    def _chat(self, h: Any, body: dict[str, Any]) -> None:
        messages = body.get("messages") or []
        tool_result = next((m.get("content") for m in reversed(messages) if m.get("role") == "tool"), None)
        user = next((_text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        terse = _terse(body, user)
        call = body.get("tools") and tool_result is None and terse is None
        text = (
            None if call else (f"The weather: {_text_of(tool_result)}" if tool_result is not None else f"echo: {user}")
        )
        text = terse if terse is not None else text
        scripted = self._scripted_text(messages)
        if scripted is not None:
            call, text = False, scripted
        usage = {"prompt_tokens": 11 + len(messages), "completion_tokens": 7, "total_tokens": 18 + len(messages)}
        base = {
            "id": self._id("chatcmpl-fake-1"),
            "created": self._created(),
            "model": body.get("model", "gpt-fake"),
            "system_fingerprint": self._id("fp_fake"),
        }
        name, args = self._call(body.get("tools"), lambda t: t["function"]["name"])
        call_id = self._id("call_fake_1")
        tool_call: dict[str, Any] = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        finish = "tool_calls" if call else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
            if call:
                message["tool_calls"] = [tool_call]
            h._send(
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
            args = tool_call["function"]["arguments"]
            frames.append(
                (
                    None,
                    {
                        **chunk,
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": None,
                                "delta": {
                                    "tool_calls": [
                                        {
                                            "index": 0,
                                            "id": call_id,
                                            "type": "function",
                                            "function": {"name": name, "arguments": ""},
                                        }
                                    ]
                                },
                            }
                        ],
                    },
                )
            )
            for piece in _split(args):
                frames.append(
                    (
                        None,
                        {
                            **chunk,
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": None,
                                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]},
                                }
                            ],
                        },
                    )
                )
        else:
            for piece in _split(text or ""):
                frames.append(
                    (None, {**chunk, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
                )
        frames.append((None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
        if (body.get("stream_options") or {}).get("include_usage"):
            frames.append((None, {**chunk, "choices": [], "usage": usage}))
        frames.append((None, "[DONE]"))
        h._sse(frames)

    def _scripted_text(self, messages: list[dict[str, Any]]) -> str | None:
        """The scripted answer for a conversation whose first user text holds a key of ``chat_texts``: the
        answer at the index of the number of assistant messages so far (the last one once they run out)."""
        first = next((_text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
        for key, answers in self.chat_texts.items():
            if key in first and answers:
                turn = sum(1 for m in messages if m.get("role") == "assistant")
                return answers[min(turn, len(answers) - 1)]
        return None

    # ------------------------------------------------------------------------------------- responses

    def _responses(self, h: Any, body: dict[str, Any]) -> None:
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else (items or [])
        output_item = next((i.get("output") for i in reversed(items) if i.get("type") == "function_call_output"), None)
        user = next((_text_of(i.get("content")) for i in reversed(items) if i.get("role") == "user"), "")
        terse = _terse(body, user)
        call = body.get("tools") and output_item is None and terse is None
        usage = {
            "input_tokens": 13 + len(items),
            "output_tokens": 9,
            "total_tokens": 22 + len(items),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        item_id = self._id("fc_fake_1") if call else self._id("msg_fake_1")
        if call:
            name, args = self._call(body.get("tools"), lambda t: t["name"])
            item: dict[str, Any] = {
                "type": "function_call",
                "id": item_id,
                "call_id": self._id("call_fake_r1"),
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            text = None
        else:
            text = f"The weather: {output_item}" if output_item is not None else f"echo: {user}"
            text = terse if terse is not None else text
            item = {
                "type": "message",
                "id": item_id,
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        response = {
            "id": self._id("resp_fake_1"),
            "object": "response",
            "created_at": self._created(),
            "status": "completed",
            "model": body.get("model", "gpt-fake"),
            "output": [item],
            "usage": usage,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "metadata": {},
            "temperature": 1.0,
            "top_p": 1.0,
        }
        if not body.get("stream"):
            h._send(200, response)
            return
        seq = iter(range(1000))
        started = {**response, "status": "in_progress", "output": [], "usage": None}
        frames: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "sequence_number": next(seq), "response": started})
        ]
        if call:
            frames.append(
                (
                    "response.output_item.added",
                    {
                        "type": "response.output_item.added",
                        "output_index": 0,
                        "sequence_number": next(seq),
                        "item": {**item, "arguments": "", "status": "in_progress"},
                    },
                )
            )
            frames.append(
                (
                    "response.function_call_arguments.done",
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": item_id,
                        "output_index": 0,
                        "arguments": item["arguments"],
                        "sequence_number": next(seq),
                    },
                )
            )
        else:
            frames.append(
                (
                    "response.output_item.added",
                    {
                        "type": "response.output_item.added",
                        "output_index": 0,
                        "sequence_number": next(seq),
                        "item": {**item, "content": [], "status": "in_progress"},
                    },
                )
            )
            empty_part = {"type": "output_text", "text": "", "annotations": []}
            frames.append(
                (
                    "response.content_part.added",
                    {
                        "type": "response.content_part.added",
                        "item_id": item_id,
                        "output_index": 0,
                        "content_index": 0,
                        "part": empty_part,
                        "sequence_number": next(seq),
                    },
                )
            )
            for piece in _split(text or ""):
                frames.append(
                    (
                        "response.output_text.delta",
                        {
                            "type": "response.output_text.delta",
                            "item_id": item_id,
                            "output_index": 0,
                            "content_index": 0,
                            "delta": piece,
                            "sequence_number": next(seq),
                            "logprobs": [],
                        },
                    )
                )
            frames.append(
                (
                    "response.output_text.done",
                    {
                        "type": "response.output_text.done",
                        "item_id": item_id,
                        "output_index": 0,
                        "content_index": 0,
                        "text": text,
                        "sequence_number": next(seq),
                        "logprobs": [],
                    },
                )
            )
            frames.append(
                (
                    "response.content_part.done",
                    {
                        "type": "response.content_part.done",
                        "item_id": item_id,
                        "output_index": 0,
                        "content_index": 0,
                        "part": item["content"][0],
                        "sequence_number": next(seq),
                    },
                )
            )
        frames.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item, "sequence_number": next(seq)},
            )
        )
        frames.append(
            ("response.completed", {"type": "response.completed", "sequence_number": next(seq), "response": response})
        )
        h._sse(frames)

    # -------------------------------------------------------------------------------------- messages

    def _messages(self, h: Any, body: dict[str, Any]) -> None:
        messages = body.get("messages") or []
        result = None
        for m in messages:
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                for block in m["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        result = _text_of(block.get("content"))
        user = next((_text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        terse = _terse(body, user)
        call = body.get("tools") and result is None and terse is None
        usage = {
            "input_tokens": 17 + len(messages),
            "output_tokens": 8,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        if call:
            name, args = self._call(body.get("tools"), lambda t: t["name"])
            block = {"type": "tool_use", "id": self._id("toolu_fake_1"), "name": name, "input": dict(args)}
            stop = "tool_use"
        else:
            text = f"The weather: {result}" if result is not None else f"echo: {user}"
            block = {"type": "text", "text": terse if terse is not None else text}
            stop = "end_turn"
        message = {
            "id": self._id("msg_fake_a1"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            h._send(200, message)
            return
        start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        frames: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": start})]
        if call:
            frames.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}},
                )
            )
            for piece in _split(json.dumps(block["input"])):
                frames.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
                )
        else:
            frames.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                )
            )
            for piece in _split(block["text"]):
                frames.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
                    )
                )
        frames.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        frames.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            )
        )
        frames.append(("message_stop", {"type": "message_stop"}))
        h._sse(frames)
