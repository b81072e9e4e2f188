"""Approvals and the audit, attacked: a relabelled tool, an approval stretched over many calls, names that hide
their risk, a replay whose trace never reaches the store, a replay killed after its side effect, a journal that
cannot be written, and audit rows forged or edited in the store.

Agents live in tests/adversarial/adv_audit_agents.py; each real tool execution appends a line to a ledger file
the test reads, so side effects are counted outside the process. Replays run through the CLI in a subprocess
(as a user runs them) unless a test needs the process itself.
"""

from __future__ import annotations

import json
import os
import pwd
import select
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adv_audit_agents as agents
import fork_server
import pytest
from cli_in_process import run_cli, runs_in_process

import otel_replay as orp
from otel_replay import semconv
from otel_replay.recording import effective_risk

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OS_USER = pwd.getpwuid(os.getuid()).pw_name


@pytest.fixture
def ledger(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "ledger.txt"
    monkeypatch.setenv(agents.LEDGER_ENV, str(path))
    monkeypatch.setenv("OTEL_REPLAY_TRUSTED_MODULES", "adv_audit_agents")
    for name in ("OTEL_REPLAY_EXPORTER", agents.READY_FD_ENV, agents.GO_FD_ENV):
        monkeypatch.delenv(name, raising=False)
    yield path
    orp.configure(home=home, exporter="spool")


def record(func: Any, *args: Any) -> str:
    """Run an agent once, for real, and return its trace id."""
    func(*args)
    orp.flush()
    with orp.Store.open() as store:
        return store.runs(kind="original", limit=1)[0].trace_id


def cli(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    if runs_in_process(args):  # the same main(), without a second of interpreter start-up
        return run_cli(args, env=full, cwd=ROOT)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=ROOT,
        timeout=300,
    )


def audit_rows(home: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    out = cli(home, "audit", "--json", *extra)
    assert "Traceback" not in out.stderr, out.stderr
    return out, json.loads(out.stdout)


def one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    return lines[0]


def replay_rows(home: Path) -> int:
    with orp.Store.open() as store:
        return len(store.runs(kind="replay", limit=1000))


# ------------------------------------------------------------------------------------------------ risk


def test_app_cannot_downgrade_a_recorded_high_tool_to_read(ledger: Path, home: Path) -> None:
    trace_id = record(agents.discount_agent, "A1")
    assert agents.executions() == ["apply_discount A1 10"]
    # The current code given with --app declares the same tool read: the recording says high, high wins.
    refused = cli(
        home,
        "replay",
        trace_id,
        "--mode",
        "live",
        "--reason",
        "relabel",
        "--json",
        "--app",
        "adv_audit_agents:discount_agent_relabelled",
    )
    assert refused.returncode == 2, refused.stderr
    data = json.loads(refused.stdout)
    assert data["outcome"] == "refused"
    assert "'apply_discount'" in data["refusal"] and "risk high" in data["refusal"]
    assert agents.executions() == ["apply_discount A1 10"], "the relabelled tool ran without an approval"
    approved = cli(
        home,
        "replay",
        trace_id,
        "--mode",
        "live",
        "--reason",
        "relabel, approved",
        "--json",
        "--app",
        "adv_audit_agents:discount_agent_relabelled",
        "--approve",
        "apply_discount",
    )
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["executions"] == {"apply_discount": 1}
    assert agents.executions() == ["apply_discount A1 10"] * 2


def test_a_tool_the_recording_does_not_have_is_judged_by_its_current_risk_and_name(ledger: Path, home: Path) -> None:
    trace_id = record(agents.discount_agent, "A2")
    # The current code texts instead of discounting: no recorded step matches, its undeclared name says high.
    result = orp.replay(
        trace_id,
        mode="live",
        reason="new tool",
        approvals=["apply_discount"],
        entrypoint="adv_audit_agents:discount_agent_texting",
    )
    assert result.outcome == "refused" and "'sendsms'" in (result.refusal or "")
    assert agents.executions() == ["apply_discount A2 10"]


HIGH_NAMES = (
    "sendemail",
    "send_sms",
    "write_file",
    "rm_rf",
    "resend_invoice",
    "charge_card",
    "drop_table",
    "exec",
    "shell",
    "transfer",
    "payout",
    "sendEmail",
    "SENDEMAIL",
    "dropdb",
    "writeFile",
    "resendemail",
    "delete_user",
    "issue_refund",
    "book_flight",
    "bookflight",
    "reserve_room",
    "buy_ticket",
    "purchase",
    "checkout_cart",
    "cancel_order",
)
READ_NAMES = (
    "get_weather",
    "search_docs",
    "lookup_order",
    "read_file",
    "list_files",
    "summarize",
    "transform_text",
    "describe_table",
    "executive_summary",
    "evaluate_answer",
    "parse_payload",
    "postgres_query",
    "dropdown_options",
    "rename_label",
    "report",
    "mailbox_size",
    "notebook_summary",
    "booking_status",
    "search_flights",
)


@pytest.mark.parametrize("name", HIGH_NAMES)
def test_undeclared_tools_whose_names_say_they_act_are_high(name: str) -> None:
    decorated = orp.tool(name)(lambda: None)
    assert decorated.__otel_replay__["risk"] == "high"
    assert effective_risk(name, None) == "high"
    assert effective_risk(name, "read") == "read"  # a declaration is never overridden by the name


@pytest.mark.parametrize("name", READ_NAMES)
def test_undeclared_tools_whose_names_only_read_stay_read(name: str) -> None:
    assert orp.tool(name)(lambda: None).__otel_replay__["risk"] == "read"


# ------------------------------------------------------------------------------------------- approvals


@pytest.mark.parametrize(
    ("spec", "ran", "outcome"),
    [("credit_account", 1, "refused"), ("credit_account:2", 2, "refused"), ("credit_account:*", 3, "matched")],
    ids=["one", "two", "all"],
)
def test_an_approval_covers_the_executions_it_names(
    ledger: Path, home: Path, spec: str, ran: int, outcome: str
) -> None:
    trace_id = record(agents.batch_agent, "acc-1")
    assert len(agents.executions()) == 3
    out = cli(
        home,
        "replay",
        trace_id,
        "--mode",
        "live",
        "--reason",
        "count approvals",
        "--json",
        "--approve",
        spec,
        "--app",
        "adv_audit_agents:batch_agent",
    )
    data = json.loads(out.stdout)
    assert out.returncode == (2 if outcome == "refused" else 0), out.stderr
    assert len(agents.executions()) == 3 + ran
    assert data["outcome"] == outcome
    assert data["approvals"] == [spec]
    assert data["executions"] == {"credit_account": ran}
    if outcome == "refused":
        assert "used up" in data["refusal"] and f"credit_account:{ran + 1}" in data["refusal"]
        assert data["first_divergence"]["kind"] == "approval"
    listed, rows = audit_rows(home)
    assert listed.returncode == 0, listed.stderr
    row = next(r for r in rows if r["replay_trace_id"] == data["replay_trace_id"])
    assert (row["approvals"], row["executions"], row["status"], row["mac_valid"], row["os_user"]) == (
        [spec],
        {"credit_account": ran},
        "recorded",
        True,
        OS_USER,
    )


def test_replay_tool_approve_is_one_execution(ledger: Path, home: Path) -> None:
    from otel_replay.replay.scopes import replay_tool

    trace_id = record(agents.batch_agent, "acc-2")
    result = replay_tool(trace_id, 1, mode="live", approve=True, reason="retry one credit")
    assert result.outcome in ("matched", "diverged") and result.refusal is None
    assert result.approvals == ("credit_account",)
    assert agents.executions()[3:] == ["credit_account acc-2 2"]  # step 1 is the second credit
    _, rows = audit_rows(home)
    (row,) = [r for r in rows if r["replay_trace_id"] == result.replay_trace_id]
    assert (row["approvals"], row["executions"], row["mac_valid"]) == (["credit_account"], {"credit_account": 1}, True)


def test_a_conversation_replay_shares_one_approval_budget_across_its_turns(ledger: Path, home: Path) -> None:
    with orp.identity(session="conv-1"):
        agents.batch_agent("acc-s")
        agents.batch_agent("acc-s")
    orp.flush()
    assert len(agents.executions()) == 6
    out = cli(
        home,
        "replay-session",
        "conv-1",
        "--mode",
        "live",
        "--reason",
        "two turns",
        "--json",
        "--approve",
        "credit_account:4",
        "--app",
        "adv_audit_agents:batch_agent",
    )
    assert out.returncode == 2, out.stderr
    turns = json.loads(out.stdout)["turns"]
    assert [(t["outcome"], t["executions"]) for t in turns] == [
        ("matched", {"credit_account": 3}),
        ("refused", {"credit_account": 1}),
    ]
    assert len(agents.executions()) == 6 + 4


@pytest.mark.parametrize(
    "spec", ["credit_account:0", "credit_account:", ":2", "credit_account:two", "credit_account:-1", ""]
)
def test_a_bad_approval_is_one_error_line_and_nothing_runs(ledger: Path, home: Path, spec: str) -> None:
    trace_id = record(agents.batch_agent, "acc-3")
    out = cli(
        home,
        "replay",
        trace_id,
        "--mode",
        "live",
        "--reason",
        "bad spec",
        "--approve",
        spec,
        "--app",
        "adv_audit_agents:batch_agent",
    )
    assert out.returncode == 2
    assert "approval" in one_error_line(out)
    assert len(agents.executions()) == 3
    assert replay_rows(home) == 0


# ------------------------------------------------------------------------------------- durable audit


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("exporter", ["none", "dead-otlp"])
def test_a_replay_whose_trace_never_reaches_the_store_is_still_audited(ledger: Path, home: Path, exporter: str) -> None:
    trace_id = record(agents.batch_agent, "acc-4")
    env = (
        {"OTEL_REPLAY_EXPORTER": "none"}
        if exporter == "none"
        else {
            "OTEL_REPLAY_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "2",
        }
    )
    out = cli(
        home,
        "replay",
        trace_id,
        "--mode",
        "live",
        "--reason",
        "lost trace",
        "--actor",
        "carol",
        "--json",
        "--approve",
        "credit_account:*",
        "--app",
        "adv_audit_agents:batch_agent",
        env=env,
    )
    data = json.loads(out.stdout)
    assert out.returncode == 0 and data["outcome"] == "matched", out.stdout + out.stderr
    assert len(agents.executions()) == 6  # the side effects happened
    assert replay_rows(home) == 0  # … and the store never saw the replay
    listed, rows = audit_rows(home)
    assert listed.returncode == 0, listed.stderr
    (row,) = [r for r in rows if r["run_id"] == data["replay_run_id"]]
    assert row["status"] == "interrupted" and row["mac_valid"] is True
    assert (row["actor"], row["os_user"], row["reason"], row["mode"]) == ("carol", OS_USER, "lost trace", "live")
    assert (row["approvals"], row["executions"]) == (["credit_account:*"], {"credit_account": 3})
    assert row["outcome"] == data["outcome"] and row["original_trace_id"] == trace_id
    assert cli(home, "audit", "--verify").returncode == 0


def test_a_replay_killed_right_after_its_side_effect_is_audited(ledger: Path, home: Path, tmp_path: Path) -> None:
    trace_id = record(agents.refund_agent, "R1")
    assert agents.executions() == ["blocking_refund R1"]
    with orp.Store.open() as store:
        saved = tmp_path / "original.json"
        saved.write_text(json.dumps(orp_otlp(store.load_run(trace_id))), encoding="utf-8")
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        agents.READY_FD_ENV: str(ready_w),
        agents.GO_FD_ENV: str(go_r),
        "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    code = (
        "import sys, adv_audit_agents as a; "
        "a.replay_live_from_file(sys.argv[1], ['blocking_refund'], 'kill me after the refund')"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(saved)],
        env=env,
        cwd=ROOT,
        pass_fds=(ready_w, go_r),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(ready_w)
    os.close(go_r)
    try:
        readable, _, _ = select.select([ready_r], [], [], 240)  # a bound against a hang, never a synchronisation
        assert readable and os.read(ready_r, 1) == b"!", child.communicate(timeout=60)
        assert agents.executions() == ["blocking_refund R1"] * 2  # the refund happened again, for real
        listed, rows = audit_rows(home)
        assert listed.returncode == 0, listed.stderr
        (running,) = [r for r in rows if r["original_trace_id"] == trace_id]
        assert (running["status"], running["actor"], running["mode"], running["mac_valid"]) == (
            "started",
            "kill-test",
            "live",
            True,
        )
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=60)
        os.close(ready_r)
        os.close(go_w)
    listed, rows = audit_rows(home)
    (row,) = [r for r in rows if r["original_trace_id"] == trace_id]
    assert (row["status"], row["outcome"], row["run_id"], row["mac_valid"]) == (
        "interrupted",
        "unknown",
        running["run_id"],
        True,
    )
    assert (row["approvals"], row["reason"], row["os_user"]) == (
        ["blocking_refund"],
        "kill me after the refund",
        OS_USER,
    )


def orp_otlp(run: Any) -> dict[str, Any]:
    from otel_replay.otlp_json import to_otlp_json

    return to_otlp_json(run.spans)


@pytest.mark.parametrize("obstacle", ["audit-folder-is-a-file", "journal-is-a-folder"])
def test_a_live_replay_whose_audit_record_cannot_be_written_is_refused(ledger: Path, home: Path, obstacle: str) -> None:
    trace_id = record(agents.batch_agent, "acc-5")
    if obstacle == "audit-folder-is-a-file":
        (home / "audit").write_text("not a folder", encoding="utf-8")
    else:
        (home / "audit" / "journal.jsonl").mkdir(parents=True)
    out = cli(
        home,
        "replay",
        trace_id,
        "--mode",
        "live",
        "--reason",
        "no journal",
        "--json",
        "--approve",
        "credit_account:*",
        "--app",
        "adv_audit_agents:batch_agent",
    )
    assert out.returncode == 2
    assert "audit record" in one_error_line(out) and out.stdout == ""
    assert len(agents.executions()) == 3, "a tool ran although the audit record was never written"
    assert replay_rows(home) == 0
    # A mock replay causes no effect and needs no journal.
    assert cli(home, "replay", trace_id, "--mode", "mock", "--app", "adv_audit_agents:batch_agent").returncode == 0


def test_a_torn_last_journal_line_is_skipped_with_a_warning(ledger: Path, home: Path) -> None:
    trace_id = record(agents.batch_agent, "acc-6")
    env = {"OTEL_REPLAY_EXPORTER": "none"}
    args = (
        "replay",
        trace_id,
        "--mode",
        "live",
        "--reason",
        "torn",
        "--json",
        "--approve",
        "credit_account:*",
        "--app",
        "adv_audit_agents:batch_agent",
    )
    first = json.loads(cli(home, *args, env=env).stdout)
    with (home / "audit" / "journal.jsonl").open("ab") as fh:
        fh.write(b'{"v":1,"record":"started","run_id":"cut-sho')  # a crash in the middle of a write
    out, rows = audit_rows(home)
    assert out.returncode == 0 and "torn" in out.stderr
    assert [r["run_id"] for r in rows] == [first["replay_run_id"]]
    second = json.loads(cli(home, *args, env=env).stdout)  # the next record starts on a line of its own
    out, rows = audit_rows(home)
    assert out.returncode == 0
    assert {r["run_id"] for r in rows} == {first["replay_run_id"], second["replay_run_id"]}
    assert all(r["mac_valid"] for r in rows)


# --------------------------------------------------------------------------------------------- the MAC


def test_actor_is_recorded_next_to_the_os_user_that_ran_the_command(ledger: Path, home: Path) -> None:
    trace_id = record(agents.batch_agent, "acc-7")
    out = cli(
        home,
        "replay",
        trace_id,
        "--mode",
        "mock",
        "--actor",
        "mallory",
        "--json",
        "--app",
        "adv_audit_agents:batch_agent",
        env={"USER": "mallory", "LOGNAME": "mallory"},
    )
    assert out.returncode == 0, out.stderr
    _, rows = audit_rows(home)
    (row,) = rows
    assert (row["actor"], row["os_user"], row["mac_valid"]) == ("mallory", OS_USER, True)
    assert OS_USER != "mallory"


def test_a_clean_store_verifies(ledger: Path, home: Path) -> None:
    trace_id = record(agents.batch_agent, "acc-8")
    for args in (
        ("--mode", "dry"),
        ("--mode", "mock"),
        ("--mode", "live", "--reason", "verify", "--approve", "credit_account:*"),
    ):
        out = cli(home, "replay", trace_id, *args, "--app", "adv_audit_agents:batch_agent")
        assert out.returncode == 0, out.stderr
    out = cli(home, "audit", "--verify")
    assert out.returncode == 0, out.stderr
    assert "INVALID" not in out.stdout
    verified, rows = audit_rows(home, "--verify")
    assert verified.returncode == 0 and len(rows) == 3 and all(r["mac_valid"] for r in rows)


def _write_forged_root(trace_id: str, attributes: dict[str, Any], *, start_time: int | None = None) -> str:
    """A replay root span made with the OTel SDK and written straight into the store; its trace id."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_replay.exporting.rows import rows_from_request

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span = provider.get_tracer("forger").start_span(
        "invoke_agent batch-agent",
        attributes={
            semconv.RUN_ID: str(uuid.uuid4()),
            semconv.RUN_KIND: "replay",
            semconv.SCHEMA_VERSION_ATTR: "1.0",
            semconv.GEN_AI_AGENT_NAME: "batch-agent",
            semconv.REPLAY_OF_TRACE_ID: trace_id,
            **attributes,
        },
        start_time=start_time,
    )
    span.end()
    (finished,) = exporter.get_finished_spans()
    with orp.Store.open() as store:
        store.insert_rows(rows_from_request(encode_spans([finished])))
    return f"{finished.context.trace_id:032x}"


def test_forged_and_edited_audit_rows_are_marked_and_fail_verify(ledger: Path, home: Path) -> None:
    trace_id = record(agents.batch_agent, "acc-9")
    genuine = orp.replay(
        trace_id,
        mode="live",
        approvals=["credit_account:*"],
        actor="alice",
        reason="real refunds",
        entrypoint="adv_audit_agents:batch_agent",
    )
    edited = orp.replay(
        trace_id, mode="mock", actor="bob", reason="regression", entrypoint="adv_audit_agents:batch_agent"
    )
    assert cli(home, "audit", "--verify").returncode == 0
    with orp.Store.open() as store:
        real_mac = next(
            r for r in store.run_rows(kind="replay", limit=10) if r.trace_id == genuine.replay_trace_id
        ).span_attributes[semconv.REPLAY_AUDIT_MAC]
    # 1. A row claiming another actor, written with the OTel SDK, with the MAC copied from a real row.
    forged = _write_forged_root(
        trace_id,
        {
            semconv.REPLAY_MODE: "live",
            semconv.REPLAY_ACTOR: "alice",
            semconv.REPLAY_OS_USER: "alice",
            semconv.REPLAY_REASON: "approved by alice",
            semconv.REPLAY_APPROVALS: ["credit_account:*"],
            semconv.REPLAY_OUTCOME: "matched",
            semconv.REPLAY_AUDIT_MAC: real_mac,
        },
    )
    # 2. A row without any MAC.
    bare = _write_forged_root(trace_id, {semconv.REPLAY_MODE: "mock", semconv.REPLAY_ACTOR: "ci"})
    # 3. An existing row whose actor and reason were changed in place.
    with orp.Store.open() as store:
        store.client.command(
            f"ALTER TABLE {store.traces_table} UPDATE SpanAttributes = mapUpdate(SpanAttributes, "
            "map({actor_key:String}, {actor:String}, {reason_key:String}, {reason:String})) "
            "WHERE TraceId = {tid:String} AND ParentSpanId = '' SETTINGS mutations_sync = 2",
            parameters={
                "actor_key": semconv.REPLAY_ACTOR,
                "actor": "mallory",
                "reason_key": semconv.REPLAY_REASON,
                "reason": "nothing to see",
                "tid": edited.replay_trace_id,
            },
        )
    listed, rows = audit_rows(home)
    assert listed.returncode == 0
    by_trace = {r["replay_trace_id"]: r for r in rows}
    assert by_trace[edited.replay_trace_id]["actor"] == "mallory"  # the edit is in the store …
    assert {t: by_trace[t]["mac_valid"] for t in (genuine.replay_trace_id, forged, bare, edited.replay_trace_id)} == {
        genuine.replay_trace_id: True,
        forged: False,
        bare: False,
        edited.replay_trace_id: False,
    }  # … and marked
    text = cli(home, "audit")
    assert text.returncode == 0 and text.stdout.count("INVALID") == 3
    verified = cli(home, "audit", "--verify")
    assert verified.returncode == 1 and verified.stdout.count("INVALID") == 3
    assert "3 rows whose MAC does not verify" in verified.stderr
    as_json, rows = audit_rows(home, "--verify")
    assert as_json.returncode == 1 and len(rows) == 4


def test_an_edited_journal_record_is_marked(ledger: Path, home: Path) -> None:
    trace_id = record(agents.batch_agent, "acc-10")
    out = cli(
        home,
        "replay",
        trace_id,
        "--mode",
        "live",
        "--reason",
        "journal only",
        "--actor",
        "alice",
        "--json",
        "--approve",
        "credit_account:*",
        "--app",
        "adv_audit_agents:batch_agent",
        env={"OTEL_REPLAY_EXPORTER": "none"},
    )
    assert out.returncode == 0, out.stderr
    assert cli(home, "audit", "--verify").returncode == 0
    path = home / "audit" / "journal.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"actor":"alice"', b'"actor":"bob"'))
    verified, rows = audit_rows(home, "--verify")
    assert verified.returncode == 1
    (row,) = rows
    assert (row["actor"], row["mac_valid"], row["status"]) == ("bob", False, "interrupted")


def test_verify_checks_every_row_not_only_those_it_prints(ledger: Path, home: Path) -> None:
    trace_id = record(agents.batch_agent, "acc-10")
    for actor in ("alice", "bob"):
        orp.replay(trace_id, mode="mock", actor=actor, reason="regression", entrypoint="adv_audit_agents:batch_agent")
    assert cli(home, "audit", "--verify", "--limit", "1").returncode == 0
    # A forged row dated long before the others, beyond the one row --limit 1 prints.
    _write_forged_root(
        trace_id,
        {
            semconv.REPLAY_MODE: "live",
            semconv.REPLAY_ACTOR: "alice",
            semconv.REPLAY_AUDIT_MAC: "hmac-sha256:" + "0" * 64,
        },
        start_time=10**18,
    )
    listed, rows = audit_rows(home, "--limit", "1")
    assert listed.returncode == 0 and len(rows) == 1 and rows[0]["mac_valid"] is True
    verified, rows = audit_rows(home, "--limit", "1", "--verify")
    assert verified.returncode == 1 and len(rows) == 1, verified.stderr
    assert "1 row whose MAC does not verify" in verified.stderr


def test_a_store_edit_cannot_hide_a_journaled_replay(ledger: Path, home: Path) -> None:
    trace_id = record(agents.batch_agent, "acc-11")
    live = orp.replay(
        trace_id,
        mode="live",
        approvals=["credit_account:*"],
        actor="alice",
        reason="refunds",
        entrypoint="adv_audit_agents:batch_agent",
    )
    (row,) = [r for r in audit_rows(home)[1] if r["run_id"] == live.replay_run_id]
    assert row["status"] == "recorded" and row["mac_valid"] is True
    # Someone who can write the store deletes the replay's root span and keeps its child spans …
    with orp.Store.open() as store:
        store.client.command(
            f"ALTER TABLE {store.traces_table} DELETE WHERE TraceId = {{tid:String}} AND ParentSpanId = '' "
            "SETTINGS mutations_sync = 2",
            parameters={"tid": live.replay_trace_id},
        )
        assert store.load_spans(live.replay_trace_id)  # the children are still there
    # … then forges a root with the same run id and no valid MAC: the journal's record still lists the replay.
    _write_forged_root(
        trace_id, {semconv.RUN_ID: live.replay_run_id, semconv.REPLAY_MODE: "mock", semconv.REPLAY_ACTOR: "nobody"}
    )
    rows = [r for r in audit_rows(home)[1] if r["run_id"] == live.replay_run_id]
    journaled = [r for r in rows if r["status"] == "interrupted"]
    assert len(journaled) == 1 and journaled[0]["actor"] == "alice" and journaled[0]["mac_valid"] is True, rows
    assert cli(home, "audit", "--verify").returncode == 1  # the forged root is marked
