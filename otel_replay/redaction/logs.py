"""Scrubbing what the library logs and shows people: :data:`LOGGER_NAMES`, :class:`ScrubbingLogFilter` (put
on each of them when this module is imported), :func:`scrub_message` and the source of the redactor it uses
(:func:`set_message_redactor_source`, set by ``exporting.setup``).

Process-wide state, defined here only: the filters on the process's loggers, the one message-redactor source
and the fallback redactor (a key of this process only) used before ``otel_replay.configure()``.

It must never drop a log record, raise, create a key file, or look upwards for the runtime itself.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any, Final

from .redactor import Redactor
from .rules import KEY_BYTES

LOGGER_NAMES: Final[tuple[str, ...]] = (
    "otel_replay",
    "otel_replay.audit",
    "otel_replay.clickhouse",
    "otel_replay.ingest",
    "otel_replay.lab",
    "otel_replay.rows",
    "otel_replay.spool",
    "otel_replay.store",
)
"""The loggers otel-replay writes to; each carries a :class:`ScrubbingLogFilter` (records of a child logger do
not pass through the filters of its parent, so every one needs its own). Every ``logging.getLogger("...")``
name in the package must be listed here: a test reads the package's source and fails on a name missing."""

_fallback: list[Redactor] = []
_message_source: list[Callable[[], Redactor | None]] = []


def set_message_redactor_source(source: Callable[[], Redactor | None]) -> None:
    """Tell :func:`scrub_message` where the configured redactor is (``exporting.setup`` registers the current
    runtime's redactor when it is loaded; this module never looks upwards itself)."""
    _message_source[:] = [source]


def _message_redactor() -> Redactor:
    """The configured redactor, or (before :func:`otel_replay.configure`) one with a key of this process only,
    so that scrubbing a message never creates a key file."""
    for source in _message_source:
        try:
            current = source()
        except Exception:  # noqa: BLE001 - scrubbing a message never raises; the fallback does the job
            current = None
        if current is not None:
            return current
    if not _fallback:
        _fallback.append(Redactor(key=secrets.token_bytes(KEY_BYTES)))
    return _fallback[0]


def scrub_message(text: Any) -> str:
    """A message for people (a log line, an error line, an exception text) with every secret shape replaced
    inline, e.g. the password of ``http://user:pass@host:8123``. Never raises.

    One difference from :meth:`Redactor.scrub_text`: a ``name: value`` assignment whose value is a short
    lower-case word (``passwd-file: no such file``) is prose in a message, not a credential, and is kept."""
    try:
        return _scrubbed_message(_message_redactor(), str(text))[0]
    except Exception:  # noqa: BLE001
        return "[REDACTED:error]"


def _scrubbed_message(redactor: Redactor, text: str) -> tuple[str, int]:
    hits = [
        h
        for h in redactor._hits(text)
        if not (
            h.rule == "secret_assignment"
            and len(h.secret) <= 3
            and h.secret.isalpha()
            and h.secret.islower()
            and ":" in text[h.mstart : h.start]
        )
    ]
    return (redactor._replace(text, hits), len(hits)) if hits else (text, 0)


class ScrubbingLogFilter(logging.Filter):
    """Scrubs every record of otel-replay's loggers before any handler formats it: the message (with its
    arguments), the formatted exception and the stack. Never drops a record, never raises."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            redactor = _message_redactor()
            clean, n = _scrubbed_message(redactor, record.getMessage())
            if n:
                record.msg, record.args = clean, ()
            if record.exc_info and not record.exc_text:
                record.exc_text = _scrubbed_message(redactor, logging.Formatter().formatException(record.exc_info))[0]
            if record.stack_info:
                record.stack_info = _scrubbed_message(redactor, record.stack_info)[0]
        except Exception:  # noqa: BLE001 - a log record is never lost to its scrubbing
            record.msg, record.args, record.exc_info, record.exc_text = "[REDACTED:error]", (), None, None
        return True


def install_log_scrubbing() -> None:
    """Put one :class:`ScrubbingLogFilter` on each of :data:`LOGGER_NAMES` (idempotent).

    Called when this module is imported: the loggers are process-wide, and so is this filter."""
    for name in LOGGER_NAMES:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ScrubbingLogFilter) for f in logger.filters):
            logger.addFilter(ScrubbingLogFilter())


install_log_scrubbing()
