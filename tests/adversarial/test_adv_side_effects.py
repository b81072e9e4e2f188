"""Side effects during replay: agent code that reaches the world through code otel-replay does not know.

Each agent (tests/adversarial/adv_side_effect_agents.py) is recorded for real, so the test first sees the
effect happen (a marker file the child process writes, a file written, deleted or renamed outside the temp
folder, a connection a loopback server accepted); the world is then put back, the run is replayed, and the
test checks that nothing happened, that the replay says why, and that ``--allow-side-effects`` lets it through
loudly. The files live in a folder outside the system temp folder (which the guard exempts).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import adv_side_effect_agents as agents
import fork_server
import pytest
from cli_in_process import run_cli, runs_in_process
from pytest_children import UNRELATED_PLUGINS

import otel_replay as orp
from otel_replay import semconv
from otel_replay.cases import case_document, write_case
from otel_replay.replay.safety import landlock

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BLOCKED = "unrecorded side effect: "


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder outside the system temp folder (writes there are side effects). The test gets a system temp
    folder of its own beside it (``tempfile.gettempdir()`` and ``TMPDIR`` for the commands it starts), so
    this holds wherever the checkout and pytest's temp folders live, /tmp included."""
    temp = tmp_path / "system-temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    folder = tmp_path / "outside"
    folder.mkdir()
    assert not str(folder.resolve()).startswith(os.path.realpath(tempfile.gettempdir()) + os.sep)
    return folder.resolve()


class Listener:
    """A loopback TCP server that never runs code: connections wait in its backlog and are counted there."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.accepted = 0

    @property
    def address(self) -> str:
        host, port = self.sock.getsockname()
        return f"{host}:{port}"

    def count(self) -> int:
        """Connections made so far (a connect() that returned is already in the backlog)."""
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return self.accepted
            conn.close()
            self.accepted += 1


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    try:
        yield server
    finally:
        server.sock.close()


class Effect:
    """One kind of side effect: where it lands, whether it happened, and how to undo it."""

    def __init__(self, kind: str, outside: Path, listener: Listener, tag: str = "a") -> None:
        self.kind = kind
        self.listener = listener
        self.path = outside / f"{kind}-{tag}.txt"
        self.connections = 0
        if kind in ("remove", "rename"):
            self.path.write_text("precious", encoding="utf-8")

    @property
    def target(self) -> str:
        return self.listener.address if self.kind == "connect" else str(self.path)

    def happened(self) -> bool:
        if self.kind == "connect":
            return self.listener.count() > self.connections
        if self.kind == "remove":
            return not self.path.exists()
        if self.kind == "rename":
            return not self.path.exists() and Path(f"{self.path}.moved").exists()
        return self.path.exists()  # spawn, system: the marker the child writes; write, sqlite: the file itself

    def undo(self) -> None:
        if self.kind == "connect":
            self.connections = self.listener.count()
        elif self.kind == "remove":
            self.path.write_text("precious", encoding="utf-8")
        elif self.kind == "rename":
            Path(f"{self.path}.moved").rename(self.path)
        else:
            self.path.unlink()

    def untouched(self) -> bool:
        if self.kind in ("remove", "rename"):
            return self.path.read_text(encoding="utf-8") == "precious" and not Path(f"{self.path}.moved").exists()
        return not self.happened()


KINDS = ("spawn", "system", "write", "sqlite", "remove", "rename", "connect")


def record(func: Callable[..., Any], *args: Any) -> str:
    """Run an agent for real once and return its trace id."""
    import asyncio
    import inspect

    if inspect.iscoroutinefunction(func):
        asyncio.run(func(*args))
    else:
        func(*args)
    orp.flush()
    with orp.Store.open() as store:
        return store.runs(limit=1)[0].trace_id


def side_effects(result: Any) -> list[str]:
    """The blocked effects, each without the agent frame that made it (`` (in f() at file:line)``)."""
    frame = re.compile(r" \(in [^()]*\(\) at [^()]*\)$")
    return [frame.sub("", d.reason) for d in result.divergences if d.kind == "side_effect"]


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "COLUMNS": "400",
        "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p),
    }
    for name in (
        "OTEL_REPLAY_STORE",
        "OTEL_REPLAY_DEBUG",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ):
        env.pop(name, None)
    if runs_in_process(args):  # the same main(), without a second of interpreter start-up
        return run_cli(args, env=env, cwd=ROOT)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )


@pytest.mark.parametrize("sandbox", ["auto", "off"])
@pytest.mark.parametrize("kind", KINDS)
def test_mock_and_deterministic_replays_block_an_undecorated_side_effect(
    kind: str, sandbox: str, home: Path, outside: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In both enforcement modes: the kernel sandbox with the audit hooks (``auto``) and the hooks alone."""
    monkeypatch.setenv("OTEL_REPLAY_SANDBOX", sandbox)
    effect = Effect(kind, outside, listener)
    trace_id = record(agents.direct_effect, kind, effect.target)
    assert effect.happened()  # recording made it for real
    effect.undo()
    for mode in ("mock", "deterministic"):
        result = orp.replay(trace_id, mode=mode)
        assert result.sandbox.startswith("landlock") is (sandbox == "auto" and landlock.abi() > 0)
        assert effect.untouched(), f"{mode} replay let the {kind} happen"
        assert result.outcome == "diverged"
        assert {d.kind for d in result.divergences} == {"side_effect"}, result.divergences
        (reason,) = side_effects(result)  # one divergence per distinct effect
        assert reason.startswith(BLOCKED)
        assert (listener.address if kind == "connect" else effect.path.name) in reason
        assert not result.allow_side_effects and result.to_dict()["allow_side_effects"] is False


@pytest.mark.parametrize("kind", ("write", "spawn", "connect"))
@pytest.mark.parametrize("agent", ("pool", "thread"))
def test_the_guard_follows_the_agent_into_a_pool_and_a_thread(
    agent: str, kind: str, home: Path, outside: Path, listener: Listener
) -> None:
    func = agents.pool_effect if agent == "pool" else agents.thread_effect
    effect = Effect(kind, outside, listener)
    trace_id = record(func, kind, effect.target)
    assert effect.happened()
    effect.undo()
    for mode in ("mock", "deterministic"):
        result = orp.replay(trace_id, mode=mode)
        assert effect.untouched(), f"{mode} replay let the {kind} happen in a {agent}"
        assert result.outcome == "diverged" and len(side_effects(result)) == 1, result.divergences
    # The pool's worker thread existed before the replays and outlives them: outside a replay it is free again.
    agents.POOL.submit(agents.make_effect, kind, effect.target).result()
    assert effect.happened()


@pytest.mark.parametrize("kind", ("write", "connect"))
def test_the_guard_follows_the_agent_into_asyncio_tasks_and_run_in_executor(
    kind: str, home: Path, outside: Path, listener: Listener
) -> None:
    in_task, in_executor = Effect(kind, outside, listener, "task"), Effect(kind, outside, listener, "executor")
    trace_id = record(agents.async_effect, kind, in_task.target, in_executor.target)
    if kind == "connect":
        assert listener.count() == 2
    else:
        assert in_task.happened() and in_executor.happened()
    in_task.undo()
    in_executor.undo()
    result = orp.replay(trace_id, mode="mock")
    assert in_task.untouched() and in_executor.untouched()
    assert result.outcome == "diverged"
    # Two files are two effects; the same address twice is one.
    assert len(side_effects(result)) == (1 if kind == "connect" else 2), result.divergences


def test_a_sqlite_database_outside_the_temp_folder_is_a_side_effect(home: Path, outside: Path) -> None:
    """SQLite opens its files in C, so no ``open`` audit event shows them: the guard checks the database
    ``sqlite3.connect`` names, a ``file:`` URI read as SQLite reads it (percent-decoded path). Databases that
    write no file (``:memory:``, ``""``, ``file::memory:``) stay allowed."""
    database = outside / "notes db.sqlite"
    uri = "file:" + quote(str(database)) + "?mode=rwc"
    assert "%20" in uri
    trace_id = record(agents.sqlite_notes, uri)
    assert database.exists()  # recording wrote it for real
    database.unlink()
    for mode in ("mock", "deterministic"):
        result = orp.replay(trace_id, mode=mode)
        assert not database.exists(), f"{mode} replay let SQLite write {database}"
        assert result.outcome == "diverged"
        assert side_effects(result) == [f"{BLOCKED}file write (sqlite3.connect): {database}"], result.divergences
        assert {d.kind for d in result.divergences} == {"side_effect"}, result.divergences


def test_output_thrown_away_to_devnull_is_not_a_side_effect(home: Path) -> None:
    trace_id = record(agents.quiet, "shh")
    for mode in ("mock", "deterministic"):
        result = orp.replay(trace_id, mode=mode)
        assert result.outcome == "matched", result.divergences


def test_a_tool_submitted_to_a_thread_pool_meets_the_firewall(home: Path, outside: Path) -> None:
    """The pool's work item carries the run while recording and the replay's run while replaying: the tool is a
    step of the recorded run, answered from the recording like a direct call, never run again in a thread that
    knows nothing of the replay."""
    marker = outside / "tool-ran.txt"
    trace_id = record(agents.pool_tool, "hello", str(marker))
    assert marker.read_text(encoding="utf-8") == "hello"
    marker.unlink()
    with orp.Store.open() as store:
        assert [s.name for s in store.load_run(trace_id).steps] == ["note_down"]
    result = orp.replay(trace_id, mode="mock")
    assert not marker.exists()
    assert result.outcome == "matched", result.divergences
    assert [s.name for s in result.replay.steps] == ["note_down"]


def test_a_write_tool_in_a_thread_that_carries_no_context_never_runs_in_a_replay(home: Path, outside: Path) -> None:
    """A thread started with ``_thread.start_new_thread`` (or by a native library) carries neither the run nor
    the replay: the recorder sees a write tool outside any run, and while a replay runs it refuses it."""
    marker = outside / "file-down.txt"
    trace_id = record(agents.bare_thread_tool, "hello", str(marker))
    assert marker.read_text(encoding="utf-8") == "hello"  # outside a replay the tool just runs
    marker.unlink()
    for mode in ("mock", "deterministic"):
        replayed = cli(home, "replay", trace_id, "--mode", mode, "--app", "adv_side_effect_agents:bare_thread_tool")
        assert replayed.returncode == 1, replayed.stdout + replayed.stderr
        assert "matched" not in replayed.stdout.splitlines()[0]
        assert not marker.exists()


def test_the_cli_reports_the_side_effect_and_exits_1(home: Path, outside: Path, listener: Listener) -> None:
    effect = Effect("write", outside, listener)
    trace_id = record(agents.direct_effect, "write", effect.target)
    effect.undo()
    text = cli(home, "replay", trace_id, "--mode", "mock")
    assert text.returncode == 1, text.stderr
    assert BLOCKED in text.stdout and effect.path.name in text.stdout
    as_json = cli(home, "replay", trace_id, "--mode", "deterministic", "--json")
    assert as_json.returncode == 1, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["outcome"] == "diverged" and document["allow_side_effects"] is False
    assert [d["kind"] for d in document["divergences"]] == ["side_effect"]
    assert effect.untouched()


def test_allow_side_effects_lets_it_through_and_says_so(home: Path, outside: Path, listener: Listener) -> None:
    effect = Effect("write", outside, listener)
    trace_id = record(agents.direct_effect, "write", effect.target)
    effect.undo()
    out = cli(home, "replay", trace_id, "--mode", "mock", "--allow-side-effects", "--json")
    assert out.returncode == 0, out.stderr
    assert "warning: --allow-side-effects" in out.stderr
    document = json.loads(out.stdout)
    assert document["outcome"] == "matched" and document["allow_side_effects"] is True
    assert effect.happened()
    with orp.Store.open() as store:
        replayed = store.load_run(document["replay_trace_id"])
    assert replayed.attributes.get(semconv.REPLAY_ALLOW_SIDE_EFFECTS) == "true"
    effect.undo()
    guarded = orp.replay(trace_id, mode="mock")  # the next replay is guarded again
    assert not effect.happened() and guarded.outcome == "diverged"
    assert guarded.replay is not None and semconv.REPLAY_ALLOW_SIDE_EFFECTS not in guarded.replay.attributes


def test_a_live_replay_is_not_guarded(home: Path, outside: Path, listener: Listener) -> None:
    effect = Effect("write", outside, listener)
    trace_id = record(agents.direct_effect, "write", effect.target)
    effect.undo()
    result = orp.replay(trace_id, mode="live", reason="check the file export for real")
    assert effect.happened()
    assert not side_effects(result) and result.outcome == "matched", result.divergences


def test_a_from_step_replay_follows_its_base_mode(home: Path, outside: Path, listener: Listener) -> None:
    effect = Effect("write", outside, listener)
    trace_id = record(agents.direct_effect, "write", effect.target)
    effect.undo()
    result = orp.replay(trace_id, mode="mock", from_step=1)
    assert not effect.happened() and side_effects(result)
    live = orp.replay(trace_id, mode="live", from_step=1, reason="resume for real")
    assert effect.happened() and not side_effects(live)


def test_otel_replays_own_writes_and_bytecode_are_not_side_effects(
    home: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain agent (a temp file, a flush to the spool of a home outside the temp folder) and a module first
    imported during the replay (Python writes its bytecode next to it, outside the temp folder) replay as
    matched."""
    own_home = outside / "otel-replay-home"
    monkeypatch.setenv("OTEL_REPLAY_HOME", str(own_home))
    orp.configure(home=own_home, exporter="spool")
    try:
        trace_id = record(agents.plain_writer, "note")
        result = orp.replay(trace_id, mode="mock")
    finally:
        monkeypatch.setenv("OTEL_REPLAY_HOME", str(home))
        orp.configure(home=home, exporter="spool")  # the folder goes away with the test
    assert result.outcome == "matched", result.divergences

    name = f"adv_fresh_{uuid.uuid4().hex[:8]}"
    (outside / f"{name}.py").write_text("VALUE = 'fresh'\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(outside))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    trace_id = record(agents.importer, name)
    cache = outside / "__pycache__"
    assert any(cache.glob(f"{name}.*.pyc"))
    shutil.rmtree(cache)
    sys.modules.pop(name, None)
    result = orp.replay(trace_id, mode="deterministic")
    assert result.outcome == "matched", result.divergences
    # Under the audit hooks alone the import writes its bytecode and nothing is reported; the kernel sandbox
    # cannot tell a bytecode file from any other, so there Python compiles the module in memory (as it does on
    # a read-only disk) and the replay still matches.
    written = any(cache.glob(f"{name}.*.pyc"))
    assert written is (result.sandbox == "audit hooks only"), result.sandbox


def _case(home: Path, folder: Path, trace_id: str, name: str) -> Path:
    with orp.Store.open() as store:
        run = store.load_run(trace_id)
    return write_case(case_document(run, name=name, expect=["output"]), folder / f"{name}.case.json")


def test_case_run_is_guarded(home: Path, outside: Path, listener: Listener) -> None:
    effect = Effect("write", outside, listener)
    trace_id = record(agents.direct_effect, "write", effect.target)
    effect.undo()
    path = _case(home, outside, trace_id, "writes-a-file")
    out = cli(home, "case", "run", str(path), "--json")
    assert out.returncode == 1, out.stderr
    (case,) = json.loads(out.stdout)["cases"]
    assert case["status"] == "failed"  # its expectation (output) held; the blocked effect fails it anyway
    assert any(f.startswith("no side effects: " + BLOCKED) for f in case["failures"]), case
    assert not effect.happened()
    allowed = cli(home, "case", "run", str(path), "--allow-side-effects")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "warning: --allow-side-effects" in allowed.stderr
    assert effect.happened()


def test_pytest_plugin_cases_are_guarded(home: Path, outside: Path, listener: Listener) -> None:
    effect = Effect("connect", outside, listener)
    trace_id = record(agents.direct_effect, "connect", effect.target)
    effect.undo()
    folder = outside / "cases"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # its own root: not this project's
    _case(home, folder, trace_id, "connects")
    # The agent module lives outside that root: the user trusts it by name.
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "OTEL_REPLAY_TRUSTED_MODULES": agents.__name__,
        "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p),
    }
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *UNRELATED_PLUGINS]
    base += ["--otel-replay-cases", str(folder), str(folder)]
    out = subprocess.run(base, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert out.returncode == 1, out.stdout + out.stderr
    assert BLOCKED in out.stdout and listener.address in out.stdout
    assert not effect.happened()
    allowed = subprocess.run(
        [*base, "--otel-replay-allow-side-effects"], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "--otel-replay-allow-side-effects: the side-effect guard is off" in allowed.stdout
    assert effect.happened()


def test_a_link_in_the_temp_folder_does_not_lead_out(home: Path, outside: Path) -> None:
    link = Path(tempfile.gettempdir()) / "looks-temporary"
    link.symlink_to(outside, target_is_directory=True)
    target = outside / "through-the-link.txt"
    trace_id = record(agents.direct_effect, "write", str(link / target.name))
    assert target.exists()
    target.unlink()
    result = orp.replay(trace_id, mode="mock")
    assert not target.exists()
    assert result.outcome == "diverged" and len(side_effects(result)) == 1, result.divergences


def test_a_blocked_command_never_shows_the_secret_it_carried(
    home: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-proj-" + "Q7v2Lx9Rk4Tz8Wm3Np6Hs1Jd5Fc0Gb"
    monkeypatch.setenv("ADV_SIDE_EFFECT_TOKEN", secret)
    marker = outside / "token-call.txt"
    trace_id = record(agents.token_caller, str(marker))
    assert marker.exists()
    marker.unlink()
    out = cli(home, "replay", trace_id, "--mode", "mock", "--json")
    assert out.returncode == 1, out.stderr
    assert not marker.exists()
    (reason,) = [d["reason"] for d in json.loads(out.stdout)["divergences"] if d["kind"] == "side_effect"]
    assert reason.startswith(BLOCKED + "process spawn (subprocess.Popen): ") and "--api-key=" in reason
    assert secret not in out.stdout + out.stderr
    for path in home.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_only_otel_replays_own_export_endpoint_is_exempt(
    home: Path, outside: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection to the OTLP endpoint otel-replay exports to is allowed; the same code connecting to any
    other loopback port is blocked."""
    other = Listener()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://{listener.address}/v1/traces")
        exempt = Effect("connect", outside, listener)
        blocked = Effect("connect", outside, other)
        to_collector = record(agents.direct_effect, "connect", exempt.target)
        elsewhere = record(agents.direct_effect, "connect", blocked.target)
        assert exempt.happened() and blocked.happened()
        exempt.undo()
        blocked.undo()
        allowed = orp.replay(to_collector, mode="mock")
        assert exempt.happened() and allowed.outcome == "matched", allowed.divergences
        refused = orp.replay(elsewhere, mode="mock")
        assert not blocked.happened() and side_effects(refused) == [
            f"{BLOCKED}network connection (socket.connect): {other.address}"
        ]
    finally:
        other.sock.close()
