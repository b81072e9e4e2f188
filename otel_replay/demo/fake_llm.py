"""Local fakes of the OpenAI and Anthropic HTTP APIs, for the SDK demos, tests and benchmarks that drive the real SDKs.

One ``http.server`` in a thread on 127.0.0.1 serves ``/v1/chat/completions``, ``/v1/responses`` and
``/v1/messages`` in the real JSON and SSE wire formats, and counts every request it receives, so a test can
prove that a replay sent none. Answers are scripted and deterministic (fixed ids and timestamps):

* a request that offers tools and has no tool result yet gets a call of the first tool offered (``get_weather``
  when the tool list names none) with the arguments ``{"city": "Paris"}`` (other arguments with
  ``FakeLLMServer(tool_args=...)``, per tool name with ``tool_args_for={name: args}``);
* a request whose conversation holds a tool result gets a final text that quotes it;
* anything else gets ``echo: <last user text>``;
* the model ``missing-model`` gets HTTP 404 with the API's error body;
* a model whose name starts with ``terse-`` (:data:`TERSE_PREFIX`, e.g. ``terse-gpt``) never asks for a tool
  and answers ``terse: <first word of the last user text>`` in every API: a what-if model that answers
  differently (a shorter final text, no tool call), so a replay lab's ``output_equal`` and
  ``tool_sequence_equal`` scores regress against runs recorded with any other model.

Ids, ``created`` and ``system_fingerprint`` are fixed by default. ``FakeLLMServer(volatile_ids=True)`` makes
them change with every request, as the real APIs do (random ids, a ``created`` that counts up), so a test can
prove that a replay does not mistake a new id for a change.

It must never reach the network or depend on anything but the standard library.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOL_NAME = "get_weather"
TOOL_ARGS = {"city": "Paris"}
CREATED = 1_767_225_600
MISSING_MODEL = "missing-model"
"""A model name the fake answers with HTTP 404, as both APIs do for an unknown model."""
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


class FakeLLMServer:
    """A scripted OpenAI + Anthropic API on ``http://127.0.0.1:{port}``; ``requests`` lists what it received."""

    def __init__(
        self,
        *,
        tool_args: dict[str, Any] | None = None,
        tool_args_for: dict[str, dict[str, Any]] | None = None,
        volatile_ids: bool = False,
    ) -> None:
        self.tool_args = dict(TOOL_ARGS if tool_args is None else tool_args)
        """The arguments of the scripted tool call (streamed in pieces, like every text)."""
        self.tool_args_for = {name: dict(args) for name, args in (tool_args_for or {}).items()}
        """Arguments per tool name; a tool not named here gets :attr:`tool_args`."""
        self.volatile_ids = volatile_ids
        """Whether ids, ``created`` and ``system_fingerprint`` change with every request."""
        self._serial = itertools.count(1)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed ACK

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append((self.path, body))
                path = self.path.split("?")[0]
                if body.get("model") == MISSING_MODEL:
                    self._send(
                        404,
                        {
                            "type": "error",
                            "error": {
                                "message": f"The model `{MISSING_MODEL}` does not exist",
                                "type": "not_found_error",
                                "code": "model_not_found",
                            },
                        },
                    )
                elif path.endswith("/chat/completions"):
                    server._chat(self, body)
                elif path.endswith("/responses"):
                    server._responses(self, body)
                elif path.endswith("/messages"):
                    server._messages(self, body)
                else:
                    self._send(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, frames: list[tuple[str | None, Any]]) -> None:
                out = []
                for event, data in frames:
                    text = data if isinstance(data, str) else json.dumps(data)
                    out.append((f"event: {event}\n" if event else "") + f"data: {text}\n\n")
                blob = "".join(out).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(blob)))
                self.end_headers()
                self.wfile.write(blob)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------------------- api

    @property
    def openai_url(self) -> str:
        """``base_url`` for ``OpenAI(...)``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        """``base_url`` for ``Anthropic(...)``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def count(self) -> int:
        """Requests received so far."""
        with self._lock:
            return len(self.requests)

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --------------------------------------------------------------------------------------- scripts

    def _id(self, fixed: str) -> str:
        """``fixed`` (e.g. ``chatcmpl-fake-1``), or with ``volatile_ids`` its prefix and a fresh random part."""
        if not self.volatile_ids:
            return fixed
        prefix = fixed.split("fake")[0]
        return f"{prefix}{secrets.token_hex(12)}"

    def _created(self) -> int:
        return CREATED + next(self._serial) if self.volatile_ids else CREATED

    def _call(self, tools: Any, name_of: Any) -> tuple[str, dict[str, Any]]:
        """The scripted tool call: the first tool offered (by ``name_of(tool)``) and its arguments."""
        name = TOOL_NAME
        if isinstance(tools, list) and tools:
            try:
                name = str(name_of(tools[0]) or TOOL_NAME)
            except (AttributeError, KeyError, TypeError):
                name = TOOL_NAME
        return name, self.tool_args_for.get(name, self.tool_args)

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
