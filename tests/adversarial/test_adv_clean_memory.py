"""The redactor remembers strings its pre-check found clean, and judges a recorded tree by its strings and keys.

What must hold: whatever was remembered, a secret is found wherever it appears next (in a new string, under a
key that was quiet before, in a recorded run), and a string is only remembered when the full scrubbing would
have left it unchanged.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

import otel_replay as orp
from otel_replay.redaction import Redactor

SECRET = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 2
CARD = "4111 1111 1111 1111"


def _message(content: str, message_id: str) -> dict:
    return {
        "type": "ai",
        "data": {
            "content": content,
            "id": message_id,
            "tool_calls": [],
            "usage_metadata": {"input_tokens": 80, "output_tokens": 12, "total_tokens": 92},
        },
    }


def test_a_secret_is_found_after_the_same_tree_was_remembered_clean() -> None:
    redactor = Redactor(key=b"k" * 32)
    clean = {"messages": [_message("sunny in Lyon", "m-1")]}
    for _ in range(3):
        assert redactor.is_clean(clean)
    for leaked in (
        {"messages": [_message(f"my key is {SECRET}", "m-1")]},  # a new string
        {"messages": [_message("sunny in Lyon", "m-1")], "api_key": "x"},  # a secret key name
        {"messages": [_message("sunny in Lyon", "m-1")], "n": 4111111111111111},
        {"messages": [_message(CARD, "m-1")]},
    ):
        assert not redactor.is_clean(leaked)
        tree, n = redactor.redact(leaked, "output")
        assert n >= 1 and SECRET not in json.dumps(tree) and "4111" not in json.dumps(tree)


def test_a_secret_key_among_non_string_keys_is_masked() -> None:
    """A dict with a non-string key is encoded in pair form: its key names are values of the tree."""
    import enum

    from otel_replay.snapshots import to_jsonable

    class Field(enum.Enum):
        PASSWORD = "password"

    redactor = Redactor(key=b"k" * 32)
    for value in ({1: "a", "password": "hunter2-SECRETVALUE"}, {Field.PASSWORD: "hunter2-SECRETVALUE"}):
        tree = to_jsonable(value)
        for _ in range(2):  # also once its strings were seen
            assert not redactor.is_clean(tree)
            out, n = redactor.redact(tree, "tool.args")
            assert n == 1 and "hunter2" not in json.dumps(out)


def test_random_ids_that_look_like_card_numbers_keep_a_tree_clean() -> None:
    """UUID digit groups pass the quick card test; the full test (the checksum) clears them."""
    redactor = Redactor(key=b"k" * 32)
    for _ in range(50):
        tree = {"messages": [_message("sunny in Lyon", f"lc_run--{uuid.uuid4()}-0")], "id": str(uuid.uuid4())}
        assert redactor.is_clean(tree)
        assert redactor.redact(tree, "output") == (tree, 0)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.text(max_size=40),
            st.sampled_from(
                [
                    SECRET,
                    CARD,
                    "Bearer abcdefghijklmnop1234",
                    "password=hunter2hunter2",
                    "AKIAIOSFODNN7EXAMPLE",
                    "ghp_" + "a1B2" * 9,
                    "token: 1234",
                    "4111-1111-1111-1111",
                ]
            ),
            st.builds(lambda a, b: f"{a} {b}", st.text(max_size=20), st.sampled_from([SECRET, CARD])),
        ),
        max_size=6,
    )
)
def test_a_string_is_remembered_clean_only_when_scrubbing_leaves_it_unchanged(strings: list[str]) -> None:
    redactor = Redactor(key=b"k" * 32)
    verdict = redactor.clean_strings(strings)
    scrubbed = [redactor.scrub_text(s, "x")[0] for s in strings]
    if verdict:
        assert scrubbed == strings
    for s in strings:  # whatever was remembered, each string alone gets the same answer as scrubbing it
        assert redactor.clean_strings([s]) == (redactor.scrub_text(s, "x")[1] == 0)


def test_a_recorded_run_never_stores_a_secret_that_follows_remembered_messages(home: Path) -> None:

    @orp.tool("lookup", risk="read")
    def lookup(question: str) -> dict:
        return {"answer": question, "id": str(uuid.uuid4())}

    @orp.agent("clean-memory-agent")
    def agent(questions: list[str]) -> list[dict]:
        return [lookup(q) for q in questions]

    @orp.tool("configure", risk="read")
    def configure(settings: dict) -> str:
        return "ok"

    agent(["sunny in Lyon"] * 3)
    agent(["sunny in Lyon", f"my key is {SECRET}", "sunny in Lyon"])
    configure({1: "a", "password": "hunter2-SECRETVALUE"})  # outside a run: nothing recorded, nothing leaks
    with orp.agent("clean-memory-settings"):
        configure({1: "a", "password": "hunter2-SECRETVALUE"})
    orp.flush()
    stored = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert b"sunny in Lyon" in stored
    assert SECRET.encode() not in stored and b"hunter2-SECRETVALUE" not in stored


class _Text(str):
    """A str subclass, as some libraries put in span attributes."""


def test_a_str_subclass_span_attribute_is_scrubbed(home: Path) -> None:
    from opentelemetry import trace

    tracer = trace.get_tracer("some.library")
    with tracer.start_as_current_span("library call") as span:
        span.set_attribute("note", _Text(f"key {SECRET}"))
        span.set_attribute("notes", [_Text(f"key {SECRET}"), "plain"])
    orp.flush()
    stored = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert b"library call" in stored and SECRET.encode() not in stored
