"""The OpenAI cookbook's function-calling SQL agent (``rw_cookbook_sql_agent.py``) recorded and replayed as its
users would: ``orp.instrument()`` plus ``@orp.agent`` on the outer call (or its ``with`` form), also under
``opentelemetry-instrument``, then every replay mode through the CLI while the fake server counts requests and
the outbox counts the tool's real side effects.

The replays run with their own temp folder (``TMPDIR``): the side-effect guard lets a replay write under the
system temp folder, and the test's outbox and database live in pytest's one; with a separate temp folder the
outbox is an ordinary folder of the machine, as a real audit log would be.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import Recordings

AGENT = "rw_cookbook_sql_agent.py"
QUERY = "SELECT Album.Title, COUNT(*) FROM Track JOIN Album USING (AlbumId) GROUP BY AlbumId ORDER BY 2 DESC LIMIT 1"
SYSTEM_PROMPT = "Answer user questions by generating SQL queries against the Chinook Music Database."


def _chinook(path: Path) -> None:
    """A small Chinook-like catalogue: artists, albums, tracks."""
    with sqlite3.connect(path) as conn:
        conn.executescript("""
            CREATE TABLE Artist (ArtistId INTEGER PRIMARY KEY, Name TEXT);
            CREATE TABLE Album (AlbumId INTEGER PRIMARY KEY, Title TEXT, ArtistId INTEGER);
            CREATE TABLE Track (TrackId INTEGER PRIMARY KEY, Name TEXT, AlbumId INTEGER, Milliseconds INTEGER);
            INSERT INTO Artist VALUES (1, 'AC/DC'), (2, 'Accept');
            INSERT INTO Album VALUES (1, 'For Those About To Rock We Salute You', 1), (2, 'Balls to the Wall', 2);
            INSERT INTO Track VALUES (1, 'For Those About To Rock', 1, 343719), (2, 'Put The Finger On You', 1, 205662),
                                     (3, 'Balls to the Wall', 2, 342562);
        """)
    conn.close()


@pytest.fixture
def cookbook(shared_world: Any, tmp_path: Path) -> Any:
    """The world (on the module's server) with the catalogue in place and the fake model asking
    ``ask_database`` for :data:`QUERY`."""
    world = shared_world
    db = tmp_path / "chinook.db"
    _chinook(db)
    world.env["RW_DB"] = str(db)
    world.server.tool_args_for["ask_database"] = {"query": QUERY}
    replay_tmp = tmp_path / "replay-tmp"
    replay_tmp.mkdir()
    world.env["RW_REPLAY_TMP"] = str(replay_tmp)
    return world


def _replay_env(world: Any, **extra: str) -> dict[str, str]:
    return {"TMPDIR": world.env["RW_REPLAY_TMP"], **extra}


def _record(world: Any, *, zero_code: bool = False, shared: Recordings | None = None, **env: str) -> dict[str, Any]:
    """Run the agent once (or, with ``shared``, copy the module's one recording of the same invocation into this
    test's fresh home); returns the one new run (``show --json``), after checking it is the only one."""
    args = ["--zero-code"] if zero_code else []
    if shared is None:
        before = {r["trace_id"] for r in world.cli_json("runs")}
        out = world.run_agent(AGENT, *args, zero_code=zero_code, extra_env=env)
    else:  # into a fresh home: no run before it
        before, out = set(), shared.world(world, AGENT, *args, zero_code=zero_code, **env).out
    assert out.returncode == 0, out.stderr
    assert "For Those About To Rock We Salute You" in out.stdout
    new = [r for r in world.cli_json("runs") if r["trace_id"] not in before]
    assert len(new) == 1, new  # one run per invocation, not one per model call
    assert new[0]["agent"] == "cookbook-sql-agent"
    return world.cli_json("show", new[0]["trace_id"])


def _replay(world: Any, trace_id: str, mode: str, *args: str, ok: tuple[int, ...] = (0,), **env: str) -> dict[str, Any]:
    return world.cli_json("replay", trace_id, "--mode", mode, *args, ok=ok, extra_env=_replay_env(world, **env))


def _steps(run: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["kind"], s["name"]) for s in run["steps"]]


def _unchanged(result: dict[str, Any]) -> None:
    assert result["outcome"] == "matched", result["divergences"]
    assert result["divergences"] == []
    # Latency is wall time (a replay answered from the recording takes its own time): not compared here.
    changed = {name: s["summary"] for name, s in result["diff"].items() if s["changed"] and name != "latency"}
    assert changed == {}, changed


@pytest.mark.parametrize("form", ["decorator", "with"])
def test_recommended_setup_replays_offline_with_no_side_effect(
    cookbook: Any, recordings: Recordings, form: str
) -> None:
    run = _record(cookbook, shared=recordings, RW_FORM=form)
    assert _steps(run) == [
        ("model", "openai.chat.completions"),
        ("tool", "ask_database"),
        ("model", "openai.chat.completions"),
    ]
    assert cookbook.effects() == [QUERY]
    app = ["--app", "rw_cookbook_sql_agent:answer"] if form == "with" else []
    assert run["entrypoint"] == ("__main__:main" if form == "decorator" else "")

    dry = _replay(cookbook, run["trace_id"], "dry")
    assert dry["not_firewalled"] == []
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["ask_database"]

    requests = cookbook.server.count
    for mode in ("mock", "deterministic"):
        result = _replay(cookbook, run["trace_id"], mode, *app)
        _unchanged(result)
        assert result["not_firewalled"] == []
    assert cookbook.server.count == requests  # no request reached the model
    assert cookbook.effects() == [QUERY]  # the tool's audit log was not written again
    if form == "with":  # a block names no entrypoint: without --app, one error line says what to add
        out = cookbook.cli("replay", run["trace_id"], "--mode", "mock", extra_env=_replay_env(cookbook))
        assert out.returncode == 2
        assert "--app" in out.stderr and "Traceback" not in out.stderr
        assert out.stderr.strip().count("\n") == 0


def test_zero_code_records_one_run_and_replays_offline(cookbook: Any) -> None:
    run = _record(cookbook, zero_code=True)
    assert _steps(run) == [
        ("model", "openai.chat.completions"),
        ("tool", "ask_database"),
        ("model", "openai.chat.completions"),
    ]
    requests = cookbook.server.count
    for mode in ("mock", "deterministic"):
        _unchanged(_replay(cookbook, run["trace_id"], mode))
    assert cookbook.server.count == requests
    assert cookbook.effects() == [QUERY]


def test_changed_prompt_changed_tool_result_and_live_replays_of_one_run(cookbook: Any, recordings: Recordings) -> None:
    """A changed system prompt diverges at the first model step, a changed tool result at the next one, each
    with a readable diff; live runs the tool only with an approval, and then matches."""
    run = _record(cookbook, shared=recordings, RW_FORM="decorator")
    requests = cookbook.server.count
    changed = "Answer in one word, using SQL against the Chinook database."
    result = _replay(cookbook, run["trace_id"], "deterministic", ok=(1,), RW_SYSTEM_PROMPT=changed)
    first = result["first_divergence"]
    assert (first["step_index"], first["kind"]) == (0, "request")
    assert f'-      "content": "{SYSTEM_PROMPT}",' in first["diff"].splitlines()
    assert f'+      "content": "{changed}",' in first["diff"].splitlines()
    text = cookbook.cli(
        "replay", run["trace_id"], "--mode", "deterministic", extra_env=_replay_env(cookbook, RW_SYSTEM_PROMPT=changed)
    )
    assert text.returncode == 1
    assert "first divergence at step 0" in text.stdout and f'+      "content": "{changed}",' in text.stdout
    assert cookbook.server.count == requests
    assert cookbook.effects() == [QUERY]

    result = _replay(cookbook, run["trace_id"], "deterministic", ok=(1,), RW_MAX_RESULT_CHARS="12")
    first = result["first_divergence"]
    assert (first["step_index"], first["kind"]) == (2, "request")
    lines = first["diff"].splitlines()
    assert any(line.startswith("-") and "For Those About To Rock We Salute You" in line for line in lines)
    assert '+      "content": "[(\'For Those",' in lines
    assert cookbook.server.count == requests
    assert cookbook.effects() == [QUERY]

    refused = _replay(cookbook, run["trace_id"], "live", "--reason", "check the fix", ok=(2,))
    assert refused["outcome"] == "refused" and "--approve ask_database" in refused["refusal"]
    assert cookbook.effects() == [QUERY]
    assert refused["refused_before_start"] is True
    assert cookbook.server.count == requests  # refused before the agent started: no model call went out

    requests = cookbook.server.count
    approved = _replay(
        cookbook, run["trace_id"], "live", "--reason", "check the fix", "--approve", "ask_database", ok=(0, 1)
    )
    assert approved["executions"] == {"ask_database": 1}
    assert cookbook.server.count == requests + 2
    assert cookbook.effects() == [QUERY, QUERY]
    # Volatile ids (tool-call ids sent back in the next request) are normalised by the replay's matching.
    _unchanged(approved)


def test_undecorated_tool_is_not_firewalled_dry_names_it_and_the_guard_blocks_its_write(cookbook: Any) -> None:
    run = _record(cookbook, RW_DECORATE="0", RW_FORM="with")
    assert _steps(run) == [("model", "openai.chat.completions"), ("model", "openai.chat.completions")]
    assert cookbook.effects() == [QUERY]

    dry = _replay(cookbook, run["trace_id"], "dry")
    assert dry["not_firewalled"] == ["ask_database"]
    text = cookbook.cli("replay", run["trace_id"], "--mode", "dry", extra_env=_replay_env(cookbook))
    assert text.returncode == 0 and "not firewalled: ask_database" in text.stdout

    requests = cookbook.server.count
    for mode in ("mock", "deterministic"):
        result = _replay(
            cookbook, run["trace_id"], mode, "--app", "rw_cookbook_sql_agent:answer", ok=(1,), RW_DECORATE="0"
        )
        assert result["outcome"] == "diverged"
        assert result["not_firewalled"] == ["ask_database"]
        blocked = [d for d in result["divergences"] if d["kind"] == "side_effect"]
        assert blocked and "queries.log" in blocked[0]["reason"]
    assert cookbook.server.count == requests
    assert cookbook.effects() == [QUERY]  # blocked: the audit log holds only the original run's line


def test_undecorated_read_only_tool_never_replays_as_matched(cookbook: Any) -> None:
    """Without its audit log the tool only reads: the guard has nothing to block, yet it ran for real, so the
    replay reports an ``unrecorded_tool`` divergence instead of ``matched``."""
    run = _record(cookbook, RW_DECORATE="0", RW_OUTBOX="")
    requests = cookbook.server.count
    for mode in ("mock", "deterministic"):
        result = _replay(cookbook, run["trace_id"], mode, ok=(1,), RW_DECORATE="0", RW_OUTBOX="")
        assert result["outcome"] == "diverged"
        kinds = [(d["kind"], d["step_index"]) for d in result["divergences"]]
        assert kinds == [("unrecorded_tool", 0)], result["divergences"]
        assert "ask_database" in result["first_divergence"]["reason"]
    assert cookbook.server.count == requests
    assert cookbook.effects() == []
