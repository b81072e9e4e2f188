"""Replays given a ``ReplayPolicy`` (what a replay lab changes) of the demo support agent: the tool tape in strict
and sequence matching, unused recorded calls, injected tool faults, tools run live, model overrides on an
``@orp.model`` function. The demo runs are recorded once into a module home; the refund tool's ``refunds.log``
in that home proves no replay issued a refund it was not approved to.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import otel_replay as orp
from otel_replay import semconv
from otel_replay.demo import agent as demo
from otel_replay.errors import ReplayRefused, ToolNotRecorded
from otel_replay.replay.engine import replay_run
from otel_replay.replay.matching.policy import ReplayPolicy, ToolFault
from otel_replay.replay.matching.tape import TAPE_KEYS, draws
from otel_replay.storage.store import Store

EMPTY_TAPE = {"unused": [], "drift": [], "refused": [], "injected": []}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The three demo conversations recorded into a module home: ``status`` (order 1042), ``refund`` (2077,
    the approved high-risk refund) and ``unknown`` (9999, the run that fails)."""
    home = tmp_path_factory.mktemp("replay-policy") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(name, raising=False)
        orp.configure(home=home, exporter="spool")
        demo.flaky_calls.clear()
        demo.run_demo()
        runs: dict[str, str] = {}
        with Store.open() as store:
            for summary in store.runs(kind="original"):
                question = store.load_run(summary.trace_id).snapshots["input"]["args"][0]
                key = "status" if "1042" in question else "refund" if "2077" in question else "unknown"
                runs[key] = summary.trace_id
        assert sorted(runs) == ["refund", "status", "unknown"]
        yield {"home": home, "runs": runs}


def ledger(world: dict[str, Any]) -> list[str]:
    """The refunds the demo's refund tool really issued."""
    path = Path(world["home"]) / "refunds.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def kinds(result: Any) -> list[tuple[str, int | None]]:
    return [(d.kind, d.step_index) for d in result.divergences]


def test_unchanged_code_matches_with_an_empty_tape_in_every_mode(world: dict[str, Any]) -> None:
    policy = ReplayPolicy(lab_id="lab-unchanged")
    for key, tid in world["runs"].items():
        for mode in ("mock", "deterministic"):
            result = orp.replay(tid, mode=mode, policy=policy)
            assert result.outcome == "matched", (key, mode, result.divergences)
            assert result.tape == EMPTY_TAPE
            assert result.to_dict()["tape"] == EMPTY_TAPE
            tools = [s for s in result.replay.steps if s.kind == "tool"]
            assert tools and {s.attributes[semconv.REPLAY_SERVED] for s in tools} == {"recording"}
            assert result.replay.attributes[semconv.REPLAY_LAB_ID] == "lab-unchanged"
    assert ledger(world) == ["refund order=2077 amount_eur=249.0"]  # recorded once, never issued again


def test_without_a_policy_there_is_no_tape(world: dict[str, Any]) -> None:
    result = orp.replay(world["runs"]["status"], mode="deterministic")
    assert result.outcome == "matched" and result.tape is None and "tape" not in result.to_dict()


def test_a_changed_system_prompt_diverges_at_the_first_model_step(world: dict[str, Any]) -> None:
    policy = ReplayPolicy(prompts={"system": "You are a terse support agent. Refund anything."})
    for tid in world["runs"].values():
        with Store.open() as store:
            original_first_model = min(s.index for s in store.load_run(tid).steps if s.kind == "model")
        result = orp.replay(tid, mode="deterministic", policy=policy)
        first = result.first_divergence
        assert result.outcome == "diverged"
        assert (first.kind, first.step_index) == ("request", original_first_model)
        assert "+" in first.diff and "Refund anything." in first.diff and demo.SYSTEM_RULES in first.diff
    # mock answers anyway and reports every model call whose request changed
    result = orp.replay(world["runs"]["status"], mode="mock", policy=policy)
    assert [k for k in kinds(result) if k[0] == "request"] == [("request", 1), ("request", 5)]
    assert ledger(world) == ["refund order=2077 amount_eur=249.0"]


def test_strict_refuses_changed_arguments_and_sequence_serves_them_as_drift(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = demo.check_inventory

    def check_inventory(sku: str) -> dict[str, Any]:  # the agent's code changed: it asks for a lower-case SKU
        return checked(sku.lower())

    monkeypatch.setattr(demo, "check_inventory", check_inventory)
    tid = world["runs"]["status"]

    strict = orp.replay(tid, mode="deterministic", policy=ReplayPolicy(tool_match="strict"))
    assert strict.outcome == "diverged"
    (refused,) = strict.tape["refused"]
    assert refused["tool"] == "check_inventory" and refused["step_index"] == 3 and "strict" in refused["reason"]
    assert strict.tape["unused"] == [
        {"tool": "check_inventory", "step_index": 3},
        {"tool": "check_inventory", "step_index": 4},
    ]
    assert strict.tape["drift"] == [] and strict.tape["injected"] == []
    assert ("arguments", 3) in kinds(strict)
    # the agent received ToolNotRecorded (it only retries timeouts): the replay's run ended with it
    assert strict.agent_error is not None and strict.agent_error["type"] == "otel_replay.errors.ToolNotRecorded"
    step = next(s for s in strict.replay.steps if s.name == "check_inventory")
    assert step.attributes[semconv.REPLAY_SERVED] == "refused" and step.status == "error"
    assert issubclass(ToolNotRecorded, Exception)  # an ordinary exception: agent code may handle it

    sequence = orp.replay(tid, mode="deterministic", policy=ReplayPolicy(tool_match="sequence"))
    assert sequence.tape["refused"] == [] and sequence.tape["unused"] == []
    assert [(d["tool"], d["step_index"]) for d in sequence.tape["drift"]] == [
        ("check_inventory", 3),
        ("check_inventory", 4),
    ]
    diff = sequence.tape["drift"][0]["diff"]
    assert '"sku": "KT-200"' in diff and '"sku": "kt-200"' in diff
    assert sequence.agent_error is None  # the recorded timeout, then the recorded stock, as in the original
    assert [k for k in kinds(sequence) if k[0] != "output"] == [("arguments", 3), ("arguments", 4)]
    assert json.loads(json.dumps(sequence.to_dict()))["tape"] == sequence.tape


def test_recorded_calls_the_replay_never_made_are_unused(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo, "_with_retry", lambda func, *args, **kw: {"sku": args[0], "in_stock": 14})
    result = orp.replay(world["runs"]["status"], mode="mock", policy=ReplayPolicy())
    assert result.tape["unused"] == [
        {"tool": "check_inventory", "step_index": 3},
        {"tool": "check_inventory", "step_index": 4},
    ]
    assert ("missing_call", 3) in kinds(result) and ("missing_call", 4) in kinds(result)
    assert result.outcome == "diverged"


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (ToolFault(tool="lookup_order", kind="timeout"), "TimeoutError"),
        (ToolFault(tool="lookup_order", kind="exception"), "RuntimeError"),
        (ToolFault(tool="lookup_order", kind="empty"), "KeyError"),
        (ToolFault(tool="lookup_order", kind="value", value={"order_id": "1042"}), "KeyError"),
    ],
)
def test_each_fault_kind_replaces_the_recorded_answer(world: dict[str, Any], fault: ToolFault, error: str) -> None:
    result = orp.replay(world["runs"]["status"], mode="mock", policy=ReplayPolicy(faults=(fault,), seed=7))
    assert result.tape["injected"] == [{"tool": "lookup_order", "step_index": 2, "fault": fault.kind, "ordinal": 0}]
    assert (
        result.agent_error is not None and result.agent_error["type"].rsplit(".", 1)[-1] == error
    )  # the demo does not cope
    assert ("output", None) in kinds(result)
    step = next(s for s in result.replay.steps if s.name == "lookup_order")
    assert step.attributes[semconv.REPLAY_SERVED] == "injected"
    if fault.kind in ("timeout", "exception"):
        assert step.status == "error" and "injected fault" in (step.error or {}).get("message", "")
    else:
        assert step.status == "ok"
        assert step.snapshots["tool"]["result"] == ({} if fault.kind == "empty" else {"order_id": "1042"})
    assert ledger(world) == ["refund order=2077 amount_eur=249.0"]


def test_a_value_fault_replaces_a_recorded_error(world: dict[str, Any]) -> None:
    # the recorded first check_inventory call timed out and was retried; a value served in its place ends the retry
    fault = ToolFault(tool="check_inventory", kind="value", value={"sku": "KT-200", "in_stock": 14})
    result = orp.replay(world["runs"]["status"], mode="mock", policy=ReplayPolicy(faults=(fault,)))
    assert result.tape["injected"] == [{"tool": "check_inventory", "step_index": 3, "fault": "value", "ordinal": 0}]
    assert result.tape["unused"] == [{"tool": "check_inventory", "step_index": 4}]
    assert result.agent_error is None and ("output", None) not in kinds(result)
    assert ("missing_call", 4) in kinds(result)


def test_fault_draws_depend_only_on_their_inputs(world: dict[str, Any]) -> None:
    fault = ToolFault(tool="check_inventory", kind="empty", p=0.5)
    drawn = [draws(fault, seed=3, trace_id="ab" * 16, tool="check_inventory", ordinal=n, rule=0) for n in range(64)]
    assert drawn == [
        draws(fault, seed=3, trace_id="ab" * 16, tool="check_inventory", ordinal=n, rule=0) for n in range(64)
    ]
    assert 10 < sum(drawn) < 54  # a fraction, not all or nothing
    other = [draws(fault, seed=4, trace_id="ab" * 16, tool="check_inventory", ordinal=n, rule=0) for n in range(64)]
    assert other != drawn
    assert not any(
        draws(ToolFault(tool="t", kind="empty", p=0.0), seed=1, trace_id="x", tool="t", ordinal=n, rule=0)
        for n in range(20)
    )

    policy = ReplayPolicy(faults=(fault,), seed=3)
    first = orp.replay(world["runs"]["status"], mode="mock", policy=policy)
    again = orp.replay(world["runs"]["status"], mode="mock", policy=policy)
    assert first.tape["injected"] == again.tape["injected"]


def test_a_live_tool_executes_only_with_its_approval(world: dict[str, Any]) -> None:
    tid = world["runs"]["refund"]
    policy = ReplayPolicy(tools_live=("issue_refund",))
    refused = orp.replay(tid, mode="mock", policy=policy)
    assert refused.outcome == "refused" and "--approve issue_refund" in (refused.refusal or "")
    assert ledger(world) == ["refund order=2077 amount_eur=249.0"]

    approved = orp.replay(tid, mode="mock", policy=policy, approvals=["issue_refund"], reason="lab live tool check")
    assert approved.outcome == "matched", approved.divergences
    assert approved.executions == {"issue_refund": 1}
    step = next(s for s in approved.replay.steps if s.name == "issue_refund")
    assert step.attributes[semconv.REPLAY_SERVED] == "executed"
    assert approved.tape == EMPTY_TAPE  # the live call took its recorded place on the tape
    path = Path(world["home"]) / "refunds.log"
    assert ledger(world) == ["refund order=2077 amount_eur=249.0"] * 2
    path.write_text("refund order=2077 amount_eur=249.0\n", encoding="utf-8")  # the other tests count from one


def test_overrides_of_a_model_function_and_the_ones_with_no_place(world: dict[str, Any]) -> None:
    tid = world["runs"]["status"]
    result = orp.replay(tid, mode="mock", policy=ReplayPolicy(model="terse-demo", params={"temperature": 0.5}))
    assert any("support_llm" in n and "'model' parameter" in n for n in result.notes)
    assert [k for k in kinds(result) if k[0] == "request"] == [("request", 1), ("request", 5)]
    first_model = next(s for s in result.replay.steps if s.kind == "model")
    assert first_model.snapshots["model"]["request"]["temperature"] == 0.5

    unplaced = orp.replay(tid, mode="mock", policy=ReplayPolicy(prompts={"assistant": "never used"}))
    assert unplaced.outcome == "matched"
    assert any("'assistant'" in n for n in unplaced.notes)


def test_replay_run_fills_the_tape_and_a_policy_cannot_start_from_a_step(world: dict[str, Any]) -> None:
    with Store.open() as store:
        original = store.load_run(world["runs"]["unknown"])
    result = replay_run(original, mode="deterministic", policy=ReplayPolicy(lab_id="lab-run", lane="baseline"))
    assert result.outcome == "matched" and set(result.tape) == set(TAPE_KEYS)
    root = result.replay.attributes
    assert (root[semconv.REPLAY_LAB_ID], root[semconv.REPLAY_LAB_LANE]) == ("lab-run", "baseline")
    with pytest.raises(ReplayRefused, match="from-step"):
        replay_run(original, mode="mock", from_step=2, policy=ReplayPolicy())
    with pytest.raises(ReplayRefused, match="whatif replay cannot start from a step"):
        replay_run(original, mode="whatif", from_step=2, reason="r")
    dry = replay_run(original, mode="dry", policy=ReplayPolicy())
    assert dry.tape == EMPTY_TAPE


def test_whatif_runs_the_model_function_and_never_the_recorded_tools(world: dict[str, Any]) -> None:
    tid = world["runs"]["refund"]
    issued = ledger(world)
    result = orp.replay(tid, mode="whatif", reason="model check", policy=ReplayPolicy(prompts={"system": "New."}))
    assert result.outcome == "matched", result.divergences  # the scripted model ignores the prompt
    served = {s.name: s.attributes[semconv.REPLAY_SERVED] for s in result.replay.steps if s.kind != "agent"}
    assert served == {
        "kb_search": "recording",
        "support_llm": "executed",
        "lookup_order": "recording",
        "issue_refund": "recording",
    }
    model_steps = [s for s in result.replay.steps if s.kind == "model"]
    assert [s.snapshots["model"]["request"]["messages"][0]["content"] for s in model_steps] == ["New.", "New."]
    assert ledger(world) == issued  # the refund came from the tape


def test_an_explicit_mock_answers_its_tool_instead_of_the_tape(world: dict[str, Any]) -> None:
    tid = world["runs"]["status"]
    with Store.open() as store:
        recorded = store.load_run(tid).steps[2].snapshots["tool"]["result"]
    for mode in ("mock", "deterministic"):
        same = orp.replay(tid, mode=mode, policy=ReplayPolicy(), mocks={"lookup_order": dict(recorded)})
        assert same.outcome == "matched", (mode, same.divergences)
        assert same.tape == {**EMPTY_TAPE, "mocked": [{"tool": "lookup_order", "step_index": 2, "ordinal": 0}]}
        assert same.to_dict()["tape"] == same.tape  # the recorded call the mock stood in for is not unused
        served = {s.name: s.attributes[semconv.REPLAY_SERVED] for s in same.replay.steps if s.kind == "tool"}
        assert served == {"lookup_order": "mock", "check_inventory": "recording"}

    teapot = orp.replay(
        tid,
        mode="deterministic",
        policy=ReplayPolicy(faults=(ToolFault(tool="lookup_order", kind="timeout"),)),
        mocks={"lookup_order": lambda order_id: {**recorded, "order_id": order_id, "item": "teapot"}},
    )
    assert teapot.tape["injected"] == [] and teapot.agent_error is None  # no fault on the user's own answer
    assert ("request", 5) in kinds(teapot)  # the mock's answer reached the model's next request
    assert "teapot" in (teapot.first_divergence.diff or "")


def test_an_explicit_mock_wins_over_a_live_tool_and_reports_changed_arguments(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    refund = orp.replay(
        world["runs"]["refund"],
        mode="mock",
        policy=ReplayPolicy(tools_live=("issue_refund",)),
        approvals=["issue_refund"],
        reason="mock over live",
        mocks={"issue_refund": {"order_id": "2077", "refunded_eur": 249.0, "status": "issued"}},
    )
    assert refund.outcome == "matched", refund.divergences
    assert refund.executions == {"issue_refund": 0}
    assert [e["tool"] for e in refund.tape["mocked"]] == ["issue_refund"] and refund.tape["unused"] == []
    assert ledger(world) == ["refund order=2077 amount_eur=249.0"]  # the mock answered: no refund issued

    checked = demo.check_inventory
    monkeypatch.setattr(demo, "check_inventory", lambda sku: checked(sku.lower()))
    stocked = {"check_inventory": lambda sku: {"sku": sku, "in_stock": 14}}
    for match in ("strict", "sequence"):
        result = orp.replay(
            world["runs"]["status"], mode="deterministic", policy=ReplayPolicy(tool_match=match), mocks=stocked
        )
        assert result.tape["refused"] == [] and result.tape["drift"] == []
        assert result.tape["mocked"] == [{"tool": "check_inventory", "step_index": 3, "ordinal": 0}]
        # the mock answered the first attempt: the recorded retry (step 4) was never made
        assert result.tape["unused"] == [{"tool": "check_inventory", "step_index": 4}]
        arguments = [d for d in result.divergences if d.kind == "arguments"]
        assert [d.step_index for d in arguments] == [3] and '"sku": "kt-200"' in (arguments[0].diff or "")
        assert ("missing_call", 4) in kinds(result) and result.agent_error is None
