"""A decorator removed: a write tool recorded with ``@orp.tool(risk="write")`` whose decorator line is then
deleted from the code, in a Pydantic AI, a LangChain and an OpenAI Agents SDK agent, and a smolagents ``CodeAgent``
whose model writes code that calls the tool (no tool call for the replay to follow).

Undecorated, the tool is no step: the replay cannot see, count or refuse its call. The recorded risk must still
hold: a live replay without ``--approve book_table`` is refused before anything runs; one given the approval,
during which the tool runs undeclared, ends refused (exit 2), never ``missing_call`` or ``matched``; ``dry``
names the tool the current code no longer declares.

The agents (``adv_undeclared_agents.py``) are written into a project folder the test owns, recorded as
programs of their own against the local fake OpenAI server, and replayed through the CLI from that folder, as
a user runs them. ``book_table`` appends a line to a file under the test's tmp path: the test counts real
bookings there, and the requests the fake server received.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import adv_undeclared_agents as agents
import fork_server
import pytest
from fake_llm_servers import FakeLLMServer

FRAMEWORKS = ("pydantic_ai", "langchain", "openai_agents", "smolagents")
QUESTION = "Book a table at Chez Paul"
BOOKED = "booked Chez Paul"


@dataclass
class Project:
    """The test's project folder, its otel-replay home, the bookings file, the fake server and the environment."""

    folder: Path
    home: Path
    bookings: Path
    server: FakeLLMServer
    env: dict[str, str]

    def booked(self) -> list[str]:
        """Lines ``book_table`` wrote: one per real booking."""
        return self.bookings.read_text(encoding="utf-8").splitlines() if self.bookings.exists() else []

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return fork_server.run(
            [sys.executable, *argv], capture_output=True, text=True, env=self.env, cwd=self.folder, timeout=300
        )

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("-m", "otel_replay.cli", *args)

    def cli_json(self, *args: str, code: int) -> dict[str, Any]:
        out = self.cli(*args, "--json")
        assert out.returncode == code, f"exit {out.returncode}\nstdout: {out.stdout}\nstderr: {out.stderr}"
        assert "Traceback" not in out.stderr, out.stderr
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    def record(self, framework: str) -> str:
        """Write the agent with its decorator, run it once for real, return the trace id of its run."""
        module = agents.write_agent(self.folder, framework, decorated=True)
        out = self.run("record.py", module, QUESTION)
        assert out.returncode == 0, out.stderr
        assert "booked a table at Chez Paul" in out.stdout
        runs = json.loads(self.cli("runs", "--json").stdout)
        (run,) = [r for r in runs if r["kind"] == "original"]
        return str(run["trace_id"])


@pytest.fixture
def project(home: Path, tmp_path: Path) -> Iterator[Project]:
    folder = tmp_path / "project"
    folder.mkdir()
    bookings = tmp_path / "bookings.txt"
    with FakeLLMServer(volatile_ids=True, tool_args_for={"book_table": {"restaurant": "Chez Paul"}}) as server:
        server.chat_texts[f"New task:\n{QUESTION}"] = [agents.CODE_ANSWER]  # the smolagents CodeAgent's task only
        env = {
            **os.environ,
            "OTEL_REPLAY_HOME": str(home),
            agents.BOOKINGS_ENV: str(bookings),
            "OPENAI_BASE_URL": server.openai_url,
            "OPENAI_API_KEY": "sk-test-" + "1" * 32,
            "COLUMNS": "400",
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
        }
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            env.pop(name, None)
        env.pop("OTEL_REPLAY_TRUSTED_MODULES", None)  # the agent is trusted as the project's code, nothing else
        yield Project(folder=folder, home=home, bookings=bookings, server=server, env=env)


def kinds(data: dict[str, Any]) -> set[str]:
    return {d["kind"] for d in data["divergences"]}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_removed_decorator_is_refused_before_anything_runs(project: Project, framework: str) -> None:
    trace_id = project.record(framework)
    assert project.booked() == [BOOKED]
    declared = project.cli_json("replay", trace_id, "--mode", "dry", code=0)
    assert declared["unfirewalled_risky"] == []
    assert declared["readiness"]["modes"]["live"]["needs_approval"] == ["book_table"]
    assert declared["readiness"]["risky_tools"]["book_table"]["declared_now"] is True

    agents.write_agent(project.folder, framework, decorated=False)  # the decorator line is deleted

    # dry: the current code no longer firewalls the recorded write tool, and a live replay is not ready.
    dry = project.cli_json("replay", trace_id, "--mode", "dry", code=0)
    assert dry["unfirewalled_risky"] == ["book_table"]
    assert dry["readiness"]["risky_tools"]["book_table"] == {"risk": "write", "step_index": 1, "declared_now": False}
    assert "live" not in dry["ready_modes"]
    text = project.cli("replay", trace_id, "--mode", "dry")
    assert text.returncode == 0, text.stderr
    assert "not firewalled by the current code: book_table (recorded risk write)" in text.stdout

    # live, no approval: refused before the agent is imported; no booking, no model request.
    requests = project.server.count
    refused = project.cli("replay", trace_id, "--mode", "live", "--reason", "check the booking flow")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = refused.stdout.splitlines()
    (refusal,) = [line for line in lines if line.startswith("refused:")]
    assert "'book_table'" in refusal and "risk write" in refusal and "--approve book_table" in refusal
    assert (
        "to approve it, replay again with --approve book_table (the replay was refused before the agent started; "
        "nothing ran)"
    ) in lines
    data = project.cli_json("replay", trace_id, "--mode", "live", "--reason", "check the booking flow", code=2)
    assert data["outcome"] == "refused" and data["refused_before_start"] is True
    assert data["refused_call"] == {
        "kind": "tool",
        "name": "book_table",
        "step_index": 1,
        "risk": "write",
        "approve_with": "--approve book_table",
    }
    assert "missing_call" not in kinds(data)
    assert project.booked() == [BOOKED], "the undeclared write tool ran without an approval"
    assert project.server.count == requests, "a refused replay sent a model request"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_removed_decorator_that_runs_with_an_approval_is_a_refusal_not_a_missing_call(
    project: Project, framework: str
) -> None:
    trace_id = project.record(framework)
    agents.write_agent(project.folder, framework, decorated=False)
    requests = project.server.count
    args = ("replay", trace_id, "--mode", "live", "--reason", "check the booking flow", "--approve", "book_table")
    data = project.cli_json(*args, code=2)
    # The approved tool ran, undeclared, outside the firewall: the replay could not count it, and says so.
    assert project.booked() == [BOOKED, BOOKED]
    assert data["outcome"] == "refused" and data["refused_before_start"] is False
    assert data["unfirewalled_risky"] == ["book_table"]
    assert "no longer declares" in data["refusal"] and '@otel_replay.tool(risk="write")' in data["refusal"]
    assert data["refused_call"]["name"] == "book_table" and data["refused_call"]["approve_with"] is None
    assert "undeclared_tool" in kinds(data) and "missing_call" not in kinds(data)
    # Stopped before the model got the undeclared tool's result back: one model request, not two.
    assert project.server.count == requests + 1

    # With the decorator back, the same approved live replay runs the tool inside the firewall and matches.
    agents.write_agent(project.folder, framework, decorated=True)
    again = project.cli_json(*args, code=0)
    assert again["outcome"] == "matched" and again["unfirewalled_risky"] == []
    assert again["executions"] == {"book_table": 1}
    assert project.booked() == [BOOKED] * 3


def test_from_step_needs_no_approval_for_earlier_steps_but_an_undeclared_tool_there_still_refuses(
    project: Project,
) -> None:
    # --from-step 2: the booking (step 1) is answered from the recording, so it needs no approval ...
    trace_id = project.record("langchain")
    args = ("replay", trace_id, "--mode", "live", "--reason", "re-run the last answer", "--from-step", "2")
    data = project.cli_json(*args, code=0)
    assert data["outcome"] == "matched" and data["refused_before_start"] is False
    assert project.booked() == [BOOKED], "a step before --from-step ran for real"
    # ... unless the current code no longer declares it: then no recording can answer it, the agent's loop runs
    # it for real, and the replay ends refused instead of matched.
    agents.write_agent(project.folder, "langchain", decorated=False)
    undeclared = project.cli_json(*args, code=2)
    assert project.booked() == [BOOKED, BOOKED]
    assert undeclared["outcome"] == "refused" and undeclared["unfirewalled_risky"] == ["book_table"]
    assert "missing_call" not in kinds(undeclared)
