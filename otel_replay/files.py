"""The files and folders otel-replay keeps under its home: private modes, durable folder entries, and whether
the process that wrote one is still alive.

The home holds the redaction key, the spool, the embedded store and the audit journal. Their writers share
three needs, met here once: a folder or file private to the user (:func:`private_dir`, :func:`private_file`),
a folder whose new, renamed or removed entries survive a crash (:func:`fsync_dir`), and a way to tell whether
the process that wrote a spool segment or a journal record is gone (:func:`pid_alive`,
:func:`process_start`), since both record the writer's pid beside what it wrote.

This module must never loosen a mode, never leave a folder or file it was asked to make private open to other
users, and never call a process gone that may still be running.
"""

from __future__ import annotations

import os
from pathlib import Path


def private_dir(path: Path) -> Path:
    """Create folder ``path`` (with missing parents) readable only by its owner, or make an existing one so.

    The home holds the redaction key, the spool, the store and the audit journal: a home that existed before
    with mode 0755 (a shared ``mkdir``, an image built with another umask) is tightened to 0700, since every
    file under it is then private too. Raises ValueError naming the folder when that is not possible."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    _make_private(path, 0o700)
    return path


def private_file(path: Path, *, label: str = "") -> int | None:
    """Make existing file ``path`` readable and writable only by its owner (0600) when group or others have
    any access to it.

    Returns the mode it had when it had to be tightened (so the caller can say so), None when it was private
    already. Raises ValueError naming the file (after ``label``, e.g. ``"redaction key "``) when it cannot be
    tightened."""
    return _make_private(path, 0o600, label=label)


def _make_private(path: Path, wanted: int, *, label: str = "") -> int | None:
    if os.name == "nt":  # pragma: no cover - POSIX permissions only
        return None
    mode = path.stat().st_mode & 0o777
    if not mode & 0o077:
        return None
    try:
        os.chmod(path, wanted)
    except OSError as exc:
        raise ValueError(
            f"{label}{path} is open to other users (mode {mode:o}) and cannot be made private "
            f"({exc.strerror or exc}); run: chmod {wanted:o} {path}"
        ) from None
    return mode


def fsync_dir(path: Path, *, best_effort: bool = False) -> None:
    """Flush folder ``path``'s entries to disk, so a file created, renamed or removed in it stays so after a
    crash. Raises ``OSError`` when that fails, unless ``best_effort`` (then a failure is ignored: the entry is
    in place, only its durability is not certain)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        if best_effort:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not best_effort:
            raise
    finally:
        os.close(fd)


def process_start(pid: int) -> str | None:
    """Start time of process ``pid`` in clock ticks since boot (Linux ``/proc``), so a reused pid is told
    apart; None where the system does not say."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return raw.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def pid_alive(pid: int, *, started: str | None = None) -> bool:
    """False only when process ``pid`` on this host is known to be gone: no process has that pid, or (given
    ``started``, its :func:`process_start` when it wrote) the process that has it now started at another time,
    so the pid was reused. A process of another user counts as alive, and so does one that cannot be checked."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, owned by another user; anything else: not known to be gone
        pass
    return started is None or process_start(pid) in (None, started)
