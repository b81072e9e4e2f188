"""Spool → store ingest: every span in the spool reaches the store exactly once, whatever crashes when.

Why it exists: agents append spans to spool segments (:mod:`otel_replay.exporting.spool`); only the process
that opens the store may write it. Ingest moves sealed segments into the store so that killing the ingesting
process at any instant, then ingesting again, leaves every span stored exactly once:

1. Take ``{spool}/.ingest.lock`` (flock): one ingester per spool at a time (a busy lock means another
   process is ingesting right now; this call then does nothing).
2. Adopt ``.open`` segments whose writer is gone (renamed to ``.seg``).
3. Recover: any ``X.ingesting`` was claimed by an ingest that may have died before, during or after its
   insert. Its spans are inserted only where ``(TraceId, SpanId)`` is not already stored; then it is deleted.
4. Claim: rename a batch of ``X.seg`` to ``X.ingesting`` (atomic; folder fsynced), insert all their spans,
   then delete them. A crash before the delete leaves ``.ingesting`` files, which step 3 handles next time.

Torn or corrupt records are skipped and reported, never fatal. A segment that cannot be read at all (or a
record that is not a valid OTLP request) is reported and renamed ``X.bad`` so it is kept for inspection and
never blocks the spool. Insert failures raise :class:`~otel_replay.errors.StoreError` and leave the claimed
segments as ``.ingesting`` for the next attempt. When that next attempt (recovery, one segment at a time)
fails again while the store otherwise answers, the store rejects that segment's data itself: it is renamed
``X.bad`` and reported, so one poisoned segment never keeps the store from opening.

It must never delete a segment before its spans are in the store, and never insert a recovered span twice.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from .. import faults
from .._gc import gc_paused
from ..errors import StoreError
from ..exporting.rows import rows_from_request
from ..exporting.spool import (
    INGESTING_SUFFIX,
    adopt_orphaned_segments,
    read_segment,
    sealed_segments,
)
from ..files import fsync_dir

__all__ = ["BAD_SUFFIX", "IngestReport", "IngestTarget", "ingest_spool"]

_log = logging.getLogger("otel_replay.ingest")

BAD_SUFFIX: Final = ".bad"
"""Suffix of segments that could not be read at all; kept for inspection, never ingested."""

_BATCH_BYTES: Final = 64 * 1024 * 1024  # claim sealed segments in batches of about this many bytes
_LOCK_NAME: Final = ".ingest.lock"
INSERT_CHUNK_ROWS = 20_000  # rows per INSERT; a crash between chunks leaves a partial insert (recovery handles it)


class IngestTarget(Protocol):
    """What ingest needs of a store: :class:`~otel_replay.storage.store.Store` has it (ingest sits below the
    store and never imports it)."""

    def insert_rows(self, rows: Sequence[Sequence[Any]]) -> int:
        """Insert rows in :data:`~otel_replay.exporting.rows.INSERT_COLUMNS` order; raise StoreError on failure."""
        ...

    def existing_span_ids(self, trace_ids: Iterable[str]) -> set[tuple[str, str]]:
        """The ``(TraceId, SpanId)`` pairs already stored for any of ``trace_ids``."""
        ...

    def server_version(self) -> str:
        """Version of the engine (any failure means the store does not answer)."""
        ...


def _checkpoint(name: str) -> None:
    """A crash-relevant point, the fault point ``ingest.<name>`` (:mod:`otel_replay.faults`; no-op unarmed)."""
    faults.reached("ingest." + name)


@dataclass(frozen=True, kw_only=True)
class IngestReport:
    """What one ingest did."""

    segments: int = 0
    """Segments ingested (including recovered ones)."""
    spans: int = 0
    """Spans inserted into the store."""
    recovered_segments: int = 0
    """``.ingesting`` segments left by an interrupted ingest and finished by this one."""
    duplicates_skipped: int = 0
    """Spans of recovered segments that were already stored and so not inserted again."""
    skipped_records: int = 0
    """Torn or corrupt records (or damaged regions) skipped."""
    adopted_segments: int = 0
    """``.open`` segments of dead processes sealed and ingested."""
    busy: bool = False
    """True when another process was ingesting this spool, so this call did nothing."""
    problems: tuple[str, ...] = ()
    """One line per skipped record, unreadable segment or payload."""


class _Totals:
    def __init__(self) -> None:
        self.segments = self.spans = self.recovered = self.duplicates = self.skipped = 0
        self.problems: list[str] = []


def _rows_of(paths: list[Path], totals: _Totals) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for chunk in _row_chunks(paths, totals, chunk_rows=None):
        rows.extend(chunk)
    return rows


def _row_chunks(paths: list[Path], totals: _Totals, *, chunk_rows: int | None) -> Iterator[list[tuple[Any, ...]]]:
    """Rows of ``paths`` in order, in lists of about ``chunk_rows`` (one list when None)."""
    rows: list[tuple[Any, ...]] = []
    for path in paths:
        try:
            read = read_segment(path)
        except OSError as exc:
            totals.problems.append(f"{path.name}: unreadable ({exc.strerror or exc}); kept as {BAD_SUFFIX}")
            _quarantine(path)
            continue
        totals.skipped += read.skipped
        totals.problems.extend(read.problems)
        for index, payload in enumerate(read.payloads):
            try:
                rows.extend(rows_from_request(payload))
            except Exception as exc:  # noqa: BLE001 - a checksummed record that is still not OTLP: report, keep going
                totals.skipped += 1
                totals.problems.append(f"{path.name}: record {index} is not an OTLP trace request ({exc})")
                continue
            if chunk_rows is not None and len(rows) >= chunk_rows:
                yield rows
                rows = []
    if rows:
        yield rows


def _quarantine(path: Path) -> None:
    try:
        os.replace(path, path.with_suffix(BAD_SUFFIX))
    except OSError:
        _log.warning("otel-replay ingest: could not set aside %s", path, exc_info=True)


def _insert(store: IngestTarget, rows: list[tuple[Any, ...]]) -> None:
    for start in range(0, len(rows), INSERT_CHUNK_ROWS):
        store.insert_rows(rows[start : start + INSERT_CHUNK_ROWS])
        _checkpoint("inserted_chunk")
    _checkpoint("inserted")


def _delete(paths: list[Path], directory: Path) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
        _checkpoint("deleted_one")
    fsync_dir(directory, best_effort=True)


def _recover(store: IngestTarget, directory: Path, totals: _Totals) -> None:
    for path in sealed_segments(directory, suffix=INGESTING_SUFFIX):
        rows = _rows_of([path], totals)
        if rows:
            present = store.existing_span_ids({row[1] for row in rows})
            fresh = [row for row in rows if (row[1], row[2]) not in present]
            totals.duplicates += len(rows) - len(fresh)
            if fresh:
                try:
                    _insert(store, fresh)
                except StoreError as exc:
                    if not _store_answers(store):
                        raise  # the store is down: keep the segment for the next attempt
                    totals.problems.append(
                        f"{path.name}: the store rejects its spans a second time "
                        f"({' '.join(str(exc).split())[:200]}); kept as {BAD_SUFFIX}"
                    )
                    _quarantine(path)
                    continue
            totals.spans += len(fresh)
        if path.exists():
            _delete([path], directory)
            totals.segments += 1
            totals.recovered += 1


def _store_answers(store: IngestTarget) -> bool:
    try:
        store.server_version()
    except Exception:  # noqa: BLE001 - any failure means "not answering"
        return False
    return True


def _claim_batches(directory: Path) -> list[list[Path]]:
    batches: list[list[Path]] = []
    batch: list[Path] = []
    size = 0
    for path in sealed_segments(directory):
        try:
            length = path.stat().st_size
        except FileNotFoundError:
            continue
        if batch and size + length > _BATCH_BYTES:
            batches.append(batch)
            batch, size = [], 0
        batch.append(path)
        size += length
    if batch:
        batches.append(batch)
    return batches


def ingest_spool(store: IngestTarget, directory: str | os.PathLike[str]) -> IngestReport:
    """Ingest every sealed, orphaned or half-ingested segment of spool ``directory`` into ``store``.

    Returns an :class:`IngestReport`; raises :class:`~otel_replay.errors.StoreError` when the store
    rejects an insert (the claimed segments stay ``.ingesting`` and are retried next time).
    """
    directory = Path(directory)
    if not directory.is_dir():
        return IngestReport()
    lock_fd = os.open(directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return IngestReport(busy=True, problems=("another process is ingesting this spool right now",))
        # The collector only rescans the rows being built (no cycles among them): paused through the shared,
        # counted pause of otel_replay._gc, which a replay running in another thread shares.
        with gc_paused():
            return _ingest_locked(store, directory)
    finally:
        os.close(lock_fd)  # releases the flock


def _ingest_locked(store: IngestTarget, directory: Path) -> IngestReport:
    totals = _Totals()
    adopted = adopt_orphaned_segments(directory)
    _recover(store, directory, totals)
    for batch in _claim_batches(directory):
        claimed: list[Path] = []
        for path in batch:
            target = path.with_suffix(INGESTING_SUFFIX)
            try:
                os.replace(path, target)
            except FileNotFoundError:
                continue
            claimed.append(target)
        fsync_dir(directory, best_effort=True)
        _checkpoint("claimed")
        rows = _rows_of(claimed, totals)
        if rows:
            _insert(store, rows)
        totals.spans += len(rows)
        _delete([p for p in claimed if p.exists()], directory)
        totals.segments += len(claimed)
    report = IngestReport(
        segments=totals.segments,
        spans=totals.spans,
        recovered_segments=totals.recovered,
        duplicates_skipped=totals.duplicates,
        skipped_records=totals.skipped,
        adopted_segments=len(adopted),
        problems=tuple(totals.problems),
    )
    for problem in report.problems:
        _log.warning("otel-replay ingest: %s", problem)
    return report
