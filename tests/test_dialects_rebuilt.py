"""``dialects.as_rebuilt``: a replayed request reduced to what a GenAI-convention recording keeps compares equal
to the request the reader rebuilt from that recording when nothing the recording holds changed, and unequal
when something it holds did (a message's text, a tool call's arguments, the model, a recorded parameter)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from otel_replay.dialects import as_rebuilt

REBUILT = {  # as dialects.calls.model_request rebuilds it from gen_ai.input.messages & co.
    "messages": [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "order A-17 arrived damaged"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "file_ticket", "arguments": '{"order_id": "A-17"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "ticket filed"},
    ],
    "model": "gpt-4o-mini",
    "temperature": 1,
}
SENT = {  # what the SDK call sends for the same conversation
    "model": "gpt-4o-mini",
    "temperature": 1.0,
    "stream": True,
    "stream_options": {"include_usage": True},
    "parallel_tool_calls": True,
    "messages": [
        {"role": "system", "content": [{"type": "text", "text": "You are a support agent."}]},
        {"role": "user", "content": "order A-17 arrived damaged"},
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "file_ticket", "arguments": '{"order_id":"A-17"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "ticket filed"},
    ],
}
ANTHROPIC = {
    "model": "gpt-4o-mini",
    "max_tokens": 512,
    "temperature": 1,
    "system": "You are a support agent.",
    "messages": [
        {"role": "user", "content": "order A-17 arrived damaged"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_1", "name": "file_ticket", "input": {"order_id": "A-17"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "ticket filed"}]},
    ],
}


def _same(sent: Any) -> bool:
    return as_rebuilt(REBUILT) == as_rebuilt(sent, like=REBUILT)


def test_what_the_recording_cannot_hold_is_not_compared() -> None:
    assert _same(SENT)
    assert _same(ANTHROPIC)


def _changed(path: tuple[Any, ...], value: Any, base: dict[str, Any] = SENT) -> dict[str, Any]:
    out = copy.deepcopy(base)
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


@pytest.mark.parametrize(
    "changed",
    [
        _changed(("messages", 0, "content"), "You are terse."),
        _changed(("messages", 2, "tool_calls", 0, "function", "arguments"), '{"order_id": "B-2"}'),
        _changed(("messages", 3, "content"), "ticket NOT filed"),
        _changed(("model",), "gpt-4o"),
        _changed(("temperature",), 0.2),
        _changed(("system",), "You are terse.", ANTHROPIC),
        _changed(("messages", 1, "content", 0, "input"), {"order_id": "B-2"}, ANTHROPIC),
    ],
    ids=[
        "system",
        "tool-arguments",
        "tool-result",
        "model",
        "recorded-parameter",
        "anthropic-system",
        "anthropic-input",
    ],
)
def test_a_change_of_what_the_recording_holds_still_differs(changed: dict[str, Any]) -> None:
    assert not _same(changed)


def test_a_parameter_the_recording_lacks_is_not_compared_and_input_is_left_alone() -> None:
    sent = {**SENT, "seed": 7, "max_completion_tokens": 100}
    before = copy.deepcopy(sent)
    assert _same(sent)
    assert sent == before
    assert as_rebuilt(sent)["max_tokens"] == 100  # without a recording to compare with, every key is kept
