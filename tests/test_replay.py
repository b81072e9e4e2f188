"""The replay engine end to end: real recordings in a real embedded store, replayed by trace id.

Agents live in ``replay_agents`` (a replay re-imports the recorded entrypoint). Tools with side effects count
real executions outside the process's memory: a line in a log file per call, or a hit on a local TCP server.
Most tests replay runs recorded once per module into a shared home (``rec``); tests that need their own
recording settings (snapshot size, another process, a script) use the per-test ``home`` fixture.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import replay_agents as ra

import otel_replay as orp
from otel_replay import semconv
from otel_replay.errors import InvalidTraceIdError, TraceNotFoundError
from otel_replay.recording import effective_risk
from otel_replay.replay.diff import SECTIONS
from otel_replay.replay.safety import seccomp
from otel_replay.replay.safety.audit import audit
from otel_replay.runs import find_root
from otel_replay.storage.store import Store

TESTS_DIR = Path(__file__).resolve().parent
SERVED = semconv.REPLAY_SERVED
TOOLS = ("read_ledger", "write_ledger", "send_email")
FAKE_KEY = "sk-proj-" + "Q7w8" * 10


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A module-wide home, a side-effect folder and a TCP server; the environment points at them."""
    base = tmp_path_factory.mktemp("replay")
    home, side = base / "home", base / "side"
    side.mkdir()
    server = ra.WireServer()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in (
            "OTEL_REPLAY_STORE",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_REPLAY_SNAPSHOT_MAX_BYTES",
        ):
            mp.delenv(name, raising=False)
        mp.setenv(ra.SIDE_DIR_ENV, str(side))
        mp.setenv(ra.PORT_ENV, str(server.port))
        try:
            yield {"home": home, "side": side, "server": server}
        finally:
            server.close()


def trace_ids(store: Store) -> dict[str, str]:
    """Trace id of each original run in the store, by agent name (one run per agent)."""
    return {s.agent: s.trace_id for s in store.runs(kind="original", limit=1000)}


@pytest.fixture(scope="module")
def recorded(env: dict[str, Any]) -> dict[str, str]:
    """One original run of each agent, recorded into the module home; trace id by agent name."""
    orp.configure(home=env["home"], exporter="spool")
    ra.FLEX.update(ra.FLEX_DEFAULTS)
    ra.matrix_agent("acc-1")
    ra.flex_agent("refund order A1")
    ra.retry_agent("SKU-1")
    with pytest.raises(KeyError):
        ra.crashing_agent("9999")
    ra.outer_agent("two orders")
    ra.value_agent("pin me")
    import asyncio

    asyncio.run(ra.async_agent("async question"))
    orp.flush()
    env["baseline"] = {name: ra.executions(name, env["side"]) for name in TOOLS}
    env["baseline"]["wire_funds"] = env["server"].hits
    with Store.open() as store:
        ids = trace_ids(store)
    assert len(ids) == 7, ids
    return ids


@pytest.fixture
def rec(env: dict[str, Any], recorded: dict[str, str]) -> Iterator[dict[str, str]]:
    """The shared recordings, with recording pointed at the module home again and ``FLEX`` at its defaults."""
    os.environ["OTEL_REPLAY_HOME"] = str(env["home"])  # a test's own ``home`` may have moved it
    orp.configure(home=env["home"], exporter="spool")
    ra.FLEX.update(ra.FLEX_DEFAULTS)
    try:
        yield recorded
    finally:
        ra.FLEX.update(ra.FLEX_DEFAULTS)


class Counts:
    """Real executions of the matrix tools since it was made."""

    def __init__(self, env: dict[str, Any]) -> None:
        self.side: Path = env["side"]
        self.server: ra.WireServer = env["server"]
        self.start = self.now()

    def now(self) -> dict[str, int]:
        counts = {name: ra.executions(name, self.side) for name in TOOLS}
        counts["wire_funds"] = self.server.hits
        return counts

    def delta(self) -> dict[str, int]:
        now = self.now()
        return {name: now[name] - self.start[name] for name in now}


def served(result: orp.ReplayResult) -> list[tuple[str, str | None]]:
    """(step name, how it was served) of each step of the replay."""
    assert result.replay is not None
    return [(s.name, s.attributes.get(SERVED)) for s in result.replay.steps]


def kinds_at(result: orp.ReplayResult) -> set[tuple[int | None, str]]:
    return {(d.step_index, d.kind) for d in result.divergences}


# --------------------------------------------------------------------------------- side-effect matrix


def test_recording_really_executed_every_tool_once(env: dict[str, Any], rec: dict[str, str]) -> None:
    # The baseline the matrix counts against: the original run ran each tool (and hit the socket) once.
    assert env["baseline"] == {"read_ledger": 1, "write_ledger": 1, "send_email": 1, "wire_funds": 1}
    assert env["server"].messages[0] == "wire acc-1 5\n"


@pytest.mark.parametrize("mode", ["dry", "mock", "deterministic"])
def test_no_tool_executes_in_dry_mock_or_deterministic(env: dict[str, Any], rec: dict[str, str], mode: str) -> None:
    counts = Counts(env)
    result = orp.replay(rec["matrix-agent"], mode=mode)
    assert counts.delta() == {"read_ledger": 0, "write_ledger": 0, "send_email": 0, "wire_funds": 0}
    assert result.outcome == "matched", result.divergences
    assert result.refusal is None
    if mode != "dry":
        assert served(result) == [
            ("planner", "recording"),
            ("read_ledger", "recording"),
            ("write_ledger", "recording"),
            ("wire_funds", "recording"),
            ("send_email", "recording"),
        ]


@pytest.mark.parametrize("from_step", [None, 1], ids=["live", "partial-live-from-1"])
def test_live_without_approvals_is_refused_before_anything_runs(
    env: dict[str, Any], rec: dict[str, str], from_step: int | None
) -> None:
    counts = Counts(env)
    result = orp.replay(rec["matrix-agent"], mode="live", from_step=from_step, reason="verify the fix")
    # Every recorded write/high tool needs an approval before the replay starts: not even the read ran.
    assert counts.delta() == {"read_ledger": 0, "write_ledger": 0, "send_email": 0, "wire_funds": 0}
    assert result.outcome == "refused" and result.refused_before_start and result.replay is None
    flags = "--approve write_ledger --approve wire_funds --approve send_email"
    assert result.refusal is not None and flags in result.refusal
    assert result.refused_call == {
        "kind": "tool",
        "name": "write_ledger",
        "step_index": 2,
        "risk": "write",
        "approve_with": flags,
    }
    assert kinds_at(result) == {(2, "approval"), (3, "approval"), (4, "approval")}


def test_partial_live_needs_no_approval_for_writes_before_the_step(env: dict[str, Any], rec: dict[str, str]) -> None:
    # from_step=3: the read and the write (steps 1, 2) come from the recording and need no approval; the high
    # tools at steps 3 and 4 do, before anything runs.
    counts = Counts(env)
    result = orp.replay(rec["matrix-agent"], mode="live", from_step=3, reason="resume at the wire")
    assert counts.delta() == {"read_ledger": 0, "write_ledger": 0, "send_email": 0, "wire_funds": 0}
    assert result.outcome == "refused" and result.refused_before_start
    assert "'wire_funds'" in (result.refusal or "") and "'write_ledger'" not in (result.refusal or "")
    assert result.refused_call is not None and result.refused_call["approve_with"] == (
        "--approve wire_funds --approve send_email"
    )
    approved = orp.replay(
        rec["matrix-agent"],
        mode="live",
        from_step=3,
        approvals=["wire_funds", "send_email"],
        reason="resume at the wire",
    )
    assert counts.delta() == {"read_ledger": 0, "write_ledger": 0, "send_email": 1, "wire_funds": 1}
    assert approved.outcome != "refused", approved.refusal
    # the recorded steps ran under the supervisor where the kernel offers it; the live tools ran for real after
    assert approved.sandbox == ("seccomp supervisor" if seccomp.available() else "audit hooks only")
    assert served(approved) == [
        ("planner", "recording"),
        ("read_ledger", "recording"),
        ("write_ledger", "recording"),
        ("wire_funds", "executed"),
        ("send_email", "executed"),
    ]


@pytest.mark.parametrize(
    ("approvals", "from_step", "expected", "refused_at"),
    [
        (["write_ledger"], None, {"read_ledger": 0, "write_ledger": 0, "wire_funds": 0, "send_email": 0}, "wire_funds"),
        (["wire_funds"], 3, {"read_ledger": 0, "write_ledger": 0, "wire_funds": 0, "send_email": 0}, "send_email"),
        (
            ["wire_funds", "send_email"],
            3,
            {"read_ledger": 0, "write_ledger": 0, "wire_funds": 1, "send_email": 1},
            None,
        ),
        (
            ["write_ledger", "wire_funds", "send_email"],
            None,
            {"read_ledger": 1, "write_ledger": 1, "wire_funds": 1, "send_email": 1},
            None,
        ),
    ],
    ids=["approve-write", "partial-approve-high", "partial-approve-both-high", "approve-all"],
)
def test_an_approval_executes_exactly_that_tool_once(
    env: dict[str, Any],
    rec: dict[str, str],
    approvals: list[str],
    from_step: int | None,
    expected: dict[str, int],
    refused_at: str | None,
) -> None:
    counts = Counts(env)
    result = orp.replay(
        rec["matrix-agent"], mode="live", from_step=from_step, approvals=approvals, reason="verify with approvals"
    )
    assert counts.delta() == expected
    assert result.approvals == tuple(approvals)
    if refused_at is None:
        assert result.outcome == "matched", result.divergences
        assert env["server"].messages[-1] == "wire acc-1 5\n"
    else:  # a recorded write/high tool without an approval: refused before anything ran
        assert result.outcome == "refused" and result.refused_before_start
        assert f"'{refused_at}'" in (result.refusal or ""), result.refusal


def test_an_approval_recorded_in_the_original_run_never_counts(env: dict[str, Any], rec: dict[str, str]) -> None:
    with Store.open() as store:
        original = store.load_run(rec["matrix-agent"])
        wire = next(s for s in original.steps if s.name == "wire_funds")
        assert wire.snapshots["tool"]["approval_status"] == "approved"  # the run itself was approved …
        counts = Counts(env)
        result = orp.replay(
            rec["matrix-agent"], mode="live", approvals=["write_ledger", "send_email"], reason="re-run", store=store
        )
    # … but the replay may not wire without its own approval: refused before anything ran.
    assert counts.delta() == {"read_ledger": 0, "write_ledger": 0, "send_email": 0, "wire_funds": 0}
    assert result.outcome == "refused" and result.refused_before_start
    assert "'wire_funds'" in (result.refusal or "") and "'send_email'" not in (result.refusal or "")


def test_an_undeclared_risk_tool_that_sends_email_is_high(env: dict[str, Any], rec: dict[str, str]) -> None:
    assert effective_risk("send_email", None) == "high"
    assert ra.send_email.__otel_replay__["risk"] == "high"
    with Store.open() as store:
        original = store.load_run(rec["matrix-agent"])
        step = next(s for s in original.steps if s.name == "send_email")
        assert step.attributes[semconv.TOOL_RISK] == "high"
        counts = Counts(env)
        result = orp.replay(
            rec["matrix-agent"],
            mode="live",
            approvals=["write_ledger", "wire_funds"],
            reason="all but the email",
            store=store,
        )
    assert counts.delta() == {"read_ledger": 0, "write_ledger": 0, "wire_funds": 0, "send_email": 0}
    assert result.outcome == "refused" and "'send_email'" in (result.refusal or "")
    first = result.first_divergence
    assert first is not None and (first.step_index, first.kind) == (4, "approval")


def test_a_live_replay_needs_a_reason_and_runs_nothing_without_one(env: dict[str, Any], rec: dict[str, str]) -> None:
    counts = Counts(env)
    for reason in (None, "   "):
        with pytest.raises(orp.ReplayRefused, match="reason"):
            orp.replay(rec["matrix-agent"], mode="live", approvals=list(TOOLS), reason=reason)
    assert counts.delta() == dict.fromkeys(["read_ledger", "write_ledger", "send_email", "wire_funds"], 0)


# ------------------------------------------------------------------------------------- byte for byte


def _rows(store: Store, trace_id: str) -> list[tuple[Any, ...]]:
    result = store.client.query(
        f"SELECT * FROM {store.traces_table} WHERE TraceId = {{tid:String}} ORDER BY Timestamp, SpanId, SpanName",
        parameters={"tid": trace_id},
    )
    return [tuple(row) for row in result.result_rows]


def _root_links(store: Store, trace_id: str) -> list[tuple[str, str]]:
    result = store.client.query(
        f"SELECT Links.TraceId, Links.SpanId FROM {store.traces_table} "
        "WHERE TraceId = {tid:String} AND ParentSpanId = ''",
        parameters={"tid": trace_id},
    )
    ((trace_ids_, span_ids),) = result.result_rows
    return list(zip(trace_ids_, span_ids))


def test_original_rows_are_unchanged_and_every_replay_is_a_new_linked_audited_trace(
    env: dict[str, Any], rec: dict[str, str]
) -> None:
    tid = rec["matrix-agent"]
    replays = [
        dict(mode="dry"),
        dict(mode="mock", actor="ci-bot", reason="regression"),
        dict(mode="deterministic"),
        dict(
            mode="live",
            approvals=["write_ledger", "wire_funds", "send_email"],
            actor="alice",
            reason="verify the fix for real",
        ),
        dict(mode="live", from_step=2, approvals=["write_ledger"], actor="bob", reason="fork at the write"),
        dict(mode="mock", from_step=0, reason="partial from the start"),
    ]
    with Store.open() as store:
        before = _rows(store, tid)
        assert len(before) == 6  # root and five steps
        original = store.load_run(tid)
        root_span_id = find_root(original.spans).span_id
        results = []
        for kwargs in replays:
            results.append(orp.replay(tid, store=store, **kwargs))
            assert _rows(store, tid) == before, f"the original's rows changed after {kwargs}"
        replay_runs = {r.replay_trace_id: store.load_run(r.replay_trace_id) for r in results}
        links = {r.replay_trace_id: _root_links(store, r.replay_trace_id) for r in results}
        entries = {e.replay_trace_id: e for e in audit(store=store)}
    assert len({r.replay_trace_id for r in results} | {tid}) == len(replays) + 1
    assert len({r.replay_run_id for r in results} | {original.run_id}) == len(replays) + 1
    for kwargs, result in zip(replays, results):
        run = replay_runs[result.replay_trace_id]
        attrs = find_root(run.spans).span_attributes
        assert run.run_id == result.replay_run_id
        assert run.summary.kind == "replay" and run.summary.replay_of == tid
        assert attrs[semconv.RUN_KIND] == "replay"
        assert attrs[semconv.REPLAY_OF_TRACE_ID] == tid
        assert attrs[semconv.REPLAY_OF_RUN_ID] == original.run_id
        assert attrs[semconv.REPLAY_MODE] == kwargs["mode"]
        assert (tid, root_span_id) in links[result.replay_trace_id]
        actor = kwargs.get("actor", getpass.getuser())
        assert result.actor == actor and attrs[semconv.REPLAY_ACTOR] == actor
        assert result.reason == kwargs.get("reason")
        if kwargs.get("reason"):
            assert attrs[semconv.REPLAY_REASON] == kwargs["reason"]
        entry = entries[result.replay_trace_id]
        assert (
            entry.actor,
            entry.reason,
            entry.mode,
            entry.from_step,
            entry.approvals,
            entry.original_trace_id,
            entry.outcome,
        ) == (
            actor,
            kwargs.get("reason"),
            kwargs["mode"],
            kwargs.get("from_step"),
            tuple(kwargs.get("approvals", ())),
            tid,
            result.outcome,
        )
        if result.outcome != "refused":  # see test_audit_and_result_agree_on_whether_a_refused_replay_diverged
            assert entry.diverged == result.diverged
    assert [r.outcome for r in results] == ["matched"] * 4 + ["refused", "matched"]


def test_audit_and_result_agree_on_whether_a_refused_replay_diverged(rec: dict[str, str]) -> None:
    with Store.open() as store:
        result = orp.replay(rec["matrix-agent"], mode="live", reason="no approvals", store=store)
        entry = next(e for e in audit(store=store) if e.replay_trace_id == result.replay_trace_id)
    assert result.outcome == entry.outcome == "refused"
    assert entry.diverged == result.diverged
    assert entry.diverged == result.to_dict()["diverged"]


# -------------------------------------------------------------------------------------- divergences


def test_unchanged_agent_matches_in_mock_and_deterministic(rec: dict[str, str]) -> None:
    for mode in ("mock", "deterministic"):
        result = orp.replay(rec["flex-agent"], mode=mode)
        assert result.outcome == "matched" and result.diverged is False, result.divergences
        assert result.divergences == () and result.first_divergence is None
        # (latency is the machine's, not the agent's: a recording made on a busy machine is slower than its replay)
        assert result.diff is not None and list(result.diff.changed_sections) in ([], ["latency"])
        assert [s.name for s in result.replay.steps] == ["kb", "planner", "lookup_order", "note", "planner"]
        assert {how for _, how in served(result)} == {"recording"}


def test_changed_prompt_stops_a_deterministic_replay_at_the_model_step(rec: dict[str, str]) -> None:
    ra.FLEX["prompt"] = "v2"
    result = orp.replay(rec["flex-agent"], mode="deterministic")
    assert result.outcome == "diverged" and result.diverged
    first = result.first_divergence
    assert first is not None and (first.step_index, first.kind) == (1, "request")
    assert first.expected and first.actual and first.expected != first.actual
    # Stopped there: the model was not answered and nothing after it ran.
    assert served(result) == [("kb", "recording"), ("planner", "refused")]
    # What changed in the prompt, readable: a unified diff of the recorded and the replayed request.
    diff = first.diff.splitlines()
    assert diff[:2] == ["--- recorded step 1", "+++ replay"], first.diff
    removed = [line for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line for line in diff if line.startswith("+") and not line.startswith("+++")]
    assert len(removed) == len(added) == 1, first.diff
    assert '"v1 | refund order A1' in removed[0] and '"v2 | refund order A1' in added[0]
    assert result.to_dict()["first_divergence"]["diff"] == first.diff


def test_changed_prompt_is_reported_by_a_mock_replay_that_completes(rec: dict[str, str]) -> None:
    ra.FLEX["prompt"] = "v2"
    result = orp.replay(rec["flex-agent"], mode="mock")
    assert result.outcome == "diverged"
    assert kinds_at(result) == {(1, "request")}
    assert [s.name for s in result.replay.steps] == ["kb", "planner", "lookup_order", "note", "planner"]
    assert result.replay.status == "ok"
    assert result.diff.sections["output"].changed is False


def test_changed_prompt_in_another_entrypoint(rec: dict[str, str]) -> None:
    result = orp.replay(rec["flex-agent"], mode="deterministic", entrypoint="replay_agents:flex_agent_variant")
    assert (result.first_divergence.step_index, result.first_divergence.kind) == (1, "request")
    assert "planner" in result.first_divergence.reason


def test_extra_tool_call_is_a_divergence_and_is_never_guessed(rec: dict[str, str]) -> None:
    ra.FLEX["extra_call"] = True
    result = orp.replay(rec["flex-agent"], mode="mock")
    assert result.outcome == "diverged"
    # The second lookup_order came where the recording has note (step 3); the recording cannot answer it.
    assert (3, "extra_call") in kinds_at(result)
    extra = next(d for d in result.divergences if d.kind == "extra_call")
    assert "lookup_order" in extra.reason
    assert any(d.kind == "unanswerable" for d in result.divergences)
    assert served(result)[-1] == ("lookup_order", "refused")
    assert "note" not in [name for name, _ in served(result)]


def test_removed_tool_call_is_a_missing_call_at_its_step(rec: dict[str, str]) -> None:
    ra.FLEX["skip_lookup"] = True
    result = orp.replay(rec["flex-agent"], mode="mock")
    assert result.outcome == "diverged"
    missing = [d for d in result.divergences if d.kind == "missing_call"]
    assert [(d.step_index, "lookup_order" in d.reason) for d in missing] == [(2, True)]
    assert result.first_divergence.step_index == 2
    assert result.diff.sections["tools"].changed


def test_a_removed_last_call_is_a_missing_call_when_the_agent_returns(rec: dict[str, str]) -> None:
    ra.FLEX["skip_final"] = True
    result = orp.replay(rec["flex-agent"], mode="mock")
    assert result.outcome == "diverged"
    assert [(d.step_index, d.kind) for d in result.divergences if d.kind == "missing_call"] == [(4, "missing_call")]
    assert result.first_divergence.step_index == 4
    assert [name for name, _ in served(result)] == ["kb", "planner", "lookup_order", "note"]


@pytest.mark.parametrize("mode", ["mock", "deterministic"])
def test_changed_tool_arguments_are_reported_at_the_tool_step(rec: dict[str, str], mode: str) -> None:
    ra.FLEX["order"] = "Z9"
    result = orp.replay(rec["flex-agent"], mode=mode)
    assert result.outcome == "diverged"
    first = result.first_divergence
    assert (first.step_index, first.kind) == (2, "arguments") and "lookup_order" in first.reason
    assert first.expected != first.actual
    names = [name for name, _ in served(result)]
    if mode == "deterministic":
        assert names == ["kb", "planner", "lookup_order"]  # stopped at the changed call
    else:
        assert names == ["kb", "planner", "lookup_order", "note", "planner"]


def test_changed_retrieval_arguments_are_reported_at_the_retrieval_step(rec: dict[str, str]) -> None:
    ra.FLEX["top_k"] = 1
    result = orp.replay(rec["flex-agent"], mode="mock")
    first = result.first_divergence
    assert result.outcome == "diverged"
    assert (first.step_index, first.kind) == (0, "arguments") and "kb" in first.reason


def test_changed_retrieval_results_given_as_mocks(rec: dict[str, str]) -> None:
    other = [{"id": "warranty", "content": "text of warranty", "source": "kb://warranty"}]
    result = orp.replay(rec["flex-agent"], mode="mock", mocks={"kb": other})
    assert result.outcome == "diverged"
    assert served(result)[0] == ("kb", "mock")
    # The model prompt holds the documents: the first call that differs is the model at step 1.
    assert (result.first_divergence.step_index, result.first_divergence.kind) == (1, "request")
    citations = result.diff.sections["citations"]
    assert citations.changed
    assert citations.details["retrieved"]["added"] == ["warranty"]


def test_changed_retrieval_results_in_a_live_replay(rec: dict[str, str]) -> None:
    ra.FLEX["docs"] = ("warranty",)
    result = orp.replay(rec["flex-agent"], mode="live", reason="the index was rebuilt")
    assert result.outcome == "diverged"
    assert served(result)[0] == ("kb", "executed")
    assert (result.first_divergence.step_index, result.first_divergence.kind) == (1, "request")
    assert result.diff.sections["citations"].changed
    assert result.diff.sections["citations"].details["citations"]["b"] == ["kb://warranty"]


# ------------------------------------------------------------- other processes, async, errors, retries


def test_replay_of_a_run_recorded_in_another_process(home: Path) -> None:
    code = textwrap.dedent("""
        import os, otel_replay as orp, replay_agents as ra
        orp.configure(exporter="spool")
        ra.flex_agent("recorded elsewhere")
        orp.flush()
        print(os.getpid())
    """)
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) != os.getpid()
    orp.configure(home=home, exporter="spool")
    ra.FLEX.update(ra.FLEX_DEFAULTS)
    with Store.open() as store:
        (summary,) = store.runs()
        result = orp.replay(summary.trace_id, mode="deterministic", store=store)
        replay_summary = store.runs(kind="replay")
    assert result.outcome == "matched", result.divergences
    assert [r.trace_id for r in replay_summary] == [result.replay_trace_id]


def test_async_agent_replays_without_calling_its_tools(env: dict[str, Any], rec: dict[str, str]) -> None:
    before = ra.executions("async_lookup", env["side"])
    for mode in ("mock", "deterministic"):
        result = orp.replay(rec["async-agent"], mode=mode)
        assert result.outcome == "matched", result.divergences
        assert sorted(served(result)) == [
            ("async_kb", "recording"),
            ("async_lookup", "recording"),
            ("async_lookup", "recording"),
            ("async_planner", "recording"),
        ]
        assert result.replay.snapshots["output"]["structured"]["orders"] == ["A1", "A2"]
    assert ra.executions("async_lookup", env["side"]) == before
    live = orp.replay(rec["async-agent"], mode="live", reason="async live")
    assert live.outcome == "matched", live.divergences
    assert ra.executions("async_lookup", env["side"]) == before + 2


@pytest.mark.parametrize("mode", ["mock", "deterministic"])
def test_an_agent_that_raised_raises_again_in_its_replay(rec: dict[str, str], mode: str) -> None:
    result = orp.replay(rec["crashing-agent"], mode=mode)
    assert result.outcome == "matched", result.divergences
    assert result.replay.status == "error"
    assert result.replay.snapshots["output"]["error"]["type"] == "KeyError"
    assert served(result) == [("planner", "recording"), ("find_order", "recording")]
    assert result.replay.steps[1].status == "error"


def test_a_retried_tool_fails_then_succeeds_again_in_mock_replay(env: dict[str, Any], rec: dict[str, str]) -> None:
    before = ra.executions("check_inventory", env["side"])
    assert before == 2  # the original: one failure, one success
    with Store.open() as store:
        original = store.load_run(rec["retry-agent"])
        result = orp.replay(rec["retry-agent"], mode="mock", store=store)
    # The agent catches only InventoryTimeout: the replay had to raise that very type, or it would have crashed.
    assert result.outcome == "matched", result.divergences
    assert ra.executions("check_inventory", env["side"]) == before
    attempts = [(s.status, s.attempt, (s.error or {}).get("type")) for s in result.replay.steps]
    assert attempts == [(s.status, s.attempt, (s.error or {}).get("type")) for s in original.steps]
    assert attempts == [("error", 1, "replay_agents.InventoryTimeout"), ("ok", 2, None)]
    assert result.replay.snapshots["output"]["structured"] == {"answer": "7 in stock", "attempts": 2}


def test_nested_agents_replay(rec: dict[str, str]) -> None:
    result = orp.replay(rec["outer-agent"], mode="deterministic")
    assert result.outcome == "matched", result.divergences
    steps = [(s.kind, s.name) for s in result.replay.steps]
    assert steps == [
        ("model", "planner"),
        ("agent", "inner-agent"),
        ("tool", "lookup_order"),
        ("agent", "inner-agent"),
        ("tool", "lookup_order"),
        ("tool", "note"),
    ]
    by_span = {s.span_id: s for s in result.replay.steps}
    assert [by_span[s.parent_span_id].name for s in result.replay.steps if s.name == "lookup_order"] == [
        "inner-agent",
        "inner-agent",
    ]
    assert result.replay.snapshots["output"]["structured"]["orders"] == ["A1", "A2"]


SCRIPT = """
from pathlib import Path

import otel_replay as orp

MAIN_LOG = Path(__file__).with_name("main-block.log")


@orp.tool("shout", risk="read")
def shout(text: str) -> str:
    return text.upper()


@orp.agent("script-agent")
def script_agent(text: str) -> dict:
    return {"answer": shout(text)}


if __name__ == "__main__":
    with MAIN_LOG.open("a") as fh:
        fh.write("the __main__ block ran\\n")
    orp.configure(exporter="spool")
    script_agent("hello from a script")
    orp.flush()
"""


def test_an_entrypoint_of_a_script_resolves_without_running_its_main_block(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a recorded script runs only from its project folder
    script = tmp_path / "scripted" / "my_agent_script.py"
    script.parent.mkdir()
    script.write_text(SCRIPT, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OTEL_REPLAY_HOME": str(home)},
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    main_log = script.with_name("main-block.log")
    assert main_log.read_text().splitlines() == ["the __main__ block ran"]
    orp.configure(home=home, exporter="spool")
    with Store.open() as store:
        (summary,) = store.runs()
        original = store.load_run(summary.trace_id)
        assert original.entrypoint == "__main__:script_agent"
        assert original.snapshots["input"]["script"] == str(script)
        results = [orp.replay(summary.trace_id, mode=mode, store=store) for mode in ("mock", "deterministic")]
    for result in results:
        assert result.outcome == "matched", result.divergences
        assert result.replay.snapshots["output"]["answer"] == "HELLO FROM A SCRIPT"
    assert main_log.read_text().splitlines() == ["the __main__ block ran"]  # not again


FLAKY_SCRIPT = '''
import otel_replay as orp


class Busy(Exception):
    """Defined in the script itself: recorded as ``__main__.Busy``."""


CALLS = {"n": 0}


@orp.tool("poll", risk="read")
def poll(job: str) -> str:
    CALLS["n"] += 1
    if CALLS["n"] == 1:
        raise Busy(f"{job} is busy")
    return "done"


@orp.agent("flaky-script")
def flaky(job: str) -> dict:
    for _ in range(3):
        try:
            return {"answer": poll(job)}
        except Busy:
            continue
    raise RuntimeError("gave up")


if __name__ == "__main__":
    orp.configure(exporter="spool")
    flaky("job-1")
    orp.flush()
'''


def test_a_script_whose_tool_raised_its_own_exception_class_replays(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a recorded script runs only from its project folder
    script = tmp_path / "flaky_script.py"
    script.write_text(FLAKY_SCRIPT, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OTEL_REPLAY_HOME": str(home)},
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    with Store.open() as store:
        (summary,) = store.runs()
        original = store.load_run(summary.trace_id)
        assert [(s.status, (s.error or {}).get("type")) for s in original.steps] == [
            ("error", "__main__.Busy"),
            ("ok", None),
        ]
        result = orp.replay(summary.trace_id, mode="mock", store=store)
    assert result.outcome == "matched", result.divergences
    assert result.replay.snapshots["output"]["answer"] == "done"


# ------------------------------------------------------------------------------------ non-determinism


@pytest.mark.parametrize("mode", ["mock", "deterministic"])
def test_time_uuid_and_random_come_back_in_replay(rec: dict[str, str], mode: str) -> None:
    with Store.open() as store:
        original = store.load_run(rec["value-agent"])
        result = orp.replay(rec["value-agent"], mode=mode, store=store)
    assert result.outcome == "matched", result.divergences
    want = original.snapshots["output"]["structured"]
    assert result.replay.snapshots["output"]["structured"] == want
    assert want["at"].endswith("+00:00") and len(want["uuid"]) == 36 and 0 <= want["random"] < 1


def test_a_live_replay_draws_fresh_values(rec: dict[str, str]) -> None:
    # The check above can fail: without the recorded values the run differs.
    result = orp.replay(rec["value-agent"], mode="live", reason="fresh values")
    assert result.outcome == "diverged"
    assert (0, "arguments") in kinds_at(result)


# -------------------------------------------------------------------------------------------- dry


def test_dry_replay_reports_readiness_and_runs_no_code(env: dict[str, Any], rec: dict[str, str]) -> None:
    ra.FLEX["prompt"] = "would diverge if the agent ran"
    counts = Counts(env)
    result = orp.replay(rec["matrix-agent"], mode="dry")
    flex = orp.replay(rec["flex-agent"], mode="dry")
    assert counts.delta() == dict.fromkeys(["read_ledger", "write_ledger", "send_email", "wire_funds"], 0)
    assert flex.outcome == "matched" and flex.replay is None
    report = result.readiness
    assert report["integrity"] == {"ok": True, "problems": []}
    assert report["modes"]["live"]["needs_approval"] == ["send_email", "wire_funds", "write_ledger"]
    assert report["modes"]["mock"] == {"ready": True, "missing": []}
    assert report["modes"]["deterministic"] == {"ready": True, "missing": []}
    assert report["dangling_tool_calls"] == [] and report["redacted_inputs"] == []
    assert result.replay_trace_id and result.replay_trace_id != rec["matrix-agent"]


def test_dry_replay_lists_redacted_inputs_and_a_live_replay_refuses_them(home: Path) -> None:
    orp.configure(home=home, exporter="spool")
    ra.secret_agent("summarise my invoices", api_key=FAKE_KEY)
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs()
        result = orp.replay(summary.trace_id, mode="dry", store=store)
        with pytest.raises(orp.ReplayRefused, match="api_key"):
            orp.replay(summary.trace_id, mode="live", reason="try live", store=store)
        assert store.runs(kind="replay", limit=10)[0].trace_id == result.replay_trace_id  # the refusal ran nothing
    report = result.readiness
    assert report["redacted_inputs"] == ["kwargs.api_key"]
    live = report["modes"]["live"]
    assert live["ready"] is False and any("api_key" in m for m in live["missing"])
    assert FAKE_KEY not in json.dumps(result.to_dict(), default=str)


def record_truncated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Record ``big_agent`` with a 600-byte snapshot cap (its tool result is ~2.7 kB) in a home of its own
    (configure reads the cap when a new home is configured); returns the trace id."""
    small = tmp_path / "small-snapshots-home"
    monkeypatch.setenv("OTEL_REPLAY_HOME", str(small))
    monkeypatch.delenv("OTEL_REPLAY_STORE", raising=False)
    monkeypatch.setenv("OTEL_REPLAY_SNAPSHOT_MAX_BYTES", "600")
    orp.configure(home=small, exporter="spool")
    ra.big_agent(200)
    orp.flush()
    monkeypatch.delenv("OTEL_REPLAY_SNAPSHOT_MAX_BYTES")
    with Store.open() as store:
        (summary,) = store.runs()
        (snapshot,) = store.load_run(summary.trace_id).steps[0].snapshot_list
        assert snapshot.truncated and snapshot.kind == "tool"
    return summary.trace_id


def test_dry_replay_says_a_truncated_payload_is_not_ready_for_mock_or_deterministic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tid = record_truncated(tmp_path, monkeypatch)
    result = orp.replay(tid, mode="dry")
    modes = result.readiness["modes"]
    for mode in ("mock", "deterministic"):
        assert modes[mode]["ready"] is False
        assert any("step 0" in m and "truncated" in m for m in modes[mode]["missing"]), modes[mode]


@pytest.mark.parametrize("mode", ["mock", "deterministic"])
def test_a_truncated_tool_snapshot_is_not_silently_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    tid = record_truncated(tmp_path, monkeypatch)
    result = orp.replay(tid, mode=mode)
    # The recording cannot answer step 0: the replay must say so at step 0 and stop, never hand the agent a
    # made-up value (it once got None and crashed with a TypeError of its own).
    assert result.outcome == "diverged"
    assert result.first_divergence is not None and result.first_divergence.step_index == 0
    assert result.first_divergence.kind == "unanswerable"
    assert served(result) == [("export_report", "refused")]


# ------------------------------------------------------------------------------------------ refusals


def test_refusals_raise_before_anything_runs(env: dict[str, Any], rec: dict[str, str]) -> None:
    counts = Counts(env)
    tid = rec["matrix-agent"]
    with pytest.raises(orp.ReplayRefused, match="unknown mode"):
        orp.replay(tid, mode="replay-everything")
    with pytest.raises(orp.ReplayRefused, match=r"from.step"):
        orp.replay(tid, mode="dry", from_step=1)
    with pytest.raises(orp.ReplayRefused, match="past its end"):
        orp.replay(tid, mode="mock", from_step=99)
    with pytest.raises(orp.ReplayRefused, match="not importable"):
        orp.replay(tid, mode="mock", entrypoint="no_such_module_here:agent")
    with pytest.raises(orp.ReplayRefused, match="has no"):
        orp.replay(tid, mode="mock", entrypoint="replay_agents:no_such_agent")
    with pytest.raises(TraceNotFoundError):
        orp.replay("ab" * 16, mode="mock")
    with pytest.raises(InvalidTraceIdError):
        orp.replay("not-a-trace", mode="mock")
    assert counts.delta() == dict.fromkeys(["read_ledger", "write_ledger", "send_email", "wire_funds"], 0)


def test_result_json_has_the_contract_keys(rec: dict[str, str]) -> None:
    ra.FLEX["order"] = "Z9"
    data = json.loads(json.dumps(orp.replay(rec["flex-agent"], mode="mock", actor="tester").to_dict()))
    assert {
        "replay_trace_id",
        "replay_run_id",
        "original_trace_id",
        "mode",
        "from_step",
        "diverged",
        "first_divergence",
        "approvals",
        "actor",
        "reason",
        "diff",
    } <= set(data)
    assert data["diverged"] is True and data["first_divergence"]["step_index"] == 2
    assert data["first_divergence"]["reason"]
    assert set(data["diff"]) == set(SECTIONS)
    assert data["diff"]["tools"]["changed"] is True
    assert data["actor"] == "tester" and data["original_trace_id"] == rec["flex-agent"]
