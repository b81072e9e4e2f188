"""Child process of the disk-full fault tests: record runs before, while and after the disk is full.

Run as ``python fault_disk_full.py SCENARIO HOME [URL]``. It prints one JSON document (the runs of each phase,
what ``flush()`` answered, what was logged on the ``otel_replay`` logger, the exporter's counters), then waits
for a line on stdin before exiting, so the parent can ingest both while this agent is alive and after it is gone.

The full disk is a failing writer: :func:`disk_full` makes ``os.write`` / ``os.fsync`` on files under the spool
fail with ENOSPC (the first write is cut short first, as on a filling disk). No root-only mount is needed.

SCENARIO ``spool``: the default spool exporter. ``clickhouse``: the direct exporter to URL, a server that refuses
connections, so batches go to the spool, and to memory (capped) when the spool cannot take them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from fault_agents import Expected, fault_agent, spans_of


@contextlib.contextmanager
def disk_full(directory: Path, *, writes: bool = True, fsyncs: bool = True) -> Iterator[None]:
    """While inside, ``os.write`` (if ``writes``) and ``os.fsync`` (if ``fsyncs``) on files under ``directory``
    fail with ENOSPC; the first write is first cut short (half its bytes written)."""
    real_write, real_fsync = os.write, os.fsync
    prefix = str(directory.resolve())
    short_write_done = threading.Event()

    def under(fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(prefix)
        except OSError:
            return False

    def write(fd: int, data: bytes) -> int:
        if writes and under(fd):
            if not short_write_done.is_set() and len(data) > 1:
                short_write_done.set()
                return real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        if fsyncs and under(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    os.write, os.fsync = write, fsync
    try:
        yield
    finally:
        os.write, os.fsync = real_write, real_fsync


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def record(prefix: str, count: int) -> list[dict]:
    runs = []
    for i in range(count):
        tools = i % 4
        marker = f"<{prefix}-{i}>"
        out = fault_agent(marker, tools=tools)  # must return normally
        runs.append(Expected(out["trace_id"], marker, spans_of(tools)).__dict__)
    return runs


def spool_scenario(home: Path) -> dict:
    import otel_replay as orp
    from otel_replay.exporting import setup

    orp.configure(home=home, exporter="spool")
    spool = home / "spool"
    out: dict = {"runs": {}, "flushed": {}}
    out["runs"]["before"] = record("before", 5)
    out["flushed"]["before"] = orp.flush()
    with disk_full(spool, writes=False):  # the disk fills while a segment is open: its seal (fsync) fails
        out["runs"]["sealing"] = record("sealing", 4)
        out["flushed"]["sealing"] = orp.flush()
    out["open_after_failed_seal"] = len(list(spool.glob("*.open")))
    with disk_full(spool):  # no write goes through either (the first one is cut short)
        out["runs"]["lost"] = record("lost", 4)
        out["flushed"]["lost"] = orp.flush()
    out["runs"]["after"] = record("after", 5)  # space is back
    out["flushed"]["after"] = orp.flush()
    out["open_after_recovery"] = len(list(spool.glob("*.open")))
    out["dropped_spans"] = setup.current_runtime().exporter.dropped_spans
    return out


def clickhouse_scenario(home: Path, url: str) -> dict:
    import otel_replay as orp
    from otel_replay.exporting import setup

    os.environ.update(
        OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS="0",
        OTEL_REPLAY_CLICKHOUSE_MAX_PENDING_ROWS="60",
        OTEL_REPLAY_SPOOL_SEGMENT_BYTES="4096",
    )  # every spooled batch also seals (fsyncs) its segment
    orp.configure(home=home, store=url, exporter="clickhouse")
    exporter = setup.current_runtime().exporter
    spool = home / "spool"
    out: dict = {"runs": {}, "flushed": {}}
    out["runs"]["before"] = record("before", 4)
    out["flushed"]["before"] = orp.flush()
    with disk_full(spool, writes=False):  # batches reach the spool, the seals of its segments fail
        out["runs"]["sealing"] = record("sealing", 6)
        out["flushed"]["sealing"] = orp.flush()
    with disk_full(spool):
        out["runs"]["held"] = record("held", 3)  # fewer spans than the cap: held in memory
        out["flushed"]["held"] = orp.flush()
        out["pending_rows_held"] = exporter._pending_rows
        out["runs"]["dropped"] = record("dropped", 12)  # beyond the cap: dropped
        out["flushed"]["dropped"] = orp.flush()
        out["pending_rows_capped"] = exporter._pending_rows
    out["runs"]["after"] = record("after", 3)  # space is back: held batches are spooled first
    out["flushed"]["after"] = orp.flush()
    out["pending_rows_after"] = exporter._pending_rows
    out["dropped_spans"] = exporter.dropped_spans
    orp.configure(home=home, exporter="spool")  # shuts the clickhouse exporter down
    out["open_after_recovery"] = len(list(spool.glob("*.open")))
    return out


def main(scenario: str, home: str, url: str = "") -> dict:
    messages = _Messages()
    logging.getLogger("otel_replay").addHandler(messages)
    logging.getLogger("otel_replay").setLevel(logging.WARNING)
    out = spool_scenario(Path(home)) if scenario == "spool" else clickhouse_scenario(Path(home), url)
    out["warnings"] = messages.lines
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])), flush=True)
    sys.stdin.readline()  # stay alive (segments still ours) until the parent has ingested
