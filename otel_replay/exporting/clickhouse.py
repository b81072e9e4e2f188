"""A direct ClickHouse exporter: spans go straight into the Collector exporter's tables, no Collector needed.

Why it exists: a small deployment (one agent host, one ClickHouse server) should not have to run an
OpenTelemetry Collector just to get its runs into ClickHouse. ``configure(store="http://…",
exporter="clickhouse")`` installs :class:`ClickHouseSpanExporter` behind the SDK's ``BatchSpanProcessor``
(which does the batching). Each batch is encoded and mapped to rows by the project's one span encoder
(:mod:`otel_replay.exporting.rows`, as the spool and its ingest do) and inserted with clickhouse-connect, so
the rows are exactly the ones the Collector (or the spool ingest) would write.

When the server is down each batch is retried with backoff within a time budget, then written to the spool
(``$OTEL_REPLAY_HOME/spool``), from where the normal ingest (``Store.open(url)``, e.g. any ``otel-replay``
command pointed at the server) brings it to the server later. A batch is either inserted or spooled, never
both:

* A batch the server certainly did not commit (no connection, or the server answered with an error) goes to
  the spool as an ordinary sealed segment.
* A batch whose outcome is unknown (the request was sent, then a timeout or a dropped connection) may have
  been committed, so it is never sent again: it is spooled as a *half-ingested* segment (``.ingesting``), and
  the ingest's recovery step inserts only the spans whose ``(TraceId, SpanId)`` is not stored yet. Every
  insert also carries ``insert_deduplication_token`` (a hash of the batch) with ``insert_deduplicate=1``.

Memory is bounded: batches that could neither be inserted nor spooled (spool unwritable) are held for a
later attempt up to ``max_pending_rows``; beyond that they are dropped and logged.

Where the rows go (the connection, made on first use and remade after a failure) and what a failed insert means
are in :mod:`.clickhouse_connection`, whose ``Connection`` is the exporter's base class.

This module must never raise into the host program from :meth:`export`, :meth:`force_flush` or
:meth:`shutdown` (it logs and returns FAILURE / False), never format a value into SQL text (rows travel as
insert data, settings as request parameters), and never show a password.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .. import settings
from ..files import fsync_dir
from ..forks import after_fork_in_child
from ..settings import OTEL_REPLAY_STORE, env_number
from .clickhouse_connection import Connection, Target, never_sent, redact, short
from .rows import INSERT_COLUMN_TYPES, INSERT_COLUMNS, encode_request, rows_from_request
from .spool import (
    INGESTING_SUFFIX,
    SEALED_SUFFIX,
    SpoolExporter,
    adopt_orphaned_segments,
)

_log = logging.getLogger("otel_replay.clickhouse")

__all__ = [
    "OTEL_REPLAY_CLICKHOUSE_MAX_PENDING_ROWS",
    "OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS",
    "OTEL_REPLAY_CLICKHOUSE_TIMEOUT",
    "ClickHouseSpanExporter",
]

OTEL_REPLAY_CLICKHOUSE_TIMEOUT: Final = "OTEL_REPLAY_CLICKHOUSE_TIMEOUT"
"""Environment variable: seconds one insert request may take (connect and send/receive; whole seconds, at
least 1); default 10."""

OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS: Final = "OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS"
"""Environment variable: seconds a batch is retried (with backoff) before it goes to the spool; default 5."""

OTEL_REPLAY_CLICKHOUSE_MAX_PENDING_ROWS: Final = "OTEL_REPLAY_CLICKHOUSE_MAX_PENDING_ROWS"
"""Environment variable: most rows held in memory when neither the server nor the spool takes them;
default 100000 (more are dropped and logged)."""

_DEFAULT_TIMEOUT_S: Final = 10.0
_DEFAULT_RETRY_S: Final = 5.0
_DEFAULT_MAX_PENDING_ROWS: Final = 100_000
_BACKOFF_FIRST_S: Final = 0.1
_BACKOFF_MAX_S: Final = 2.0
_COOLDOWN_MAX_S: Final = 60.0  # while the server is known down, batches go to the spool without trying
_UNCERTAIN_DIR: Final = ".uncertain"  # staging folder (inside the spool) for batches of unknown outcome


@dataclass(kw_only=True)
class _Batch:
    spans: Sequence[ReadableSpan]
    """The spans, for the spool (which encodes them itself) if the insert fails."""
    rows: list[tuple[Any, ...]]
    token: str
    """``insert_deduplication_token``: the same for every attempt of this batch."""
    uncertain: bool = False
    """True once an attempt may have been committed by the server."""


def _resolve_seconds(value: float | None, env: str, default: float, what: str, *, minimum: float) -> float:
    if value is None:
        return env_number(env, default, minimum=minimum, unit="seconds")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ValueError(f"{what} must be a number of seconds >= {minimum:g}, got {value!r}")
    return float(value)


def _resolve_rows(value: int | None) -> int:
    if value is None:
        return env_number(OTEL_REPLAY_CLICKHOUSE_MAX_PENDING_ROWS, _DEFAULT_MAX_PENDING_ROWS, minimum=0, unit="rows")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"max_pending_rows must be a whole number >= 0, got {value!r}")
    return value


class ClickHouseSpanExporter(Connection, SpanExporter):
    """Insert span batches into a ClickHouse server's ``otel_traces`` table; spool what cannot be inserted.

    Thread-safe; never raises from :meth:`export`, :meth:`force_flush` or :meth:`shutdown`. The connection
    is made lazily on the first export, so an unreachable server at start-up only means spooling. After a
    ``fork`` the child makes its own connection (the parent's and the batches it holds stay the parent's).
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        client_factory: Callable[[], Any] | None = None,
        table: str | None = None,
        home: str | os.PathLike[str] | None = None,
        spool_directory: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        retry_seconds: float | None = None,
        max_pending_rows: int | None = None,
    ) -> None:
        """Export to the store at ``url`` or to the client that ``client_factory()`` returns.

        ``url``: ``http(s)://user:password@host:8123/database[?table=name]`` (the tables must exist: run
        ``otel-replay db init``), or ``chdb:///abs/path`` (the embedded engine in this process: it locks the
        path, so only for single-process use and tests). ``client_factory``: instead of ``url``, a callable
        returning a clickhouse-connect ``Client`` (or anything with ``insert(table, rows, column_names=,
        column_type_names=, settings=)`` and ``close()``); ``table`` is then its qualified table name
        (default ``default.otel_traces``).

        ``home``: the otel-replay home whose ``spool`` folder receives what cannot be inserted (default:
        ``OTEL_REPLAY_HOME``, then ``~/.otel-replay``); ``spool_directory`` overrides that folder.
        ``timeout``: seconds per insert request (argument → ``OTEL_REPLAY_CLICKHOUSE_TIMEOUT`` → 10).
        ``retry_seconds``: retry budget of one batch (argument → ``OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS`` → 5).
        ``max_pending_rows``: rows held in memory when the spool is unwritable (argument →
        ``OTEL_REPLAY_CLICKHOUSE_MAX_PENDING_ROWS`` → 100000). Bad values raise :class:`ValueError` here.
        """
        if url is None and client_factory is None:
            url = os.environ.get(OTEL_REPLAY_STORE) or None  # built with no arguments by the SDK's configuration
            if url is None:
                raise ValueError(
                    f"the clickhouse exporter needs a store URL: set {OTEL_REPLAY_STORE} "
                    "(http(s)://user:password@host:8123/database)"
                )
        if url is not None and client_factory is not None:
            raise ValueError("ClickHouseSpanExporter needs exactly one of url= or client_factory=")
        self.url = url or ""
        if url is not None:
            scheme = url.split(":", 1)[0].lower()
            if scheme not in ("http", "https", "chdb"):
                raise ValueError(
                    f"unsupported store URL {redact(url)!r} for the clickhouse exporter: use "
                    "http(s)://user:password@host:8123/database or chdb:///abs/path"
                )
            if scheme == "chdb" and (urlsplit(url).netloc or not urlsplit(url).path.startswith("/")):
                raise ValueError(
                    f"store URL {redact(url)!r}: the clickhouse exporter needs an on-disk chdb:///abs/path"
                )
            if scheme != "chdb":
                self._server_options(url)  # validate now, at setup
        self._client_factory = client_factory
        self._table = table or "default.otel_traces"
        self.timeout = _resolve_seconds(
            timeout, OTEL_REPLAY_CLICKHOUSE_TIMEOUT, _DEFAULT_TIMEOUT_S, "timeout", minimum=1
        )
        self.retry_seconds = _resolve_seconds(
            retry_seconds, OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS, _DEFAULT_RETRY_S, "retry_seconds", minimum=0
        )
        self.max_pending_rows = _resolve_rows(max_pending_rows)
        self.spool_directory = (
            Path(spool_directory) if spool_directory is not None else settings.resolve_home(home) / "spool"
        )
        self._spool: SpoolExporter | None = None
        self._uncertain_spool: SpoolExporter | None = None
        self._target: Target | None = None
        self._pending: deque[_Batch] = deque()
        self._pending_rows = 0
        self._down_until = 0.0  # monotonic time before which the server is not tried again
        self._cooldown = 0.0
        self._lock = threading.Lock()
        self._shutdown = False
        self.dropped_spans = 0
        """Spans dropped because neither the server, the spool nor the memory cap could take them."""
        after_fork_in_child(self._after_fork_in_child)  # held weakly: a dropped exporter is collected

    def _after_fork_in_child(self) -> None:
        # The parent owns its connection and the batches it holds: the child starts with neither.
        self._lock = threading.Lock()
        self._target = None
        self._pending = deque()
        self._pending_rows = 0

    # ------------------------------------------------------------------------------------------ SpanExporter

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Insert ``spans`` as one batch (retrying within the budget), else spool them; FAILURE (logged) when
        the batch is neither inserted nor spooled."""
        if self._shutdown:
            _log.warning("otel-replay clickhouse exporter already shut down; dropping %d span(s)", len(spans))
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            payload = encode_request(spans)
            batch = _Batch(spans=spans, rows=rows_from_request(payload), token=hashlib.sha256(payload).hexdigest())
        except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
            _log.exception("otel-replay clickhouse exporter: could not encode %d span(s)", len(spans))
            return SpanExportResult.FAILURE
        try:
            with self._lock:
                self._drain_pending_locked(time.monotonic() + self.retry_seconds)
                delivered = self._deliver_locked(batch, time.monotonic() + self.retry_seconds)
            return SpanExportResult.SUCCESS if delivered else SpanExportResult.FAILURE
        except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
            _log.exception("otel-replay clickhouse exporter: unexpected failure; %d span(s) not exported", len(spans))
            return SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Deliver batches held in memory (insert or spool) and seal the spool segment so an ingest sees it.
        True when nothing is left undelivered."""
        deadline = time.monotonic() + max(timeout_millis, 0) / 1000
        try:
            if not self._lock.acquire(timeout=max(timeout_millis, 0) / 1000):
                return False
            try:
                self._drain_pending_locked(deadline)
                ok = not self._pending
                for spool in (self._spool, self._uncertain_spool):
                    if spool is not None:
                        ok = spool.force_flush(timeout_millis) and ok
                self._publish_uncertain_locked()
                return ok
            finally:
                self._lock.release()
        except Exception:  # noqa: BLE001 - a flush never raises into the host program
            _log.exception("otel-replay clickhouse exporter: flush failed")
            return False

    def shutdown(self) -> None:
        """Flush, seal the spool, close the connection; later exports are dropped with a warning."""
        if self._shutdown:
            return
        try:
            self.force_flush(int(max(self.retry_seconds, 1.0) * 1000))
            with self._lock:
                self._shutdown = True
                if self._pending_rows:
                    _log.warning(
                        "otel-replay clickhouse exporter: shut down with %d span(s) neither inserted nor "
                        "spooled; they are lost",
                        self._pending_rows,
                    )
                    self.dropped_spans += self._pending_rows
                    self._pending.clear()
                    self._pending_rows = 0
                for spool in (self._spool, self._uncertain_spool):
                    if spool is not None:
                        spool.shutdown()
                self._close_target_locked()
        except Exception:  # noqa: BLE001 - a shutdown never raises into the host program
            _log.exception("otel-replay clickhouse exporter: shutdown failed")

    # ---------------------------------------------------------------------------------------------- delivery

    def _deliver_locked(self, batch: _Batch, deadline: float) -> bool:
        """Insert, else spool, else keep in memory within the cap. True when inserted or spooled."""
        if self._insert_with_retries_locked(batch, deadline) or self._spool_locked(batch):
            return True
        self._hold_locked(batch)
        return False

    def _drain_pending_locked(self, deadline: float) -> None:
        while self._pending:
            batch = self._pending[0]
            if not (self._insert_with_retries_locked(batch, deadline) or self._spool_locked(batch)):
                return
            self._pending.popleft()
            self._pending_rows -= len(batch.rows)

    def _hold_locked(self, batch: _Batch) -> None:
        if self._pending_rows + len(batch.rows) > self.max_pending_rows:
            self.dropped_spans += len(batch.rows)
            _log.error(
                "otel-replay clickhouse exporter: server and spool (%s) both unavailable and %d row(s) "
                "already held (max_pending_rows=%d): dropped %d span(s) (%d dropped so far)",
                self.spool_directory,
                self._pending_rows,
                self.max_pending_rows,
                len(batch.rows),
                self.dropped_spans,
            )
            return
        self._pending.append(batch)
        self._pending_rows += len(batch.rows)
        _log.warning(
            "otel-replay clickhouse exporter: server and spool (%s) both unavailable; holding %d span(s) "
            "in memory for a later attempt (%d held)",
            self.spool_directory,
            len(batch.rows),
            self._pending_rows,
        )

    def _insert_with_retries_locked(self, batch: _Batch, deadline: float) -> bool:
        if time.monotonic() < self._down_until:
            return False  # known down: do not make the host wait again until the cooldown ends
        delay = _BACKOFF_FIRST_S
        attempt = 0
        while True:
            attempt += 1
            try:
                self._insert_locked(batch)
            except Exception as exc:  # noqa: BLE001 - any failure is retried, then spooled
                if not never_sent(exc):
                    batch.uncertain = True
                self._close_target_locked()  # a fresh connection for the next attempt
                now = time.monotonic()
                # A batch the server may have committed is never sent again: it goes to the spool's recovery
                # path, whose ingest stores only the spans not already there (exactly once on any table).
                if batch.uncertain or now + delay > deadline:
                    self._cooldown = min(max(self._cooldown * 2, 1.0), _COOLDOWN_MAX_S)
                    self._down_until = now + self._cooldown
                    _log.warning(
                        "otel-replay clickhouse exporter: insert into %s failed after %d attempt(s) (%s); "
                        "spooling to %s, next try in %.0f s",
                        self._describe(),
                        attempt,
                        short(exc, self.url),
                        self.spool_directory,
                        self._cooldown,
                    )
                    return False
                _log.debug(
                    "otel-replay clickhouse exporter: attempt %d failed (%s); retrying in %.1f s",
                    attempt,
                    short(exc, self.url),
                    delay,
                )
                time.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX_S)
                continue
            if self._cooldown:
                _log.info("otel-replay clickhouse exporter: %s reachable again", self._describe())
            self._cooldown = 0.0
            self._down_until = 0.0
            return True

    def _insert_locked(self, batch: _Batch) -> None:
        target = self._connect_locked()
        target.client.insert(
            target.table,
            batch.rows,
            column_names=list(INSERT_COLUMNS),
            column_type_names=list(INSERT_COLUMN_TYPES),
            settings={"insert_deduplicate": 1, "insert_deduplication_token": batch.token},
        )

    def _spool_locked(self, batch: _Batch) -> bool:
        try:
            if batch.uncertain:
                return self._spool_uncertain_locked(batch)
            if self._spool is None:
                self._spool = SpoolExporter(self.spool_directory)
            return self._spool.export(batch.spans) is SpanExportResult.SUCCESS
        except Exception:  # noqa: BLE001 - an unspoolable batch is logged, never raised into the host program
            _log.exception("otel-replay clickhouse exporter: could not spool %d span(s)", len(batch.rows))
            return False

    def _spool_uncertain_locked(self, batch: _Batch) -> bool:
        """Spool a batch the server may have committed as a half-ingested segment: the ingest's recovery step
        inserts only its spans not yet stored."""
        if self._uncertain_spool is None:
            self._uncertain_spool = SpoolExporter(self.spool_directory / _UNCERTAIN_DIR)
        if self._uncertain_spool.export(batch.spans) is not SpanExportResult.SUCCESS:
            return False
        # On disk from here on: if sealing or moving fails now, a later flush (or the next exporter of this
        # home) publishes it, so the batch must not be spooled a second time.
        if self._uncertain_spool.force_flush():
            self._publish_uncertain_locked()
        return True

    def _publish_uncertain_locked(self) -> bool:
        """Move sealed segments of the staging folder into the spool as ``.ingesting`` (also those a previous
        process left behind)."""
        staging = self.spool_directory / _UNCERTAIN_DIR
        if not staging.is_dir():
            return True
        ok = True
        adopt_orphaned_segments(staging)
        for path in sorted(staging.glob("*" + SEALED_SUFFIX)):
            try:
                os.replace(path, self.spool_directory / (path.stem + INGESTING_SUFFIX))
            except FileNotFoundError:
                continue  # another exporter of this home moved it first
            except OSError:
                _log.warning("otel-replay clickhouse exporter: could not move %s into the spool", path, exc_info=True)
                ok = False
        fsync_dir(self.spool_directory, best_effort=True)
        return ok
