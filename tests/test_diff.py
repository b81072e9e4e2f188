"""The run diff: each section says whether two real recorded runs differ, and where.

Every run here is recorded for real through ``otel_replay.testing.capture`` from a small scripted agent whose
behaviour is set per test, so the diff reads exactly what a store would hold.
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_clock import FakeClock
from opentelemetry.sdk import trace as sdk_trace
from rich.console import Console

import otel_replay as orp
from otel_replay import recording
from otel_replay.replay.diff import SECTIONS, RunDiff, diff_runs, render_diff
from otel_replay.testing import capture

_sleep = time.sleep  # what make_agent(sleep_s=...) waits with (a test may swap in a fake clock)

SECRET = "sk-proj-" + "A1b2" * 10
OTHER_SECRET = "sk-proj-" + "Z9y8" * 10

Call = tuple[str, dict[str, Any]]


@pytest.fixture(autouse=True)
def span_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Span times from a clock that moves only when an agent "sleeps" (``make_agent(sleep_s=...)``): a run takes
    no time at all unless it sleeps, however busy the machine is, so no latency section changes by chance."""
    clock = FakeClock()
    monkeypatch.setattr(sdk_trace, "time_ns", clock.time_ns)
    monkeypatch.setattr(recording.lifecycle, "time", clock)  # the run start time is read there
    monkeypatch.setattr(sys.modules[__name__], "_sleep", clock.sleep)
    return clock


def make_agent(
    *,
    answer: str = "Refund approved for A1.",
    calls: tuple[Call, ...] = (
        ("lookup_order", {"order_id": "A1"}),
        ("issue_refund", {"order_id": "A1", "amount": 20}),
    ),
    docs: tuple[str, ...] = ("refund-policy", "shipping"),
    doc_text: str = "policy text",
    tokens: tuple[int, int] = (40, 12),
    cost: float | None = None,
    states: tuple[str, ...] = ("triage", "refund", "done"),
    verdicts: tuple[Any, ...] = ("pass",),
    fail: bool = False,
    sleep_s: float = 0.0,
    approval: str | None = None,
) -> Callable[[str], Any]:
    """A support agent: retrieve, ask the model, call tools, record states and a safety verdict, answer."""

    @orp.retriever("kb")
    def kb(query: str, top_k: int = 3) -> list[dict[str, Any]]:
        return [{"id": d, "content": f"{doc_text} {d}"} for d in docs]

    @orp.model("planner", provider="scripted", model="scripted-1")
    def planner(prompt: str) -> dict[str, Any]:
        usage: dict[str, Any] = {"input_tokens": tokens[0], "output_tokens": tokens[1]}
        if cost is not None:
            usage["cost_usd"] = cost
        return {"text": "plan", "usage": usage}

    @orp.tool("lookup_order", risk="read")
    def lookup_order(order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, "status": "delivered"}

    @orp.tool("issue_refund", risk="write")
    def issue_refund(order_id: str, amount: int) -> dict[str, Any]:
        return {"refunded": amount}

    @orp.tool("send_email", risk="high")
    def send_email(to: str, body: str) -> str:
        return "sent"

    tools = {"lookup_order": lookup_order, "issue_refund": issue_refund, "send_email": send_email}

    @orp.agent("support")
    def support(question: str) -> dict[str, Any]:
        previous = None
        found = kb(question)
        planner(question)
        for i, (name, args) in enumerate(calls):
            if approval is not None and name == "issue_refund":
                orp.record_approval(f"apr-{i}", status=approval, tool=name)
            tools[name](**args)
        for state in states:
            orp.record_state(state, transition=f"{previous} -> {state}")
            previous = state
        for verdict in verdicts:
            orp.record_safety({"verdict": verdict, "checker": "policy"})
        if sleep_s:
            _sleep(sleep_s)
        if fail:
            raise RuntimeError("refund service unavailable")
        return {"answer": answer, "citations": [d["id"] for d in found]}

    return support


def record(tmp_path: Path, agent: Callable[[str], Any], question: str = "refund for A1?") -> orp.Run:
    """Run ``agent`` once under capture and return the recorded run."""
    with capture(home=tmp_path) as recorded:
        try:
            agent(question)
        except RuntimeError:
            pass
    (run,) = recorded.runs()
    return run


def pair(tmp_path: Path, a: dict[str, Any], b: dict[str, Any]) -> RunDiff:
    """Diff of one run of ``make_agent(**a)`` against one of ``make_agent(**b)``."""
    return diff_runs(record(tmp_path, make_agent(**a)), record(tmp_path, make_agent(**b)))


def changed(diff: RunDiff) -> set[str]:
    return {name for name, section in diff.sections.items() if section.changed}


def test_identical_runs_change_nothing(tmp_path: Path) -> None:
    a, b = record(tmp_path, make_agent()), record(tmp_path, make_agent())
    assert a.trace_id != b.trace_id
    diff = diff_runs(a, b)
    assert changed(diff) == set()
    assert not diff.changed
    assert diff.sections["tools"].details["count"] == {"a": 2, "b": 2}
    assert diff.sections["safety"].details["verdicts"] == {"a": ["pass"], "b": ["pass"]}
    assert diff.sections["state"].details["final_task_state"] == {"a": "done", "b": "done"}
    assert diff.sections["citations"].details["retrieved"]["a"] == ["refund-policy", "shipping"]


def test_a_run_compared_with_itself_is_unchanged(tmp_path: Path) -> None:
    run = record(tmp_path, make_agent(fail=True))
    assert not diff_runs(run, run).changed


def test_changed_answer_changes_output_only(tmp_path: Path) -> None:
    diff = pair(tmp_path, {}, {"answer": "Refund denied."})
    assert changed(diff) == {"output"}
    output = diff.sections["output"]
    assert output.details["differences"]["answer"] == {"a": "Refund approved for A1.", "b": "Refund denied."}
    assert "structured" in output.details["differences"]
    assert "status" not in output.details["differences"]
    assert "answer changed" in output.summary


def test_error_against_ok_changes_output(tmp_path: Path) -> None:
    diff = pair(tmp_path, {}, {"fail": True})
    assert "output" in changed(diff)
    details = diff.sections["output"].details
    assert details["status"] == {"a": "ok", "b": "error"}
    assert details["differences"]["error_type"] == {"a": None, "b": "RuntimeError"}
    assert details["differences"]["error_message"]["b"] == "refund service unavailable"
    assert "status ok → error" in diff.sections["output"].summary


def test_extra_tool_call_is_added_with_its_index(tmp_path: Path) -> None:
    base = (("lookup_order", {"order_id": "A1"}), ("issue_refund", {"order_id": "A1", "amount": 20}))
    extra = (*base[:1], ("send_email", {"to": "ann@example.com", "body": "done"}), *base[1:])
    a, b = record(tmp_path, make_agent(calls=base)), record(tmp_path, make_agent(calls=extra))
    tools = diff_runs(a, b).sections["tools"]
    assert tools.changed
    assert tools.details["removed"] == [] and tools.details["changed"] == []
    (added,) = tools.details["added"]
    email_step = next(s for s in b.steps if s.name == "send_email")
    assert added["name"] == "send_email" and added["a_index"] is None and added["b_index"] == email_step.index
    assert f"b#{email_step.index} send_email" in tools.summary


def test_removed_tool_call_is_reported_with_its_index(tmp_path: Path) -> None:
    a = record(tmp_path, make_agent())
    b = record(tmp_path, make_agent(calls=(("issue_refund", {"order_id": "A1", "amount": 20}),)))
    tools = diff_runs(a, b).sections["tools"]
    assert tools.changed
    (removed,) = tools.details["removed"]
    lookup_step = next(s for s in a.steps if s.name == "lookup_order")
    assert removed == {**removed, "name": "lookup_order", "a_index": lookup_step.index, "b_index": None}
    assert tools.details["added"] == [] and tools.details["changed"] == []
    assert tools.details["count"] == {"a": 2, "b": 1}


def test_changed_tool_arguments_are_a_changed_call_on_both_sides(tmp_path: Path) -> None:
    a = record(tmp_path, make_agent())
    b = record(
        tmp_path,
        make_agent(calls=(("lookup_order", {"order_id": "A1"}), ("issue_refund", {"order_id": "A1", "amount": 99}))),
    )
    diff = diff_runs(a, b)
    assert "tools" in changed(diff)
    (entry,) = diff.sections["tools"].details["changed"]
    assert entry["name"] == "issue_refund"
    assert entry["a_index"] == a.steps[-1].index and entry["b_index"] == b.steps[-1].index
    assert entry["fields"]["args_hash"]["keys"] == ["amount"]
    assert entry["fields"]["args_hash"]["a"] != entry["fields"]["args_hash"]["b"]
    assert "result_hash" in entry["fields"]  # the refund result depends on the amount
    assert diff.sections["tools"].details["added"] == diff.sections["tools"].details["removed"] == []


def test_changed_approval_is_a_changed_call(tmp_path: Path) -> None:
    diff = pair(tmp_path, {"approval": "approved"}, {"approval": "denied"})
    (entry,) = diff.sections["tools"].details["changed"]
    assert entry["name"] == "issue_refund"
    assert entry["fields"] == {"approval": {"a": "approved", "b": "denied"}}


def test_changed_retrieval_results_change_citations(tmp_path: Path) -> None:
    diff = pair(tmp_path, {}, {"docs": ("refund-policy", "warranty")})
    assert changed(diff) == {"citations", "output"}  # the answer's structured output cites the new doc
    details = diff.sections["citations"].details
    assert details["retrieved"]["added"] == ["warranty"]
    assert details["retrieved"]["removed"] == ["shipping"]
    assert details["citations"]["added"] == ["warranty"]
    assert details["citations"]["removed"] == ["shipping"]


def test_changed_document_content_changes_citations(tmp_path: Path) -> None:
    diff = pair(tmp_path, {}, {"doc_text": "new policy text"})
    citations = diff.sections["citations"]
    assert citations.changed
    assert citations.details["retrieved"]["content_changed"] == ["refund-policy", "shipping"]
    assert citations.details["retrieved"]["added"] == citations.details["retrieved"]["removed"] == []


def test_changed_tokens_change_cost_with_deltas(tmp_path: Path) -> None:
    diff = pair(tmp_path, {"tokens": (40, 12)}, {"tokens": (55, 12)})
    assert changed(diff) == {"cost"}
    cost = diff.sections["cost"].details
    assert cost["input_tokens"] == {"a": 40, "b": 55, "delta": 15, "changed": True}
    assert cost["output_tokens"]["changed"] is False
    assert "input tokens +15" in diff.sections["cost"].summary


def test_changed_cost_changes_cost(tmp_path: Path) -> None:
    diff = pair(tmp_path, {"cost": 0.0001}, {"cost": 0.0003})
    cost = diff.sections["cost"].details["cost_usd"]
    assert cost["changed"] and cost["a"] == pytest.approx(0.0001) and cost["delta"] == pytest.approx(0.0002)


def test_different_safety_verdict_changes_safety(tmp_path: Path) -> None:
    diff = pair(tmp_path, {"verdicts": ("pass",)}, {"verdicts": ("block",)})
    assert "safety" in changed(diff)
    assert diff.sections["safety"].details["verdicts"] == {"a": ["pass"], "b": ["block"]}
    assert diff.sections["safety"].summary == "verdicts pass → block"


def test_an_extra_safety_verdict_changes_safety(tmp_path: Path) -> None:
    diff = pair(tmp_path, {"verdicts": ("pass",)}, {"verdicts": ("pass", "flag")})
    assert diff.sections["safety"].changed
    assert diff.sections["safety"].details["verdicts"]["b"] == ["pass", "flag"]


def test_changed_state_reports_the_first_differing_position(tmp_path: Path) -> None:
    diff = pair(tmp_path, {}, {"states": ("triage", "escalate", "done")})
    state = diff.sections["state"]
    assert changed(diff) == {"state"}
    first = state.details["first_difference"]
    assert first["position"] == 1
    assert first["a"]["task_state"] == "refund" and first["b"]["task_state"] == "escalate"
    assert state.details["transitions"]["b"] == ["None -> triage", "triage -> escalate", "escalate -> done"]
    assert state.details["final_task_state"] == {"a": "done", "b": "done"}


def test_missing_final_state_is_a_difference(tmp_path: Path) -> None:
    diff = pair(tmp_path, {}, {"states": ("triage", "refund")})
    state = diff.sections["state"]
    assert state.changed and state.details["first_difference"]["position"] == 2
    assert state.details["first_difference"]["b"] is None
    assert state.details["final_task_state"] == {"a": "done", "b": "refund"}


def test_latency_changes_only_past_the_threshold(tmp_path: Path) -> None:
    fast, slow = record(tmp_path, make_agent()), record(tmp_path, make_agent(sleep_s=0.3))
    assert fast.summary.duration_ms == 0 and slow.summary.duration_ms == pytest.approx(300)
    diff = diff_runs(fast, slow)
    latency = diff.sections["latency"]
    assert latency.changed and diff.changed
    assert latency.details["total"]["delta_ms"] > 250
    assert set(latency.details["by_kind"]) == {"model", "retrieval", "tool"}
    assert not diff_runs(fast, slow, latency_threshold_ms=10_000).sections["latency"].changed
    # the small wobble between two fast runs stays within the threshold
    assert not diff_runs(fast, record(tmp_path, make_agent())).sections["latency"].changed


def test_redacted_ids_compare_by_fingerprint_and_never_print(tmp_path: Path) -> None:
    a = record(tmp_path, make_agent(docs=(SECRET, "shipping")))
    b = record(tmp_path, make_agent(docs=("shipping", SECRET)))  # same secret, other position (scope)
    c = record(tmp_path, make_agent(docs=(OTHER_SECRET, "shipping")))
    same = diff_runs(a, b).sections["citations"]
    assert not same.changed, same.details
    other = diff_runs(a, c)
    assert other.sections["citations"].changed
    assert len(other.sections["citations"].details["retrieved"]["added"]) == 1
    text = json.dumps(other.to_dict())
    console = Console(file=io.StringIO(), width=200)
    console.print(render_diff(other))
    for shown in (text, console.file.getvalue()):
        assert SECRET not in shown and OTHER_SECRET not in shown
    assert "hmac-sha256:" in text  # the fingerprint (already in the run) is what is shown


def test_to_dict_is_json_ready_with_the_seven_sections(tmp_path: Path) -> None:
    diff = pair(tmp_path, {}, {"fail": True, "calls": (), "verdicts": ("block",), "sleep_s": 0.0})
    data = json.loads(json.dumps(diff.to_dict()))
    assert list(data) == ["a", "b", "changed", "sections", "diff"]
    assert data["diff"] == data["sections"]
    assert data["a"] == diff.a_trace_id and data["b"] == diff.b_trace_id and data["changed"] is True
    assert (
        list(data["sections"])
        == list(SECTIONS)
        == ["output", "state", "requests", "tools", "citations", "cost", "latency", "safety"]
    )
    for section in data["sections"].values():
        assert set(section) == {"changed", "summary", "details"}
        assert isinstance(section["changed"], bool) and isinstance(section["summary"], str)
    assert data["sections"]["tools"]["changed"] and data["sections"]["safety"]["changed"]


def test_render_lists_every_section_and_its_summary(tmp_path: Path) -> None:
    diff = pair(tmp_path, {}, {"answer": "[bold]Refund denied.[/bold]"})
    console = Console(file=io.StringIO(), width=200)
    console.print(render_diff(diff))
    out = console.file.getvalue()
    for name in SECTIONS:
        assert name in out
    assert "changed" in out and "answer changed" in out
    assert diff.a_trace_id in out


def test_results_are_frozen(tmp_path: Path) -> None:
    diff = pair(tmp_path, {}, {})
    with pytest.raises(AttributeError):
        diff.a_trace_id = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        diff.sections["output"].changed = True  # type: ignore[misc]
