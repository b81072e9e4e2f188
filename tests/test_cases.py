"""Regression cases end to end: runs recorded into a real store, exported by the CLI to case files, and
replayed from those files against the current code with no store at all.

Agents live in ``case_agents`` and ``replay_agents`` (a case re-imports its entrypoint). Changing ``DESK`` /
``FLEX`` changes the agent's code path, as an edit of the agent would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import case_agents as ca
import fork_server
import pytest
import replay_agents as ra
from cli_in_process import run_cli, runs_in_process

import otel_replay as orp
from otel_replay import semconv
from otel_replay.cases import CaseError, case_document, load_case, run_case, write_case
from otel_replay.exporting.setup import runtime
from otel_replay.otlp_json import from_otlp_json, to_otlp_json
from otel_replay.storage.store import Store

TESTS_DIR = Path(__file__).resolve().parent
API_KEY = "sk-live-" + "Zq93" * 8
SLIPPED = "sk-ant-api03-" + "Xy7_" * 12


def cli(
    world: dict[str, Any], *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(world["home"]),
        "COLUMNS": "200",
        ra.SIDE_DIR_ENV: str(world["side"]),
        ra.PORT_ENV: "9",
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
        # the commands run from a folder outside the project: trust the test agents by name
        "OTEL_REPLAY_TRUSTED_MODULES": "replay_agents,case_agents",
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        full.pop(name, None)
    full.update(env or {})
    if runs_in_process(args):  # the same main(), without a second of interpreter start-up
        return run_cli(args, env=full, cwd=cwd or world["cases"])
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        cwd=cwd or world["cases"],
    )


def assert_one_line_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Runs recorded once into a module-wide store: the desk agent (with a credential), the flex agent and the
    side-effect matrix."""
    base = tmp_path_factory.mktemp("cases")
    home, side, cases = base / "home", base / "side", base / "cases"
    side.mkdir()
    cases.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        mp.delenv("OTEL_REPLAY_STORE", raising=False)
        mp.setenv(ra.SIDE_DIR_ENV, str(side))
        orp.configure(home=home, exporter="spool")
        ca.DESK.update(ca.DESK_DEFAULTS)
        ra.FLEX.update(ra.FLEX_DEFAULTS)
        ca.desk_agent("refund order A7", api_key=API_KEY)
        ra.flex_agent("refund order A1")
        orp.flush()
        with Store.open(home=home) as store:
            ids = {s.agent: s.trace_id for s in store.runs(kind="original")}
        yield {"home": home, "side": side, "cases": cases, "ids": ids}


@pytest.fixture(autouse=True)
def restore_agents() -> Iterator[None]:
    yield
    ca.DESK.update(ca.DESK_DEFAULTS)
    ra.FLEX.update(ra.FLEX_DEFAULTS)


def export(world: dict[str, Any], agent: str, name: str, *args: str) -> Path:
    path = world["cases"] / f"{name}.case.json"
    out = cli(world, "case", "export", world["ids"][agent], "-o", str(path), "--force", *args)
    assert out.returncode == 0, out.stderr
    return path


# ---------------------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("mode", ["mock", "deterministic"])
def test_an_exported_case_holds_against_unchanged_code(world: dict[str, Any], mode: str) -> None:
    path = export(
        world,
        "desk-agent",
        f"desk-{mode}",
        "--mode",
        mode,
        "--expect",
        "output",
        "--expect",
        "tools",
        "--expect",
        "no-divergence",
    )
    out = cli(world, "case", "run", str(path), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert (report["passed"], report["failed"], report["error"]) == (1, 0, 0)
    (case,) = report["cases"]
    assert case["status"] == "passed" and case["mode"] == mode and case["outcome"] == "matched"
    assert case["expect"] == ["no-divergence", "output", "tools"]
    assert case["replay_trace_id"] and case["replay_trace_id"] != world["ids"]["desk-agent"]


def test_the_case_file_is_plain_otlp_json_in_a_stable_order(world: dict[str, Any]) -> None:
    first = export(world, "flex-agent", "flex-a").read_text(encoding="utf-8")
    second = export(world, "flex-agent", "flex-b").read_text(encoding="utf-8")
    assert first == second  # same run, same bytes
    document = json.loads(first)
    assert first == json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert document["otel_replay_case"] == 1 and document["convention"] == semconv.SCHEMA_VERSION
    assert document["entrypoint"] == "replay_agents:flex_agent" and document["mode"] == "mock"
    spans = document["trace"]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)  # OTLP JSON: hex ids
    assert {s["traceId"] for s in spans} == {world["ids"]["flex-agent"]}
    assert [s["startTimeUnixNano"] for s in spans] == sorted((s["startTimeUnixNano"] for s in spans), key=int)
    with Store.open(home=world["home"]) as store:
        stored = store.load_spans(world["ids"]["flex-agent"])
    assert sorted(from_otlp_json(document["trace"]), key=lambda r: r.span_id) == sorted(stored, key=lambda r: r.span_id)
    assert to_otlp_json(from_otlp_json(document["trace"])) == document["trace"]


def test_a_case_fails_when_the_agent_code_changed(world: dict[str, Any]) -> None:
    path = export(world, "desk-agent", "desk-change", "--expect", "output", "--expect", "tools")
    ca.DESK["refund_cents"] = 900  # the "fix" that refunds less: a changed tool argument
    result = run_case(load_case(path))
    assert result.status == "failed"
    assert any(f.startswith("tools:") for f in result.failures), result.failures
    # in mock mode the refund is answered from the recording, so the run's output is what it was
    assert not any(f.startswith("output:") for f in result.failures), result.failures
    first = result.replay.first_divergence
    assert first is not None and first.step_index == 2 and first.kind == "arguments"


def test_a_case_whose_entrypoint_is_gone_could_not_run(world: dict[str, Any]) -> None:
    """The code as it stands cannot be tested: exit 125, which ``git bisect run`` reads as "skip this commit"
    (any other case error stays 2)."""
    path = export(world, "desk-agent", "desk-gone")
    out = cli(world, "case", "run", str(path), "--app", "case_agents:desk_agent_renamed")
    assert out.returncode == 125, out.stdout
    assert "ERROR" in out.stdout and "desk_agent_renamed" in out.stdout and "Traceback" not in out.stdout
    listed = json.loads(
        cli(world, "case", "run", str(path), "--app", "case_agents:desk_agent_renamed", "--json").stdout
    )
    assert [(c["status"], c["cannot_test"]) for c in listed["cases"]] == [("error", True)]
    broken = path.with_name("broken.case.json")
    broken.write_text("{")
    out = cli(world, "case", "run", str(path), str(broken), "--app", "case_agents:desk_agent_renamed")
    assert out.returncode == 2, out.stdout + out.stderr  # a case file that cannot be read is no skip


def test_a_failing_case_prints_its_diff_and_first_divergence(world: dict[str, Any], tmp_path: Path) -> None:
    changed = tmp_path / "changed_desk.py"
    changed.write_text(
        (TESTS_DIR / "case_agents.py")
        .read_text(encoding="utf-8")
        .replace('"refund_cents": 1500', '"refund_cents": 1499'),
        encoding="utf-8",
    )
    path = export(world, "desk-agent", "desk-cli", "--app", "changed_desk:desk_agent", "--expect", "tools")
    # The changed code lives outside the project folder: the user trusts it by name.
    out = cli(
        world,
        "case",
        "run",
        str(path),
        env={"PYTHONPATH": str(tmp_path), "OTEL_REPLAY_TRUSTED_MODULES": "changed_desk"},
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAIL" in out.stdout and "first divergence at step 2 (arguments)" in out.stdout
    assert "diff tools:" in out.stdout and "0 passed, 1 failed" in out.stdout
    ok = cli(world, "case", "run", str(path), "--app", "case_agents:desk_agent")
    assert ok.returncode == 0, ok.stdout


def test_risky_tools_in_a_case_are_answered_from_the_recording(world: dict[str, Any]) -> None:
    path = export(world, "flex-agent", "flex-side")
    before = {name: ra.executions(name, world["side"]) for name in ("write_ledger", "send_email")}
    out = cli(world, "case", "run", str(path))
    assert out.returncode == 0, out.stdout
    assert {name: ra.executions(name, world["side"]) for name in before} == before


# ------------------------------------------------------------------------------------- no store, no net


def test_case_run_needs_no_store_and_writes_nothing(world: dict[str, Any], tmp_path: Path) -> None:
    path = export(world, "desk-agent", "desk-nostore")
    fresh = tmp_path / "fresh-home"
    out = cli(
        world,
        "case",
        "run",
        str(path),
        env={"OTEL_REPLAY_HOME": str(fresh), "OTEL_REPLAY_STORE": "http://127.0.0.1:9/nowhere"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    written = sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file())
    assert written == ["redaction.key"]  # no spool, no store: the replay's spans stayed in the process


def test_a_case_of_an_sdk_agent_runs_with_the_sdk_server_gone(world: dict[str, Any], tmp_path: Path) -> None:
    home = tmp_path / "sdk-home"
    demo = cli(world, "demo", "--sdk", "openai", env={"OTEL_REPLAY_HOME": str(home)})
    assert demo.returncode == 0, demo.stderr
    runs = json.loads(cli(world, "runs", "--json", "--kind", "original", env={"OTEL_REPLAY_HOME": str(home)}).stdout)
    path = tmp_path / "sdk.case.json"
    out = cli(
        world,
        "case",
        "export",
        runs[0]["trace_id"],
        "-o",
        str(path),
        "--expect",
        "output",
        env={"OTEL_REPLAY_HOME": str(home)},
    )
    assert out.returncode == 0, out.stderr
    steps = [
        s
        for s in json.loads(path.read_text())["trace"]["resourceSpans"][0]["scopeSpans"][0]["spans"]
        if any(a["key"] == semconv.STEP_INSTRUMENTATION for a in s.get("attributes", []))
    ]
    assert len(steps) == 2  # both OpenAI calls say which instrumentor recorded them
    # The fake OpenAI server of the demo is gone: any request would fail and the case with it.
    ran = cli(world, "case", "run", str(path), "--json", env={"OTEL_REPLAY_HOME": str(home)})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["cases"][0]["outcome"] == "matched"


# ------------------------------------------------------------------------------------------- secrets


def test_planted_secrets_never_reach_a_case_file(world: dict[str, Any], tmp_path: Path) -> None:
    path = export(world, "desk-agent", "desk-secret")
    text = path.read_text(encoding="utf-8")
    assert API_KEY not in text and "Zq93Zq93" not in text
    assert "$redacted" in text
    stdout = cli(world, "case", "export", world["ids"]["desk-agent"], "-o", "-")
    assert stdout.returncode == 0 and API_KEY not in stdout.stdout and json.loads(stdout.stdout)["name"]


def test_a_secret_that_slipped_into_the_trace_is_redacted_at_export(world: dict[str, Any]) -> None:
    """Spans of other instrumentations reach the store unredacted; export scrubs them and keeps the
    snapshot it touched intact, so the case still runs."""
    with Store.open(home=world["home"]) as store:
        run = store.load_run(world["ids"]["desk-agent"])
    document = case_document(run, redactor=runtime().redactor)
    trace = json.dumps(document["trace"])
    assert document["source"]["redactions_at_export"] == 0
    spans = from_otlp_json(document["trace"])
    tainted = []
    for span in spans:
        events = []
        for event in span.events:
            attrs = dict(event.attributes)
            if attrs.get(semconv.SNAPSHOT_PAYLOAD, "").startswith('{"answer"'):
                attrs[semconv.SNAPSHOT_PAYLOAD] = attrs[semconv.SNAPSHOT_PAYLOAD].replace(
                    '"answer":"', f'"answer":"key {SLIPPED} '
                )
                from otel_replay.snapshots import sha256_hex

                attrs[semconv.SNAPSHOT_SHA256] = sha256_hex(attrs[semconv.SNAPSHOT_PAYLOAD])
            events.append(type(event)(timestamp_ns=event.timestamp_ns, name=event.name, attributes=attrs))
        attrs = dict(span.span_attributes)
        if not span.parent_span_id:
            attrs["llm.input_messages"] = f"use {SLIPPED} please"
        tainted.append(
            type(span)(
                **{**{f: getattr(span, f) for f in span.__slots__}, "events": tuple(events), "span_attributes": attrs}
            )
        )
    assert SLIPPED not in trace and SLIPPED in repr(tainted)
    from otel_replay.runs import build_run

    dirty = build_run(tainted)
    scrubbed = case_document(dirty, redactor=runtime().redactor)
    text = json.dumps(scrubbed)
    assert SLIPPED not in text and "[REDACTED:" in text
    assert scrubbed["source"]["redactions_at_export"] >= 2
    path = write_case(scrubbed, world["cases"] / "desk-scrubbed.case.json")
    case = load_case(path)
    assert case.run().problems == ()  # the rewritten snapshot still matches its sha256


# -------------------------------------------------------------------------------------- versions, input


def _rewrite(path: Path, target: Path, convention: str, *, spans: bool) -> Path:
    text = path.read_text(encoding="utf-8")
    document = json.loads(text)
    document["convention"] = convention
    out = json.dumps(document, indent=2, sort_keys=True)
    if spans:
        out = out.replace(f'"stringValue": "{semconv.SCHEMA_VERSION}"', f'"stringValue": "{convention}"')
    target.write_text(out, encoding="utf-8")
    return target


def test_a_case_of_an_older_minor_convention_still_runs(world: dict[str, Any], tmp_path: Path) -> None:
    """A 1.0 recording (before ``otel_replay.step.instrumentation``) and a 1.1 one run under this 2.x reader, as
    does one from a newer minor (readers ignore what they do not know)."""
    path = export(world, "desk-agent", "desk-versions", "--expect", "output")
    for version in ("1.0", "1.1", "2.9"):
        old = _rewrite(path, tmp_path / f"v{version}.case.json", version, spans=True)
        assert f'"stringValue": "{version}"' in old.read_text()
        result = run_case(load_case(old))
        assert result.status == "passed", (version, result.failures, result.error)


@pytest.mark.parametrize(
    ("convention", "needle"),
    [
        ("0.9", "re-record the run"),
        ("3.0", "upgrade otel-replay"),
    ],
)
def test_a_case_of_another_major_convention_fails_with_what_to_do(
    world: dict[str, Any], tmp_path: Path, convention: str, needle: str
) -> None:
    path = export(world, "desk-agent", "desk-major")
    for spans in (False, True):
        bad = _rewrite(path, tmp_path / f"c{convention}-{spans}.case.json", convention, spans=spans)
        if spans:  # the document says 2.x but its spans were written by another major
            document = json.loads(bad.read_text())
            document["convention"] = semconv.SCHEMA_VERSION
            bad.write_text(json.dumps(document))
        with pytest.raises(CaseError, match=needle):
            load_case(bad)
        out = cli(world, "case", "run", str(bad))
        assert out.returncode == 2 and needle in out.stdout and "Traceback" not in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not a readable JSON case file"),
        ('{"name": "x"}', "not an otel-replay case file"),
        ('{"otel_replay_case": 7}', "upgrade otel-replay"),
        (
            '{"otel_replay_case": 1, "convention": "1.1", "name": "x", "entrypoint": "m:f", "mode": "live", '
            '"trace": {"resourceSpans": []}}',
            "a case never calls real models or tools",
        ),
        (
            '{"otel_replay_case": 1, "convention": "1.1", "name": "x", "entrypoint": "m:f", "mode": "mock", '
            '"trace": {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "\'; DROP TABLE otel_traces;--", '
            '"spanId": "00"}]}]}]}}',
            "traceId must be 32 hex digits",
        ),
        (
            '{"otel_replay_case": 1, "convention": "1.1", "name": "x", "entrypoint": "m:f", "mode": "mock", '
            '"expect": ["vibes"], "trace": {"resourceSpans": []}}',
            "unknown expectation 'vibes'",
        ),
    ],
)
def test_bad_case_files_are_one_clear_error(world: dict[str, Any], tmp_path: Path, content: str, needle: str) -> None:
    bad = tmp_path / "bad.case.json"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(CaseError, match=needle):
        load_case(bad)
    good = export(world, "flex-agent", "flex-beside-bad")
    out = cli(world, "case", "run", str(bad), str(good), "--json")
    assert out.returncode == 2, out.stdout
    report = json.loads(out.stdout)
    assert (report["passed"], report["error"]) == (1, 1)
    assert needle in next(c["error"] for c in report["cases"] if c["status"] == "error")


def test_export_refusals_are_one_line(world: dict[str, Any]) -> None:
    path = export(world, "flex-agent", "flex-exists")
    before = path.read_bytes()
    assert_one_line_error(cli(world, "case", "export", world["ids"]["flex-agent"], "-o", str(path)), "--force")
    assert path.read_bytes() == before
    assert_one_line_error(cli(world, "case", "export", "f" * 32), "f" * 32)
    assert_one_line_error(cli(world, "case", "export", "1 OR 1=1"), "trace id")
    assert_one_line_error(cli(world, "case", "export", world["ids"]["flex-agent"], "--mode", "live"), "live")
    assert_one_line_error(cli(world, "case", "export", world["ids"]["flex-agent"], "--expect", "vibes"), "vibes")
    # Missing folders are created now; a file where a folder must go is still one error line.
    (world["cases"] / "a-file").write_text("not a folder")
    assert_one_line_error(
        cli(world, "case", "export", world["ids"]["flex-agent"], "-o", str(world["cases"] / "a-file" / "x.case.json")),
        "cannot create folder",
    )
    assert_one_line_error(cli(world, "case", "run", str(world["cases"] / "missing")), "no such file")
    empty = world["cases"] / "empty"
    empty.mkdir(exist_ok=True)
    assert_one_line_error(cli(world, "case", "run", str(empty)), "no case files")


def test_case_run_takes_folders_and_reports_every_case(world: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "suite"
    (folder / "nested").mkdir(parents=True)
    for name, agent in (("a", "flex-agent"), ("nested/b", "desk-agent")):
        source = export(world, agent, f"suite-{name.replace('/', '-')}")
        (folder / f"{name}.case.json").write_text(source.read_text())
    (folder / "notes.json").write_text("{}")  # not a case file: ignored
    out = cli(world, "case", "run", str(folder), "--json")
    assert out.returncode == 0, out.stdout
    report = json.loads(out.stdout)
    assert [Path(c["path"]).name for c in report["cases"]] == ["a.case.json", "b.case.json"]


def test_running_a_case_leaves_later_recordings_alone(world: dict[str, Any], tmp_path: Path) -> None:
    """A case run inside a process that never configured recording (a user's pytest session) does not leave
    spans going nowhere: the next run is recorded to the spool as usual."""
    path = export(world, "desk-agent", "desk-after")
    home = tmp_path / "after-home"
    script = (
        "import sys, otel_replay as orp, case_agents as ca\n"
        "from otel_replay.cases import load_case, run_case\n"
        "assert run_case(load_case(sys.argv[1])).passed\n"
        "ca.desk_agent('refund order B1', api_key='sk-live-' + 'Ab12' * 8)\n"
        "orp.flush()\n"
    )
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
    }
    env.pop("OTEL_REPLAY_STORE", None)
    out = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    listed = cli(world, "runs", "--json", env={"OTEL_REPLAY_HOME": str(home)})
    assert [r["agent"] for r in json.loads(listed.stdout)] == ["desk-agent"]  # the later run, not the case's
