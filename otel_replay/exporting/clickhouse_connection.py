"""Where the direct ClickHouse exporter's rows go, and what a failed insert means: the target (a clickhouse-connect
client and the qualified table: a server URL's options checked, the embedded store opened, or the injected
client), made on first use and closed after a failure; whether a failure proves the server never committed the
insert (``never_sent``); a failure as one short line for a log (``short``). ``ClickHouseSpanExporter`` takes
the connection's methods from ``Connection``, its base class; the delivery (retries, spool, memory cap) stays
in :mod:`.clickhouse`.

It must never show a password, put a value into SQL text, or call an uncertain outcome "never sent" (such a
batch would be sent again).
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from .. import settings

_log = logging.getLogger("otel_replay.clickhouse")

_PROXY_TIMEOUT: Final = re.compile(r"HTTP status (502|504)\b")


class Target:
    """Where rows go: a clickhouse-connect client and the qualified table name, plus how to close it."""

    def __init__(self, client: Any, table: str, close: Callable[[], None]) -> None:
        self.client = client
        self.table = table
        self.close = close


redact = settings.masked_url
"""A store URL as a log line or an error may show it (the password masked, however malformed the URL is)."""


def never_sent(exc: BaseException) -> bool:
    """True when ``exc`` proves the server did not commit the insert: no connection was made, or the server
    answered with an error. False when the request may have been committed (timeout, dropped connection)."""
    try:
        from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError
    except ImportError:  # pragma: no cover - clickhouse-connect is a dependency
        return False
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ConnectionRefusedError, socket.gaierror)):
            return True
        if type(current).__name__ in ("NewConnectionError", "NameResolutionError", "ConnectTimeoutError"):
            return True
        if isinstance(current, DatabaseError) and not isinstance(current, OperationalError):
            # The server (or the embedded engine) answered with an error, so nothing was committed, unless a
            # proxy in front of it answered 502/504 (the server may have committed behind it).
            return _PROXY_TIMEOUT.search(str(current)) is None
        reason = getattr(current, "reason", None)  # urllib3 MaxRetryError
        if isinstance(reason, BaseException) and never_sent(reason):
            return True
        current = current.__cause__ or current.__context__
    return False


_CAUSES: Final = (
    "Connection refused",
    "timed out",
    "Name or service not known",
    "No route to host",
    "Temporary failure in name resolution",
    "Connection reset",
    "Authentication failed",
)


def short(exc: BaseException, url: str) -> str:
    """One short line about the failure for a log (the root cause when it is a known one), no password."""
    text = str(exc) or type(exc).__name__
    for cause in _CAUSES:
        if cause.lower() in text.lower():
            return cause.lower()
    if url:
        text = settings.scrub_url(text, url)
    return text.splitlines()[0][:200]


class Connection:
    """The connection part of :class:`~otel_replay.exporting.clickhouse.ClickHouseSpanExporter`."""

    url: str
    timeout: float
    spool_directory: Path
    _client_factory: Callable[[], Any] | None
    _table: str
    _target: Target | None

    def _describe(self) -> str:
        return redact(self.url) if self.url else f"the injected client ({self._table})"

    def _server_options(self, url: str) -> dict[str, Any]:
        from ..storage import ddl

        if settings.malformed_userinfo(url):
            raise ValueError(
                f"store URL {redact(url)}: the part before the host cannot be read as user:password; "
                "percent-encode '/', '?', '#' and '@' in the password (%2F, %3F, %23, %40)"
            )
        parts = urlsplit(url)
        database = unquote(parts.path.strip("/")) or ddl.DEFAULT_DATABASE
        table = parse_qs(parts.query).get("table", [ddl.DEFAULT_TABLE])[0]
        try:
            ddl.check_identifier(database, what="database name")
            ddl.check_identifier(table, what="table name")
        except ValueError as exc:
            raise ValueError(f"store URL {redact(url)}: {settings.scrub_url(str(exc), url)}") from None
        secure = parts.scheme.lower() == "https"
        try:
            port = parts.port or (8443 if secure else 8123)
        except ValueError:
            raise ValueError(f"store URL {redact(url)}: bad port") from None
        return {
            "host": parts.hostname or "localhost",
            "port": port,
            "username": unquote(parts.username or "default"),
            "password": unquote(parts.password) if parts.password else "",
            "database": database,
            "secure": secure,
            "table": f"{database}.{table}",
        }

    def _connect_locked(self) -> Target:
        if self._target is not None:
            return self._target
        if self._client_factory is not None:
            client = self._client_factory()
            self._target = Target(client, self._table, client.close)
        elif self.url.lower().startswith("chdb:"):
            from ..storage.store import Store

            store = Store.open(self.url, home=self.spool_directory.parent, ingest=False)
            self._target = Target(store.client, store.traces_table.replace("`", ""), store.close)
        else:
            import clickhouse_connect

            options = self._server_options(self.url)
            table = options.pop("table")
            seconds = max(1, round(self.timeout))  # clickhouse-connect takes whole seconds
            client = clickhouse_connect.get_client(
                **options, connect_timeout=seconds, send_receive_timeout=seconds, autogenerate_session_id=False
            )
            self._target = Target(client, table, client.close)
        return self._target

    def _close_target_locked(self) -> None:
        target, self._target = self._target, None
        if target is not None:
            try:
                target.close()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail too
                _log.debug("otel-replay clickhouse exporter: closing the client failed", exc_info=True)
