"""``streams.chat_stream`` / ``responses_stream`` / ``message_stream``: the events a whole answer is streamed as
(``otel-replay serve`` to a client that streams a call recorded whole) assemble, with the same assemblers the
recorders use, into the answer they were built from: several choices, tool calls, a refusal, usage; message and
function-call items; text, tool-use and thinking blocks."""

from __future__ import annotations

from typing import Any

import pytest

from otel_replay import streams

CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"},
        {
            "index": 1,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}},
                    {"id": "call_2", "type": "function", "function": {"name": "b", "arguments": "{}"}},
                ],
            },
            "finish_reason": "tool_calls",
        },
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
}
RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1700000000,
    "status": "completed",
    "model": "gpt-4o-mini",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It rains.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
            "status": "completed",
        },
    ],
    "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
}
MESSAGE = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "The user wants the weather.", "signature": "sig"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 20},
}


@pytest.mark.parametrize(
    ("answer", "split", "assemble"),
    [
        (CHAT, streams.chat_stream, streams.assemble_chat),
        (RESPONSE, streams.responses_stream, streams.assemble_responses),
        (MESSAGE, streams.message_stream, streams.assemble_message),
    ],
    ids=["chat", "responses", "messages"],
)
def test_the_stream_of_a_whole_answer_assembles_into_that_answer(answer: Any, split: Any, assemble: Any) -> None:
    events = split(answer)
    assert len(events) > 2
    rebuilt = assemble(events)
    for key in ("id", "model", "usage"):
        assert rebuilt[key] == answer[key], key
    if answer is CHAT:
        assert [(c["index"], c["message"], c["finish_reason"]) for c in rebuilt["choices"]] == [
            (c["index"], {k: v for k, v in c["message"].items() if v is not None or k == "content"}, c["finish_reason"])
            for c in CHAT["choices"]
        ]
    elif answer is RESPONSE:
        assert rebuilt["output"] == RESPONSE["output"]
    else:
        assert (rebuilt["content"], rebuilt["stop_reason"]) == (MESSAGE["content"], "tool_use")


@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"choices": "x", "output": 3, "content": None},
        {"choices": [{"message": {"tool_calls": [{"function": "not an object"}, 7]}}, "junk"]},
        {"output": [{"type": "message", "content": [{"type": "output_text"}, "junk"]}, {"type": "function_call"}]},
        {"content": [{"type": "tool_use", "input": {"a": [1, {"b": None}]}}, {"type": "unknown"}, 5], "usage": "x"},
    ],
)
def test_a_recorded_answer_of_any_shape_splits_without_raising(answer: Any) -> None:
    """What ``serve`` splits is read back from a store: a shape the providers never send still gives events."""
    for split in (streams.chat_stream, streams.responses_stream, streams.message_stream):
        assert isinstance(split(answer), list)
