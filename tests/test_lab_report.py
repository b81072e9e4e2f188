"""The lab's report from real replays: demo runs recorded into a home, replayed with unchanged and changed code
(``lab_report_agents``), each replay scored with ``pair_result``, summarised, gated, and shown in the terminal, as
JSON validated against ``docs/lab.schema.json``, and as HTML.

What a user sees: unchanged code matches everywhere and passes ``diverged > 0``; a new system prompt diverges at
the first model step of every run and fails it; the fixed demo agent improves the ``no error`` scorer on the
failing run; a baseline lane tells flaky runs from runs the change altered; a scorer that raises is a note on
the pair, never a crash; stored names cannot drive the terminal or the page.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import lab_report_agents as agents
import pytest

import otel_replay as orp
from otel_replay.demo import agent as demo
from otel_replay.lab import scoring
from otel_replay.lab.gates import evaluate, parse_gate
from otel_replay.lab.html import lab_html, write_lab_html
from otel_replay.lab.model import LabResult, PairResult
from otel_replay.lab.render import print_lab
from otel_replay.lab.scoring import pair_result
from otel_replay.lab.summary import summarize
from otel_replay.replay.diff import SECTIONS
from otel_replay.replay.engine import ReplayResult, replay
from otel_replay.replay.matching.divergence import Divergence
from otel_replay.replay.matching.sentdiff import request_diff
from otel_replay.runs import Run
from otel_replay.storage.store import Store
from otel_replay.terminal import SafeConsole

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "docs" / "lab.schema.json").read_text(encoding="utf-8"))
EXTRA_QUESTION = ("What does the warranty cover for a kettle?", "dora")
NEW_PROMPT = "lab_report_agents:support_agent_new_prompt"
NOISY = "lab_report_agents:support_agent_noisy"
GUARDED = "lab_report_agents:support_agent_guarded"


@dataclass
class Cohort:
    """Recorded demo runs and their replays, one store for the module."""

    home: Path
    store: Store
    originals: dict[str, Run]
    """Trace id → original run, in recording order."""
    failing: str
    """The trace id of the demo run that fails (order 9999, KeyError)."""
    hostile: str
    """The trace id of the run of the agent with a hostile name."""
    memo: dict[tuple[str, str, str | None], ReplayResult]

    def replayed(self, trace_id: str, *, entrypoint: str | None = None, mode: str = "deterministic") -> ReplayResult:
        """A replay of ``trace_id`` (each distinct replay made once per module)."""
        key = (trace_id, mode, entrypoint)
        if key not in self.memo:
            reason = "lab report test" if mode == "live" else None
            self.memo[key] = replay(trace_id, mode=mode, store=self.store, entrypoint=entrypoint, reason=reason)
        return self.memo[key]

    def pairs(
        self,
        *,
        entrypoint: str | None = None,
        lane: str = "candidate",
        repeat: int = 0,
        scorers: Sequence[scoring.Scorer] | None = None,
        trace_ids: Sequence[str] | None = None,
    ) -> list[PairResult]:
        """One pair per demo run (the hostile one left out unless named)."""
        out = []
        for tid in trace_ids or self.demo_ids:
            result = self.replayed(tid, entrypoint=entrypoint)
            out.append(pair_result(self.originals[tid], result, lane=lane, repeat=repeat, scorers=scorers))  # type: ignore[arg-type]
        return out

    @property
    def demo_ids(self) -> list[str]:
        return [tid for tid in self.originals if tid != self.hostile]


@pytest.fixture(scope="module")
def cohort(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cohort]:
    home = tmp_path_factory.mktemp("lab-report") / "otel-replay-home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for var in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(var, raising=False)
        orp.configure(home=home, exporter="spool")
        outcomes = demo.run_demo()
        assert [error is None for _, error in outcomes] == [True, True, False]
        demo.support_agent(EXTRA_QUESTION[0], customer=EXTRA_QUESTION[1])
        agents.hostile_agent(1)
        orp.flush()
        store = Store.open()
        try:
            summaries = sorted(store.runs(kind="original", limit=100), key=lambda s: s.started_at)
            originals = {s.trace_id: store.load_run(s.trace_id) for s in summaries}
            failing = next(s.trace_id for s in summaries if s.status == "error")
            hostile = next(s.trace_id for s in summaries if s.agent == agents.HOSTILE_AGENT)
            yield Cohort(home=home, store=store, originals=originals, failing=failing, hostile=hostile, memo={})
        finally:
            store.close()


def lab_of(pairs: list[PairResult], gates: Sequence[str] = (), *, scorers: Any = None, **kw: Any) -> LabResult:
    """A LabResult as the lab runner builds it: pairs, summary, gates."""
    summary = summarize(pairs, scorers=scorers)
    return LabResult(
        lab_id=kw.pop("lab_id", "lab-test"),
        mode=kw.pop("mode", "deterministic"),
        spec=kw.pop("spec", {"cohort": {"agent": "support-agent"}, "fail_if": list(gates)}),
        cohort=list(dict.fromkeys(p.original_trace_id for p in pairs)),
        pairs=pairs,
        summary=summary,
        gates=evaluate([parse_gate(g) for g in gates], summary),
        **kw,
    )


def terminal_text(result: LabResult) -> str:
    out = io.StringIO()
    print_lab(result, console=SafeConsole(file=out, width=200, color_system=None, force_terminal=False))
    return out.getvalue()


def validate(document: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(document)


def builtin_scorers() -> tuple[scoring.Scorer, ...]:
    """The built-in scorers but ``latency_delta``: its value depends on wall time (a loaded machine can make a
    replay 100 ms and 50 % slower), so the exact counts asserted here leave it out (see the latency test)."""
    return tuple(s for s in scoring.BUILTIN_SCORERS if s.name != "latency_delta")


def user_scorers() -> tuple[scoring.Scorer, ...]:
    by_name = {s.name: s for s in scoring.registered()}
    return (*builtin_scorers(), *(by_name[n] for n in agents.SCORER_NAMES))


# ------------------------------------------------------------------------------------------- outcomes


def test_unchanged_code_matches_everywhere_and_passes_the_gate(cohort: Cohort) -> None:
    pairs = cohort.pairs(scorers=builtin_scorers())
    lab = lab_of(pairs, ["diverged > 0", "matched < 100%", "regressed(output_equal) > 2%"], scorers=builtin_scorers())
    totals = lab.summary["totals"]
    assert totals == {
        "runs": 4,
        "replays": 4,
        "matched": 4,
        "diverged": 0,
        "refused": 0,
        "errors": 0,
        "agent_errors": 1,  # the demo's failing run raises again, as recorded
        "scorer_errors": 0,
        "baseline_replays": 0,
    }
    assert not lab.failed and [g.held for g in lab.gates] == [False, False, False]
    assert [g.value for g in lab.gates] == [0.0, 100.0, 0.0]
    for name in ("output_equal", "tool_sequence_equal", "cost_delta"):
        s = lab.summary["scorers"][name]
        assert (s["regressed"], s["improved"], s["pass_rate"], s["against"]) == (0, 0, 1.0, "original"), name
    assert lab.summary["divergences"] == [] and lab.summary["tools"] == {} and lab.summary["worst"] == []
    assert lab.summary["cost"]["p50"] == 0.0 and lab.summary["cost"]["n"] == 4
    for pair in pairs:
        assert pair.outcome == "matched" and pair.first_divergence is None
        assert pair.cost_usd["original"] == pair.cost_usd["replay"] is not None
        assert pair.latency_ms["original"] > 0 and pair.latency_ms["replay"] > 0
        assert pair.tape == {"unused": [], "drift": [], "refused": [], "injected": []}
        assert set(pair.diff or {}) == set(SECTIONS)
        assert pair.steps["original"] == pair.steps["replay"] == len(cohort.originals[pair.original_trace_id].steps)
    text = terminal_text(lab)
    assert "gates (--fail-if)" in text and "FAIL" not in text and "lab failed" not in text


def test_a_new_prompt_diverges_at_the_first_model_step_of_every_run_and_fails_the_gate(cohort: Cohort) -> None:
    pairs = cohort.pairs(entrypoint=NEW_PROMPT, scorers=builtin_scorers())
    lab = lab_of(pairs, ["diverged > 0", "matched < 100%"], scorers=builtin_scorers())
    assert lab.summary["totals"]["diverged"] == 4 and lab.failed
    assert [(g.held, g.value) for g in lab.gates] == [(True, 4.0), (True, 0.0)]
    for pair in pairs:
        original = cohort.originals[pair.original_trace_id]
        first_model = min(s.index for s in original.steps if s.kind == "model")
        first = pair.first_divergence
        assert first is not None and first["step_index"] == first_model
        assert (first["step_kind"], first["step_name"], first["kind"]) == ("model", "support_llm", "request")
    (row,) = lab.summary["divergences"]
    assert (row["step_kind"], row["step_name"], row["count"], row["kinds"]) == (
        "model",
        "support_llm",
        4,
        {"request": 4},
    )
    worst = lab.summary["worst"]
    assert len(worst) == 4 and all(w["first_divergence"]["step_name"] == "support_llm" for w in worst)
    assert [w["badness"] for w in worst] == sorted((w["badness"] for w in worst), reverse=True)
    text = terminal_text(lab)
    assert "first divergence by step" in text and "support_llm" in text and "lab failed" in text


def test_the_guarded_agent_improves_the_failing_run_against_the_original(cohort: Cohort) -> None:
    scorers = user_scorers()
    pairs = cohort.pairs(entrypoint=GUARDED, scorers=scorers)
    lab = lab_of(
        pairs,
        ["improved(lab_test_no_error) < 1", "regressed(output_equal) > 20%", "regressed(output_equal) >= 2"],
        scorers=scorers,
    )
    failing = next(p for p in pairs if p.original_trace_id == cohort.failing)
    assert failing.scores["lab_test_no_error"] is True and failing.reference_scores["lab_test_no_error"] is False
    assert failing.scores["output_equal"] is False and failing.agent_error is None
    assert failing.replay_status == "ok" and failing.original_status == "error"
    no_error = lab.summary["scorers"]["lab_test_no_error"]
    assert (no_error["improved"], no_error["regressed"], no_error["same"]) == (1, 0, 3)
    output = lab.summary["scorers"]["output_equal"]
    assert (output["regressed"], output["same"], output["pass_rate"]) == (1, 3, 0.75)
    # 1 of 4 replays regressed output_equal: 25 % > 20 % holds; 1 >= 2 does not; 1 improved is not < 1
    assert [(g.held, g.value) for g in lab.gates] == [(False, 1.0), (True, 25.0), (False, 1.0)]
    assert failing.outcome == "diverged" and failing.first_divergence is not None
    assert failing.first_divergence["kind"] == "output" and failing.first_divergence["step_kind"] is None
    assert lab.summary["divergences"] == [{"step_kind": None, "step_name": None, "count": 1, "kinds": {"output": 1}}]
    assert lab.summary["worst"][0]["original_trace_id"] == cohort.failing
    assert lab.summary["worst"][0]["regressed"] == ["output_equal"]


def test_changed_tool_arguments_show_in_the_tool_matrix(cohort: Cohort) -> None:
    result = cohort.replayed(cohort.hostile, entrypoint="lab_report_agents:hostile_agent_changed", mode="mock")
    pair = pair_result(cohort.originals[cohort.hostile], result, scorers=builtin_scorers())
    assert pair.tool_changes == [{"tool": agents.HOSTILE_TOOL, "change": "changed_args", "a_index": 0, "b_index": 0}]
    # mock: the tool is answered from the recording whatever its arguments, so the output stays the same
    assert pair.scores["tool_sequence_equal"] is False and pair.scores["output_equal"] is True
    lab = lab_of([pair], scorers=builtin_scorers())
    assert lab.summary["tools"] == {agents.HOSTILE_TOOL: {"added": 0, "removed": 0, "changed_args": 1}}


def test_baseline_lane_separates_flaky_runs_from_changed_ones(cohort: Cohort) -> None:
    ids = cohort.demo_ids
    flaky, changed = ids[0], ids[1]
    scorers = builtin_scorers()
    baseline = cohort.pairs(lane="baseline", repeat=0, scorers=scorers)
    # repeat 1 of the baseline: the first run answers differently (noise); the others as repeat 0
    repeat_1 = [
        pair_result(
            cohort.originals[tid],
            replay(tid, mode="deterministic", store=cohort.store, entrypoint=NOISY if tid == flaky else None),
            lane="baseline",
            repeat=1,
            scorers=scorers,
        )
        for tid in ids
    ]
    candidate = [
        pair_result(
            cohort.originals[tid],
            cohort.replayed(tid, entrypoint=NOISY if tid in (flaky, changed) else None),
            scorers=scorers,
        )
        for tid in ids
    ]
    lab = lab_of(
        [*baseline, *repeat_1, *candidate],
        ["flaky > 0", "stable_changed >= 25%", "regressed(output_equal) > 1"],
        scorers=scorers,
    )
    stability = lab.summary["stability"]
    assert stability["baseline"] is True
    assert stability["runs"][flaky] == "flaky" and stability["runs"][changed] == "stable-changed"
    assert {stability["runs"][t] for t in ids[2:]} == {"stable-same"}
    assert stability["counts"] == {"flaky": 1, "stable-changed": 1, "stable-same": 2}
    output = lab.summary["scorers"]["output_equal"]
    # judged against the baseline: the flaky run's change is noise, only the stable run's change regresses
    assert output["against"] == "baseline" and output["flaky"] == 1 and output["regressed"] == 1
    assert lab.summary["totals"]["baseline_replays"] == 8 and lab.summary["totals"]["replays"] == 4
    assert [(g.held, g.value) for g in lab.gates] == [(True, 1.0), (True, 25.0), (False, 1.0)]
    # both diverged; the stable run's change regressed output_equal, the flaky run's counts as noise
    worst = [(w["original_trace_id"], w["badness"], w["regressed"], w["stability"]) for w in lab.summary["worst"]]
    assert worst == [(changed, 11, ["output_equal"], "stable-changed"), (flaky, 1, [], "flaky")]
    assert "baseline stability: 2 stable-same, 1 stable-changed, 1 flaky" in terminal_text(lab)
    validate(lab.to_dict())


# ---------------------------------------------------------------------------------------------- scorers


def test_latency_delta_is_the_relative_change_past_the_diff_threshold(cohort: Cohort) -> None:
    (latency,) = [s for s in scoring.BUILTIN_SCORERS if s.name == "latency_delta"]
    for pair in cohort.pairs(scorers=(latency,)):
        diff = pair.diff or {}
        value = pair.scores["latency_delta"]
        original, replayed = pair.latency_ms["original"], pair.latency_ms["replay"]
        if diff["latency"]["changed"]:
            assert value == pytest.approx((replayed - original) / original, rel=1e-3, abs=1e-3)
        else:
            assert value == 0.0
        assert pair.reference_scores["latency_delta"] == 0.0
    lab = lab_of(cohort.pairs(scorers=(latency,)), scorers=(latency,))
    assert lab.summary["scorers"]["latency_delta"]["higher_is_better"] is False
    assert lab.summary["latency"]["n"] == 4


def test_a_scorer_that_raises_is_noted_on_the_pair_and_never_stops_the_lab(cohort: Cohort) -> None:
    pairs = cohort.pairs(scorers=user_scorers())
    for pair in pairs:
        assert pair.scores["lab_test_explodes"] is None
        assert pair.scorer_errors == {"lab_test_explodes": "ZeroDivisionError: scorer bug on support-agent"}
        assert pair.scores["output_equal"] is True
        words = pair.scores["lab_test_answer_words"]
        assert words > 0 if pair.original_trace_id != cohort.failing else words is None
    lab = lab_of(pairs, ["scorer_errors > 0"], scorers=user_scorers())
    assert lab.summary["scorers"]["lab_test_explodes"]["errors"] == 4
    assert lab.summary["totals"]["scorer_errors"] == 4 and lab.failed


def test_scorer_registration_and_import() -> None:
    names = {s.name for s in scoring.import_scorers(["lab_report_agents"])}
    assert set(agents.SCORER_NAMES) <= names and "output_equal" in names
    with pytest.raises(ValueError, match="built-in scorer"):
        scoring.scorer(name="output_equal")(lambda original, replay: True)
    with pytest.raises(ValueError, match="cannot import scorer module 'no_such_scorers_module'"):
        scoring.import_scorers(["no_such_scorers_module"])
    with pytest.raises(ValueError, match="module name"):
        scoring.import_scorers(["os; rm -rf /"])

    @scoring.scorer
    def lab_test_bare(original: Run, replay: Run | None) -> bool:
        return True

    try:
        assert scoring.registered()[-1].name == "lab_test_bare" and scoring.registered()[-1].higher_is_better
        assert orp.scorer is scoring.scorer if hasattr(orp, "scorer") else True
    finally:
        scoring.unregister("lab_test_bare")
    assert "lab_test_bare" not in {s.name for s in scoring.registered()}


def test_a_gate_on_a_scorer_the_lab_did_not_run_fails_the_lab(cohort: Cohort) -> None:
    lab = lab_of(cohort.pairs(scorers=builtin_scorers()), ["regressed(no_such_scorer) > 0"], scorers=builtin_scorers())
    (gate,) = lab.gates
    assert gate.held and gate.value is None and "no scorer named 'no_such_scorer'" in (gate.note or "")


def test_output_hash_is_keyed_and_equal_for_equal_endings(cohort: Cohort) -> None:
    tid = cohort.demo_ids[0]
    first = pair_result(cohort.originals[tid], cohort.replayed(tid), scorers=())
    again = pair_result(cohort.originals[tid], replay(tid, mode="deterministic", store=cohort.store), scorers=())
    assert first.output_hash == again.output_hash and (first.output_hash or "").startswith("hmac-sha256:")
    answer = cohort.originals[tid].snapshots["output"]["answer"]
    for plain in (answer, json.dumps(answer), json.dumps({"answer": answer})):
        assert hashlib.sha256(plain.encode()).hexdigest() not in (first.output_hash or "")
    other = pair_result(cohort.originals[cohort.demo_ids[1]], cohort.replayed(cohort.demo_ids[1]), scorers=())
    assert other.output_hash != first.output_hash


def test_the_tape_of_a_policy_replay_is_carried_and_counted(cohort: Cohort) -> None:
    tid = cohort.demo_ids[0]
    tape = {
        "unused": [{"tool": "check_inventory", "step_index": 4}],
        "drift": [{"tool": "lookup_order", "step_index": 2, "diff": "-a\n+b"}],
        "refused": [],
        "injected": [{"tool": "lookup_order", "step_index": 2, "fault": {"kind": "timeout"}}],
    }
    result = dataclasses.replace(cohort.replayed(tid), tape=tape)
    pair = pair_result(cohort.originals[tid], result, scorers=())
    assert pair.tape == tape
    lab = lab_of([pair], scorers=())
    assert lab.summary["tape"] == {"unused": 1, "drift": 1, "refused": 0, "injected": 1}
    assert "tool tape: unused 1, drift 1, refused 0, injected 1" in terminal_text(lab)
    assert "check_inventory" in lab_html(lab)


def test_a_request_divergence_shows_its_prompt_text_diff_in_the_page(cohort: Cohort) -> None:
    tid = cohort.demo_ids[0]
    prompt = "\n".join(f"Rule {i}: answer <b>briefly</b>." for i in range(100))
    changed = prompt.replace("Rule 50: answer", "Rule 50: never answer")
    request = {"messages": [{"role": "system", "content": prompt}]}
    diff, texts = request_diff(request, {"messages": [{"role": "system", "content": changed}]}, "recorded step 1")
    divergence = Divergence(step_index=1, kind="request", reason="changed prompt", diff=diff, text_diffs=texts)
    pair = pair_result(cohort.originals[tid], cohort.replayed(tid), scorers=())
    lab = lab_of([dataclasses.replace(pair, divergences=[divergence.to_dict()])], scorers=())
    validate(lab.to_dict())
    page = lab_html(lab)
    assert '<span class="dl-text">=== messages[0].content (system): 100 lines recorded, 100 lines in the replay' in page
    assert '<span class="dl-del">-Rule 50: answer &lt;b&gt;briefly&lt;/b&gt;.</span>' in page
    assert '<span class="dl-add">+Rule 50: never answer &lt;b&gt;briefly&lt;/b&gt;.</span>' in page
    assert "Rule 10:" not in page


def test_an_error_pair_and_an_interrupted_lab(cohort: Cohort) -> None:
    tid = cohort.demo_ids[0]
    key = "sk-proj-" + "L4b5" * 10
    pair = scoring.error_pair(cohort.originals[tid], "the worker stopped")
    leaky = scoring.error_pair(cohort.originals[tid], f"worker failed calling with {key}")
    assert key not in (leaky.error or "") and (leaky.error or "").startswith("worker failed calling with ")
    lab = lab_of([pair], ["errors >= 1", "cost_p50 > +10%"], scorers=builtin_scorers(), interrupted=True)
    assert lab.summary["totals"]["errors"] == 1
    assert [(g.held, g.value) for g in lab.gates] == [(True, 1.0), (False, None)]
    assert lab.gates[1].note == "no replay measured a cost change"
    assert lab.summary["worst"][0]["error"] == "the worker stopped"
    document = lab.to_dict()
    validate(document)
    assert document["interrupted"] is True and document["failed"] is True
    assert "interrupted" in terminal_text(lab)
    page = lab_html(lab)  # a pair with no replay run: no diff to show, said so
    assert 'id="run-0"' in page and "no diff: the replay recorded no run" in page and "the worker stopped" in page


# ------------------------------------------------------------------------------------------ JSON, schema


def test_cost_and_latency_deltas_against_the_baseline_lane(cohort: Cohort) -> None:
    ids = cohort.demo_ids
    scorers = builtin_scorers()

    def planted(pairs: list[PairResult], costs: Sequence[float], latencies: Sequence[float]) -> list[PairResult]:
        return [
            dataclasses.replace(
                p, cost_usd={"original": 1.0, "replay": c}, latency_ms={"original": 100.0, "replay": ms}
            )
            for p, c, ms in zip(pairs, costs, latencies, strict=True)
        ]

    # each run's baseline: repeats costing 2.0 and 4.0 (median 3.0), lasting 100 and 300 ms (median 200)
    baseline = [
        *planted(cohort.pairs(lane="baseline", scorers=scorers), [2.0] * 4, [100.0] * 4),
        *planted(cohort.pairs(lane="baseline", repeat=1, scorers=scorers), [4.0] * 4, [300.0] * 4),
    ]
    candidate = planted(cohort.pairs(scorers=scorers), [3.0, 3.3, 6.0, 1.5], [200.0, 250.0, 100.0, 400.0])
    assert len(ids) == 4
    gates = ["cost_p50_vs_baseline > +4%", "latency_p95_vs_baseline > +90%", "cost_p50 > +200%"]

    lab = lab_of([*baseline, *candidate], gates, scorers=scorers)

    summary = lab.summary
    # against the baseline: 0 %, +10 %, +100 %, -50 % (cost); 0 %, +25 %, -50 %, +100 % (latency)
    assert summary["cost_vs_baseline"] == {"p50": 5.0, "p95": 86.5, "mean": 15.0, "n": 4}
    assert summary["latency_vs_baseline"] == {"p50": 12.5, "p95": 88.75, "mean": 18.75, "n": 4}
    # against the original, as before: +200 %, +230 %, +500 %, +50 %
    assert summary["cost"]["p50"] == 215.0 and summary["cost"]["n"] == 4
    assert [(g.expression, g.held, g.value) for g in lab.gates] == [
        ("cost_p50_vs_baseline > +4%", True, 5.0),
        ("latency_p95_vs_baseline > +90%", False, 88.75),
        ("cost_p50 > +200%", True, 215.0),
    ]
    text = terminal_text(lab)
    assert "cost vs baseline" in text and "+5.0%" in text and "+86.5%" in text
    assert "latency vs baseline" in text and "+88.8%" in text
    page = lab_html(lab)
    row = page.split('data-delta="cost_vs_baseline"', 1)[1].split("</tr>", 1)[0]
    assert "cost vs baseline" in row and "+5.0%" in row and "+86.5%" in row and "+15.0%" in row
    assert 'data-delta="latency_vs_baseline"' in page
    validate(lab.to_dict())

    # without a baseline lane: nothing to measure, no rows, and a gate on it does not hold, saying why
    alone = lab_of(candidate, ["cost_p50_vs_baseline > 0"], scorers=scorers)
    assert alone.summary["cost_vs_baseline"] == {"p50": None, "p95": None, "mean": None, "n": 0}
    (gate,) = alone.gates
    assert gate.held is False and gate.note == "this lab has no baseline lane (--baseline)"
    assert "vs baseline" not in terminal_text(alone)
    assert "cost_vs_baseline" not in lab_html(alone)


def test_lab_json_validates_against_its_schema_and_round_trips(cohort: Cohort) -> None:
    pairs = [
        *cohort.pairs(scorers=user_scorers()),
        *cohort.pairs(entrypoint=NEW_PROMPT, scorers=user_scorers()),
        *cohort.pairs(entrypoint=GUARDED, scorers=user_scorers()),
    ]
    lab = lab_of(pairs, ["diverged > 0", "cost_p95 > +10%", "pass_rate(output_equal) < 90"], scorers=user_scorers())
    document = json.loads(json.dumps(lab.to_dict(), allow_nan=False))
    validate(document)
    assert [PairResult.from_dict(p) for p in document["runs"]] == pairs
    diff_schema = json.loads((REPO / "docs" / "diff.schema.json").read_text(encoding="utf-8"))
    for run in document["runs"]:  # each pair's diff is the diff document of docs/diff.schema.json
        jsonschema.Draft202012Validator(diff_schema).validate(run["diff"])
    broken = json.loads(json.dumps(document))
    broken["runs"][0]["outcome"] = "exploded"
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)
    del broken["summary"]["totals"]
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)
    # a lab with a baseline lane: the deltas against it are in the document, in their schema's shape
    with_baseline = lab_of(
        [*cohort.pairs(lane="baseline", scorers=user_scorers()), *pairs[: len(cohort.demo_ids)]],
        ["cost_p50_vs_baseline > +10%"],
        scorers=user_scorers(),
    )
    document = json.loads(json.dumps(with_baseline.to_dict(), allow_nan=False))
    validate(document)
    for key in ("cost_vs_baseline", "latency_vs_baseline"):
        assert set(document["summary"][key]) >= {"p50", "p95", "mean", "n"}
    assert document["summary"]["latency_vs_baseline"]["n"] == len(cohort.demo_ids)
    broken = json.loads(json.dumps(document))
    broken["summary"]["cost_vs_baseline"]["n"] = "four"
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)


# ------------------------------------------------------------------------------------------- hostile text


def test_stored_names_never_drive_the_terminal_or_the_page(cohort: Cohort, tmp_path: Path) -> None:
    result = cohort.replayed(cohort.hostile, entrypoint="lab_report_agents:hostile_agent_changed", mode="mock")
    pair = pair_result(cohort.originals[cohort.hostile], result, scorers=builtin_scorers())
    assert pair.agent == agents.HOSTILE_AGENT
    lab = lab_of([pair], ["diverged > 0"], scorers=builtin_scorers())
    text = terminal_text(lab)
    assert "\x1b" not in text and "\x07" not in text
    assert "␛]0;pwned␇agent[bold red]" in text  # shown, as visible stand-ins, markup not interpreted
    page = write_lab_html(lab, tmp_path / "lab.html").read_text(encoding="utf-8")
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert page.count("<script>") == 1  # the report's own script only
    assert 'id="run-0"' in page and 'href="#run-0"' in page


def test_an_empty_interrupted_lab_still_reports(tmp_path: Path) -> None:
    lab = lab_of([], ["diverged > 0", "matched < 100%"], scorers=builtin_scorers(), interrupted=True)
    assert lab.summary["totals"]["replays"] == 0 and not lab.failed
    assert [(g.held, g.value) for g in lab.gates] == [(False, 0.0), (False, None)]
    validate(lab.to_dict())
    assert "interrupted" in terminal_text(lab)
    page = write_lab_html(lab, tmp_path / "empty.html").read_text(encoding="utf-8")
    assert "interrupted: only the replays that finished" in page and 'id="run-0"' not in page


def test_worst_runs_rank_errors_then_refusals_then_divergences(cohort: Cohort) -> None:
    ids = cohort.demo_ids
    refund = next(t for t in ids if any(s.name == "issue_refund" for s in cohort.originals[t].steps))
    ledger = cohort.home / "refunds.log"
    before = ledger.read_bytes()
    refused = cohort.replayed(refund, mode="live")  # no --approve issue_refund: stopped before the refund
    assert refused.outcome == "refused" and ledger.read_bytes() == before
    other = next(t for t in ids if t != refund)
    pairs = [
        pair_result(cohort.originals[other], cohort.replayed(other, entrypoint=NEW_PROMPT), scorers=()),
        pair_result(cohort.originals[refund], refused, scorers=()),
        scoring.error_pair(cohort.originals[ids[-1]], "could not load the run"),
        pair_result(cohort.originals[ids[-1]], cohort.replayed(ids[-1]), scorers=()),
    ]
    lab = lab_of(pairs, ["refused >= 1"], scorers=())
    totals = lab.summary["totals"]
    assert (totals["matched"], totals["diverged"], totals["refused"], totals["errors"]) == (1, 1, 1, 1)
    worst = [(w["pair_index"], w["outcome"], w["badness"]) for w in lab.summary["worst"]]
    assert worst == [(2, "error", 3), (1, "refused", 2), (0, "diverged", 1)]
    assert lab.failed and "refused" in terminal_text(lab)
