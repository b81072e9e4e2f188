"""The file lock that gives one process at a time the embedded (chDB) store.

Why it exists: chDB can open an on-disk path from ONE process only; a second process gets an opaque
``Error initializing EmbeddedServer``. So every process takes an exclusive ``fcntl.flock`` on a lock file next
to the store before opening it, writes who it is (pid, host, command, since) into the file, waits a bounded
time (:func:`otel_replay.settings.resolve_lock_timeout`) when someone else holds it, and then fails with a
one-line :class:`~otel_replay.errors.StoreBusyError` naming the holder and what to do. The kernel drops the
lock when the holder dies, so a crashed process never leaves the store locked.

It must never break a lock it does not hold, and never wait without a bound.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .. import settings
from ..errors import StoreBusyError
from ..redaction.logs import scrub_message

__all__ = ["LockHolder", "StoreLock", "read_holder"]

POLL_S: Final = 0.05
_HELD_HERE: set[str] = set()  # lock files held by StoreLock objects of this process


@dataclass(frozen=True, kw_only=True)
class LockHolder:
    """Who holds (or last held) a store lock, as written in the lock file."""

    pid: int
    host: str
    command: str
    since: str
    """ISO 8601 UTC time the lock was taken."""

    def describe(self) -> str:
        """One phrase for messages: ``pid 123 on host-a (python agent.py) since 2026-…``."""
        command = self.command if len(self.command) <= 80 else self.command[:77] + "..."
        return f"pid {self.pid} on {self.host} ({command}) since {self.since}"


def read_holder(path: str | os.PathLike[str]) -> LockHolder | None:
    """The holder recorded in a lock file, or None when it is absent or unreadable."""
    try:
        data: Any = json.loads(Path(path).read_text(encoding="utf-8") or "null")
        return LockHolder(
            pid=int(data["pid"]), host=str(data["host"]), command=str(data["command"]), since=str(data["since"])
        )
    except (OSError, ValueError, TypeError, KeyError):
        return None


class StoreLock:
    """An exclusive, process-wide lock on one store path: :meth:`acquire`, then :meth:`release`."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float | None = None, what: str = "store") -> None:
        """Lock file ``path``; wait at most ``timeout`` seconds (argument, ``OTEL_REPLAY_LOCK_TIMEOUT``, 10 s)."""
        self.path = Path(path)
        self.timeout = settings.resolve_lock_timeout(timeout)
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, waiting up to :attr:`timeout`; raises StoreBusyError naming the holder."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = read_holder(self.path)
                    if str(self.path.resolve()) in _HELD_HERE:
                        raise StoreBusyError(
                            f"the {self.what} {self.path.parent} is already open in this process; close the other "
                            "Store first (chDB opens one store per process)"
                        ) from None
                    if time.monotonic() >= deadline:
                        who = holder.describe() if holder is not None else "another process"
                        raise StoreBusyError(
                            f"the {self.what} at {self.path.parent} is busy: held by {who}; waited "
                            f"{self.timeout:g}s. Close that process (or wait for it to finish), or raise "
                            f"{settings.OTEL_REPLAY_LOCK_TIMEOUT} to wait longer"
                        ) from None
                    time.sleep(POLL_S)
            info = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                # the command line may carry a secret (``--set-param api_key=...``, a store URL's password)
                "command": scrub_message(" ".join(sys.argv) or sys.executable),
                "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        _HELD_HERE.add(str(self.path.resolve()))

    def release(self) -> None:
        """Release the lock (the holder info stays in the file for diagnostics). Safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is not None:
            _HELD_HERE.discard(str(self.path.resolve()))
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
