"""Adversarial: the code a code agent's model wrote is hostile text, read back from the store (dry, the replay's
firewall) and from live answers (a live replay's watch).

otel-replay reads the code blobs of a model answer to find the tools that code calls (parsed with ``ast``, never
run). A model, or anyone who can write spans, controls that text: code that Python's parser cannot take
(operators nested until its recursion or memory gives out, a megabyte-long blob) must not crash ``dry``, a replay
or the watch, and nothing in it may ever run. The agent is a real smolagents ``CodeAgent`` recorded against the
fake OpenAI server, with only the ``openai`` client instrumented (recognised as a code agent by its prompt); its
answer runs a harmless first ``<code>`` block (the one smolagents executes) and carries the hostile code in a
second, fenced one, which only otel-replay's reader looks at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm_servers import FakeLLMServer
from smolagents import CodeAgent, OpenAIServerModel, Tool

import otel_replay as orp
from otel_replay.instrumentation import uninstrument
from otel_replay.replay.matching.toolcalls import code_calls
from otel_replay.replay.safety.riskytools import UndeclaredWatch
from otel_replay.storage.store import Store

SERVER: dict[str, FakeLLMServer] = {}
MARKER_ENV = "ADV_CODE_BLOB_MARKER"
HOSTILE = {
    "unary chain": "-" * 200_000 + "get_weather(city='x')",
    "attribute chain": "a" + ".b" * 50_000 + "\nget_weather(city='x')",
    "a megabyte": "x = 1\n" * 200_000 + "get_weather(city='x')",
    "parentheses": "(" * 5_000 + "get_weather(city='x')" + ")" * 5_000,
}


class WeatherTool(Tool):
    name = "get_weather"
    description = "The weather in a city."
    inputs = {"city": {"type": "string", "description": "The city."}}  # noqa: RUF012 - smolagents' own style
    output_type = "string"

    def forward(self, city: str) -> str:
        return f"sunny in {city}"


@orp.agent("blob-agent")
def ask(task: str) -> Any:
    model = OpenAIServerModel(model_id="gpt-fake", api_base=SERVER["fake"].openai_url, api_key="sk-test-" + "5" * 32)
    return CodeAgent(tools=[WeatherTool()], model=model, max_steps=2, verbosity_level=0).run(task)


def answer(hostile: str, marker: Path) -> str:
    """A code answer: the block smolagents runs, then a fenced block with the hostile code (and a write that would
    leave ``marker`` if anything ran it)."""
    return (
        "Thought: done.\n<code>\nfinal_answer('done')\n</code>\n"
        f"```py\nopen({str(marker)!r}, 'w').write('ran')\n{hostile}\n```"
    )


@pytest.fixture
def recorded(home: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, Path]]:
    marker = tmp_path / "ran.txt"
    hostile = HOSTILE[request.param]
    with FakeLLMServer() as server:
        server.chat_texts["Hostile"] = [answer(hostile, marker)]
        SERVER["fake"] = server
        orp.instrument("openai")
        try:
            assert ask("Hostile code") == "done"
            orp.flush()
            with Store.open() as store:
                trace_id = store.runs(agent="blob-agent", kind="original")[0].trace_id
            yield trace_id, marker
        finally:
            uninstrument("openai")


@pytest.mark.parametrize("recorded", list(HOSTILE), indirect=True)
def test_hostile_code_in_a_recorded_answer_never_crashes_dry_or_a_replay_and_never_runs(
    recorded: tuple[str, Path], home: Path
) -> None:
    trace_id, marker = recorded
    dry = orp.replay(trace_id, mode="dry")
    assert dry.readiness is not None and dry.readiness["executes_code"] is True
    assert dry.not_firewalled == ("get_weather",)  # found by searching the text the parser could not take
    mock = orp.replay(trace_id, mode="mock", entrypoint=f"{__name__}:ask")
    assert mock.agent_error is None and mock.outcome in ("matched", "diverged")
    # through the CLI as a user runs it: one JSON document, no traceback
    env = {**os.environ, "OTEL_REPLAY_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "replay", trace_id, "--mode", "dry", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["not_firewalled"] == ["get_weather"]
    assert not marker.exists(), "code a model wrote was run by otel-replay"


@pytest.mark.parametrize("name", list(HOSTILE))
def test_the_live_watch_reads_hostile_code_without_raising(name: str) -> None:
    """A live model's answer is just as hostile: the watch still counts the risky tool the code calls."""
    from types import SimpleNamespace

    from otel_replay import semconv

    step = SimpleNamespace(index=1, kind="tool", name="get_weather", attributes={semconv.TOOL_RISK: "write"})
    run = SimpleNamespace(
        steps=[step],
        attributes={semconv.RUN_EXECUTES_CODE: True, semconv.RUN_CODE_TOOLS: '["get_weather"]'},
    )
    watch = UndeclaredWatch(run)  # type: ignore[arg-type]
    text = f"<code>\n{HOSTILE[name]}\n</code>"
    watch.answered_text(json.dumps({"choices": [{"message": {"content": text}}]}))
    assert [t.name for t in watch.unanswered()] == ["get_weather"]
    assert code_calls({"content": text}, {"get_weather"}) == ["get_weather"]
