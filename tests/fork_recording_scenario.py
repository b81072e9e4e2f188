"""A pre-fork server in miniature, for ``tests/test_fork_recording.py`` (run as a script; the test imports it only
for :data:`SECRET`).

``python fork_recording_scenario.py MODE HOME RESULTS [PORT]``. The parent configures recording (``MODE``:
``spool``; ``clickhouse-down``: the ClickHouse exporter with a server that refuses connections at ``PORT``;
``clickhouse-server``: the ClickHouse exporter with the fake server this script runs in a thread), records
runs, and forks children that record runs with the real decorators (``fault_agents.fault_agent``):

- ``os-exit``: ``os.fork``, records, leaves through ``sys.exit(0)`` (the interpreter's exit: ``atexit``);
- ``os-underscore-exit``: ``os.fork``, records, ``orp.flush()``, then ``os._exit(0)`` (as gunicorn workers can);
- ``mp-return``: ``multiprocessing`` ``fork`` context, records and returns (``multiprocessing`` ends it with
  ``os._exit``: no ``atexit``);
- ``mp-reconfigure``: the same after ``orp.configure(service_name=...)`` in the child (a runtime of its own,
  whose redactor reads the home's key again).

The fork happens while another thread of the parent is exporting, stopped at a named point: in ``spool`` and
``clickhouse-down`` modes at the ``spool.append`` fault point (the spool's lock and the batch processor's export
lock held), the parent's hook reporting through a pipe and waiting on another one, while a third thread holds
the delivery watch's lock; then once more while a thread of the parent reconfigures (holding the setup lock) and
its old pipeline is stopped at that point, and a ``multiprocessing`` child configures (``mp-configure-during-
reconfigure``). In ``clickhouse-server`` mode the fake server holds the parent's insert unanswered until the
children are done (the exporter's lock held) while a third thread holds the runtime's flusher lock (the
children's exit flushes wait on the server through it), and a child is also forked while the parent holds an idle
keep-alive connection.

Every process appends one JSON line per run to ``RESULTS`` (one ``write``): role, pid, trace id, span count; the
parent ends with a ``parent`` line (the children's exit codes, whether the gated flush returned True, and in
``clickhouse-server`` mode the fake server's log). Every value a run sees carries :data:`SECRET`.
"""

from __future__ import annotations

import http.server
import json
import multiprocessing
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lz4.frame

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fault_agents import fault_agent, spans_of

import otel_replay as orp
from otel_replay import faults
from otel_replay.exporting.pipeline import DeliveryWatch
from otel_replay.runtime import current as current_runtime

SECRET = "sk-proj-" + "F0rkSafeKey" * 3
"""An OpenAI-shaped key every run is given (the redactor replaces it by a keyed fingerprint)."""

GUARD_S = 120  # bounds every wait of this script, so a bug ends in a failure instead of a hang; never asserted

MODE = HOME = RESULTS = ""  # set from the command line when run as a script
PARENT = 0


def record(role: str, tools: int) -> None:
    """One run, appended to the results file as one line."""
    out = fault_agent(f"<{role}>", tools=tools, pad=f"use {SECRET}")
    line = {"role": role, "pid": os.getpid(), "trace_id": out["trace_id"], "spans": spans_of(tools)}
    fd = os.open(RESULTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def mp_return() -> None:
    record("mp-return", 3)


def mp_reconfigure() -> None:
    orp.configure(home=HOME, service_name="fork-child", **exporter_options())
    record("mp-reconfigure", 1)


def mp_configure_while_the_parent_configures() -> None:
    orp.configure(home=HOME, service_name="fork-child-2", **exporter_options())
    record("mp-configure-during-reconfigure", 2)


def fork_os(role: str, tools: int, *, underscore_exit: bool) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:
        record(role, tools)
        if underscore_exit:
            ok = orp.flush()
            os._exit(0 if ok else 3)
    except BaseException:  # noqa: BLE001 - a child never runs on into the parent's code
        os._exit(4)
    sys.exit(0)  # the interpreter's exit: threads joined, atexit (otel-replay's flush) run


def wait_pid(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def start_mp_children() -> list[multiprocessing.process.BaseProcess]:
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=mp_return), context.Process(target=mp_reconfigure)]
    for child in children:
        child.start()
    return children


def fork_every_child() -> dict[str, int]:
    """Fork the four children, wait for them, and return their exit codes by role."""
    codes: dict[str, int] = {}
    os_exit = fork_os("os-exit", 2, underscore_exit=False)
    os_underscore = fork_os("os-underscore-exit", 0, underscore_exit=True)
    mp_children = start_mp_children()
    codes["os-exit"] = wait_pid(os_exit)
    codes["os-underscore-exit"] = wait_pid(os_underscore)
    for role, child in zip(("mp-return", "mp-reconfigure"), mp_children, strict=True):
        child.join(GUARD_S)
        codes[role] = child.exitcode if child.exitcode is not None else -999
    return codes


def gated_flush() -> bool:
    """The flush of the parent's export thread, which waits for as long as the children take."""
    return orp.flush(timeout_millis=GUARD_S * 1000)


def exporter_options() -> dict[str, Any]:
    if MODE == "spool":
        return {"exporter": "spool"}
    return {"exporter": "clickhouse", "store": f"http://127.0.0.1:{sys.argv[4]}/default"}


# ---------------------------------------------------------------------------------- spool, clickhouse-down


class Gate:
    """Stops a thread of the parent at its next pass of the ``spool.append`` fault point (where it holds the
    spool's lock and the batch processor's export lock): the hook reports on a pipe and waits on another. Only
    in the parent, one pass per :meth:`hold`."""

    def __init__(self) -> None:
        self.reached_r, self.reached_w = os.pipe()
        self.go_r, self.go_w = os.pipe()
        self.armed = False
        real = faults.reached

        def reached(point: str, **kwargs: Any) -> None:
            if point == "spool.append" and os.getpid() == PARENT and self.armed:
                self.armed = False
                os.write(self.reached_w, b"!")
                os.read(self.go_r, 1)
            real(point, **kwargs)

        faults.reached = reached

    def hold(self, target: Callable[[], object], name: str) -> threading.Thread:
        """Run ``target`` in a thread; return once that thread is stopped at the point."""
        self.armed = True
        thread = threading.Thread(target=target, name=name)
        thread.start()
        if os.read(self.reached_r, 1) != b"!":
            raise SystemExit(f"{name} never reached spool.append")
        return thread

    def release(self, thread: threading.Thread) -> None:
        os.write(self.go_w, b"!")
        thread.join(GUARD_S)


def hold_lock(lock: threading.Lock) -> Callable[[], None]:
    """Hold ``lock`` in another thread (it reports through a pipe once it has it); returns what releases it."""
    held_r, held_w = os.pipe()
    free_r, free_w = os.pipe()

    def hold() -> None:
        with lock:
            os.write(held_w, b"!")
            os.read(free_r, 1)

    thread = threading.Thread(target=hold, name="lock-holder")
    thread.start()
    os.read(held_r, 1)

    def release() -> None:
        os.write(free_w, b"!")
        thread.join(GUARD_S)

    return release


def spool_scenario() -> dict[str, Any]:
    orp.configure(home=HOME, **exporter_options())
    gate = Gate()
    # Round 1: a thread of the parent flushes and is stopped in the middle of writing the batch; another holds
    # the delivery watch's lock (held for an instant after every export).
    record("parent-before", 1)  # queued in the parent's batch processor (the schedule delay is long)
    flushed: list[bool] = []
    exporting = gate.hold(lambda: flushed.append(gated_flush()), "parent-export")
    runtime = current_runtime()
    assert runtime is not None and isinstance(runtime.watch, DeliveryWatch)
    release_watch = hold_lock(runtime.watch._mutex)
    record("parent-queued", 2)  # in the parent's queue at fork time: the children must not export it
    codes = fork_every_child()
    release_watch()
    gate.release(exporting)
    # Round 2: a thread of the parent reconfigures (holding the setup lock) while its old pipeline exports.
    record("parent-between", 1)  # queued in the old pipeline, which the reconfiguring thread shuts down
    reconfiguring = gate.hold(
        lambda: orp.configure(home=HOME, service_name="parent-reconfigured", **exporter_options()), "reconfigure"
    )
    child = multiprocessing.get_context("fork").Process(target=mp_configure_while_the_parent_configures)
    child.start()
    child.join(GUARD_S)
    codes["mp-configure-during-reconfigure"] = child.exitcode if child.exitcode is not None else -999
    gate.release(reconfiguring)
    record("parent-after", 0)
    return {"codes": codes, "gated_flush": flushed == [True], "final_flush": orp.flush()}


# ------------------------------------------------------------------------------------- clickhouse-server

_TRACE_ID = re.compile(rb"[0-9a-f]{32}")
_FINGERPRINT = re.compile(rb"\[REDACTED:openai_api_key:(hmac-sha256:[0-9a-f]+)\]")


class FakeClickHouse(http.server.ThreadingHTTPServer):
    """Enough of ClickHouse's HTTP interface for clickhouse-connect: empty answers, a version, inserts taken.

    Logs every request: the client's port (one per TCP connection), the parent's phase when it arrived,
    whether it is an insert, and the trace ids an insert carries. In phase ``gate`` the first insert is held
    unanswered (``gate_reached`` set) until ``release`` is set."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.phase = "start"
        self.log: list[dict[str, Any]] = []
        self.gate_reached = threading.Event()
        self.release = threading.Event()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a connection can carry many requests
    server: FakeClickHouse

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = self._body()
        if self.headers.get("Content-Encoding") == "lz4":
            body = lz4.frame.decompress(body)
        insert = body.lstrip().upper().startswith(b"INSERT")
        phase = self.server.phase
        self.server.log.append(
            {
                "port": self.client_address[1],
                "phase": phase,
                "insert": insert,
                "first_words": body[:30].decode("ascii", "replace"),
                "trace_ids": sorted({m.decode() for m in _TRACE_ID.findall(body)}) if insert else [],
                "fingerprints": sorted({m.decode() for m in _FINGERPRINT.findall(body)}),
                "secret_seen": SECRET.encode() in body,
            }
        )
        if insert and phase == "gate" and not self.server.gate_reached.is_set():
            self.server.gate_reached.set()
            self.server.release.wait(GUARD_S)
        answer = b"25.3.1\tUTC\n" if b"version()" in body else b""
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_GET = do_POST

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = []
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            chunks.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline().strip():  # trailers, up to the blank line
            pass
        return b"".join(chunks)


def clickhouse_server_scenario() -> dict[str, Any]:
    server = FakeClickHouse()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.argv[4:] = [str(server.server_address[1])]
    orp.configure(home=HOME, **exporter_options())
    record("parent-before", 1)
    first_flush = orp.flush()  # inserted; the parent keeps its keep-alive connection for the next insert
    server.phase = "idle-fork"
    codes = {"idle-child": wait_pid(fork_os("idle-child", 1, underscore_exit=False))}
    server.phase = "gate"
    record("parent-gated", 2)
    flushed: list[bool] = []
    exporting = threading.Thread(target=lambda: flushed.append(gated_flush()), name="parent-export")
    exporting.start()
    if not server.gate_reached.wait(GUARD_S):  # the export thread now holds the exporter's lock
        raise SystemExit("the parent's insert never reached the server")
    record("parent-queued", 1)  # in the parent's queue at fork time: the children must not export it
    # another thread holds the runtime's flusher lock (held for an instant by every flush that waits on a server):
    # the children's own flushes take it
    runtime = current_runtime()
    assert runtime is not None
    release_flusher = hold_lock(runtime.flusher.lock)
    try:
        server.phase = "children"
        codes.update(fork_every_child())
    finally:
        release_flusher()
    server.phase = "after"
    server.release.set()
    exporting.join(GUARD_S)
    record("parent-after", 0)
    final_flush = orp.flush()
    return {
        "codes": codes,
        "gated_flush": flushed == [True] and first_flush,
        "final_flush": final_flush,
        "server_log": server.log,
    }


def main() -> None:
    outcome = clickhouse_server_scenario() if MODE == "clickhouse-server" else spool_scenario()
    fd = os.open(RESULTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, (json.dumps({"role": "parent", "pid": PARENT, **outcome}) + "\n").encode())
    os.close(fd)


if __name__ == "__main__":
    MODE, HOME, RESULTS = sys.argv[1], sys.argv[2], sys.argv[3]
    PARENT = os.getpid()
    main()
