"""The embedded default exporter: an append-only spool of OTLP protobuf segments under ``OTEL_REPLAY_HOME``.

Why it exists: an agent process must never open the embedded chDB store (one process per path), and must
never wait on or fail because of storage. So spans are appended, as the OTLP ``ExportTraceServiceRequest``
the project's one span encoder writes (:func:`otel_replay.exporting.rows.encode_request`, the bytes of the
SDK's own encoder), to a segment file that only this process writes; the store ingests sealed
segments when it is opened (:mod:`otel_replay.storage.ingest`).

Segment files (see ``docs/storage.md``)::

    <created ns, 20 digits>-<host>-<pid>-<random hex>.open   being written by one live process
    <same stem>.seg                                            sealed: complete, ready for ingest
    <same stem>.ingesting                                      claimed by an ingest (storage side)

A segment starts with the 8-byte header ``b"ORSPOOL1"`` and holds records, each
``b"ORR1" | payload length (u32 LE) | crc32(payload) (u32 LE) | payload`` where the payload is one binary
``ExportTraceServiceRequest``. One ``export()`` call is one record, written with a single ``write()``.

Sealing: ``force_flush()`` and ``shutdown()`` seal the open segment (fsync, then an atomic rename from
``.open`` to ``.seg``, then an fsync of the folder); a segment reaching ``segment_max_bytes`` is sealed
right after the write that crossed it. Durability (``fsync``): ``"seal"`` (default) syncs at every seal, so a
process crash loses nothing already exported and a power loss loses at most the unsealed tail;
``"always"`` also syncs after every record; ``"never"`` leaves it to the OS. A seal that fails (disk full)
leaves the segment open and locked by this process, and the next seal tries again.

When the spool cannot be written (disk full, folder unwritable) the batch is dropped (``dropped_spans``),
export returns FAILURE and one warning is logged for the outage (and one when writing works again); a record cut
short by the failure is truncated away, so the segment stays intact.

The writer holds an exclusive ``flock`` on its open segment for as long as it writes it. A reader adopts an
``.open`` segment (renames it to ``.seg``) only when that lock is free and the writer's pid is no longer
alive on this host (or the segment was written on another host), so a live writer is never raced.

This module must never raise into the host program from the exporter: it logs and returns FAILURE.
The reader side (:func:`read_segment`) never crashes on a damaged file: it skips what it cannot read and
reports it.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import secrets
import socket
import struct
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .. import faults
from ..files import fsync_dir, pid_alive, private_dir
from ..forks import after_fork_in_child
from ..settings import env_number, resolve_home
from .rows import encode_request

_log = logging.getLogger("otel_replay.spool")

__all__ = [
    "OTEL_REPLAY_SPOOL_FSYNC",
    "OTEL_REPLAY_SPOOL_SEGMENT_BYTES",
    "SegmentRead",
    "SpoolExporter",
    "adopt_orphaned_segments",
    "encode_record",
    "read_segment",
    "sealed_segments",
]

OTEL_REPLAY_SPOOL_SEGMENT_BYTES: Final = "OTEL_REPLAY_SPOOL_SEGMENT_BYTES"
"""Environment variable: size in bytes after which the open segment is sealed and a new one started."""

OTEL_REPLAY_SPOOL_FSYNC: Final = "OTEL_REPLAY_SPOOL_FSYNC"
"""Environment variable: ``seal`` (default), ``always`` or ``never`` — when the spool calls fsync."""

_DEFAULT_SEGMENT_MAX_BYTES: Final = 32 * 1024 * 1024
_DEFAULT_FSYNC: Final = "seal"
_FSYNC_POLICIES: Final = ("seal", "always", "never")

SEGMENT_MAGIC: Final = b"ORSPOOL1"
"""First 8 bytes of every segment file (format version 1)."""

RECORD_MAGIC: Final = b"ORR1"
"""First 4 bytes of every record."""

_RECORD_HEADER: Final = struct.Struct("<4sII")  # magic, payload length, crc32(payload)

OPEN_SUFFIX: Final = ".open"
SEALED_SUFFIX: Final = ".seg"
INGESTING_SUFFIX: Final = ".ingesting"

_NAME = re.compile(r"^(?P<ns>\d{20})-(?P<host>[A-Za-z0-9_.]*)-(?P<pid>\d+)-(?P<rand>[0-9a-f]{8})$")


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:64]


def encode_record(payload: bytes) -> bytes:
    """One spool record (header + payload) for a binary ``ExportTraceServiceRequest``."""
    return _RECORD_HEADER.pack(RECORD_MAGIC, len(payload), zlib.crc32(payload)) + payload


def _resolve_segment_bytes(value: int | None) -> int:
    if value is None:
        return env_number(OTEL_REPLAY_SPOOL_SEGMENT_BYTES, _DEFAULT_SEGMENT_MAX_BYTES, minimum=1024, unit="bytes")
    if value < 1024:
        raise ValueError(f"segment_max_bytes must be at least 1024, got {value}")
    return int(value)


def _resolve_fsync(value: str | None) -> str:
    raw = value if value is not None else os.environ.get(OTEL_REPLAY_SPOOL_FSYNC) or _DEFAULT_FSYNC
    policy = raw.strip().lower()
    if policy not in _FSYNC_POLICIES:
        raise ValueError(f"spool fsync policy must be one of {', '.join(_FSYNC_POLICIES)}, got {raw!r}")
    return policy


class SpoolExporter(SpanExporter):
    """Append spans to this process's open spool segment; seal it on flush, shutdown and size rotation.

    Thread-safe (the ``BatchSpanProcessor`` worker and ``force_flush`` callers may race). Never raises from
    :meth:`export`, :meth:`force_flush` or :meth:`shutdown`: failures are logged and reported as FAILURE /
    False. After a ``fork`` the child starts its own segment; the parent's stays the parent's.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        segment_max_bytes: int | None = None,
        fsync: str | None = None,
    ) -> None:
        """Spool into ``directory`` (created on first export; default ``$OTEL_REPLAY_HOME/spool``, which is what
        ``OTEL_TRACES_EXPORTER=otel_replay_spool`` gives an application configured by the OTel SDK itself).

        ``segment_max_bytes``: argument, then ``OTEL_REPLAY_SPOOL_SEGMENT_BYTES``, then 32 MiB.
        ``fsync``: ``seal`` | ``always`` | ``never``; argument, then ``OTEL_REPLAY_SPOOL_FSYNC``, then ``seal``.
        Bad values raise :class:`ValueError` here, never later.
        """
        self.directory = Path(directory) if directory is not None else resolve_home() / "spool"
        self.segment_max_bytes = _resolve_segment_bytes(segment_max_bytes)
        self.fsync = _resolve_fsync(fsync)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0
        self._records = 0
        self._owner_pid = os.getpid()
        self._shutdown = False
        self._host = _host_tag()
        self._failing_spans = 0  # spans dropped since writes started failing (0: writes work)
        self.dropped_spans = 0
        """Spans dropped because the spool could not be written (disk full, folder unwritable)."""
        after_fork_in_child(self._after_fork_in_child)  # held weakly: a dropped exporter is collected

    # -- SpanExporter ------------------------------------------------------------------------------------

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Encode ``spans`` as one OTLP request and append it as one record; FAILURE (logged) on any error."""
        if self._shutdown:
            _log.warning("otel-replay spool exporter already shut down; dropping %d span(s)", len(spans))
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            record = encode_record(encode_request(spans))
        except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
            _log.exception("otel-replay spool: could not encode %d span(s)", len(spans))
            return SpanExportResult.FAILURE
        with self._lock:
            try:
                self._append(record)
            except Exception as exc:  # noqa: BLE001 - a failed write is logged, never raised into the host program
                self._write_failed(len(spans), exc)
                return SpanExportResult.FAILURE
            if self._failing_spans:
                _log.warning(
                    "otel-replay spool: writing to %s again; %d span(s) were dropped while it could not be written",
                    self.directory,
                    self._failing_spans,
                )
                self._failing_spans = 0
            if self._size >= self.segment_max_bytes:
                self._seal_or_warn_locked()  # the record is written either way: never report it as failed
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Seal the open segment so the store can ingest everything exported so far. False when sealing failed
        (the segment then stays open and the next flush seals it)."""
        with self._lock:
            return self._seal_or_warn_locked()

    def shutdown(self) -> None:
        """Seal the open segment; later exports are dropped with a warning."""
        if self._shutdown:
            return
        self.force_flush()
        self._shutdown = True

    # -- internals -----------------------------------------------------------------------------------------

    @property
    def open_segment(self) -> Path | None:
        """Path of the segment currently being written, if any (for tests and diagnostics)."""
        return self._path

    def _after_fork_in_child(self) -> None:
        # The parent owns its open segment: forget it (closing our copy of the fd keeps the parent's flock).
        fd, self._fd, self._path = self._fd, None, None
        self._size = self._records = 0
        self._owner_pid = os.getpid()
        self._lock = threading.Lock()
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def _write_failed(self, count: int, exc: Exception) -> None:
        self.dropped_spans += count
        first = not self._failing_spans
        self._failing_spans += count
        if not isinstance(exc, OSError):
            _log.error("otel-replay spool: could not write %d span(s) to %s", count, self.directory, exc_info=exc)
        elif first:  # one warning per outage, not one per batch
            _log.warning(
                "otel-replay spool: could not write %d span(s) to %s (%s); they are dropped, the agent goes "
                "on, and recording resumes as soon as the spool can be written again",
                count,
                self.directory,
                exc.strerror or exc,
            )
        else:
            _log.debug("otel-replay spool: still cannot write to %s; dropped %d more span(s)", self.directory, count)

    def _seal_or_warn_locked(self) -> bool:
        try:
            self._seal_locked()
            return True
        except Exception as exc:  # noqa: BLE001 - a flush never raises into the host program; the next one seals
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            _log.warning(
                "otel-replay spool: could not seal the segment in %s (%s); it stays open and the next flush seals it",
                self.directory,
                reason,
                exc_info=not isinstance(exc, OSError),
            )
            return False

    def _open_locked(self) -> None:
        private_dir(self.directory)
        stem = f"{time.time_ns():020d}-{self._host}-{os.getpid()}-{secrets.token_hex(4)}"
        path = self.directory / (stem + OPEN_SUFFIX)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _write_all(fd, SEGMENT_MAGIC)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self._fd, self._path, self._size, self._records = fd, path, len(SEGMENT_MAGIC), 0

    def _append(self, record: bytes) -> None:
        if self._fd is not None and self._owner_pid != os.getpid():  # fork without register_at_fork
            self._after_fork_in_child()
        if self._fd is None:
            self._open_locked()
        assert self._fd is not None
        faults.reached("spool.append", fd=self._fd, data=record)
        try:
            _write_all(self._fd, record)
        except BaseException:
            try:  # a short write (disk full) leaves part of a record: cut it off so the segment stays clean
                os.ftruncate(self._fd, self._size)
            except OSError:
                pass  # the reader skips and reports a torn record
            raise
        self._size += len(record)
        self._records += 1
        if self.fsync == "always":
            try:
                os.fsync(self._fd)
            except OSError as exc:  # written all the same: reporting it as failed would have it written twice
                _log.warning(
                    "otel-replay spool: fsync of %s failed (%s); the record is written but may not survive "
                    "a power loss",
                    self._path,
                    exc.strerror or exc,
                )

    def _seal_locked(self) -> None:
        """Seal the open segment. If the fsync or the rename fails (disk full), it stays this process's open
        segment, still locked, and a later seal tries again: never left ``.open`` for a live process."""
        fd, path = self._fd, self._path
        if fd is None or path is None:
            return
        if self._records == 0:
            self._fd, self._path = None, None
            try:
                path.unlink(missing_ok=True)
            finally:
                os.close(fd)
            return
        if self.fsync != "never":
            os.fsync(fd)
        faults.reached("spool.seal.before_rename")
        os.replace(path, path.with_suffix(SEALED_SUFFIX))
        faults.reached("spool.seal.after_rename")
        self._fd, self._path = None, None
        try:
            if self.fsync != "never":
                fsync_dir(self.directory, best_effort=True)
        finally:
            os.close(fd)  # releases the flock only after the rename, so no reader adopts it half-way


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


# ---------------------------------------------------------------------------------------------- reader


@dataclass(frozen=True, kw_only=True)
class SegmentRead:
    """What :func:`read_segment` found in one segment file."""

    path: Path
    payloads: tuple[bytes, ...]
    """Every intact record's payload (a binary ``ExportTraceServiceRequest``), in file order."""
    skipped: int
    """Number of damaged regions skipped (a torn tail, a bad checksum, garbage between records)."""
    problems: tuple[str, ...]
    """One human-readable line per skipped region."""


def read_segment(path: str | os.PathLike[str]) -> SegmentRead:
    """Read every intact record of a segment; never raises for damaged content (only for an unreadable file).

    A record whose header or payload is cut short (a torn write at the tail) or whose checksum does not match
    is skipped and reported; reading resumes at the next record magic that starts an intact record.
    """
    path = Path(path)
    data = path.read_bytes()
    payloads: list[bytes] = []
    problems: list[str] = []
    size = len(data)
    if not data.startswith(SEGMENT_MAGIC):
        if size == 0:
            return SegmentRead(path=path, payloads=(), skipped=0, problems=())
        if SEGMENT_MAGIC.startswith(data):
            return SegmentRead(
                path=path, payloads=(), skipped=1, problems=(f"{path.name}: torn segment header ({size} bytes)",)
            )
        problems.append(f"{path.name}: not a spool segment (bad header); salvaging records")
        offset = 0
    else:
        offset = len(SEGMENT_MAGIC)
    header_size = _RECORD_HEADER.size
    view = memoryview(data)
    skipped = 1 if problems else 0
    damaged_from: int | None = None
    damaged_why = ""
    while offset < size:
        why = ""
        if size - offset < header_size:
            why = "torn record header at the end of the segment"
        else:
            magic, length, crc = _RECORD_HEADER.unpack_from(data, offset)
            end = offset + header_size + length
            if magic != RECORD_MAGIC:
                why = "no record magic"
            elif end > size:
                why = "torn record at the end of the segment"
            elif zlib.crc32(view[offset + header_size : end]) != crc:
                why = "checksum mismatch"
            else:
                if damaged_from is not None:
                    problems.append(
                        f"{path.name}: skipped {offset - damaged_from} byte(s) at offset {damaged_from}: {damaged_why}"
                    )
                    skipped += 1
                    damaged_from = None
                payloads.append(bytes(view[offset + header_size : end]))
                offset = end
                continue
        if damaged_from is None:  # damage starts here: resynchronise at the next record magic
            damaged_from, damaged_why = offset, why
        following = data.find(RECORD_MAGIC, offset + 1)
        if following < 0:
            break
        offset = following
    if damaged_from is not None:
        problems.append(f"{path.name}: skipped {size - damaged_from} byte(s) at offset {damaged_from}: {damaged_why}")
        skipped += 1
    return SegmentRead(path=path, payloads=tuple(payloads), skipped=skipped, problems=tuple(problems))


def _parse_name(path: Path) -> tuple[str, int] | None:
    match = _NAME.match(path.name.rsplit(".", 1)[0])
    if match is None:
        return None
    return match.group("host"), int(match.group("pid"))


def _writer_gone(path: Path) -> bool:
    """True when no live process writes ``path``: its flock is free and its pid is dead (or on another host)."""
    parsed = _parse_name(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    if parsed is None:
        return True  # not ours by name; nobody holds it
    host, pid = parsed
    if host != _host_tag():
        return True
    return pid != os.getpid() and not pid_alive(pid)


def adopt_orphaned_segments(directory: str | os.PathLike[str]) -> list[Path]:
    """Seal ``.open`` segments whose writer died (rename to ``.seg``); returns the adopted paths.

    Their tail may be torn; :func:`read_segment` skips and reports that. A segment with no records is removed.
    """
    directory = Path(directory)
    adopted: list[Path] = []
    if not directory.is_dir():
        return adopted
    for path in sorted(directory.glob("*" + OPEN_SUFFIX)):
        try:
            if not _writer_gone(path):
                continue
            target = path.with_suffix(SEALED_SUFFIX)
            if path.stat().st_size <= len(SEGMENT_MAGIC):
                path.unlink(missing_ok=True)
                continue
            os.replace(path, target)
            adopted.append(target)
            _log.info("otel-replay spool: adopted %s left open by a process that is gone", path.name)
        except OSError:
            _log.warning("otel-replay spool: could not adopt %s", path, exc_info=True)
    if adopted:
        fsync_dir(directory, best_effort=True)
    return adopted


def sealed_segments(directory: str | os.PathLike[str], *, suffix: str = SEALED_SUFFIX) -> list[Path]:
    """Sealed (or, with ``suffix``, otherwise suffixed) segments in ``directory``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(directory.glob("*" + suffix))
