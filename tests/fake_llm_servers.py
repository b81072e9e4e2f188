"""The test suite's fake OpenAI and Anthropic servers: the demo's fake chat completions server
(:class:`otel_replay.demo.fake_llm.FakeLLMServer`) extended with what only the tests and benchmarks need. It
lives here, not in the package: users get the demo's server, not the suite's.

On top of the demo server's chat completions (see its module for the scripted answers), this one serves
``/v1/responses`` (the OpenAI Responses API) and ``/v1/messages`` (the Anthropic Messages API) in their JSON and
SSE wire formats, and:

* other tool-call arguments with ``FakeLLMServer(tool_args=...)``, per tool name with ``tool_args_for={name:
  args}``; several tool calls in one chat completion (parallel tool calls) with ``parallel_tools=(name, ...)``;
* a chat completion whose first user text holds a key of ``chat_texts`` gets the text scripted for it, turn
  by turn (``chat_texts={key: [first answer, second answer, ...]}``: a code agent's code blobs, say);
* the model ``missing-model`` (:data:`MISSING_MODEL`) gets HTTP 404 with the API's error body;
* ``FakeLLMServer(volatile_ids=True)`` makes ids, ``created`` and ``system_fingerprint`` change with every
  request, as the real APIs do (random ids, a ``created`` that counts up), so a test can prove that a replay
  does not mistake a new id for a change.

Benchmarks import it too (with this folder on ``sys.path``). It must never reach the network.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
from typing import Any

from otel_replay.demo.fake_llm import CREATED, TOOL_ARGS, TOOL_NAME
from otel_replay.demo.fake_llm import FakeLLMServer as DemoLLMServer
from otel_replay.demo.fake_wire import TERSE_PREFIX, split_text, terse_answer, text_of

__all__ = ["CREATED", "MISSING_MODEL", "TERSE_PREFIX", "TOOL_ARGS", "TOOL_NAME", "FakeLLMServer"]

MISSING_MODEL = "missing-model"
"""A model name the fake answers with HTTP 404, as both APIs do for an unknown model."""


class FakeLLMServer(DemoLLMServer):
    """A scripted OpenAI + Anthropic API on ``http://127.0.0.1:{port}``; ``requests`` lists what it received."""

    def __init__(
        self,
        *,
        tool_args: dict[str, Any] | None = None,
        tool_args_for: dict[str, dict[str, Any]] | None = None,
        volatile_ids: bool = False,
        prefer_tools: tuple[str, ...] = (),
        per_agent_tools: bool = False,
        parallel_tools: tuple[str, ...] = (),
    ) -> None:
        self.tool_args = dict(TOOL_ARGS if tool_args is None else tool_args)
        """The arguments of the scripted tool call (streamed in pieces, like every text)."""
        self.tool_args_for = {name: dict(args) for name, args in (tool_args_for or {}).items()}
        """Arguments per tool name; a tool not named here gets :attr:`tool_args`."""
        self.volatile_ids = volatile_ids
        """Whether ids, ``created`` and ``system_fingerprint`` change with every request."""
        self.prefer_tools = prefer_tools
        """Tool names the model calls first when offered, whatever their order in the request (a multi-agent
        graph offers its handoff tools in the order of a Python set)."""
        self.per_agent_tools = per_agent_tools
        """Chat completions call a tool until the conversation holds a result of one of the tools *offered*, not
        of any tool: each agent of a multi-agent graph calls its own tools once, after the handoffs."""
        self.parallel_tools = parallel_tools
        """Tool names a chat completion calls all at once (parallel tool calls, in this order) when it calls tools
        and every one of them is offered; once the conversation holds a tool result, it answers instead."""
        self.chat_texts: dict[str, list[str]] = {}
        """Chat-completion answers scripted per key found in the first user text, one per assistant turn."""
        self.rendezvous: threading.Barrier | None = None
        """When set, each request waits at it before it is answered: concurrent calls of an agent are then in
        flight together, whatever the scheduling (their recorded steps overlap)."""
        self._serial = itertools.count(1)
        super().__init__()

    @property
    def anthropic_url(self) -> str:
        """``base_url`` for ``Anthropic(...)``."""
        return f"http://127.0.0.1:{self.port}"

    def route(self, h: Any, path: str, body: dict[str, Any]) -> None:
        rendezvous = self.rendezvous
        if rendezvous is not None:  # answer only when every party's request is in: their calls overlap in time
            rendezvous.wait(timeout=30)
        if body.get("model") == MISSING_MODEL:
            h.send_json(
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
        elif path.endswith("/responses"):
            self.answer_responses(h, body)
        elif path.endswith("/messages"):
            self.answer_messages(h, body)
        else:
            super().route(h, path, body)

    def make_id(self, fixed: str) -> str:
        """``fixed`` (e.g. ``chatcmpl-fake-1``), or with ``volatile_ids`` its prefix and a fresh random part."""
        if not self.volatile_ids:
            return fixed
        prefix = fixed.split("fake")[0]
        return f"{prefix}{secrets.token_hex(12)}"

    def created_at(self) -> int:
        return CREATED + next(self._serial) if self.volatile_ids else CREATED

    def tool_call(self, tools: Any, name_of: Any) -> tuple[str, dict[str, Any]]:
        name, _ = super().tool_call(tools, name_of)
        offered = {str(name_of(t)) for t in tools} if isinstance(tools, list) else set()
        name = next((p for p in self.prefer_tools if p in offered), name)
        return name, self.tool_args_for.get(name, self.tool_args)

    def tool_calls(self, tools: Any, name_of: Any) -> list[tuple[str, dict[str, Any]]]:
        offered = {str(name_of(t)) for t in tools} if isinstance(tools, list) else set()
        if self.parallel_tools and set(self.parallel_tools) <= offered:
            return [(name, self.tool_args_for.get(name, self.tool_args)) for name in self.parallel_tools]
        return super().tool_calls(tools, name_of)

    def tool_result(self, messages: list[dict[str, Any]], tools: Any) -> Any:
        offered = {t["function"]["name"] for t in tools} if isinstance(tools, list) else set()
        if self.parallel_tools and set(self.parallel_tools) <= offered:
            # once the conversation holds a tool result (its parallel calls', or the agents' it handed off to
            # handing back), it answers
            done = next((m.get("content") for m in reversed(messages) if m.get("role") == "tool"), None)
            if done is not None:
                return done
        if not self.per_agent_tools:
            return super().tool_result(messages, tools)
        offered = {t["function"]["name"] for t in tools} if isinstance(tools, list) else set()
        called = {
            call.get("id"): call.get("function", {}).get("name")
            for m in messages
            if m.get("role") == "assistant"
            for call in m.get("tool_calls") or []
        }
        return next(
            (
                m.get("content")
                for m in reversed(messages)
                if m.get("role") == "tool" and (not offered or called.get(m.get("tool_call_id")) in offered)
            ),
            None,
        )

    def scripted_text(self, messages: list[dict[str, Any]]) -> str | None:
        """The scripted answer for a conversation whose first user text holds a key of ``chat_texts``: the
        answer at the index of the number of assistant messages so far (the last one once they run out)."""
        first = next((text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
        for key, answers in self.chat_texts.items():
            if key in first and answers:
                turn = sum(1 for m in messages if m.get("role") == "assistant")
                return answers[min(turn, len(answers) - 1)]
        return None

    # ------------------------------------------------------------------------------------- responses

    def answer_responses(self, h: Any, body: dict[str, Any]) -> None:
        """Answer one ``/responses`` request (the OpenAI Responses API)."""
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else (items or [])
        output_item = next((i.get("output") for i in reversed(items) if i.get("type") == "function_call_output"), None)
        user = next((text_of(i.get("content")) for i in reversed(items) if i.get("role") == "user"), "")
        terse = terse_answer(body, user)
        call = body.get("tools") and output_item is None and terse is None
        usage = {
            "input_tokens": 13 + len(items),
            "output_tokens": 9,
            "total_tokens": 22 + len(items),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        item_id = self.make_id("fc_fake_1") if call else self.make_id("msg_fake_1")
        if call:
            name, args = self.tool_call(body.get("tools"), lambda t: t["name"])
            item: dict[str, Any] = {
                "type": "function_call",
                "id": item_id,
                "call_id": self.make_id("call_fake_r1"),
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
            "id": self.make_id("resp_fake_1"),
            "object": "response",
            "created_at": self.created_at(),
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
            h.send_json(200, response)
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
            frames.append(  # as the API sends them: the arguments in deltas, then whole in the done event
                (
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item_id,
                        "output_index": 0,
                        "delta": item["arguments"],
                        "sequence_number": next(seq),
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
            for piece in split_text(text or ""):
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
        h.send_events(frames)

    # -------------------------------------------------------------------------------------- messages

    def answer_messages(self, h: Any, body: dict[str, Any]) -> None:
        """Answer one ``/messages`` request (the Anthropic Messages API)."""
        messages = body.get("messages") or []
        result = None
        for m in messages:
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                for block in m["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        result = text_of(block.get("content"))
        user = next((text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        terse = terse_answer(body, user)
        call = body.get("tools") and result is None and terse is None
        usage = {
            "input_tokens": 17 + len(messages),
            "output_tokens": 8,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        if call:
            name, args = self.tool_call(body.get("tools"), lambda t: t["name"])
            block = {"type": "tool_use", "id": self.make_id("toolu_fake_1"), "name": name, "input": dict(args)}
            stop = "tool_use"
        else:
            text = f"The weather: {result}" if result is not None else f"echo: {user}"
            block = {"type": "text", "text": terse if terse is not None else text}
            stop = "end_turn"
        message = {
            "id": self.make_id("msg_fake_a1"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            h.send_json(200, message)
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
            for piece in split_text(json.dumps(block["input"])):
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
            for piece in split_text(block["text"]):
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
        h.send_events(frames)
