"""Agents for tests/adversarial/test_adv_sandbox.py: ordinary agent code whose effects Python's audit hooks
cannot see, or see too late.

``book`` writes through resources its module opens at import (a ledger file, a SQLite database, a TCP connection,
each named by an environment variable when the module is imported), from an undecorated helper. ``count_entries``
reads through a per-thread SQLite connection its module opens at import. ``arrow_note`` writes a file from C++
(pyarrow). ``native`` writes a file and starts a process through libc with ``ctypes``. ``vacuum`` has SQLite copy
an in-memory database to a file (``VACUUM INTO``), which SQLite does in C with no audit event. ``c_spawn`` starts
a program through ``_posixsubprocess.fork_exec`` directly, the C function ``subprocess`` calls after its audit
event, so no audit event is raised. ``prefix_below`` makes such effects between its two recorded steps, the
part a live replay from step 2 replays offline; ``async_prefix`` writes there from an asyncio loop's executor
thread. The tests copy this file into a project folder of their own and record and
replay it in fresh processes, as a user would.
"""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import os
import socket
import sqlite3
import subprocess
import threading

import otel_replay as orp

LEDGER = open(os.environ["ADV_LEDGER"], "a", encoding="utf-8") if os.environ.get("ADV_LEDGER") else None  # noqa: SIM115
DB = sqlite3.connect(os.environ["ADV_DB"], check_same_thread=False) if os.environ.get("ADV_DB") else None
if DB is not None:
    DB.execute("CREATE TABLE IF NOT EXISTS ledger (entry TEXT)")
    DB.commit()
_CONNECTIONS = threading.local()
"""Per-thread connections, as a thread-safe data layer keeps them; the importing thread's is opened at import."""
_CONNECTIONS.catalogue = sqlite3.connect(os.environ["ADV_CATALOGUE"]) if os.environ.get("ADV_CATALOGUE") else None
# opened with SQLite's default check_same_thread=True: usable only on the importing thread
_peer = os.environ.get("ADV_PEER")
PEER = (
    socket.create_connection((_peer.rpartition(":")[0], int(_peer.rpartition(":")[2])), timeout=10) if _peer else None
)


@orp.tool("lookup", risk="read")
def lookup(key: str) -> str:
    return key.upper()


def append_entry(entry: str) -> None:
    """The undecorated helper: writes through what the module opened at import."""
    if LEDGER is not None:
        LEDGER.write(entry + "\n")
        LEDGER.flush()
    if DB is not None:
        DB.execute("INSERT INTO ledger VALUES (?)", (entry,))
        DB.commit()
    if PEER is not None:
        PEER.sendall(entry.encode())


@orp.agent("import-time-ledger")
def book(entry: str) -> str:
    answer = lookup(entry)
    append_entry(entry)
    return answer


def native_effects(target: str, marker: str) -> None:
    """Writes ``target`` and runs ``touch marker`` through libc, below Python's audit events."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.open(target.encode(), os.O_WRONLY | os.O_CREAT, 0o644)
    if fd >= 0:
        libc.write(fd, b"written by libc", 15)
        libc.close(fd)
    libc.system(f"touch {marker}".encode())


def _entries() -> int:
    """The undecorated helper: reads through this thread's connection, the one the module opened at import."""
    return int(_CONNECTIONS.catalogue.execute("SELECT count(*) FROM ledger").fetchone()[0])


@orp.agent("catalogue-reader")
def count_entries(entry: str) -> str:
    return f"{lookup(entry)}: {_entries()} entries"


@orp.agent("native-writer")
def native(target: str, marker: str) -> str:
    answer = lookup(target)
    with contextlib.suppress(OSError):  # as code on a read-only system would: carry on
        native_effects(target, marker)
    return answer


@orp.agent("arrow-writer")
def arrow_note(target: str) -> str:
    """Writes a CSV file through pyarrow's C++ file system, which raises no Python audit event; a failed write is
    ignored (``ArrowIOError`` is an ``OSError``), as best-effort export code would."""
    import pyarrow as pa
    import pyarrow.csv

    answer = lookup(target)
    with contextlib.suppress(OSError):
        pyarrow.csv.write_csv(pa.table({"note": [answer]}), target)
    return answer


@orp.agent("sqlite-vacuum")
def vacuum(target: str, how: str = "vacuum", swallow: bool = False) -> str:
    """Keeps its notes in memory, then has SQLite (in C) copy them to ``target``: ``VACUUM INTO`` or
    ``ATTACH DATABASE`` and a table created in it. With ``swallow``, a failed copy is ignored, as code that
    treats the copy as best effort would."""
    answer = lookup(target)
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute("INSERT INTO notes VALUES (?)", (answer,))
        conn.commit()
        with contextlib.suppress(sqlite3.Error) if swallow else contextlib.nullcontext():
            if how == "attach":
                conn.execute("ATTACH DATABASE ? AS copy", (target,))
                conn.execute("CREATE TABLE copy.notes AS SELECT * FROM notes")
                conn.commit()
            else:
                conn.execute("VACUUM INTO ?", (target,))
    return answer


@orp.agent("sqlite-archive")
def archive(database: str, entry: str, write: bool = True) -> str:
    """Opens an existing database, makes sure its table is there, counts its rows and (with ``write``) adds
    one, ignoring a failed insert as best-effort bookkeeping would."""
    answer = lookup(entry)
    with contextlib.closing(sqlite3.connect(database)) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS ledger (entry TEXT)")
        count = conn.execute("SELECT count(*) FROM ledger").fetchone()[0]
        if write:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("INSERT INTO ledger VALUES (?)", (entry,))
                conn.commit()
    return f"{answer} after {count}"


@orp.agent("prefix-writer")
def prefix_writer(target: str) -> str:
    """Two recorded steps with a file write between them: in a live replay from step 2 the write belongs to
    the recorded part (replayed offline), from step 1 to the live part."""
    first = lookup("a")
    with contextlib.suppress(OSError), open(target, "a", encoding="utf-8") as out:
        out.write("between\n")
    return first + lookup("b")


def fork_exec(argv: list[str]) -> None:
    """Run ``argv`` to its end through ``_posixsubprocess.fork_exec``, with the arguments ``subprocess`` passes
    it on this Python; raise the ``OSError`` the child's ``exec`` met, as ``subprocess`` does."""
    import _posixsubprocess

    errpipe_read, errpipe_write = os.pipe()
    try:
        head = [[os.fsencode(a) for a in argv], [os.fsencode(argv[0])], True, (errpipe_write,), None, None]
        head += [-1, -1, -1, -1, -1, -1, errpipe_read, errpipe_write, True, False]  # pipes, restore_signals, setsid
        if "process_group" in inspect.signature(subprocess.Popen).parameters:
            head.append(-1)  # process_group (3.11)
        tail: list[object] = [None, None, None, -1, None]  # gid, groups, uid, umask, preexec_fn
        if hasattr(subprocess, "_USE_VFORK"):
            tail.append(False)  # allow_vfork (3.12, and later 3.11 releases)
        pid = _posixsubprocess.fork_exec(*head, *tail)
    finally:
        os.close(errpipe_write)
    failed = b""
    try:
        while part := os.read(errpipe_read, 50000):  # the child may write its error in pieces: read to the end
            failed += part
    finally:
        os.close(errpipe_read)
    os.waitpid(pid, 0)
    if failed:
        kind, errno, _ = failed.split(b":", 2)
        raise OSError(int(errno, 16), f"exec failed ({kind.decode()})")


@orp.agent("c-spawner")
def c_spawn(marker: str) -> str:
    """Starts ``touch marker`` below Python's audit hooks and lets a failure propagate."""
    answer = lookup(marker)
    fork_exec(["/usr/bin/touch", marker])
    return answer


@orp.agent("prefix-below")
def prefix_below(target: str, marker: str) -> str:
    """Between its two recorded steps, effects no audit hook sees: a write through the ledger its module opened at
    import, bytes sent through the connection it opened at import, a pyarrow (C++) file write and a program
    started through ``_posixsubprocess``; after the second step one more ledger line. In a live replay from step 2
    the effects belong to the recorded part (replayed offline), from step 1 to the live part. Failures are
    ignored, as best-effort code would: a line whose flush failed stays in the ledger's buffer, which the agent
    flushes again on its way out."""
    import pyarrow as pa
    import pyarrow.csv

    try:
        first = lookup("a")
        with contextlib.suppress(OSError):
            os.write(LEDGER.fileno() if LEDGER is not None else -1, b"prefix\n")
        with contextlib.suppress(OSError):  # a refused flush leaves the line in the buffer
            if LEDGER is not None:
                LEDGER.write("buffered\n")
                LEDGER.flush()
        with contextlib.suppress(OSError):
            if PEER is not None:
                PEER.sendall(b"prefix")
        with contextlib.suppress(OSError):
            pyarrow.csv.write_csv(pa.table({"note": [first]}), target)
        with contextlib.suppress(OSError):
            fork_exec(["/usr/bin/touch", marker])
        second = lookup("b")
        os.write(LEDGER.fileno() if LEDGER is not None else -1, b"live\n")
        return first + second
    finally:  # as code that flushes its log on the way out, however it leaves
        with contextlib.suppress(OSError):
            if LEDGER is not None:
                LEDGER.flush()


@orp.tool("lookup_async", risk="read")
async def lookup_async(key: str) -> str:
    return key.upper()


def _log_line(text: str) -> None:
    if LEDGER is not None:
        LEDGER.write(text + "\n")
        LEDGER.flush()


@orp.agent("async-prefix")
async def async_prefix(entry: str) -> str:
    """An asyncio agent that, between its two recorded steps, appends to the ledger its module opened at import
    from the event loop's default executor (a pool thread the loop starts on first use)."""
    import asyncio

    first = await lookup_async("a")
    with contextlib.suppress(OSError):
        await asyncio.get_running_loop().run_in_executor(None, _log_line, entry)
    return first + await lookup_async("b")
