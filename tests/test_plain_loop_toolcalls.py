"""The tool calls of recorded model responses and the tool results of requests, in every shape a plain tool loop
or a framework records them: what dry's ``not_firewalled`` and the ``unrecorded_tool`` divergence rest on."""

from __future__ import annotations

from otel_replay.markers import marker_paths
from otel_replay.replay.matching.toolcalls import requested_calls, result_ids

CHAT = {
    "id": "chatcmpl-1",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "ask_database", "arguments": "{}"}}
                ],
            },
        }
    ],
}
RESPONSES = {
    "id": "resp_1",
    "tools": [{"type": "function", "name": "ask_database"}],
    "output": [
        {"type": "function_call", "id": "fc_1", "call_id": "call_r1", "name": "ask_database", "arguments": "{}"}
    ],
}
ANTHROPIC = {
    "id": "msg_1",
    "content": [
        {"type": "text", "text": "let me look"},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}},
    ],
}
LANGCHAIN = {
    "$type": "pydantic",
    "class": "langchain_core.messages.ai:AIMessage",
    "fields": {
        "content": "",
        "tool_calls": [{"name": "search", "args": {}, "id": "call_lc", "type": "tool_call"}],
        "additional_kwargs": {"tool_calls": [{"id": "call_lc", "function": {"name": "search"}}]},
    },
}


def test_requested_calls_in_every_recorded_shape() -> None:
    assert requested_calls(CHAT) == [("ask_database", "call_1")]
    assert requested_calls(RESPONSES) == [("ask_database", "call_r1")]  # the echoed tool definitions are not calls
    assert requested_calls(ANTHROPIC) == [("lookup", "toolu_1")]
    assert requested_calls(LANGCHAIN) == [("search", "call_lc")]  # additional_kwargs repeats it: counted once
    assert requested_calls({"otel_replay.stream": 1, "chunks": [CHAT], "response": CHAT}) == [
        ("ask_database", "call_1")
    ]
    assert requested_calls({"choices": [{"message": {"role": "assistant", "content": "done"}}]}) == []


def test_result_ids_of_requests_in_every_shape() -> None:
    chat = {"messages": [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "call_1", "content": "r"}]}
    responses = {"input": [{"type": "function_call_output", "call_id": "call_r1", "output": "r"}]}
    anthropic = {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]}]}
    assert result_ids(chat) == {"call_1"}
    assert result_ids(responses) == {"call_r1"}
    assert result_ids(anthropic) == {"toolu_1"}
    assert result_ids({"messages": [{"role": "user", "content": "call_1"}]}) == set()


def test_marker_paths_find_marker_objects_and_tokens_inside_strings() -> None:
    request = {
        "messages": [
            {"role": "user", "content": "my key is [REDACTED:openai_api_key:hmac-sha256:0123456789abcdef], go"},
            {"role": "tool", "content": [{"type": "text", "text": "no secret here [REDACTED] or [redacted:x]"}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "content": {"$redacted": "hmac-sha256:0123456789abcdef", "scope": "tool.result"},
                    }
                ],
            },
        ]
    }
    assert marker_paths(request) == ["messages[0].content", "messages[2].content[0].content"]
    assert marker_paths("[REDACTED:error]") == ["(value)"]


def test_a_users_own_redacted_label_is_text_not_a_marker() -> None:
    """Documents that say ``[REDACTED:PII]`` themselves are sent in a live replay; only otel-replay's keyed
    tokens (and the text a replayed redacted value reads as) stop it."""
    assert marker_paths({"content": "the contract says [REDACTED:PII] in clause 4"}) == []
    assert marker_paths({"content": "value [REDACTED:hmac-sha256:0123456789abcdef]"}) == ["content"]
