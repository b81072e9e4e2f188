"""What a lab's candidate changes, seen through the lab: a changed system prompt, an injected tool fault, a what-if
model, a changed entrypoint that leaves recorded tool calls unused.

These outcomes come from the replay policy the replay session applies (tool tape, faults, whatif, model
overrides: ``otel_replay/replay/matching/tape.py``); the lab's side (flags → one policy → every replay) is what
they check.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm_servers import FakeLLMServer

import otel_replay as orp
from otel_replay.demo import agent as demo


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("lab-policy")
    home = base / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(name, raising=False)
        orp.configure(home=home, exporter="spool")
        for question, customer in demo.QUESTIONS * 2:
            try:
                demo.support_agent(question, customer=customer)
            except KeyError:
                pass  # the demo's unknown order, on purpose
        orp.flush()
        with orp.Store.open() as store:
            runs = store.runs(kind="original", agent="support-agent", limit=100)
            originals = {r.trace_id: store.load_run(r.trace_id) for r in runs}
        prompt = base / "system.txt"
        prompt.write_text("You are a terse support agent. Answer in five words.", encoding="utf-8")
        yield {
            "home": home,
            "base": base,
            "originals": originals,
            "prompt": prompt,
            "refunds": (home / "refunds.log").read_text(encoding="utf-8"),
        }


def _first_model_step(run: orp.Run) -> int:
    return min(s.index for s in run.steps if s.kind == "model")


def test_a_changed_system_prompt_diverges_every_run_at_its_first_model_step(world: dict[str, Any]) -> None:
    result = orp.lab(
        agent="support-agent", prompt_files={"system": str(world["prompt"])}, workers=1, fail_if=["diverged > 0"]
    )

    assert result.failed  # the gate holds: `otel-replay lab` exits 1
    assert {p.outcome for p in result.pairs} == {"diverged"}
    for pair in result.pairs:
        first = pair.first_divergence
        assert first is not None
        assert first["step_index"] == _first_model_step(world["originals"][pair.original_trace_id])
        assert first["kind"] == "request"
    assert result.spec["prompt_files"] == {"system": str(world["prompt"])}  # the path, never the text
    assert "terse support agent" not in str(result.to_dict()["spec"])


def test_an_injected_lookup_timeout_regresses_the_runs_that_do_not_handle_it(world: dict[str, Any]) -> None:
    result = orp.lab(agent="support-agent", inject=["lookup_order:error=timeout"], workers=1)

    ok_runs = {t for t, run in world["originals"].items() if run.status == "ok"}
    assert len(ok_runs) == 4
    for pair in result.pairs:
        assert pair.tape["injected"], pair.tape
        assert pair.agent_error is not None and pair.agent_error["type"] == "TimeoutError"
        if pair.original_trace_id in ok_runs:  # answered before, now the agent raises: a regression
            assert pair.outcome == "diverged"
            assert pair.scores["output_equal"] is False
    assert (world["home"] / "refunds.log").read_text(encoding="utf-8") == world["refunds"]


def test_recorded_tool_calls_the_candidate_never_makes_are_reported_unused(world: dict[str, Any]) -> None:
    failing = [t for t, run in world["originals"].items() if run.status == "error"]

    result = orp.lab(trace_ids=failing, app="otel_replay.demo.agent:support_agent_fixed", workers=1)

    for pair in result.pairs:  # the fixed agent no longer looks the unknown order up
        assert [entry["tool"] for entry in pair.tape["unused"]] == ["lookup_order"]


def test_whatif_with_another_model_calls_the_model_for_real_and_nothing_else(
    world: dict[str, Any], tmp_path: Path
) -> None:
    from otel_replay.demo.sdk_agents import openai_weather_agent
    from otel_replay.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    with FakeLLMServer() as server:
        instrumentor.instrument()
        try:
            openai_weather_agent("Weather in Lisbon?", base_url=server.openai_url)
            orp.flush()
        finally:
            instrumentor.uninstrument()
        recorded = server.count

        result = orp.lab(
            agent="openai-weather-agent", mode="whatif", model="terse-demo", reason="model trial", workers=1
        )

        asked = [body.get("model") for _, body in server.requests[recorded:]]
    assert asked and set(asked) == {"terse-demo"}
    assert result.summary["totals"]["errors"] == 0
    assert result.pairs[0].tape["refused"] == []
