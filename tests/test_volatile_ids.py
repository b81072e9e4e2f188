"""Volatile ids never make a replay diverge; a real change still does, with a readable diff.

Runs are recorded with the real ``openai``, ``anthropic`` and LangChain / LangGraph SDKs against the fake server
with ``volatile_ids=True``: every answer carries fresh completion, message, response and tool-call ids, a new
``created`` and a new ``system_fingerprint``, and the next request carries them back (the agents are in
``volatile_agents.py``). A live replay of unchanged code against that server therefore sends requests that
differ from the recorded ones in their ids only (each test checks that they do), and must report ``matched``;
mock and deterministic replays must report ``matched`` with no request and no side effect; a changed system
prompt or tool result must still diverge, with a unified diff that shows the change and no random id.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fork_server
import openai  # noqa: F401 - a package of the [test] extra: missing, the module fails
import pytest
import volatile_agents as va
from cli_in_process import run_cli, runs_in_process
from fake_llm_servers import FakeLLMServer

import otel_replay as orp
from otel_replay import semconv
from otel_replay.replay import volatile
from otel_replay.storage.store import Store

TESTS_DIR = Path(__file__).resolve().parent
RANDOM_ID = re.compile(r"(chatcmpl-|call_|toolu_|msg_|resp_|fc_|fp_)[0-9a-f]{24}")
"""An id as ``FakeLLMServer(volatile_ids=True)`` makes them: a prefix and 24 random hex digits."""


@pytest.fixture
def world(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    """A fake server with volatile ids, the SDKs pointed at it and instrumented, a fresh side-effect file."""
    monkeypatch.setenv(va.SIDE_FILE_ENV, str(tmp_path / "side.log"))
    monkeypatch.delenv(volatile.OTEL_REPLAY_VOLATILE_KEYS, raising=False)
    va.KNOBS.update(va.DEFAULT_KNOBS)
    with FakeLLMServer(volatile_ids=True) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "1" * 32)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-" + "2" * 32)
        done = orp.instrument("openai", "anthropic", "langchain")
        try:
            yield server
        finally:
            orp.uninstrument(*done)
            va.KNOBS.update(va.DEFAULT_KNOBS)


def record(agent: str, func: Any, *args: Any) -> str:
    """Call ``func(*args)`` (an agent, or SDK code the instrumentor makes a run of), flush: the run's trace id."""
    func(*args)
    orp.flush()
    with Store.open() as store:
        summaries = store.runs(agent=agent, kind="original")
    return summaries[0].trace_id


def load(trace_id: str) -> orp.Run:
    with Store.open() as store:
        return store.load_run(trace_id)


def model_requests(run: orp.Run) -> list[Any]:
    return [s.snapshots["model"]["request"] for s in run.steps if s.kind == "model"]


def assert_ids_really_changed(original: orp.Run, replayed: orp.Run | None) -> None:
    """The live replay's requests differ from the recorded ones (so the test can fail), in their ids only."""
    assert replayed is not None
    before, after = model_requests(original), model_requests(replayed)
    assert len(before) == len(after) >= 2
    assert before[-1] != after[-1], "the server did not hand out fresh ids: this test proves nothing"
    assert [volatile.normalise(r) for r in before] == [volatile.normalise(r) for r in after]


def unchanged(result: orp.ReplayResult) -> None:
    assert result.outcome == "matched", [d.to_dict() for d in result.divergences]
    assert result.divergences == ()
    assert result.diff is not None
    assert not result.diff.sections["output"].changed, result.diff.sections["output"].details
    assert not result.diff.sections["tools"].changed, result.diff.sections["tools"].details
    assert not result.diff.sections["state"].changed, result.diff.sections["state"].details


LOOPS = {
    "openai": ("volatile-openai-loop", va.openai_loop),
    "responses": ("volatile-responses-loop", va.responses_loop),
    "anthropic": ("volatile-anthropic-loop", va.anthropic_loop),
}


# ---------------------------------------------------------------------------------- unchanged code


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_live_replay_of_an_sdk_tool_loop_is_matched(world: FakeLLMServer, loop: str) -> None:
    agent, func = LOOPS[loop]
    trace_id = record(agent, func, "What is the weather in Paris?")
    requests, effects = world.count, va.effects()
    result = orp.replay(trace_id, mode="live", approvals=["report_weather"], reason="verify unchanged code")
    unchanged(result)
    assert world.count - requests == 2 and va.effects() - effects == 1
    assert_ids_really_changed(load(trace_id), result.replay)


@pytest.mark.parametrize("mode", ["mock", "deterministic"])
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_mock_and_deterministic_replays_of_an_sdk_tool_loop_are_matched(
    world: FakeLLMServer, loop: str, mode: str
) -> None:
    agent, func = LOOPS[loop]
    trace_id = record(agent, func, "What is the weather in Paris?")
    requests, effects = world.count, va.effects()
    unchanged(orp.replay(trace_id, mode=mode))
    assert (world.count, va.effects()) == (requests, effects)


@pytest.mark.parametrize("mode", ["mock", "deterministic", "live"])
def test_langgraph_react_agent_without_an_agent_decorator_is_matched(world: FakeLLMServer, mode: str) -> None:
    va.langgraph_run({"messages": [{"role": "user", "content": "What is the weather in Paris?"}]})
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="LangGraph", kind="original")
    original = load(summary.trace_id)
    assert [s.kind for s in original.steps] == ["model", "tool", "model"]
    requests, effects = world.count, va.effects()
    live = mode == "live"
    result = orp.replay(
        summary.trace_id,
        mode=mode,
        entrypoint="volatile_agents:langgraph_run",
        approvals=["get_weather"] if live else (),
        reason="verify" if live else None,
    )
    unchanged(result)
    assert (world.count - requests, va.effects() - effects) == ((2, 1) if live else (0, 0))
    # the graph's state holds LangChain message ids (uuid4s, lc_run--…) and OpenAI ids: different every run
    output = json.dumps(result.replay.snapshots["output"] if result.replay else None)
    assert output != json.dumps(original.snapshots["output"])
    if live:
        assert_ids_really_changed(original, result.replay)


def test_mock_replay_of_a_call_whose_output_is_an_sdk_object_is_matched(world: FakeLLMServer) -> None:
    """A model call made outside any run is recorded with its answer's JSON form as output; its replay through
    ``--app`` returns the ChatCompletion object itself. Both are the same answer."""
    va.openai_ask([{"role": "user", "content": "hello"}])
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="openai.chat.completions", kind="original")
    requests = world.count
    result = orp.replay(summary.trace_id, mode="mock", entrypoint="volatile_agents:openai_ask")
    unchanged(result)
    assert world.count == requests
    replayed = result.replay.snapshots["output"]["structured"] if result.replay else None
    assert isinstance(replayed, dict) and replayed.get("$type") == "pydantic"
    assert "$type" not in load(summary.trace_id).snapshots["output"]["structured"]


def test_two_recordings_of_the_same_code_diff_as_unchanged(world: FakeLLMServer) -> None:
    first = record("volatile-openai-loop", va.openai_loop, "What is the weather in Paris?")
    second = record("volatile-openai-loop", va.openai_loop, "What is the weather in Paris?")
    assert first != second
    diff = orp.diff(first, second)
    assert not diff.sections["output"].changed, diff.sections["output"].details
    assert not diff.sections["tools"].changed, diff.sections["tools"].details
    va.KNOBS["suffix"] = " and hot"
    third = record("volatile-openai-loop", va.openai_loop, "What is the weather in Paris?")
    changed = orp.diff(first, third)
    assert changed.sections["output"].changed and changed.sections["tools"].changed


# ------------------------------------------------------------------------------------ real changes


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t.get("name") or t["function"]["name"] for t in request["tools"]]


@pytest.mark.parametrize("mode", ["mock", "deterministic"])
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_the_same_tools_offered_in_another_order_are_the_same_request(
    world: FakeLLMServer, loop: str, mode: str
) -> None:
    """The APIs give a request's tool list no order, and code that builds it from a set or dict changes it from
    one process to the next: the replay sends the tools reversed and still matches."""
    agent, func = LOOPS[loop]
    trace_id = record(agent, func, "What is the weather in Paris?")
    requests, effects = world.count, va.effects()
    va.KNOBS["tool_order"] = "reversed"
    result = orp.replay(trace_id, mode=mode)
    unchanged(result)
    assert (world.count, va.effects()) == (requests, effects)
    assert result.replay is not None
    recorded, replayed = model_requests(load(trace_id))[0], model_requests(result.replay)[0]
    assert tool_names(recorded) == ["report_weather", "local_time"]
    assert tool_names(replayed) == ["local_time", "report_weather"]  # the order really changed


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_changed_tool_definition_still_diverges_whatever_the_order(world: FakeLLMServer, loop: str) -> None:
    agent, func = LOOPS[loop]
    trace_id = record(agent, func, "What is the weather in Paris?")
    va.KNOBS.update(tool_order="reversed", tool_note=" Metric units.")
    result = orp.replay(trace_id, mode="deterministic")
    assert result.outcome == "diverged"
    first = result.first_divergence
    assert first is not None and (first.kind, first.step_index) == ("request", 0)
    assert first.diff is not None
    changes = [line for line in first.diff.splitlines() if line[:1] in "+-" and line[:3] not in ("---", "+++")]
    assert len(changes) == 2 and all("log the report." in c or "Weather of a city." in c for c in changes), changes
    assert changes[1].rstrip('",').endswith("Metric units."), changes


@pytest.mark.parametrize("mode", ["deterministic", "live"])
def test_changed_system_prompt_diverges_at_the_first_model_step_with_a_readable_diff(
    world: FakeLLMServer, mode: str
) -> None:
    trace_id = record("volatile-openai-loop", va.openai_loop, "What is the weather in Paris?")
    va.KNOBS["prompt"] = "You are a pirate. Answer in one line."
    result = orp.replay(trace_id, mode=mode, approvals=["report_weather"], reason="new prompt")
    assert result.outcome == "diverged"
    first = result.first_divergence
    assert first is not None and first.kind == "request" and first.step_index == 0
    assert first.diff is not None
    assert '-      "content": "You are a weather assistant. Answer in one line.",' in first.diff
    assert '+      "content": "You are a pirate. Answer in one line.",' in first.diff
    if mode == "live":  # every request carries the prompt; the ids in the second one are not a change
        assert [d.step_index for d in result.divergences if d.kind == "request"] == [0, 2]
    for d in (d for d in result.divergences if d.kind == "request"):
        assert d.diff is not None and not RANDOM_ID.search(d.diff), d.diff
        changes = [line for line in d.diff.splitlines() if line[:1] in "+-" and line[:3] not in ("---", "+++")]
        assert changes == [
            '-      "content": "You are a weather assistant. Answer in one line.",',
            '+      "content": "You are a pirate. Answer in one line.",',
        ], d.diff


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_changed_tool_result_diverges_at_the_next_model_step(world: FakeLLMServer, loop: str) -> None:
    agent, func = LOOPS[loop]
    trace_id = record(agent, func, "What is the weather in Paris?")
    va.KNOBS["suffix"] = " and hot"
    result = orp.replay(trace_id, mode="live", approvals=["report_weather"], reason="new tool")
    assert result.outcome == "diverged"
    first = result.first_divergence
    assert first is not None and first.kind == "request" and first.step_index == 2, first
    assert first.diff is not None and "It is sunny in Paris and hot" in first.diff
    assert "<id:1>" in first.diff and not RANDOM_ID.search(first.diff), first.diff
    changed = [c["name"] for c in result.diff.sections["tools"].details["changed"]] if result.diff else []
    assert changed == ["report_weather"]


def test_a_tool_result_answering_another_call_is_still_a_change() -> None:
    """Placeholders keep the structure: the tool message must refer to the call the model made."""

    def conversation(call: str, answered: str) -> dict[str, Any]:
        return {
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": call, "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                },
                {"role": "tool", "tool_call_id": answered, "content": "42"},
            ]
        }

    recorded = conversation("call_" + "a" * 24, "call_" + "a" * 24)
    assert volatile.same(recorded, conversation("call_" + "b" * 24, "call_" + "b" * 24))
    assert not volatile.same(recorded, conversation("call_" + "b" * 24, "call_" + "c" * 24))


def test_ids_that_do_not_look_volatile_are_compared() -> None:
    assert not volatile.same({"order": {"id": "A17"}}, {"order": {"id": "A18"}})
    assert not volatile.same({"id": 17}, {"id": 18})
    assert not volatile.same({"created": "yesterday"}, {"created": "today"})
    assert volatile.same({"id": "chatcmpl-1", "created": 1}, {"id": "chatcmpl-2", "created": 2})


def test_only_lists_of_tool_definitions_lose_their_order() -> None:
    a, b = {"name": "a", "description": "A"}, {"type": "function", "function": {"name": "b"}}
    assert volatile.same({"tools": [a, b]}, {"tools": [b, a]})
    assert volatile.same({"functions": [a, b]}, {"functions": [b, a]})
    assert not volatile.same({"tools": [a, b]}, {"tools": [b, {**a, "description": "A!"}]})
    assert not volatile.same({"tools": [a, b]}, {"tools": [b]})
    # a list of anything else keeps its order, under the same key or any other
    assert not volatile.same({"tools": ["saw", "hammer"]}, {"tools": ["hammer", "saw"]})
    assert not volatile.same({"tools": [a, "saw"]}, {"tools": ["saw", a]})
    assert not volatile.same({"messages": [a, b]}, {"messages": [b, a]})


# ------------------------------------------------------------------------------- user-given rules


@pytest.mark.parametrize("how", ["environment", "argument"])
def test_user_keys_extend_the_rules(world: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """An agent that sends its own random reference with every request (``user=``) diverges live until the
    key is named volatile, through ``OTEL_REPLAY_VOLATILE_KEYS`` or ``replay(volatile_keys=...)``."""
    trace_id = record("volatile-openai-tagged", va.openai_loop_tagged, "What is the weather in Paris?")
    before = orp.replay(trace_id, mode="live", approvals=["report_weather:*"], reason="without the key")
    assert before.outcome == "diverged"
    assert [d.step_index for d in before.divergences if d.kind == "request"] == [0, 2]
    kwargs: dict[str, Any] = {}
    if how == "environment":
        monkeypatch.setenv(volatile.OTEL_REPLAY_VOLATILE_KEYS, " user , other_ref")
    else:
        kwargs["volatile_keys"] = ["user"]
    after = orp.replay(trace_id, mode="live", approvals=["report_weather:*"], reason="with the key", **kwargs)
    unchanged(after)


# ------------------------------------------------------------------------------------------- CLI


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p)}
    for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        env.pop(name, None)
    if runs_in_process(args):  # the same main(), without a second of interpreter start-up
        return run_cli(args, env=env, cwd=TESTS_DIR)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=TESTS_DIR,
        timeout=180,
    )


def test_cli_live_replay_of_unchanged_code_is_matched(world: FakeLLMServer) -> None:
    trace_id = record("volatile-openai-loop", va.openai_loop, "What is the weather in Paris?")
    requests = world.count
    out = cli("replay", trace_id, "--mode", "live", "--approve", "report_weather", "--reason", "verify", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout[out.stdout.index("{") :])
    assert result["outcome"] == "matched", result["divergences"]
    assert not result["diff"]["output"]["changed"]
    assert world.count - requests == 2
    out = cli("replay", trace_id, "--mode", "deterministic", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout[out.stdout.index("{") :])["outcome"] == "matched"
    assert world.count - requests == 2


def test_zero_code_langgraph_run_replays_matched_through_the_cli(world: FakeLLMServer, tmp_path: Path) -> None:
    """Recorded by ``opentelemetry-instrument`` with no line of otel-replay in the program, replayed by the CLI
    with ``--app``: deterministic sends nothing, live sends its two requests (fresh ids) and is matched."""
    import shutil

    launcher = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
    assert launcher, "no opentelemetry-instrument next to this Python (opentelemetry-instrumentation, [test] extra)"
    script = tmp_path / "weather.py"
    script.write_text(
        "import volatile_agents as va\n"
        "va.langgraph_run({'messages': [{'role': 'user', 'content': 'What is the weather in Paris?'}]})\n"
    )
    env = {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai_v2,openai",
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
    }
    recorded = subprocess.run(
        [launcher, sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=TESTS_DIR, timeout=180
    )
    assert recorded.returncode == 0, recorded.stderr
    with Store.open() as store:
        (summary,) = store.runs(agent="LangGraph", kind="original")
    requests, effects = world.count, va.effects()
    app = ("--app", "volatile_agents:langgraph_run", "--json")
    out = cli("replay", summary.trace_id, "--mode", "deterministic", *app)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout[out.stdout.index("{") :])["outcome"] == "matched"
    assert (world.count, va.effects()) == (requests, effects)
    out = cli("replay", summary.trace_id, "--mode", "live", "--approve", "get_weather", "--reason", "verify", *app)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout[out.stdout.index("{") :])
    assert result["outcome"] == "matched", result["divergences"]
    assert not result["diff"]["output"]["changed"] and not result["diff"]["state"]["changed"]
    assert (world.count - requests, va.effects() - effects) == (2, 1)


def test_request_hash_is_still_the_hash_of_what_was_sent(world: FakeLLMServer) -> None:
    """The recorded hash is not taken over placeholders: two recordings of the same code have different
    request hashes at the second model step (their conversations carry different ids)."""
    first = load(record("volatile-openai-loop", va.openai_loop, "What is the weather in Paris?"))
    second = load(record("volatile-openai-loop", va.openai_loop, "What is the weather in Paris?"))
    hashes = [
        [s.attributes[semconv.MODEL_REQUEST_HASH] for s in run.steps if s.kind == "model"] for run in (first, second)
    ]
    assert hashes[0][0] == hashes[1][0] and hashes[0][1] != hashes[1][1]


def test_report_of_a_live_replay_pairs_every_step_as_the_same(world: FakeLLMServer) -> None:
    """The side-by-side report compares each step's request and response: fresh ids are not a change there
    either, a changed tool result is."""
    from otel_replay.report import replay_report

    trace_id = record("volatile-openai-loop", va.openai_loop, "What is the weather in Paris?")
    original = load(trace_id)
    result = orp.replay(trace_id, mode="live", approvals=["report_weather"], reason="verify")
    assert result.outcome == "matched"
    rows = re.findall(r'class="sbs-row ([a-z]+)[" ]', replay_report(result, original))  # step rows
    assert len(original.steps) == 3 and rows == ["same"] * 3
    va.KNOBS["suffix"] = " and hot"
    changed = orp.replay(trace_id, mode="live", approvals=["report_weather"], reason="new tool")
    rows = re.findall(r'class="sbs-row ([a-z]+)[" ]', replay_report(changed, original))
    assert rows == ["same", "changed", "changed"]


def test_bad_rules_are_refused_before_anything_runs(world: FakeLLMServer) -> None:
    trace_id = record("volatile-openai-loop", va.openai_loop, "What is the weather in Paris?")
    requests, effects = world.count, va.effects()
    with pytest.raises(TypeError, match="volatile_keys must be key names or VolatileRule objects"):
        orp.replay(trace_id, mode="live", approvals=["report_weather"], reason="r", volatile_keys=[3])
    with pytest.raises(ValueError, match="not a regular expression"):
        volatile.VolatileRule(key="ref", pattern="(")
    with pytest.raises(ValueError, match="needs a key, a pattern or both"):
        volatile.VolatileRule()
    assert (world.count, va.effects()) == (requests, effects)
    with Store.open() as store:
        assert [r.kind for r in store.runs(agent="volatile-openai-loop")] == ["original"]
