"""Adversarial: a mock replay hands recorded answers back to the agent, and those answers are hostile data.

The store may be written by anyone who can send spans. A mock replay answers each call with the value its
recorded step returned, and the replay's own steps record that value again. Whatever the recorded text holds (a
secret in clear, the same secret behind JSON escapes, a key given twice whose first value is a secret, a forged
keyed hash), the replay's stored rows and its result must hold no secret in clear and only hashes computed
with this installation's key: the recorded text and hashes are never copied, the values are encoded, checked
and hashed again.

Every recorded answer here is planted with the OTel SDK (a copy of a genuinely recorded run, its snapshot texts
edited as raw text), read from the real embedded store, replayed by ``otel_replay.replay`` in mock mode.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import adv_answer_agents as agents
import pytest

import otel_replay as orp
from otel_replay import semconv
from otel_replay.records import SpanRecord
from otel_replay.redaction import Redactor
from otel_replay.snapshots import canonical_json
from otel_replay.storage.store import Store

SECRET = "sk-proj-" + "Q7vLm2Xc9RtB4nWy8KpZ3dHs6FgJ1aEu5iOo0TqV"
"""A key of a shape the redactor knows (fixed: no random draw may decide whether a test passes)."""
FORGED = "hmac-sha256:" + "0f" * 32
"""A keyed hash nobody computed with this installation's key."""


def escaped(text: str) -> str:
    """``text`` as a JSON string body with every character escaped (``\\u0073\\u006b...``): the same value."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


def record_original(home: Path) -> list[SpanRecord]:
    """A genuine run of the agent, recorded through the real decorators; its stored spans."""
    agents.answer_agent(1042)
    orp.flush()
    with Store.open(home=home) as store:
        (summary,) = store.runs(agent="answer-agent", kind="original")
        return store.load_spans(summary.trace_id)


def replay_rows(home: Path, trace_id: str) -> tuple[Any, list[SpanRecord]]:
    """A mock replay of ``trace_id``, and the replay's rows as the store holds them."""
    with Store.open(home=home) as store:
        result = orp.replay(trace_id, mode="mock", store=store)
        assert result.replay_trace_id is not None
        return result, store.load_spans(result.replay_trace_id)


def stored_text(spans: list[SpanRecord]) -> str:
    """Every string of the rows: names, attributes, events, statuses, links."""
    parts: list[str] = []
    for span in spans:
        parts += [span.span_name, span.status_message, *span.span_attributes, *span.span_attributes.values()]
        parts += [str(v) for v in span.resource_attributes.values()]
        for event in span.events:
            parts += [event.name, *event.attributes, *(str(v) for v in event.attributes.values())]
        for link in span.links:
            parts += [str(v) for v in link.attributes.values()]
    return "\n".join(parts)


def step_of(spans: list[SpanRecord], kind: str) -> SpanRecord:
    (span,) = [s for s in spans if s.span_attributes.get(semconv.STEP_KIND) == kind]
    return span


def snapshot_of(span: SpanRecord, kind: str) -> dict[str, Any]:
    (event,) = [e for e in span.events if e.name == semconv.snapshot_event_name(kind)]
    payload: dict[str, Any] = json.loads(event.attributes[semconv.SNAPSHOT_PAYLOAD])
    return payload


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} is not in the recorded text once"
    return text.replace(old, new)


# The recorded tool result's note and the recorded model reply, as stored text, and what is planted instead.
HOSTILE: dict[str, Callable[[str], str]] = {
    "clear": lambda key: f'"{key}":"{SECRET}"',
    "escaped": lambda key: f'"{key}":"{escaped(SECRET)}"',
    # the same key twice: a JSON reader keeps the last value, the text still holds the first
    "key_twice": lambda key: f'"{key}":"{SECRET}","{key}":"{agents.NOTE if key == "note" else agents.REPLY}"',
}


@pytest.mark.parametrize("form", sorted(HOSTILE))
def test_a_secret_planted_in_recorded_answers_never_reaches_the_replays_rows_or_result_in_clear(
    home: Path, form: str
) -> None:
    original = record_original(home)

    def hostile(kind: str, text: str) -> str | None:
        if kind == "tool":
            return replace_once(text, f'"note":"{agents.NOTE}"', HOSTILE[form]("note"))
        if kind == "model":
            return replace_once(text, f'"text":"{agents.REPLY}"', HOSTILE[form]("text"))
        return None

    planted = agents.plant_text(home, original, payload=hostile)
    with Store.open(home=home) as store:  # the plant took: the recorded answers hold the secret as planted
        planted_text = stored_text(store.load_spans(planted))
    assert (escaped(SECRET) if form == "escaped" else SECRET) in planted_text
    result, rows = replay_rows(home, planted)

    text = stored_text(rows)
    reported = json.dumps(result.to_dict(), ensure_ascii=False)
    for where, blob in (("the replay's rows", text), ("the replay's result", reported)):
        assert SECRET not in blob, f"the planted secret is in clear in {where}"
        assert escaped(SECRET) not in blob, f"the planted escaped secret is in {where}"
    tool = snapshot_of(step_of(rows, "tool"), "tool")
    model = snapshot_of(step_of(rows, "model"), "model")
    if form == "key_twice":
        # the answer the agent got is the value a JSON reader sees: the last one, recorded as such
        assert tool["result"] == {"ticket": 1042, "note": agents.NOTE}
        assert model["response"]["text"] == agents.REPLY
    else:
        # the secret did reach the agent (it is the recorded answer) and was redacted where the replay recorded it
        assert set(tool["result"]["note"]) == {"$redacted", "scope"}
        assert set(model["response"]["text"]) == {"$redacted", "scope"}
        for kind in ("tool", "model"):
            (event,) = [e for e in step_of(rows, kind).events if e.name == semconv.snapshot_event_name(kind)]
            assert int(event.attributes[semconv.SNAPSHOT_REDACTIONS]) >= 1


def test_forged_recorded_hashes_are_never_copied_into_the_replay(home: Path) -> None:
    original = record_original(home)

    def forged_text(kind: str, text: str) -> str | None:
        payload = json.loads(text)
        field = {"tool": "result_hash", "model": "response_hash"}.get(kind)
        if field is None:
            return None
        return replace_once(text, f'"{field}":"{payload[field]}"', f'"{field}":"{FORGED}"')

    def forged_attributes(span: SpanRecord) -> dict[str, str]:
        kind = span.span_attributes.get(semconv.STEP_KIND)
        if kind == "tool":
            return {semconv.TOOL_RESULT_HASH: FORGED}
        if kind == "model":
            return {semconv.MODEL_RESPONSE_HASH: FORGED}
        return {}

    planted = agents.plant_text(home, original, payload=forged_text, span_attributes=forged_attributes)
    with Store.open(home=home) as store:  # the plant took: the recorded run carries the forged hashes
        stored = store.load_spans(planted)
    assert step_of(stored, "tool").span_attributes[semconv.TOOL_RESULT_HASH] == FORGED
    assert snapshot_of(step_of(stored, "model"), "model")["response_hash"] == FORGED

    result, rows = replay_rows(home, planted)

    assert FORGED not in stored_text(rows)
    assert FORGED not in json.dumps(result.to_dict())
    key = Redactor.for_home(home)
    tool_span, model_span = step_of(rows, "tool"), step_of(rows, "model")
    tool, model = snapshot_of(tool_span, "tool"), snapshot_of(model_span, "model")
    # recomputed with this installation's key from what the replay recorded
    expected_tool = key.content_hash(canonical_json(tool["result"]))
    expected_model = key.content_hash(canonical_json(model["response"]))
    assert tool_span.span_attributes[semconv.TOOL_RESULT_HASH] == tool["result_hash"] == expected_tool
    assert model_span.span_attributes[semconv.MODEL_RESPONSE_HASH] == model["response_hash"] == expected_model
