"""One agent of each real-world shape end to end, every command a fresh process, as a user runs them: the agent
programs of ``tests/realworld/`` (copies of each framework's own doc examples, recorded with the one line the
docs ask for) copied into the user's project folder and started as ``python agent.py`` against a local fake
OpenAI-compatible server, then the installed ``otel-replay``: ``runs`` → ``show`` → replay in every mode (dry,
mock, deterministic, whatif, live) → ``diff`` → ``case export`` → ``case run`` and the pytest plugin → ``lab``.

Each agent has one real side effect (its write tool appends a line to a file in ``RW_OUTBOX``, outside the
temp folder): the recording and the approved live replay write one line each, nothing else writes any. The
server counts the requests that reach it: offline replays send none, whatif and live as many as recorded.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, User, trace_ids
from fake_llm_servers import FakeLLMServer

REALWORLD = ROOT / "tests" / "realworld"


@dataclass(frozen=True)
class Shape:
    """One agent program and what its user sees."""

    script: str
    app: str
    """``--app`` of its replays, cases and lab (the docs' entrypoint for the framework)."""
    agent: str
    """The run's agent name."""
    tool: str
    """Its write tool: asked for approval by live replays."""
    printed: str
    """What the program prints."""
    env: dict[str, str] = field(default_factory=dict)
    server: Callable[[FakeLLMServer], None] = lambda server: None
    """How the fake server answers this agent."""
    prepare: Callable[[Path], dict[str, str]] = lambda folder: {}
    """Files the program needs in the project folder; returns environment variables pointing at them."""
    whatif: tuple[str, ...] = ()
    """What a whatif replay needs besides ``--reason``: it runs under the audit hooks only (its model calls are
    real), where a database the program opens at import is refused unless the replay allows that one file."""


def _chinook(folder: Path) -> dict[str, str]:
    """The cookbook's music catalogue, as a user's SQLite database."""
    db = folder / "chinook.db"
    with sqlite3.connect(db) as conn:
        conn.executescript("""
            CREATE TABLE Album (AlbumId INTEGER PRIMARY KEY, Title TEXT);
            CREATE TABLE Track (TrackId INTEGER PRIMARY KEY, Name TEXT, AlbumId INTEGER);
            INSERT INTO Album VALUES (1, 'For Those About To Rock We Salute You'), (2, 'Balls to the Wall');
            INSERT INTO Track VALUES (1, 'For Those About To Rock', 1), (2, 'Put The Finger On You', 1),
                                     (3, 'Balls to the Wall', 2);
        """)
    conn.close()
    return {"RW_DB": str(db)}


QUERY = "SELECT Album.Title, COUNT(*) FROM Track JOIN Album USING (AlbumId) GROUP BY AlbumId ORDER BY 2 DESC LIMIT 1"
CODE = (
    "Thought: I get the weather in Paris, then text it to Alice.\n<code>\n"
    'weather = get_weather(city="Paris")\nsent = send_message(to="Alice", text=weather)\nfinal_answer(sent)\n</code>'
)


def _tool_args(name: str, args: dict[str, Any]) -> Callable[[FakeLLMServer], None]:
    def configure(server: FakeLLMServer) -> None:
        server.tool_args_for[name] = args

    return configure


def _code(server: FakeLLMServer) -> None:
    server.chat_texts["Text Alice"] = [CODE]


SHAPES = {
    "langgraph": Shape(
        "rw_langgraph_agent.py", "rw_langgraph_agent:agent.invoke", "LangGraph", "send_postcard", "postcard sent"
    ),
    "agent-executor": Shape(
        "rw_agent_executor_agent.py",
        "rw_agent_executor_agent:agent_executor.invoke",
        "AgentExecutor",
        "send_postcard",
        "postcard sent",
    ),
    "openai-cookbook": Shape(
        "rw_cookbook_sql_agent.py",
        "rw_cookbook_sql_agent:main",
        "cookbook-sql-agent",
        "ask_database",
        "For Those About To Rock We Salute You",
        server=_tool_args("ask_database", {"query": QUERY}),
        prepare=_chinook,
        whatif=("--allow-path", "chinook.db"),
    ),
    "openai-agents": Shape(
        "rw_openai_agents_agent.py",
        "rw_openai_agents_agent:main",
        "Hello world",
        "send_forecast",
        "forecast sent for Tokyo",
        env={"OTEL_REPLAY_OPENAI_AGENTS_TRACING": "replace", "OPENAI_AGENTS_DONT_LOG_MODEL_DATA": "1"},
        server=_tool_args("send_forecast", {"city": "Tokyo"}),
    ),
    "llamaindex": Shape(
        "rw_llamaindex_agent.py",
        "rw_llamaindex_agent:main",
        "Agent",
        "send_forecast",
        "forecast sent for Tokyo",
        server=_tool_args("send_forecast", {"city": "Tokyo"}),
    ),
    "smolagents": Shape(
        "rw_smolagents_agent.py",
        "rw_smolagents_agent:main",
        "CodeAgent",
        "send_message",
        "message sent to Alice",
        server=_code,
    ),
}


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    """The model: a local OpenAI-compatible server that hands out fresh ids with every answer, as the API does."""
    with FakeLLMServer(volatile_ids=True) as fake:
        yield fake


@pytest.mark.parametrize("name", list(SHAPES))
def test_record_then_every_stage_in_fresh_processes(name: str, user: User, server: FakeLLMServer) -> None:
    shape = SHAPES[name]
    shape.server(server)
    shutil.copy(REALWORLD / shape.script, user.cwd / shape.script)
    outbox = user.home / "outbox"  # outside the temp folder, as a real side effect is
    outbox.mkdir()
    user.env.update(
        OPENAI_BASE_URL=server.openai_url,
        OPENAI_API_KEY="sk-e2e-" + "7" * 32,
        RW_OUTBOX=str(outbox),
        **shape.env,
        **shape.prepare(user.cwd),
    )

    def effects() -> int:
        return sum(len(f.read_text().splitlines()) for f in outbox.iterdir())

    out = user.run("python", shape.script)
    assert shape.printed in out.stdout, out.stdout
    recorded_requests = server.count
    assert effects() == 1 and recorded_requests >= 1

    (trace_id,) = trace_ids(user.json("otel-replay", "runs"), kind="original")  # one invocation, one run
    run = user.json("otel-replay", "show", trace_id)
    assert run["agent"] == shape.agent and run["status"] == "ok", run
    kinds = [(s["kind"], s["name"]) for s in run["steps"]]
    assert ("tool", shape.tool) in kinds and kinds[0][0] == "model", kinds

    def replay(mode: str, *args: str, ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
        return user.json("otel-replay", "replay", trace_id, "--mode", mode, "--app", shape.app, *args, ok=ok)

    readiness = replay("dry")["readiness"]
    assert readiness["modes"]["mock"]["ready"] and readiness["modes"]["deterministic"]["ready"], readiness
    assert shape.tool in readiness["modes"]["live"]["needs_approval"], readiness
    replays = {mode: replay(mode) for mode in ("mock", "deterministic")}
    for result in replays.values():
        assert result["outcome"] == "matched", result["divergences"]
    assert (server.count, effects()) == (recorded_requests, 1)  # offline: no request, no effect
    whatif = replay("whatif", "--reason", "e2e: the model again, tools from the recording", *shape.whatif)
    assert whatif["outcome"] == "matched", whatif["divergences"]
    assert (server.count, effects()) == (2 * recorded_requests, 1)
    refused = replay("live", "--reason", "e2e", ok=(2,))
    assert refused["refusal"] and shape.tool in refused["refusal"], refused
    live = replay("live", "--reason", "e2e", "--approve", shape.tool)
    assert live["outcome"] == "matched", live["divergences"]
    assert (server.count, effects()) == (3 * recorded_requests, 2)  # the approved tool ran, once

    # exit 1 when any section changed: latency may (wall time; a replay answered from the recording is faster)
    diff = user.json("otel-replay", "diff", trace_id, replays["deterministic"]["replay_trace_id"], ok=(0, 1))
    changed = {section for section, s in diff["sections"].items() if s["changed"]} - {"latency"}
    assert changed == set(), diff["sections"]

    case = user.cwd / "cases" / f"{name}.case.json"
    user.run(
        "otel-replay",
        "case",
        "export",
        trace_id,
        "-o",
        str(case),
        "--expect",
        "output",
        "--expect",
        "tools",
        "--app",
        shape.app,
    )
    ran = user.json("otel-replay", "case", "run", str(case.parent), "--app", shape.app)
    assert (ran["passed"], ran["failed"], ran["error"]) == (1, 0, 0), ran
    tested = user.run(
        "python",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--otel-replay-cases",
        "cases",
        "--otel-replay-app",
        shape.app,
    )
    assert re.search(r"\b1 passed\b", tested.stdout), tested.stdout
    lab = user.json("otel-replay", "lab", "--trace-id", trace_id, "--app", shape.app, "--fail-if", "diverged > 0")
    totals = lab["summary"]["totals"]
    assert (totals["replays"], totals["matched"]) == (1, 1), totals
    assert (server.count, effects()) == (3 * recorded_requests, 2)  # cases, pytest and the lab: offline
