"""The replay lab's proof, through ``otel-replay lab`` as a user runs it (a process of its own per lab).

One cohort, recorded with the real decorators into a tmp home: the demo support agent's three conversations twice
(a status question whose inventory call times out and is retried, a refund through the high-risk
``issue_refund`` tool, an unknown order that fails), and an OpenAI-SDK agent twice against the project's fake
model server. Then:

* unchanged code: every run matched, exit 0 with the gate;
* a changed system prompt (the file holds a secret): every run diverged at its first model step, exit 1, the
  secret nowhere in what the lab printed or stored;
* whatif with another model against the fake server: the per-scorer regressions counted, exit 1 with the gate;
* an injected tool timeout: the runs whose agent does not handle the error regress, the runs whose agent
  retries do not;
* zero real side effects in every lab (the demo's ``refunds.log``, the fake server's requests);
* every ``--json`` document validates against ``docs/lab.schema.json``.
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
import pytest
from fake_llm_servers import FakeLLMServer
from leak_checks import masked_bytes

import otel_replay as orp
from otel_replay.demo import agent as demo
from otel_replay.replay.matching.tape import draws

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "docs" / "lab.schema.json").read_text(encoding="utf-8"))
SECRET = "sk-proj-" + "Lab7proofQ2xW9rT4yU8iO3pA6sD1fG5hJ0kZ"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from otel_replay.demo.sdk_agents import openai_weather_agent
    from otel_replay.instrumentation.openai import OpenAIInstrumentor

    base = tmp_path_factory.mktemp("lab-proof")
    home = base / "home"
    with pytest.MonkeyPatch.context() as mp, FakeLLMServer() as server:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(name, raising=False)
        orp.configure(home=home, exporter="spool")
        demo.flaky_calls.clear()  # the inventory times out on the first call of each SKU in this process
        for question, customer in demo.QUESTIONS * 2:
            try:
                demo.support_agent(question, customer=customer)
            except KeyError:
                pass  # the demo's unknown order, on purpose
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument()
        try:
            for city in ("Lisbon", "Oslo"):
                openai_weather_agent(f"Weather in {city}?", base_url=server.openai_url)
        finally:
            instrumentor.uninstrument()
        orp.flush()
        with orp.Store.open() as store:
            summaries = store.runs(kind="original", limit=100)
            originals = {s.trace_id: store.load_run(s.trace_id) for s in summaries}
        prompt = base / "system.txt"
        prompt.write_text(f"You are a terse support agent. Internal key: {SECRET}", encoding="utf-8")
        yield {
            "home": home,
            "base": base,
            "server": server,
            "originals": originals,
            "demo": {t for t, r in originals.items() if r.agent == "support-agent"},
            "weather": {t for t, r in originals.items() if r.agent == "openai-weather-agent"},
            "prompt": prompt,
            "refunds": (home / "refunds.log").read_text(encoding="utf-8"),
        }


def lab(world: dict[str, Any], *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``otel-replay lab ARGS --json`` in a process of its own; the document, validated against its schema."""
    env = {**os.environ, "OTEL_REPLAY_HOME": str(world["home"]), "COLUMNS": "200"}
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    out = fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", "lab", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=world["base"],
    )
    assert "Traceback" not in out.stderr, out.stderr
    document = json.loads(out.stdout)  # only the document on stdout
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(document)
    return out, document


def no_real_side_effect(world: dict[str, Any]) -> None:
    assert (world["home"] / "refunds.log").read_text(encoding="utf-8") == world["refunds"]


def first_model_step(run: orp.Run) -> int:
    return min(s.index for s in run.steps if s.kind == "model")


def test_unchanged_code_matches_every_run_and_the_gate_exits_0(world: dict[str, Any]) -> None:
    out, doc = lab(world, "--agent", "support-agent", "--workers", "1", "--fail-if", "diverged > 0")

    assert out.returncode == 0, out.stderr
    assert {r["original_trace_id"] for r in doc["runs"]} == world["demo"]
    assert {r["original_status"] for r in doc["runs"]} == {"ok", "error"}  # failing runs are in the cohort
    assert [r["outcome"] for r in doc["runs"]] == ["matched"] * 6
    totals = doc["summary"]["totals"]
    assert (totals["replays"], totals["matched"], totals["diverged"], totals["errors"]) == (6, 6, 0, 0)
    assert doc["gates"][0]["held"] is False and doc["failed"] is False
    no_real_side_effect(world)


def test_a_changed_prompt_diverges_every_run_at_its_first_model_step_and_the_gate_exits_1(
    world: dict[str, Any],
) -> None:
    html = world["base"] / "prompt-lab.html"
    out, doc = lab(
        world,
        "--agent",
        "support-agent",
        "--workers",
        "2",
        "--prompt-file",
        f"system={world['prompt']}",
        "--fail-if",
        "diverged > 0",
        "--html",
        str(html),
    )

    assert out.returncode == 1, out.stderr
    assert len(doc["runs"]) == 6
    for pair in doc["runs"]:
        assert pair["outcome"] == "diverged"
        first = pair["first_divergence"]
        assert first["kind"] == "request" and first["step_kind"] == "model"
        assert first["step_index"] == first_model_step(world["originals"][pair["original_trace_id"]])
    assert doc["gates"][0]["held"] is True
    no_real_side_effect(world)
    # the prompt's secret: not printed, not in the page, not stored anywhere under the home
    assert SECRET not in out.stdout + out.stderr
    assert SECRET not in html.read_text(encoding="utf-8")
    with orp.Store.open() as store:
        for pair in doc["runs"]:
            assert SECRET not in json.dumps(store.load_run(pair["replay_trace_id"]).to_dict(), default=str)
    for path in world["home"].rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in masked_bytes(path.read_bytes()), path


def test_whatif_with_another_model_counts_regressions_per_scorer(world: dict[str, Any]) -> None:
    server: FakeLLMServer = world["server"]
    before = server.count

    out, doc = lab(
        world,
        "--agent",
        "openai-weather-agent",
        "--mode",
        "whatif",
        "--model",
        "terse-demo",
        "--reason",
        "model trial",
        "--workers",
        "1",
        "--fail-if",
        "regressed(output_equal) > 2%",
    )

    assert out.returncode == 1, out.stderr
    assert {r["original_trace_id"] for r in doc["runs"]} == world["weather"]
    scorers = doc["summary"]["scorers"]
    assert scorers["output_equal"]["regressed"] == 2  # a terse answer
    assert scorers["tool_sequence_equal"]["regressed"] == 2  # the terse model asks for no tool
    assert scorers["output_equal"]["pass_rate"] == 0
    assert doc["gates"][0]["held"] is True and doc["gates"][0]["value"] == 100
    # the model was really called, with the what-if name; nothing else reached the server
    asked = [body.get("model") for _, body in server.requests[before:]]
    assert asked == ["terse-demo", "terse-demo"]


def test_a_whatif_lab_without_a_reason_calls_nothing(world: dict[str, Any]) -> None:
    server: FakeLLMServer = world["server"]
    before = server.count
    env = {**os.environ, "OTEL_REPLAY_HOME": str(world["home"])}
    out = fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", "lab", "--agent", "openai-weather-agent", "--mode", "whatif"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=world["base"],
    )
    assert out.returncode == 2 and out.stdout == ""
    assert [line for line in out.stderr.splitlines() if line.strip()] == [
        "error: a whatif lab calls real models: give a reason (--reason TEXT)"
    ]
    assert server.count == before


def _seed_where_a_retry_copes(trace_ids: list[str]) -> int:
    """A seed under which, in every run, the first inventory call times out and the two retries do not."""
    from otel_replay.replay.matching.policy import ToolFault

    fault = ToolFault(tool="check_inventory", kind="timeout", p=0.5)
    for seed in range(5000):
        fired = [
            [draws(fault, seed=seed, trace_id=t, tool="check_inventory", ordinal=n, rule=0) for n in range(3)]
            for t in trace_ids
        ]
        if all(f == [True, False, False] for f in fired):
            return seed
    raise AssertionError("no seed found")  # pragma: no cover - 1 in 64 seeds qualifies


def test_an_injected_timeout_regresses_the_runs_whose_agent_does_not_handle_it(world: dict[str, Any]) -> None:
    # lookup_order: the demo agent does not handle its errors: every run that looks an order up regresses
    out, doc = lab(world, "--agent", "support-agent", "--workers", "1", "--inject", "lookup_order:error=timeout")

    assert out.returncode == 0, out.stderr  # no gate
    for pair in doc["runs"]:
        assert pair["tape"]["injected"] and pair["agent_error"]["type"] == "TimeoutError"
        assert pair["scores"]["output_equal"] is False
        # the faulted call was answered (by the fault): not a recorded call the replay never made
        assert "lookup_order" not in [entry["tool"] for entry in pair["tape"]["unused"]]
    assert doc["summary"]["scorers"]["output_equal"]["regressed"] == 6
    no_real_side_effect(world)

    # check_inventory: the agent retries a timeout: a run whose retry gets an answer does not regress
    status = sorted(t for t in world["demo"] if any(s.name == "check_inventory" for s in world["originals"][t].steps))
    seed = _seed_where_a_retry_copes(status)
    out, doc = lab(
        world,
        "--trace-id",
        status[0],
        "--trace-id",
        status[1],
        "--workers",
        "1",
        "--inject",
        "check_inventory:error=timeout:p=0.5",
        "--seed",
        str(seed),
        "--fail-if",
        "regressed(output_equal) > 0",
    )

    assert out.returncode == 0, out.stderr
    for pair in doc["runs"]:
        assert [e["ordinal"] for e in pair["tape"]["injected"]] == [0]
        assert pair["tape"]["refused"] == [] and pair["agent_error"] is None
        assert pair["scores"]["output_equal"] is True
    assert doc["summary"]["scorers"]["output_equal"]["regressed"] == 0
    no_real_side_effect(world)


def test_a_high_risk_tool_run_live_without_approval_is_refused_and_nothing_happens(world: dict[str, Any]) -> None:
    out, doc = lab(world, "--agent", "support-agent", "--workers", "1", "--tool-live", "issue_refund", "--reason", "r")

    assert out.returncode == 0, out.stderr
    refunds = {t for t in world["demo"] if any(s.name == "issue_refund" for s in world["originals"][t].steps)}
    assert len(refunds) == 2
    for pair in doc["runs"]:
        if pair["original_trace_id"] in refunds:
            assert pair["outcome"] == "refused"
            assert "--approve issue_refund" in pair["first_divergence"]["reason"]
        else:
            assert pair["outcome"] == "matched"
    no_real_side_effect(world)


def test_progress_is_reported_as_replays_finish(world: dict[str, Any]) -> None:
    seen: list[tuple[int, int]] = []

    orp.lab(agent="support-agent", workers=1, progress=lambda done, total: seen.append((done, total)))

    assert seen[0] == (0, 6) and seen[-1] == (6, 6)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_the_progress_bar_is_drawn_on_a_terminal_stderr_only(world: dict[str, Any]) -> None:
    import pty

    primary, secondary = pty.openpty()
    env = {**os.environ, "OTEL_REPLAY_HOME": str(world["home"]), "COLUMNS": "120", "TERM": "xterm"}
    env.pop("OTEL_REPLAY_STORE", None)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "otel_replay.cli", "lab", "--agent", "support-agent", "--workers", "1", "--json"],
            stdout=subprocess.PIPE,
            stderr=secondary,
            text=True,
            env=env,
            timeout=300,
            cwd=world["base"],
        )
        os.close(secondary)
        drawn = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal's other side is closed: everything was read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(primary)
    assert out.returncode == 0
    assert json.loads(out.stdout)["summary"]["totals"]["replays"] == 6  # stdout: the document only
    assert b"replaying" in drawn and b"6/6" in drawn
