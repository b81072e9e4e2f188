"""Agents for tests/adversarial/test_adv_side_effects.py.

Each agent makes one recorded tool call and then an effect through plain, undecorated code that otel-replay
knows nothing about: a process, a file write, a SQLite database, a delete, a rename, a socket connection.
Recording runs it for real; a replay must not. The effect is made directly, from a thread pool created at
import (so its worker thread exists before any replay), from a ``threading.Thread``, or from asyncio (a task and
``loop.run_in_executor``). The agents tolerate ``OSError`` as code on a read-only system would, so their
output is the same whether the effect happened or was blocked.
"""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import importlib
import os
import shlex
import socket
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import otel_replay as orp

POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="adv-side-effects")
POOL.submit(lambda: None).result()  # its worker thread exists before any replay starts


@orp.tool("lookup", risk="read")
def lookup(key: str) -> str:
    return key.upper()


def make_effect(kind: str, target: str) -> None:
    """One real side effect, in code no decorator or instrumentor knows about."""
    if kind == "spawn":  # the child would create the marker file named by target
        subprocess.run([sys.executable, "-c", f"open({target!r}, 'w').write('ran')"], check=False, timeout=60)
    elif kind == "system":
        script = shlex.quote(f"open({target!r}, 'w').write('ran')")
        os.system(f"{shlex.quote(sys.executable)} -c {script}")
    elif kind == "write":
        Path(target).write_text("written", encoding="utf-8")
    elif kind == "remove":
        os.remove(target)
    elif kind == "rename":
        os.rename(target, target + ".moved")
    elif kind == "sqlite":  # SQLite opens the file in C, past the ``open`` audit event
        with contextlib.closing(sqlite3.connect(target)) as conn:
            conn.execute("CREATE TABLE notes (text TEXT)")
            conn.execute("INSERT INTO notes VALUES ('written')")
            conn.commit()
    elif kind == "connect":
        host, _, port = target.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(b"hello")
    else:
        raise ValueError(kind)


def tolerant_effect(kind: str, target: str) -> None:
    try:
        make_effect(kind, target)
    except OSError:
        pass  # as on a read-only system: carry on


@orp.agent("direct-effect")
def direct_effect(kind: str, target: str) -> str:
    answer = lookup(kind)
    tolerant_effect(kind, target)
    return answer


@orp.agent("pool-effect")
def pool_effect(kind: str, target: str) -> str:
    answer = lookup(kind)
    POOL.submit(tolerant_effect, kind, target).result()
    return answer


@orp.agent("thread-effect")
def thread_effect(kind: str, target: str) -> str:
    answer = lookup(kind)
    worker = threading.Thread(target=tolerant_effect, args=(kind, target), name="adv-effect-thread")
    worker.start()
    worker.join()
    return answer


@orp.agent("async-effect")
async def async_effect(kind: str, target: str, second: str) -> str:
    """The effect from an asyncio task on ``target``, and from ``run_in_executor`` on ``second``."""
    answer = lookup(kind)

    async def in_task() -> None:
        tolerant_effect(kind, target)

    await asyncio.create_task(in_task())
    await asyncio.get_running_loop().run_in_executor(None, tolerant_effect, kind, second)
    return answer


@orp.agent("plain-writer")
def plain_writer(note: str) -> str:
    """An ordinary agent: a tool call, a scratch file in the temp folder, and a flush of what it recorded so
    far (otel-replay writes its spool from a thread the agent's call starts)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".txt") as scratch:
        scratch.write(note)
    answer = lookup(note)
    orp.flush()
    return answer


@orp.agent("importer")
def importer(module_name: str) -> str:
    """Imports a module by name (the test makes it importable), so Python may write its bytecode."""
    return str(importlib.import_module(module_name).VALUE)


@orp.agent("sqlite-notes")
def sqlite_notes(uri: str) -> str:
    """Keeps scratch tables in SQLite databases that write no file (in memory, SQLite's private temporary
    one), then writes a row to the database the ``file:`` URI ``uri`` names."""
    answer = lookup("notes")
    for name, as_uri in ((":memory:", False), ("", False), ("file::memory:", True)):
        with contextlib.closing(sqlite3.connect(name, uri=as_uri)) as conn:
            conn.execute("CREATE TABLE scratch (text TEXT)")
            conn.execute("INSERT INTO scratch VALUES (?)", (answer,))
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            conn.execute("CREATE TABLE notes (text TEXT)")
            conn.execute("INSERT INTO notes VALUES (?)", (answer,))
            conn.commit()
    except OSError:
        pass
    return answer


@orp.agent("quiet")
def quiet(note: str) -> str:
    """Silences its own chatter the usual way: output written to ``os.devnull``."""
    answer = lookup(note)
    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        print("progress:", answer)
    fd = os.open(os.devnull, os.O_WRONLY)
    try:
        os.write(fd, b"more chatter")
    finally:
        os.close(fd)
    return answer


@orp.tool("note_down", risk="read")
def note_down(text: str, path: str) -> str:
    Path(path).write_text(text, encoding="utf-8")
    return text


@orp.agent("pool-tool")
def pool_tool(text: str, path: str) -> str:
    """A decorated tool run in a pool created before the run: the work item carries the run (recording) or the
    replay (replaying), so the tool is a step of the run either way."""
    return POOL.submit(note_down, text, path).result()


@orp.agent("token-caller")
def token_caller(marker: str) -> str:
    """Runs a command whose arguments hold a credential from the current environment (never recorded)."""
    answer = lookup("call")
    token = os.environ.get("ADV_SIDE_EFFECT_TOKEN", "")
    script = "import sys; open(sys.argv[2], 'w').write('ran')"
    try:
        subprocess.run([sys.executable, "-c", script, f"--api-key={token}", marker], check=False, timeout=60)
    except OSError:
        pass
    return answer


@orp.tool("file_down", risk="write")
def file_down(text: str, path: str) -> str:
    Path(path).write_text(text, encoding="utf-8")
    return text


@orp.agent("bare-thread-tool")
def bare_thread_tool(text: str, path: str) -> str:
    """A write tool run in a thread started with ``_thread.start_new_thread``: it carries no context at all
    (neither the run nor a replay), as a native library's callback thread would."""
    done = threading.Event()
    box: dict[str, str] = {}

    def worker() -> None:
        try:
            box["out"] = file_down(text, path)
        except BaseException as exc:  # noqa: BLE001 - reported in the answer
            box["out"] = f"refused: {type(exc).__name__}"
        done.set()

    _thread.start_new_thread(worker, ())
    if not done.wait(60):
        raise RuntimeError("the worker never finished")
    return box["out"]
