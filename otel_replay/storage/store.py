"""The Store: otel-replay's one door to ClickHouse, embedded (chDB) or a server, through clickhouse-connect.

Why it exists: every reader (CLI, replay engine, tests) and the spool ingest need the same few operations on
the Collector exporter's tables: create them, insert rows, find one trace through the trace-id lookup table,
list run roots. This class owns the connection, the embedded store's file lock and the schema check, so
nobody else builds SQL against ``otel_traces``. Its reads (spans, traces, runs, run roots) are defined in
:mod:`.reads`, the base class ``Reads``.

Delivery into the store is at least once (an SDK retry, a Collector restart between insert and
acknowledgement), so a span may be stored as several identical rows; every read here keeps one row per
``(TraceId, SpanId)`` (``LIMIT 1 BY``), and the tables keep the exporter's layout (docs/storage.md).

Store URLs (argument → ``OTEL_REPLAY_STORE`` → ``chdb://{home}/store``):

* ``chdb:///abs/path``: embedded chDB on disk. Locked for this process (:mod:`.lock`); schema created if
  missing; pending spool segments of ``{home}/spool`` are ingested when it opens.
* ``chdb://memory``: embedded, in memory, gone at close (tests, experiments). Nothing is ingested on open
  (spool segments would be consumed into a store that vanishes); call :meth:`Store.ingest` to do it anyway.
* ``http(s)://user:password@host:8123/database``: a ClickHouse server. The schema is never created
  implicitly (run ``otel-replay db init``); spool segments, if any, are ingested on open.
  ``?table=name`` picks another traces table name (the exporter's ``traces_table_name``). A password holding
  ``/``, ``?`` or ``#`` must be percent-encoded (``%2F``, ``%3F``, ``%23``): otherwise the URL is refused.

It must never put a value into SQL text: values travel only as server-side bound parameters ``{name:Type}``;
the only interpolated names are database / table identifiers checked against a strict pattern. It never
shows a password in a message: every URL it shows goes through :func:`otel_replay.settings.masked_url`, every
driver error through :func:`otel_replay.settings.scrub_url`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from .. import runtime, settings
from ..errors import StoreError, StoreUnavailableError
from ..exporting.rows import (
    INSERT_COLUMN_TYPES,
    INSERT_COLUMNS,
    row_from_record,
)
from ..files import private_dir
from ..records import SpanRecord
from . import ddl
from .lock import StoreLock
from .reads import Reads

if TYPE_CHECKING:
    from .ingest import IngestReport

__all__ = ["Store", "open_given"]

_log = logging.getLogger("otel_replay.store")

_INSERT_CHUNK_ROWS: Final = 50_000


_redact_url = settings.masked_url
"""A store URL as people may see it (the password masked, however malformed the URL is)."""

_UNREADABLE_USERINFO: Final = (
    "the part before the host cannot be read as user:password; percent-encode '/', '?', '#' and '@' in the "
    "password (%2F, %3F, %23, %40)"
)


def _root_cause(exc: BaseException, url: str) -> str:
    """The shortest useful reason of a driver error: the innermost OS error when there is one."""
    text = str(exc)
    for marker in (
        "Connection refused",
        "Name or service not known",
        "timed out",
        "No route to host",
        "Authentication failed",
        "Temporary failure in name resolution",
    ):
        if marker.lower() in text.lower():
            return marker.lower()
    text = _scrub(text, url)
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:300]


def _scrub(text: str, url: str | None) -> str:
    """The first line of ``text`` (a driver's error) with ``url`` and every piece of its credential masked, and
    the password of any other ``scheme://user:password@`` in it."""
    if url:
        text = settings.scrub_url(text, url)
    text = re.sub(r"//([^:/@\s]*):[^@\s]*@", r"//\1:***@", text)
    return text.splitlines()[0] if text else text


class Store(Reads):
    """An open store (use :meth:`open`); a context manager that closes the connection and releases the lock."""

    def __init__(
        self, *, client: Any, url: str, home: Path, database: str, table: str, embedded: bool, lock: StoreLock | None
    ) -> None:
        """Internal: use :meth:`Store.open`."""
        self._client = client
        self.url = url
        """The store URL as given (may hold a password: show :meth:`describe` instead)."""
        self.home = home
        """The otel-replay home whose spool this store ingests."""
        self.database = database
        """Database of the tables."""
        self.table = table
        """Name of the traces table (the lookup table is ``{table}_trace_id_ts``)."""
        self.embedded = embedded
        """True for chDB (``chdb://``), False for a server."""
        self._lock = lock
        self.last_ingest: IngestReport | None = None
        """Report of the ingest run when the store opened (None if none ran)."""

    # ------------------------------------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        home: str | os.PathLike[str] | None = None,
        ingest: bool = True,
        lock_timeout: float | None = None,
    ) -> Store:
        """Open the store at ``url`` (argument, the ``store=`` given to :func:`otel_replay.configure`,
        ``OTEL_REPLAY_STORE``, then ``chdb://{home}/store``; ``home`` defaults to the configured one).

        The embedded store is locked for this process (waiting up to ``lock_timeout`` seconds, then
        :class:`StoreBusyError`) and gets its schema if missing; a server without the tables raises
        :class:`StoreError` (run ``otel-replay db init``); an unreachable server raises
        :class:`StoreUnavailableError`. With ``ingest`` (default), pending spool segments are ingested.
        """
        configured = runtime.current()
        if configured is not None:  # what the application passed to configure() is this process's default
            home = home if home is not None or not configured.home_given else configured.home
            url = url or configured.store_url
        home_path = settings.resolve_home(home)
        resolved = settings.resolve_store_url(url, home_path)
        scheme = resolved.split(":", 1)[0].lower()
        if scheme == "chdb":
            store = cls._open_chdb(resolved, home_path, lock_timeout)
            auto_ingest = ingest and not store._memory
        elif scheme in ("http", "https"):
            store = cls._open_server(resolved, home_path)
            auto_ingest = ingest
        else:
            raise StoreError(
                f"unsupported store URL {_redact_url(resolved)!r}: use chdb:///abs/path, chdb://memory "
                "or http(s)://user:password@host:8123/database"
            )
        try:
            if auto_ingest:
                store.last_ingest = store.ingest()
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def _open_chdb(cls, url: str, home: Path, lock_timeout: float | None) -> Store:
        import clickhouse_connect

        parts = urlsplit(url)
        location = parts.netloc or ""
        memory = location in ("memory", ":memory:") or (not location and parts.path in ("", "/"))
        if not memory and location:
            raise StoreError(
                f"store URL {_redact_url(url)!r}: write an on-disk chDB store with an absolute path, chdb:///abs/path"
            )
        lock = None
        path: Path | None = None
        if not memory:
            path = Path(unquote(parts.path)).expanduser()
            if not path.is_absolute():
                raise StoreError(f"store URL {_redact_url(url)!r}: the chDB path must be absolute (chdb:///abs/path)")
            private_dir(path)
            lock = StoreLock(path.parent / (path.name + ".lock"), timeout=lock_timeout, what="embedded store")
            lock.acquire()
        try:
            try:
                client = clickhouse_connect.get_client(dsn="chdb://memory" if memory else f"chdb://{path}")
            except Exception as exc:  # noqa: BLE001 - classified below, raised as StoreError
                text = str(exc)
                if "already initialized" in text:
                    raise StoreError(
                        f"cannot open {_redact_url(url)}: this process already has another chDB store open (chDB "
                        "runs one embedded store per process); close it first"
                    ) from None
                raise StoreError(f"cannot open the embedded store {_redact_url(url)}: {_scrub(text, url)}") from None
            store = cls(
                client=client,
                url=url,
                home=home,
                database=ddl.DEFAULT_DATABASE,
                table=ddl.DEFAULT_TABLE,
                embedded=True,
                lock=lock,
            )
            store._memory = memory
            try:
                if not store._tables_exist():
                    store.init_schema()
            except BaseException:
                store.close()
                raise
            return store
        except BaseException:
            if lock is not None:
                lock.release()
            raise

    @classmethod
    def _open_server(cls, url: str, home: Path) -> Store:
        import clickhouse_connect

        if settings.malformed_userinfo(url):
            raise StoreError(f"store URL {_redact_url(url)}: {_UNREADABLE_USERINFO}")
        parts = urlsplit(url)
        database = unquote(parts.path.strip("/")) or ddl.DEFAULT_DATABASE
        query = parse_qs(parts.query)
        table = query.get("table", [ddl.DEFAULT_TABLE])[0]
        try:
            ddl.check_identifier(database, what="database name")
            ddl.check_identifier(table, what="table name")
        except ValueError as exc:
            raise StoreError(f"store URL {_redact_url(url)}: {_scrub(str(exc), url)}") from None
        secure = parts.scheme.lower() == "https"
        password = unquote(parts.password) if parts.password else ""
        try:
            port = parts.port or (8443 if secure else 8123)
        except ValueError:
            raise StoreError(f"store URL {_redact_url(url)}: bad port") from None
        try:
            client = clickhouse_connect.get_client(
                host=parts.hostname or "localhost",
                port=port,
                username=unquote(parts.username or "default"),
                password=password,
                database=database,
                secure=secure,
                connect_timeout=5,
                send_receive_timeout=300,
            )
        except Exception as exc:  # noqa: BLE001 - may quote the password: from None
            raise StoreUnavailableError(
                f"cannot reach the ClickHouse store at {_redact_url(url)} ({_root_cause(exc, url)}): check that "
                "the server is running and the URL, user and password are right"
            ) from None
        store = cls(client=client, url=url, home=home, database=database, table=table, embedded=False, lock=None)
        store._memory = False
        try:
            if not store._tables_exist():
                raise StoreError(
                    f"the store at {_redact_url(url)} has no {database}.{table} tables: run "
                    f"`otel-replay db init --store URL` (or let the Collector's exporter create them)"
                )
        except BaseException:
            store.close()
            raise
        return store

    _memory: bool = False

    def close(self) -> None:
        """Close the connection and release the embedded store's lock. Safe to call twice."""
        client, self._client = self._client, None
        try:
            if client is not None:
                client.close()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        """Where this store is, for people (no password)."""
        return f"{_redact_url(self.url)} ({self.database}.{self.table})"

    def __repr__(self) -> str:
        return f"Store({self.describe()})"

    # ------------------------------------------------------------------------------------------ plumbing

    @property
    def client(self) -> Any:
        """The clickhouse-connect client (raises StoreError once closed)."""
        if self._client is None:
            raise StoreError("the store is closed; open it again with Store.open()")
        return self._client

    @property
    def traces_table(self) -> str:
        """Quoted ``database.table`` of the traces table."""
        return f"`{self.database}`.`{self.table}`"

    @property
    def lookup_table(self) -> str:
        """Quoted ``database.table_trace_id_ts`` of the trace-id lookup table."""
        return f"`{self.database}`.`{self.table}_trace_id_ts`"

    def _run(self, method: str, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        try:
            return getattr(self.client, method)(sql, parameters=parameters or {})
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - any driver failure becomes a StoreError with a scrubbed message
            raise self._error(exc) from None

    def _error(self, exc: Exception) -> StoreError:
        text = _scrub(str(exc), self.url)
        name = type(exc).__name__
        if not self.embedded and name in ("OperationalError",):
            return StoreUnavailableError(f"lost the ClickHouse store at {_redact_url(self.url)}: {text}")
        return StoreError(f"store query failed ({self.describe()}): {text}")

    def _tables_exist(self) -> bool:
        result = self._run(
            "query",
            "SELECT count() FROM system.tables WHERE database = {db:String} AND name IN ({t:String}, {lookup:String})",
            {"db": self.database, "t": self.table, "lookup": self.table + "_trace_id_ts"},
        )
        return int(result.result_rows[0][0]) == 2

    def server_version(self) -> str:
        """Version string of the ClickHouse engine (chDB reports its embedded engine's)."""
        return str(self._run("query", "SELECT version()").result_rows[0][0])

    # --------------------------------------------------------------------------------------------- schema

    def init_schema(self, *, cluster: str | None = None, ttl_days: int | None = None) -> None:
        """Create the exporter's tables if missing (idempotent), with indexes for this server's version."""
        if self.database != ddl.DEFAULT_DATABASE:
            self._run(
                "command",
                f"CREATE DATABASE IF NOT EXISTS `{ddl.check_identifier(self.database)}`"
                + (f" ON CLUSTER `{ddl.check_identifier(cluster)}`" if cluster else ""),
            )
        try:
            statements = ddl.render_ddl(
                database=self.database,
                table=self.table,
                cluster=cluster,
                ttl_days=ttl_days,
                server_version=self.client.server_version or self.server_version(),  # the driver asked at connect
            )
        except ValueError as exc:
            raise StoreError(str(exc)) from None
        for statement in statements:
            self._run("command", statement)

    # --------------------------------------------------------------------------------------------- writes

    def insert_rows(self, rows: Sequence[Sequence[Any]]) -> int:
        """Insert rows already in :data:`~otel_replay.exporting.rows.INSERT_COLUMNS` order; returns how many went in."""
        total = 0
        for start in range(0, len(rows), _INSERT_CHUNK_ROWS):
            chunk = rows[start : start + _INSERT_CHUNK_ROWS]
            try:
                self.client.insert(
                    self.traces_table.replace("`", ""),
                    chunk,
                    column_names=list(INSERT_COLUMNS),
                    column_type_names=list(INSERT_COLUMN_TYPES),
                )
            except StoreError:
                raise
            except Exception as exc:  # noqa: BLE001 - any driver failure becomes a StoreError with a scrubbed message
                raise self._error(exc) from None
            total += len(chunk)
        return total

    def insert_spans(self, records: Iterable[SpanRecord]) -> int:
        """Insert span records as the exporter would; returns how many were inserted."""
        return self.insert_rows([row_from_record(record) for record in records])

    def ingest(self) -> IngestReport:
        """Ingest every sealed (or orphaned) spool segment of :attr:`home` into this store, exactly once."""
        from .ingest import ingest_spool

        return ingest_spool(self, self.home / "spool")


def open_given(store: Store | str | None) -> tuple[Store, bool]:
    """The store a Python call was given as ``store=``: a :class:`Store` as it is, or one opened from a URL
    (``None``: the configured store, see :meth:`Store.open`). Returns ``(store, opened_here)``; the caller closes
    the store only when ``opened_here`` is true (a store it was given stays open for its owner)."""
    if store is None or isinstance(store, str):
        return Store.open(store), True
    return store, False
