"""Named fault-injection points: where a reliability test makes this process die, tear a write or fail.

Why it exists: the crash-safety claims of the spool and the ingest ("a SIGKILL at any point loses no flushed
span and stores none twice") are proved by killing real processes at the exact points that matter. Killing
after a sleep proves nothing reliably (the kill lands wherever the process happens to be, and the test depends
on the machine's speed); a named point is hit at the same place on every run, on any machine.

Arming (nothing else arms a point):

* the environment variable :data:`OTEL_REPLAY_FAULTS`, read once when this module is first imported
  (at process start, in practice), e.g. ``OTEL_REPLAY_FAULTS="spool.seal.before_rename@2=kill"``;
* :func:`arm` / :func:`disarm`, for a process that decides when to arm (a test's child that arms a fault
  once it has flushed three times).

A spec is a comma-separated list of ``POINT[@N][=ACTION]``: act the ``N``-th time (default 1) this process
passes ``POINT`` (one of :data:`POINTS`). Actions: ``kill`` (default: SIGKILL this process), ``tear`` (write
the first half of the data about to be written, then SIGKILL: a torn record; only at points that pass
``fd`` and ``data``), ``raise`` (raise :class:`FaultInjected`, an ``OSError``, from the point).

Process-wide state (documented, because it is unavoidable for a hook reached from any thread): the armed
faults and a pass counter per armed point, guarded by a lock. Unarmed, :func:`reached` costs one global
lookup and a falsy test; nothing is counted.

This module must never act at a point that is not armed, never be armed by anything but the variable or an
explicit :func:`arm` call, and never import anything from otel_replay (it is a leaf every layer may call).
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

OTEL_REPLAY_FAULTS: Final = "OTEL_REPLAY_FAULTS"
"""Environment variable: the faults armed at process start (see the module docstring for the spec)."""

POINTS: Final = frozenset(
    {
        "spool.append",  # a record is about to be written to the open segment (fd, data)
        "spool.seal.before_rename",  # sealing: the segment is fsynced, still ``.open``
        "spool.seal.after_rename",  # sealing: renamed to ``.seg``, the folder not fsynced yet
        "ingest.claimed",  # segments renamed to ``.ingesting``, nothing inserted yet
        "ingest.inserted_chunk",  # one INSERT of a claimed batch committed
        "ingest.inserted",  # every row of a claimed batch committed, no segment deleted yet
        "ingest.deleted_one",  # one ingested segment deleted
    }
)
"""Every point the package passes, by name (docs/testing.md says where each one is)."""

ACTIONS: Final = frozenset({"kill", "tear", "raise"})
"""What an armed point does."""


class FaultInjected(OSError):
    """Raised at a point armed with ``raise`` (an I/O error, as a failing disk or socket would give)."""


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One armed fault: act the ``nth`` time this process passes ``point``."""

    point: str
    """One of :data:`POINTS`."""
    nth: int = 1
    """Which pass acts (1 = the first)."""
    action: str = "kill"
    """One of :data:`ACTIONS`."""


def parse(spec: str) -> tuple[Fault, ...]:
    """The faults of a ``POINT[@N][=ACTION],...`` spec; ``ValueError`` naming the bad part otherwise."""
    faults: list[Fault] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        where, _, action = part.partition("=")
        point, _, nth = where.partition("@")
        point, action = point.strip(), action.strip() or "kill"
        if point not in POINTS:
            known = ", ".join(sorted(POINTS))
            raise ValueError(f"{OTEL_REPLAY_FAULTS}: unknown fault point {point!r} (known: {known})")
        if action not in ACTIONS:
            raise ValueError(
                f"{OTEL_REPLAY_FAULTS}: unknown action {action!r} for {point} (known: {', '.join(sorted(ACTIONS))})"
            )
        try:
            count = int(nth) if nth.strip() else 1
        except ValueError:
            raise ValueError(f"{OTEL_REPLAY_FAULTS}: {part!r}: the pass after '@' must be a whole number") from None
        if count < 1:
            raise ValueError(f"{OTEL_REPLAY_FAULTS}: {part!r}: the pass after '@' counts from 1")
        faults.append(Fault(point=point, nth=count, action=action))
    return tuple(faults)


_lock = threading.Lock()
_armed: dict[str, list[Fault]] = {}
_passes: dict[str, int] = {}


def arm(faults: str | Iterable[Fault]) -> None:
    """Arm ``faults`` (a spec string or :class:`Fault` objects) in place of what was armed; counts restart."""
    parsed = parse(faults) if isinstance(faults, str) else tuple(faults)
    table: dict[str, list[Fault]] = {}
    for fault in parsed:
        if fault.point not in POINTS or fault.action not in ACTIONS or fault.nth < 1:
            raise ValueError(f"not a fault this package can inject: {fault!r}")
        table.setdefault(fault.point, []).append(fault)
    global _armed
    with _lock:
        _passes.clear()
        _armed = table


def armed() -> tuple[Fault, ...]:
    """The faults armed now (empty when none is)."""
    return tuple(fault for faults in _armed.values() for fault in faults)


def disarm() -> None:
    """Disarm every fault."""
    arm(())


def reached(point: str, *, fd: int | None = None, data: bytes | None = None) -> None:
    """Called by the package at ``point``; acts only when a fault is armed there (see the module docstring)."""
    if not _armed:
        return
    faults = _armed.get(point)
    if not faults:
        return
    with _lock:
        count = _passes[point] = _passes.get(point, 0) + 1
    for fault in faults:
        if fault.nth == count:
            _act(fault, fd=fd, data=data)


def _act(fault: Fault, *, fd: int | None, data: bytes | None) -> None:
    if fault.action == "raise":
        raise FaultInjected(errno.EIO, f"fault injected at {fault.point}")
    if fault.action == "tear" and fd is not None and data:
        os.write(fd, data[: len(data) // 2])
    os.kill(os.getpid(), signal.SIGKILL)


def _arm_from_environment() -> None:
    try:
        arm(os.environ.get(OTEL_REPLAY_FAULTS, ""))
    except ValueError as exc:  # a bad spec must not break the program that imports the package
        logging.getLogger("otel_replay").warning("otel-replay: %s; no fault is armed", exc)


_arm_from_environment()
