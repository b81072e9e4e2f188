"""The kernel sandbox of offline replays, attacked with ordinary agent code (docs/security.md, "Enforcement").

Each test records an agent of ``adv_sandbox_agents.py`` for real in a fresh process, from a project folder of
its own, then replays it with ``otel-replay replay`` in another fresh process, as a user would, in both
enforcement modes: ``OTEL_REPLAY_SANDBOX=auto`` (Landlock, where this kernel offers it) and ``off`` (the audit
hooks alone). Every test looks at the real effect (the ledger's bytes, the database's rows, the bytes a loopback
listener received, the file and the marker a spawned process would make) and at the outcome.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import fork_server
import pytest
from pytest_children import UNRELATED_PLUGINS

import otel_replay as orp
from otel_replay.errors import ReplayRefused
from otel_replay.replay.safety import landlock, sandbox, seccomp
from otel_replay.semconv import ReplayMode

HERE = Path(__file__).resolve().parent
KERNEL = landlock.abi() > 0
MODES = ("auto", "off")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The user's project folder: the agent module, run from here (so the replay trusts it)."""
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(HERE / "adv_sandbox_agents.py", folder / "adv_sandbox_agents.py")
    return folder


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder outside the system temp folder of the commands the test starts (``TMPDIR``)."""
    temp = tmp_path / "system-temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder.resolve()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback TCP server that keeps what it is sent (read by :func:`received`)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.5)
    try:
        yield server
    finally:
        server.close()


def received(server: socket.socket) -> bytes:
    """Every byte sent to ``server`` by connections made so far."""
    data = b""
    server.setblocking(False)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except BlockingIOError:
                return data
            conn.settimeout(2)
            with conn:
                while chunk := conn.recv(4096):
                    data += chunk
    finally:
        server.settimeout(0.5)


def run(project: Path, home: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "OTEL_REPLAY_HOME": str(home), "COLUMNS": "400", **env}
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "PYTHONPATH"):
        full.pop(name, None)
    return fork_server.run([sys.executable, *args], capture_output=True, text=True, env=full, timeout=300, cwd=project)


def record(project: Path, home: Path, call: str, **env: str) -> str:
    """Run ``adv_sandbox_agents.<call>`` for real in a fresh process and return its trace id."""
    code = f"import adv_sandbox_agents as a, otel_replay as orp\na.{call}\norp.flush()"
    done = run(project, home, ["-c", code], **env)
    assert done.returncode == 0, done.stderr
    with orp.Store.open() as store:
        return store.runs(limit=1)[0].trace_id


def replay(
    project: Path, home: Path, trace_id: str, sandbox: str, *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    args = ["-m", "otel_replay.cli", "replay", trace_id, *extra]
    return run(project, home, args, OTEL_REPLAY_SANDBOX=sandbox, **env)


ARCHIVE_INSERT, ATTACH, VACUUM = 'conn.execute("INSERT INTO ledger', 'conn.execute("ATTACH', 'conn.execute("VACUUM'


def line_of(text: str) -> int:
    """The line of ``adv_sandbox_agents.py`` holding ``text``: the agent's frame a divergence names."""
    lines = (HERE / "adv_sandbox_agents.py").read_text(encoding="utf-8").splitlines()
    (number,) = [n for n, line in enumerate(lines, 1) if text in line]
    return number


def expected_sandbox(mode: str) -> str:
    return f"landlock ABI {landlock.abi()}" if mode == "auto" and KERNEL else "audit hooks only"


@pytest.mark.parametrize("sandbox", MODES)
@pytest.mark.parametrize("resource", ["ledger", "sqlite", "socket"])
def test_resources_opened_at_import_are_never_written_by_an_offline_replay(
    project: Path, home: Path, outside: Path, listener: socket.socket, resource: str, sandbox: str
) -> None:
    """A module that opens a ledger file, a SQLite database or a TCP connection at import and writes through it
    from an undecorated helper: nothing is ever written, sent or inserted. The offline replay refuses to import
    it (exit 2, one line naming what was refused and the ways out), except an existing SQLite database under
    the kernel sandbox: the kernel lets SQLite open it read-only, the insert is refused and named, and the
    replay diverges (exit 1)."""
    ledger, database = outside / "ledger.txt", outside / "ledger.db"
    address = "{}:{}".format(*listener.getsockname())
    env = {"ledger": {"ADV_LEDGER": str(ledger)}, "sqlite": {"ADV_DB": str(database)}, "socket": {"ADV_PEER": address}}
    trace_id = record(project, home, "book('first')", **env[resource])
    before = (ledger.read_bytes() if ledger.exists() else b"", rows(database), received(listener))
    assert before[0] == b"first\n" or before[1] == ["first"] or before[2] == b"first"  # recording wrote for real
    read_only = resource == "sqlite" and expected_sandbox(sandbox) != "audit hooks only"
    for mode in ("mock", "deterministic"):
        done = replay(project, home, trace_id, sandbox, "--mode", mode, "--json", **env[resource])
        if read_only:
            assert done.returncode == 1, (done.stdout, done.stderr)
            document = json.loads(done.stdout)
            assert document["outcome"] == "diverged" and document["sandbox"] == expected_sandbox(sandbox)
            effects = [d["reason"] for d in document["divergences"] if d["kind"] == "side_effect"]
            assert effects and effects[0].startswith(f"unrecorded side effect: file write (sqlite3 INSERT): {database}")
        else:
            assert done.returncode == 2, (done.stdout, done.stderr)
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
            assert "could not be imported under the replay's sandbox" in lines[0]
            shown = {"ledger": str(ledger), "sqlite": str(database), "socket": address}[resource]
            assert shown in lines[0], lines[0]
            assert "in <module>() at adv_sandbox_agents.py:" in lines[0]  # the agent's line that opened it
            assert "--allow-path" in lines[0] and "--mode live" in lines[0]
        after = (ledger.read_bytes() if ledger.exists() else b"", rows(database), received(listener))
        assert after == (before[0], before[1], b""), after


def rows(database: Path) -> list[str]:
    if not database.exists():
        return []
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
        return [row[0] for row in conn.execute("SELECT entry FROM ledger")]


@pytest.mark.parametrize("sandbox", MODES)
def test_allowing_the_one_path_lets_it_through_and_the_audit_records_it(
    project: Path, home: Path, outside: Path, sandbox: str
) -> None:
    ledger = outside / "ledger.txt"
    trace_id = record(project, home, "book('first')", ADV_LEDGER=str(ledger))
    done = replay(
        project,
        home,
        trace_id,
        sandbox,
        "--mode",
        "mock",
        "--allow-path",
        str(ledger),
        "--json",
        ADV_LEDGER=str(ledger),
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["outcome"] == "matched"
    assert document["sandbox"] == expected_sandbox(sandbox)
    assert document["allowed_effects"] == [f"path:{ledger}"]
    assert ledger.read_text(encoding="utf-8") == "first\nfirst\n"  # what the person replaying allowed
    journal = (home / "audit" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    started = [json.loads(line) for line in journal if '"started"' in line]
    assert started[-1]["allowed_effects"] == [f"path:{ledger}"] and started[-1]["sandbox"] == document["sandbox"]
    with orp.Store.open() as store:
        replayed = store.load_run(document["replay_trace_id"])
    assert replayed.attributes.get("otel_replay.replay.sandbox") == document["sandbox"]


@pytest.mark.parametrize("entry", ["replay-session", "pytest", "lab"])
def test_every_offline_command_takes_the_one_path_to_allow(
    project: Path, home: Path, outside: Path, entry: str
) -> None:
    """The import refusal names ``--allow-path``: ``replay-session``, the pytest plugin
    (``--otel-replay-allow-path``) and ``lab`` take it too. Without it the agent's module, which opens its ledger
    at import, cannot be imported; with it the replay runs and writes only there."""
    ledger = outside / "ledger.txt"
    code = (
        "import adv_sandbox_agents as a, otel_replay as orp\nwith orp.identity(session='desk-7'):\n    a.book('first')"
    )
    assert run(project, home, ["-c", code + "\norp.flush()"], ADV_LEDGER=str(ledger)).returncode == 0
    with orp.Store.open() as store:
        trace_id = store.runs(limit=1)[0].trace_id
    cli = ["-m", "otel_replay.cli"]
    if entry == "pytest":
        exported = run(project, home, [*cli, "case", "export", trace_id, "-o", "cases/book.case.json"])
        assert exported.returncode == 0, exported.stderr
    commands = {
        "replay-session": [*cli, "replay-session", "desk-7", "--mode", "mock", "--json"],
        "pytest": ["-m", "pytest", "-q", "-p", "no:cacheprovider", *UNRELATED_PLUGINS, "--otel-replay-cases", "cases"],
        "lab": [*cli, "lab", "--trace-id", trace_id, "--json", "--fail-if", "errors > 0"],
    }
    allow = {"pytest": "--otel-replay-allow-path"}.get(entry, "--allow-path")
    if entry == "replay-session":  # the refusal is the engine's, the same for every command: checked once
        refused = run(project, home, commands[entry], ADV_LEDGER=str(ledger))
        assert refused.returncode != 0 and "--allow-path" in refused.stdout + refused.stderr, refused.stdout
        assert ledger.read_text(encoding="utf-8") == "first\n"
    done = run(project, home, [*commands[entry], allow, str(ledger)], ADV_LEDGER=str(ledger))
    assert done.returncode == 0, done.stdout + done.stderr
    assert ledger.read_text(encoding="utf-8") == "first\nfirst\n"  # what the person replaying allowed


@pytest.mark.parametrize("sandbox", MODES)
def test_writes_and_spawns_through_libc_never_happen_and_are_named(
    project: Path, home: Path, outside: Path, sandbox: str
) -> None:
    target, marker = outside / "native.txt", outside / "spawned"
    trace_id = record(project, home, f"native({str(target)!r}, {str(marker)!r})")
    assert target.read_bytes() == b"written by libc" and marker.exists()  # recording did both for real
    target.unlink()
    marker.unlink()
    for mode in ("mock", "deterministic"):
        done = replay(project, home, trace_id, sandbox, "--mode", mode, "--json")
        assert done.returncode == 1, done.stderr
        document = json.loads(done.stdout)
        assert document["outcome"] == "diverged" and document["sandbox"] == expected_sandbox(sandbox)
        effects = [d["reason"] for d in document["divergences"] if d["kind"] == "side_effect"]
        assert effects and effects[0].startswith("unrecorded side effect: native call (ctypes): open()"), effects
        assert "native_effects() at adv_sandbox_agents.py:" in effects[0]  # the agent frame that made it
        assert not target.exists() and not marker.exists()


@pytest.mark.parametrize("sandbox", MODES)
def test_a_write_no_audit_hook_sees_is_stopped_by_the_kernel(
    project: Path, home: Path, outside: Path, sandbox: str
) -> None:
    """pyarrow writes a file from C++: no Python audit event sees it, so only the kernel can stop it. Under the
    sandbox the file is never written (the agent ignores the failed write, and the replay cannot name it: one
    of the gaps ``dry`` lists); under the audit hooks alone it is written, and the result and ``dry`` say that
    this enforcement does not cover code below Python."""
    target = outside / "notes.csv"
    trace_id = record(project, home, f"arrow_note({str(target)!r})")
    assert target.read_text(encoding="utf-8").splitlines()[1:] == [f'"{str(target).upper()}"']  # it works for real
    target.unlink()
    done = replay(project, home, trace_id, sandbox, "--mode", "mock", "--json")
    document = json.loads(done.stdout)
    assert document["sandbox"] == expected_sandbox(sandbox), document["sandbox"]
    dry = json.loads(replay(project, home, trace_id, sandbox, "--mode", "dry", "--json").stdout)
    not_covered = dry["readiness"]["sandbox"]["not_covered"]
    if expected_sandbox(sandbox) == "audit hooks only":
        assert target.exists()  # what the weaker enforcement cannot stop, and says so
        assert any("code below Python" in gap for gap in not_covered), not_covered
    else:
        assert not target.exists(), "the kernel sandbox let a C++ write through"
        assert any("inside a C extension" in gap for gap in not_covered), not_covered


@pytest.mark.parametrize("sandbox", MODES)
def test_a_whatif_replay_is_confined_for_files_and_programs(
    project: Path, home: Path, outside: Path, sandbox: str
) -> None:
    """A whatif replay calls its models for real, so the kernel leaves TCP to the guard, but files and programs
    are confined as in a mock replay: pyarrow's C++ write is never made under the sandbox (written under the
    audit hooks alone)."""
    target = outside / "notes.csv"
    trace_id = record(project, home, f"arrow_note({str(target)!r})")
    target.unlink()
    done = replay(project, home, trace_id, sandbox, "--mode", "whatif", "--reason", "a model change", "--json")
    document = json.loads(done.stdout)
    assert document["sandbox"] == expected_sandbox(sandbox), document
    if expected_sandbox(sandbox) == "audit hooks only":
        assert target.exists()  # what the weaker enforcement cannot stop
    else:
        assert not target.exists(), "the kernel sandbox let a C++ write of a whatif replay through"


@pytest.mark.parametrize("sandbox", MODES)
def test_a_spawn_no_audit_hook_sees_is_never_matched(project: Path, home: Path, outside: Path, sandbox: str) -> None:
    """``_posixsubprocess.fork_exec`` called directly raises no audit event, so the guard cannot name or stop the
    program. Under the kernel sandbox the program never runs (the exec is refused, the agent's error ends the
    replay); under the audit hooks alone it runs, and the replay sees the child process afterwards: a
    ``side_effect`` divergence, never ``matched``."""
    marker = outside / "spawned"
    trace_id = record(project, home, f"c_spawn({str(marker)!r})")
    assert marker.exists()  # the recording ran it for real
    marker.unlink()
    done = replay(project, home, trace_id, sandbox, "--mode", "mock", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["outcome"] == "diverged" and document["sandbox"] == expected_sandbox(sandbox)
    effects = [d["reason"] for d in document["divergences"] if d["kind"] == "side_effect"]
    assert any("a process started below Python's audit hooks" in e for e in effects), document["divergences"]
    if expected_sandbox(sandbox) == "audit hooks only":
        assert marker.exists()  # what the weaker enforcement cannot stop: reported, not prevented
    else:
        assert not marker.exists(), "the kernel sandbox let a program run"
        assert document["agent_error"]["type"] == "PermissionError", document["agent_error"]  # the exec refused


@pytest.mark.parametrize("entry", ["case-run", "pytest", "lab"])
def test_cases_pytest_and_lab_workers_run_the_agent_in_the_kernel_sandbox(
    project: Path, home: Path, outside: Path, entry: str
) -> None:
    """The same C++ write through a regression case (``case run``), the pytest plugin and a lab worker: the kernel
    stops it there too (under the audit hooks alone, where the kernel offers no sandbox, it is written)."""
    target = outside / "notes.csv"
    trace_id = record(project, home, f"arrow_note({str(target)!r})")
    target.unlink()
    cases = project / "cases"
    if entry != "lab":
        exported = run(
            project, home, ["-m", "otel_replay.cli", "case", "export", trace_id, "-o", "cases/arrow.case.json"]
        )
        assert exported.returncode == 0, exported.stderr
    if entry == "case-run":
        done = run(project, home, ["-m", "otel_replay.cli", "case", "run", str(cases), "--json"])
        assert json.loads(done.stdout)["passed"] == 1, done.stdout
    elif entry == "pytest":
        done = run(
            project,
            home,
            [
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                *UNRELATED_PLUGINS,
                "--otel-replay-cases",
                str(cases),
                str(cases),
            ],
        )
        assert "1 passed" in done.stdout, done.stdout + done.stderr
    else:
        done = run(project, home, ["-m", "otel_replay.cli", "lab", "--trace-id", trace_id, "--json"])
        assert json.loads(done.stdout)["summary"]["totals"]["replays"] == 1, done.stdout
    if expected_sandbox("auto") == "audit hooks only":
        assert target.exists()
    else:
        assert not target.exists(), f"{entry} let a C++ write through the kernel sandbox"


@pytest.mark.parametrize("sandbox", MODES)
@pytest.mark.parametrize("how", ["vacuum", "attach"])
def test_a_c_extension_write_is_stopped_and_named(
    project: Path, home: Path, outside: Path, how: str, sandbox: str
) -> None:
    """``VACUUM INTO`` and ``ATTACH DATABASE`` (its file a bound parameter) write from SQLite's C code with no
    audit event: the guard's SQLite authorizer and trace callback name and stop them in both enforcement modes
    (the kernel sandbox would stop them too). ``dry`` lists what an agent can still do to get past them."""
    target = outside / "copy.db"
    trace_id = record(project, home, f"vacuum({str(target)!r}, {how!r})")
    assert target.exists()
    target.unlink()
    dry = json.loads(replay(project, home, trace_id, "off", "--mode", "dry", "--json").stdout)
    assert dry["sandbox"] == "audit hooks only"
    assert any("VACUUM INTO" in gap for gap in dry["readiness"]["sandbox"]["not_covered"])
    done = replay(project, home, trace_id, sandbox, "--mode", "mock", "--json")
    document = json.loads(done.stdout)
    assert done.returncode == 1 and document["outcome"] == "diverged", done.stdout
    assert document["sandbox"] == expected_sandbox(sandbox)
    assert not target.exists()
    effects = [d["reason"] for d in document["divergences"] if d["kind"] == "side_effect"]
    assert effects and f"file write (sqlite3 ATTACH or VACUUM INTO): {target}" in effects[0], effects
    assert document["agent_error"]["message"] == ("interrupted" if how == "attach" else "authorization denied")


@pytest.mark.parametrize("sandbox", MODES)
@pytest.mark.parametrize("how", ["vacuum", "attach"])
def test_a_c_extension_write_the_agent_ignores_is_still_reported(
    project: Path, home: Path, outside: Path, how: str, sandbox: str
) -> None:
    """The agent catches SQLite's error and carries on, so its answer is the recorded one: the copy's write is
    still reported (the connection's authorizer sees it before SQLite tries it), never ``matched``, in both
    enforcement modes."""
    target = outside / "copy.db"
    trace_id = record(project, home, f"vacuum({str(target)!r}, {how!r}, swallow=True)")
    target.unlink()
    for mode in ("mock", "deterministic"):
        done = replay(project, home, trace_id, sandbox, "--mode", mode, "--json")
        assert done.returncode == 1, (done.stdout, done.stderr)
        document = json.loads(done.stdout)
        assert document["outcome"] == "diverged" and document["sandbox"] == expected_sandbox(sandbox)
        effects = [d["reason"] for d in document["divergences"] if d["kind"] == "side_effect"]
        assert effects == [
            f"unrecorded side effect: file write (sqlite3 ATTACH or VACUUM INTO): {target} "
            f"(in vacuum() at adv_sandbox_agents.py:{line_of(ATTACH if how == 'attach' else VACUUM)})"
        ], effects
        assert document["agent_error"] is None  # the agent went on as in the recording
        assert not target.exists()


@pytest.mark.parametrize("write", [True, False])
def test_an_existing_database_is_read_but_never_written(project: Path, home: Path, outside: Path, write: bool) -> None:
    """An agent that opens an existing database outside the replay's folders. Under the kernel sandbox SQLite
    opens it read-only: reading it (and a ``CREATE TABLE IF NOT EXISTS`` that changes nothing) replays
    ``matched``; an insert the agent ignores when it fails is reported. Under the audit hooks alone the open
    itself is refused (nothing can stop a write after it)."""
    database = outside / "archive.db"
    with contextlib.closing(sqlite3.connect(database)) as conn:
        conn.execute("CREATE TABLE ledger (entry TEXT)")
        conn.execute("INSERT INTO ledger VALUES ('seed')")
        conn.commit()
    trace_id = record(project, home, f"archive({str(database)!r}, 'first', write={write})")
    before = rows(database)
    done = replay(project, home, trace_id, "auto", "--mode", "mock", "--json")
    document = json.loads(done.stdout)
    effects = [d["reason"] for d in document["divergences"] if d["kind"] == "side_effect"]
    if expected_sandbox("auto") == "audit hooks only":
        assert done.returncode == 1 and effects[0].startswith("unrecorded side effect: file write (sqlite3.connect)")
    elif write:
        assert done.returncode == 1 and document["outcome"] == "diverged", done.stdout
        assert effects == [
            f"unrecorded side effect: file write (sqlite3 INSERT): {database} (in archive() at adv_sandbox_agents.py:"
            f"{line_of(ARCHIVE_INSERT)})"
        ], effects
    else:
        assert done.returncode == 0 and document["outcome"] == "matched", (done.stdout, done.stderr)
    assert rows(database) == before


@pytest.mark.parametrize("mode", ["mock", "deterministic"])
def test_a_database_opened_at_import_is_used_on_the_thread_that_opened_it(
    project: Path, home: Path, outside: Path, mode: str
) -> None:
    """The replay imports the agent and calls it on one confined thread, as the recording did on one thread:
    per-thread state made at import (a thread-local SQLite connection, opened with SQLite's default same-thread
    check) is there in the call, and the replay matches (on two threads the read fails and the replay would
    diverge on unchanged code). Under the audit hooks alone the open at import is refused, with the ways out."""
    database = outside / "catalogue.db"
    with contextlib.closing(sqlite3.connect(database)) as conn:
        conn.execute("CREATE TABLE ledger (entry TEXT)")
        conn.executemany("INSERT INTO ledger VALUES (?)", [("a",), ("b",)])
        conn.commit()
    env = {"ADV_CATALOGUE": str(database)}
    trace_id = record(project, home, "count_entries('x')", **env)
    done = replay(project, home, trace_id, "auto", "--mode", mode, "--json", **env)
    if expected_sandbox("auto") == "audit hooks only":
        assert done.returncode == 2 and "file write (sqlite3.connect)" in done.stderr, done.stderr
    else:
        document = json.loads(done.stdout)
        assert (done.returncode, document["outcome"]) == (0, "matched"), (document["divergences"], done.stderr)
        assert document["agent_error"] is None and document["sandbox"] == expected_sandbox("auto")
    assert rows(database) == ["a", "b"]


def test_require_refuses_what_the_kernel_cannot_confine(project: Path, home: Path, outside: Path) -> None:
    trace_id = record(project, home, "book('first')")
    both = replay(project, home, trace_id, "require", "--mode", "mock", "--allow-side-effects")
    assert both.returncode == 2 and "contradict" in both.stderr
    bad = replay(project, home, trace_id, "sometimes", "--mode", "mock")
    assert bad.returncode == 2 and "OTEL_REPLAY_SANDBOX must be off, auto or require" in bad.stderr
    assert "Traceback" not in bad.stderr
    live = replay(project, home, trace_id, "auto", "--mode", "live", "--reason", "check", "--json")
    assert live.returncode == 0 and json.loads(live.stdout)["sandbox"] == "none"


def test_an_in_process_replay_of_an_imported_agent_says_what_it_cannot_promise(
    project: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.delitem(sys.modules, "adv_sandbox_agents", raising=False)
    import adv_sandbox_agents as agents

    agents.book("first")
    orp.flush()
    with orp.Store.open() as store:
        trace_id = store.runs(limit=1)[0].trace_id
    result = orp.replay(trace_id, mode="mock")
    assert result.outcome == "matched"
    if KERNEL:
        assert any("was imported before this replay" in note for note in result.notes), result.notes
        monkeypatch.setenv("OTEL_REPLAY_SANDBOX", "require")
        with pytest.raises(orp.ReplayRefused, match="imported before this replay"):
            orp.replay(trace_id, mode="mock")
    with open(project / "after.txt", "w", encoding="utf-8") as after:  # the host program is not confined
        after.write("the test process can still write here")


SUPERVISED = seccomp.available()


def expected_prefix_sandbox(mode: str) -> str:
    return "seccomp supervisor" if mode == "auto" and SUPERVISED else "audit hooks only"


def test_a_live_replay_from_step_n_replays_the_steps_before_n_offline(project: Path, home: Path, outside: Path) -> None:
    """The code before the recorded step N-1 is answered is the recorded part of a live replay from step N:
    the guard blocks and names its effects; from there on the replay is live and its effects are real."""
    target = outside / "between.txt"
    trace_id = record(project, home, f"prefix_writer({str(target)!r})")
    assert target.read_text(encoding="utf-8") == "between\n"
    args = ["--mode", "live", "--reason", "resume", "--json"]
    resumed = replay(project, home, trace_id, "auto", *args, "--from-step", "2")
    document = json.loads(resumed.stdout)
    assert resumed.returncode == 1 and document["sandbox"] == expected_prefix_sandbox("auto"), resumed.stdout
    effects = [d["reason"] for d in document["divergences"] if d["kind"] == "side_effect"]
    assert effects and str(target) in effects[0] and "prefix_writer() at adv_sandbox_agents.py:" in effects[0]
    assert target.read_text(encoding="utf-8") == "between\n"  # blocked: nothing appended
    live_part = replay(project, home, trace_id, "auto", *args, "--from-step", "1")
    assert live_part.returncode == 0, live_part.stdout
    assert target.read_text(encoding="utf-8") == "between\nbetween\n"  # after step 0: the live part


@pytest.mark.parametrize("sandbox", MODES)
def test_the_recorded_steps_of_a_live_replay_are_confined_below_python(
    project: Path, home: Path, outside: Path, listener: socket.socket, sandbox: str
) -> None:
    """A live replay from step 2 replays the code between the recorded steps 0 and 1 offline: its writes through
    the ledger and the connection the module opened at import (the import is live code), a C++ file write and
    a program started below the audit hooks. Under the seccomp supervisor none of them happens, each is named,
    and the live part never starts (the agent's state holds what was refused); under the audit hooks alone the
    spawn is still reported (the writes are the gap ``dry`` lists). From step 1 the same code is the live part,
    run under the same filter: every effect is real."""
    ledger, target, marker = outside / "ledger.txt", outside / "notes.csv", outside / "spawned"
    env = {"ADV_LEDGER": str(ledger), "ADV_PEER": f"127.0.0.1:{listener.getsockname()[1]}"}
    trace_id = record(project, home, f"prefix_below({str(target)!r}, {str(marker)!r})", **env)
    lines = "prefix\nbuffered\nlive\n"
    assert ledger.read_text(encoding="utf-8") == lines and marker.exists() and target.exists()
    assert received(listener) == b"prefix"  # every effect is real when recorded
    marker.unlink()
    target.unlink()
    dry = json.loads(replay(project, home, trace_id, sandbox, "--mode", "dry", "--json", **env).stdout)
    prefix = dry["readiness"]["sandbox"]["live_from_step"]
    assert prefix["enforcement"] == expected_prefix_sandbox(sandbox), prefix
    gap = "reads a call's arguments once" if SUPERVISED and sandbox == "auto" else "code below Python"
    assert any(gap in line for line in prefix["not_covered"]), prefix
    args = ["--mode", "live", "--reason", "resume", "--json", "--from-step"]
    resumed = replay(project, home, trace_id, sandbox, *args, "2", **env)
    document = json.loads(resumed.stdout)
    effects = [d["reason"] for d in document["divergences"] if d["kind"] == "side_effect"]
    assert resumed.returncode == 1 and document["sandbox"] == expected_prefix_sandbox(sandbox), resumed.stdout
    if expected_prefix_sandbox(sandbox) == "seccomp supervisor":
        # nothing, not even the refused line the ledger's buffer still held when the replaying process exited
        assert ledger.read_text(encoding="utf-8") == lines, "a recorded step wrote the ledger"
        assert received(listener) == b"" and not target.exists() and not marker.exists()
        for named in (f"{ledger}", f"127.0.0.1:{listener.getsockname()[1]}", f"{target}", "/usr/bin/touch"):
            assert any(named in effect and "refused by the kernel" in effect for effect in effects), (named, effects)
        # the agent's frame that made the call, as for what the audit hooks block (the write and the send release
        # the GIL, so the replaying process can tell; the exec happens in a forked child, named without one)
        port = listener.getsockname()[1]
        for named in (f"{ledger} (in prefix_below() at ", f"127.0.0.1:{port} (in prefix_below() at "):
            assert any(named in effect for effect in effects), (named, effects)
        assert any("the live part did not start" in note for note in document["notes"]), document["notes"]
        assert any(f"{ledger}" in note and "/dev/null" in note for note in document["notes"]), document["notes"]
    else:
        assert marker.exists() and received(listener) == b"prefix"  # what the audit hooks cannot stop
        assert any("a process started below Python's audit hooks" in effect for effect in effects), effects
        assert ledger.read_text(encoding="utf-8") == lines * 2
        marker.unlink()
        target.unlink()
    before = ledger.read_text(encoding="utf-8")
    live = replay(project, home, trace_id, sandbox, *args, "1", **env)
    assert json.loads(live.stdout)["outcome"] == "matched", live.stdout
    assert ledger.read_text(encoding="utf-8") == before + lines
    assert marker.exists() and target.exists() and received(listener) == b"prefix"


@pytest.mark.skipif(not SUPERVISED, reason="needs seccomp user notification on Linux x86-64")
def test_an_async_agents_executor_thread_is_confined_in_the_recorded_steps(
    project: Path, home: Path, outside: Path
) -> None:
    """An asyncio agent writes the ledger opened at import from the loop's default executor: a thread the agent
    started, so under the same filter. From step 2 the write is refused and named and the ledger unchanged;
    from step 1 it is the live part's, and real."""
    ledger = outside / "ledger.txt"
    env = {"ADV_LEDGER": str(ledger)}
    code = "import asyncio, adv_sandbox_agents as a, otel_replay as orp\n"
    code += "asyncio.run(a.async_prefix('between'))\norp.flush()"
    assert run(project, home, ["-c", code], **env).returncode == 0
    with orp.Store.open() as store:
        trace_id = store.runs(limit=1)[0].trace_id
    assert ledger.read_text(encoding="utf-8") == "between\n"
    args = ["--mode", "live", "--reason", "resume", "--json", "--from-step"]
    resumed = replay(project, home, trace_id, "auto", *args, "2", **env)
    document = json.loads(resumed.stdout)
    assert resumed.returncode == 1 and document["sandbox"] == "seccomp supervisor", resumed.stdout
    assert any(f"refused by the kernel): {ledger}" in d["reason"] for d in document["divergences"]), document
    assert ledger.read_text(encoding="utf-8") == "between\n"
    live = replay(project, home, trace_id, "auto", *args, "1", **env)
    assert json.loads(live.stdout)["outcome"] == "matched", live.stdout
    assert ledger.read_text(encoding="utf-8") == "between\nbetween\n"


def test_require_refuses_an_offline_replay_where_the_kernel_offers_no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel without Landlock (macOS, an old kernel, a container that forbids it), as ``landlock.abi`` reports
    it: ``require`` refuses every offline mode before anything runs, ``auto`` falls back to the audit hooks, and a
    live replay is unaffected."""
    monkeypatch.setattr(landlock, "abi", lambda: 0)
    monkeypatch.setenv("OTEL_REPLAY_SANDBOX", "require")
    for mode in (ReplayMode.DRY, ReplayMode.MOCK, ReplayMode.DETERMINISTIC, ReplayMode.WHATIF):
        with pytest.raises(ReplayRefused, match="this system offers no Landlock sandbox"):
            sandbox.plan(mode, allow_side_effects=False)
    assert sandbox.plan(ReplayMode.LIVE, allow_side_effects=False).text == "none"
    monkeypatch.setenv("OTEL_REPLAY_SANDBOX", "auto")
    assert sandbox.plan(ReplayMode.MOCK, allow_side_effects=False).text == "audit hooks only"
    assert sandbox.plan(ReplayMode.WHATIF, allow_side_effects=False).text == "audit hooks only"


def test_a_whatif_replay_leaves_tcp_to_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel offers Landlock, a whatif replay is confined for files and programs, not TCP (its model
    calls connect), and the gaps say so instead of the TCP-by-port one."""
    monkeypatch.setattr(landlock, "abi", lambda: 7)
    monkeypatch.setenv("OTEL_REPLAY_SANDBOX", "auto")
    whatif = sandbox.plan(ReplayMode.WHATIF, allow_side_effects=False)
    mock = sandbox.plan(ReplayMode.MOCK, allow_side_effects=False)
    assert (whatif.text, whatif.network, mock.network) == ("landlock ABI 7", False, True)
    assert any("left to the audit hooks" in gap for gap in sandbox.gaps(whatif))
    assert not any("confined by port" in gap for gap in sandbox.gaps(whatif))
    assert any("confined by port" in gap for gap in sandbox.gaps(mock))


@pytest.mark.parametrize("setting", ["auto", "require"])
def test_a_kernel_that_refuses_the_confinement_after_all(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    """The kernel offered Landlock but refused the ruleset (a seccomp filter, a lost capability): under ``auto``
    the replay learns it runs under the audit hooks alone and its calls run unconfined; under ``require`` it is
    refused before the agent's first line."""

    def refuse(**_: object) -> None:
        raise landlock.LandlockError("landlock_restrict_self: Operation not permitted")

    monkeypatch.setattr(landlock, "restrict_thread", refuse)
    monkeypatch.setenv("OTEL_REPLAY_SANDBOX", setting)
    learned: list[str] = []
    ran: list[str] = []
    with sandbox.Confinement(
        sandbox.Enforcement(abi=7, guarded=True), on_unconfined=lambda weaker: learned.append(weaker.text)
    ) as confinement:
        if setting == "require":
            with pytest.raises(ReplayRefused, match="the kernel refused the sandbox"):
                confinement.call(lambda: ran.append("agent"))
            assert ran == [] and learned == []
        else:
            assert confinement.call(lambda: ran.append("import") or 1) == 1
            confinement.call(lambda: ran.append("call"))
            assert learned == ["audit hooks only"] and ran == ["import", "call"]
