"""The audit journal: a replay that can cause real effects says so on disk before it makes its first real call.

A live replay (or one run with the side-effect guard off) appends a ``started`` record to
``$OTEL_REPLAY_HOME/audit/journal.jsonl`` (folder 0700, file 0600, ``O_APPEND``, flushed and fsync'd, the
folder fsync'd when the file or folder is new) before the agent runs; if the record cannot be written the
replay is refused and nothing runs. When it ends it appends a ``finished`` record. The store stays the audit
of record; the journal covers what never reaches it: a replay killed after its side effect, an exporter set
to ``none``, a Collector that was down. :func:`~otel_replay.replay.safety.audit.audit` merges both.

Every audit record carries a keyed MAC (HMAC-SHA256 with a key derived from the installation's redaction key
under the label :data:`MAC_LABEL`), so a replay row written straight into the store, or an edited one, does
not verify.

This module must never let a replay that needs a record run without one, never raise while reading the
journal back (a torn last line from a crash is skipped with a warning), and never write the key anywhere.
"""

from __future__ import annotations

import datetime as _dt
import hmac
import json
import logging
import os
import socket
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ... import semconv
from ...errors import ReplayRefused
from ...exporting import setup
from ...files import fsync_dir, pid_alive, private_dir, process_start
from ...semconv import ReplayMode

AUDIT_DIR: Final = "audit"
"""Folder of the audit journal inside the otel-replay home."""

JOURNAL_NAME: Final = "journal.jsonl"
"""File name of the audit journal (one JSON record per line)."""

MAC_LABEL: Final = "otel-replay audit mac v1"
"""Domain-separation label of the audit MAC key derived from the redaction key."""

MAC_PREFIX: Final = "hmac-sha256:"

_VERSION: Final = 1
_log = logging.getLogger("otel_replay.audit")


def journal_path(home: Path | str | os.PathLike[str] | None = None) -> Path:
    """``<home>/audit/journal.jsonl`` (``home`` defaults to the configured otel-replay home)."""
    return Path(home if home is not None else setup.runtime().home) / AUDIT_DIR / JOURNAL_NAME


def needs_record(session: Any) -> bool:
    """True for a replay that may cause real effects: live or whatif mode (real model calls), the side-effect
    guard turned off, or tools a policy runs live."""
    if session.mode in (ReplayMode.LIVE, ReplayMode.WHATIF) or bool(getattr(session, "allow_side_effects", False)):
        return True
    if getattr(session, "allowed_effects", ()):
        return True
    return bool(getattr(getattr(session, "policy", None), "tools_live", ()))


# ------------------------------------------------------------------------------------------------ MAC


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def mac(fields: Mapping[str, Any], *, redactor: Any = None) -> str:
    """``hmac-sha256:`` + HMAC-SHA256 of the canonical JSON of ``fields`` under the audit key."""
    key = (redactor or setup.runtime().redactor).derive_key(MAC_LABEL)
    return MAC_PREFIX + hmac.new(key, _canonical(dict(fields)), "sha256").hexdigest()


def mac_valid(fields: Mapping[str, Any], given: Any, *, redactor: Any = None) -> bool:
    """True when ``given`` is the MAC of ``fields`` (constant-time compare); False when missing or wrong."""
    if not isinstance(given, str) or not given.startswith(MAC_PREFIX):
        return False
    return hmac.compare_digest(mac(fields, redactor=redactor), given)


def root_fields(
    *,
    actor: Any,
    os_user: Any,
    reason: Any,
    mode: Any,
    from_step: Any,
    approvals: Any,
    original_trace_id: Any,
    run_id: Any,
    trace_id: Any,
) -> dict[str, Any]:
    """What a replay root's MAC covers, in the form it has both when written and when read from the store
    (strings; a missing reason or from step is ``""``; approvals a list of strings)."""
    return {
        "actor": str(actor or ""),
        "os_user": str(os_user or ""),
        "reason": str(reason or ""),
        "mode": str(mode or ""),
        "from_step": "" if from_step in (None, "") else str(from_step),
        "approvals": [str(a) for a in (approvals or ())],
        "original_trace_id": str(original_trace_id or ""),
        "run_id": str(run_id or ""),
        "trace_id": str(trace_id or ""),
    }


def root_mac(session: Any) -> str:
    """The MAC written on a replay's root span (``otel_replay.replay.audit_mac``)."""
    return mac(
        root_fields(
            actor=session.actor,
            os_user=getattr(session, "os_user", ""),
            reason=session.reason,
            mode=session.mode.value,
            from_step=session.from_step,
            approvals=session.approvals,
            original_trace_id=session.original.trace_id,
            run_id=session.run_id,
            trace_id=session.trace_id,
        )
    )


def root_fields_of(attributes: Mapping[str, str], trace_id: str) -> dict[str, Any]:
    """:func:`root_fields` of a replay root span as the store holds it."""
    raw = attributes.get(semconv.REPLAY_APPROVALS, "")
    try:
        approvals = json.loads(raw) if raw else []
    except ValueError:
        approvals = [raw]
    if not isinstance(approvals, list):
        approvals = [approvals]
    return root_fields(
        actor=attributes.get(semconv.REPLAY_ACTOR),
        os_user=attributes.get(semconv.REPLAY_OS_USER),
        reason=attributes.get(semconv.REPLAY_REASON),
        mode=attributes.get(semconv.REPLAY_MODE),
        from_step=attributes.get(semconv.REPLAY_FROM_STEP),
        approvals=approvals,
        original_trace_id=attributes.get(semconv.REPLAY_OF_TRACE_ID),
        run_id=attributes.get(semconv.RUN_ID),
        trace_id=trace_id,
    )


def record_valid(record: Mapping[str, Any], *, redactor: Any = None) -> bool:
    """True when a journal record's ``mac`` covers the rest of the record."""
    return mac_valid({k: v for k, v in record.items() if k != "mac"}, record.get("mac"), redactor=redactor)


# ------------------------------------------------------------------------------------------- writing


def append(record: Mapping[str, Any], *, home: Path | str | os.PathLike[str] | None = None) -> Path:
    """Append one record (with its MAC) to the journal durably; raises ``OSError`` when it cannot."""
    path = journal_path(home)
    home_dir, folder = path.parent.parent, path.parent
    new_folder = not folder.is_dir()
    private_dir(home_dir)
    private_dir(folder)  # a file where the folder should be raises: the replay is refused
    if new_folder:
        fsync_dir(home_dir)
    body = {**record, "mac": mac({k: v for k, v in record.items() if k != "mac"})}
    line = _canonical(body) + b"\n"
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    existed = path.exists()
    fd = os.open(path, flags, 0o600)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        if os.name != "nt" and info.st_mode & 0o077:
            os.fchmod(fd, 0o600)
        if info.st_size and os.pread(fd, 1, info.st_size - 1) != b"\n":
            line = b"\n" + line  # a torn line left by a crash stays a line of its own
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    if not existed or new_folder:
        fsync_dir(folder)
    return path


def _now() -> str:
    return _dt.datetime.now(tz=_dt.timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True, kw_only=True)
class JournalEntry:
    """A replay's ``started`` record as written: what :func:`finished` needs to close it."""

    run_id: str
    path: Path


def started(session: Any) -> JournalEntry:
    """Write the ``started`` record of a replay that needs one, before its first real call.

    Raises :class:`~otel_replay.replay.engine.ReplayRefused` when the record cannot be made durable."""
    record = {
        "v": _VERSION,
        "record": "started",
        "run_id": session.planned_run_id,
        "at": _now(),
        "actor": session.actor,
        "os_user": getattr(session, "os_user", ""),
        "reason": session.reason,
        "mode": session.mode.value,
        "from_step": session.from_step,
        "approvals": list(session.approvals),
        "allow_side_effects": bool(getattr(session, "allow_side_effects", False)),
        "allowed_effects": list(getattr(session, "allowed_effects", ())),
        "sandbox": getattr(session, "sandbox", ""),
        "original_trace_id": session.original.trace_id,
        "original_run_id": session.original.run_id,
        "pid": os.getpid(),
        "pid_start": process_start(os.getpid()),
        "host": socket.gethostname(),
    }
    try:
        path = append(record)
    except (OSError, ValueError) as exc:
        where = journal_path()
        raise ReplayRefused(
            f"the audit record of this {session.mode.value} replay cannot be written to {where} "
            f"({type(exc).__name__}: {exc}); nothing ran: make {where.parent} a folder you can "
            "write (mode 700) and try again"
        ) from None
    return JournalEntry(run_id=session.planned_run_id, path=path)


def finished(entry: JournalEntry | None, session: Any, *, outcome: str | None = None) -> None:
    """Write the ``finished`` record (outcome, executions, replay trace id). Never raises: the replay already
    happened, and a missing finished record makes the audit list it as ``interrupted``."""
    if entry is None:
        return
    executions = session.executions() if hasattr(session, "executions") else {}
    record = {
        "v": _VERSION,
        "record": "finished",
        "run_id": entry.run_id,
        "at": _now(),
        "outcome": outcome or session.outcome,
        "executions": executions,
        "replay_trace_id": session.trace_id,
        "pid": os.getpid(),
        "host": socket.gethostname(),
    }
    try:
        append(record, home=entry.path.parent.parent)
    except Exception as exc:  # noqa: BLE001 - logged; the audit still has the started record
        _log.warning("the audit journal %s could not record the end of replay %s: %s", entry.path, entry.run_id, exc)


# ------------------------------------------------------------------------------------------- reading


def read(home: Path | str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Every well-formed record of the journal, oldest first; torn or damaged lines are skipped with a warning."""
    path = journal_path(home)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        _log.warning("the audit journal %s cannot be read (%s): replays recorded only there are not listed", path, exc)
        return []
    records: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("run_id"), str):
                raise ValueError("not a journal record")
        except ValueError:
            torn = number == len(lines)  # no newline after it: a write cut short
            _log.warning(
                "the audit journal %s has a %s at line %d; it was skipped",
                path,
                "torn last line (a replay was killed while writing it)" if torn else "damaged line",
                number,
            )
            continue
        records.append(record)
    return records


def process_alive(record: Mapping[str, Any]) -> bool:
    """True when the process that wrote ``record`` may still be running: on another host (it cannot be
    checked from here), or on this one with the same pid and start time."""
    if record.get("host") != socket.gethostname():
        return True
    pid = record.get("pid")
    if not isinstance(pid, int):
        return False
    was = record.get("pid_start")
    return pid_alive(pid, started=None if was is None else str(was))


def os_user() -> str:
    """The operating-system user running this process, by its user id (never from ``--actor`` or ``$USER``)."""
    import getpass

    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except Exception:  # noqa: BLE001 - no user database (containers), or not POSIX
        pass
    if hasattr(os, "getuid"):
        return f"uid-{os.getuid()}"
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001
        return "unknown"
