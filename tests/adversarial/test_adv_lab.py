"""``otel-replay lab`` given hostile input: recorded names with terminal escapes and HTML, a secret in a
``--set-param`` value, a cohort mixing agents with different entrypoints (and the replays of earlier labs in
the store), a worker process that dies in the middle of its chunk.

Each lab runs as a process of its own, as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fork_server
import jsonschema
import lab_agents
import lab_hostile_agents
import pytest
from leak_checks import masked_bytes

import otel_replay as orp

TESTS_DIR = Path(__file__).resolve().parent.parent
SECRET = "sk-proj-" + "Hostile4labK8mN2bV6cX1zL9qW3eR7tY5uI0o"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("lab-hostile")
    home = base / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(name, raising=False)
        for name in (lab_agents.INTERRUPT_ENV, lab_agents.DIE_ENV):
            mp.delenv(name, raising=False)
        orp.configure(home=home, exporter="spool")
        for n in range(8):
            lab_agents.counter_agent(n)
        lab_hostile_agents.hostile_agent("hello")
        orp.flush()
        with orp.Store.open() as store:
            runs = store.runs(kind="original", limit=100)
        yield {
            "home": home,
            "base": base,
            "counter": {r.trace_id for r in runs if r.agent == "counter-agent"},
            "all": {r.trace_id for r in runs},
        }


def lab(world: dict[str, Any], *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(world["home"]),
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
        "OTEL_REPLAY_TRUSTED_MODULES": "lab_agents,lab_hostile_agents",
        **(extra_env or {}),
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", "lab", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=world["base"],
    )


def test_hostile_names_never_drive_the_terminal_or_the_page(world: dict[str, Any]) -> None:
    html = world["base"] / "hostile.html"
    out = lab(world, "--agent", lab_hostile_agents.HOSTILE, "--workers", "1", "--html", str(html))

    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout + out.stderr and "\x07" not in out.stdout + out.stderr
    assert "replays" in out.stdout  # the summary table was printed
    page = html.read_text(encoding="utf-8")
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the report's own script only


def test_an_inject_refusal_lists_hostile_recorded_tool_names_without_their_escapes(world: dict[str, Any]) -> None:
    # the refusal names the tools the cohort's recordings call: stored data, printed in the error line
    out = lab(world, "--agent", lab_hostile_agents.HOSTILE, "--workers", "1", "--inject", "no_such_tool:error=timeout")

    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.strip().splitlines()
    assert "no_such_tool" in line and "pwned" in line  # the recorded tool is listed, its text kept
    assert "\x1b" not in out.stderr and "\x07" not in out.stderr  # but it cannot retitle or colour the terminal


def test_a_secret_set_param_value_is_never_printed_or_stored(world: dict[str, Any]) -> None:
    html = world["base"] / "param.html"
    out = lab(
        world,
        "--agent",
        "counter-agent",
        "--workers",
        "1",
        "--set-param",
        f"api_key={SECRET}",
        "--set-param",
        "temperature=0",
        "--json",
        "--html",
        str(html),
    )

    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert document["spec"]["params"]["temperature"] == 0  # what is not a secret is shown as given
    assert SECRET not in out.stdout + out.stderr
    assert SECRET not in html.read_text(encoding="utf-8")
    for path in world["home"].rglob("*"):  # the spool, the store, the store's lock file (the command line)
        if path.is_file():
            assert SECRET.encode() not in masked_bytes(path.read_bytes()), path


def test_a_cohort_of_several_agents_replays_each_with_its_own_entrypoint_and_never_a_replay(
    world: dict[str, Any],
) -> None:
    lab(world, "--agent", "counter-agent", "--workers", "1")  # replays of an earlier lab are in the store now

    out = lab(world, "--workers", "1", "--json", "--fail-if", "diverged > 0", "--fail-if", "errors > 0")

    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert set(document["cohort"]) == world["all"]  # every original, no replay
    assert {r["agent"] for r in document["runs"]} == {"counter-agent", lab_hostile_agents.HOSTILE}
    assert {r["outcome"] for r in document["runs"]} == {"matched"}


def test_a_worker_process_that_dies_loses_only_its_chunk(world: dict[str, Any]) -> None:
    with orp.Store.open() as store:
        inputs = {t: store.load_run(t).snapshots["input"]["args"][0] for t in world["counter"]}
    doomed = next(t for t, n in inputs.items() if n == 5)

    out = lab(
        world,
        "--agent",
        "counter-agent",
        "--workers",
        "2",
        "--json",
        extra_env={lab_agents.DIE_ENV: "5"},
    )

    assert out.returncode == 0, out.stderr  # no gate: the lab reports; `--fail-if 'errors > 0'` would fail it
    assert "Traceback" not in out.stderr
    document = json.loads(out.stdout)
    schema = json.loads((TESTS_DIR.parent / "docs" / "lab.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(document)  # the lost runs' pairs too
    by_run = {r["original_trace_id"]: r for r in document["runs"]}
    assert set(by_run) == world["counter"] and len(document["runs"]) == 8  # every run reported, once
    assert by_run[doomed]["outcome"] == "error"
    assert "worker process" in by_run[doomed]["error"]
    for pair in by_run.values():  # the others matched, or were lost with the dead worker's pool
        assert pair["outcome"] == "matched" or "worker process" in pair["error"], pair
    assert document["summary"]["totals"]["errors"] >= 1


def test_a_replay_named_by_trace_id_is_refused_in_one_line(world: dict[str, Any]) -> None:
    first = lab(world, "--agent", "counter-agent", "--limit", "1", "--workers", "1", "--json")
    pair = json.loads(first.stdout)["runs"][0]

    out = lab(world, "--trace-id", pair["replay_trace_id"], "--workers", "1")

    assert out.returncode == 2 and out.stdout == ""
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "is a replay" in lines[0]
    assert f"--trace-id {pair['original_trace_id']}" in lines[0]


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "huge"])
def test_a_prompt_file_that_is_no_prompt_is_refused_before_it_is_read(world: dict[str, Any], target: str) -> None:
    path = world["base"] / target
    if target == "fifo" and not path.exists():
        os.mkfifo(path)  # opening it for reading would wait for a writer
    elif target == "huge":
        path.write_bytes(b"a" * (4 * 2**20 + 1))
    out = lab(world, "--agent", "counter-agent", "--prompt-file", f"system={path if target != '/dev/zero' else target}")

    assert out.returncode == 2 and out.stdout == ""
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --prompt-file system=")
