"""The embedded default exporter: an append-only spool of OTLP protobuf segments under ``OTEL_REPLAY_HOME``.

Why it exists: an agent process must never open the embedded chDB store (one process per path), and must
never wait on or fail because of storage. So spans are appended, as the OTLP ``ExportTraceServiceRequest``
the SDK's own encoder produces, to a segment file that only this process writes; the store ingests sealed
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
from ..settings import env_number, resolve_home

_log = logging.getLogger("otel_replay.spool")

__all__ = [
    "OTEL_REPLAY_SPOOL_FSYNC",
    "OTEL_REPLAY_SPOOL_SEGMENT_BYTES",
    "SegmentRead",
    "SpoolExporter",
    "adopt_orphaned_segments",
    "encode_record",
    "encode_request",
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


# ------------------------------------------------------------------------------------------ OTLP writer
#
# The SDK's encoder builds one protobuf object per span, event, attribute and value before serialising them,
# which made it the largest single cost of recording (about 1.4 µs per attribute). The writer below produces
# the same bytes directly: fields in field-number order, proto3 defaults left out, exactly as the SDK's
# ``encode_spans(spans).SerializeToString()`` does. Anything it does not handle the same way (an attribute
# value the SDK would log and drop, an int outside int64, a string that is not valid UTF-8, an unknown span
# kind) makes it hand the whole batch to the SDK's encoder instead, so the output never differs.
#
# Tags are written as bytes: (field number << 3) | wire type, where wire type 0 is a varint, 1 a fixed64,
# 2 length-delimited and 5 a fixed32; e.g. b"\x4a" is Span field 9 (attributes), b"\x85\x01" field 16
# (flags). Field numbers are those of opentelemetry/proto/trace/v1/trace.proto and common/v1/common.proto.


class _Fallback(Exception):
    """This batch needs the SDK's own encoder."""


_VARINT_SMALL: Final = tuple(bytes((i,)) for i in range(128))
_LENGTHS: Final = _VARINT_SMALL + tuple(bytes(((i & 127) | 128, i >> 7)) for i in range(128, 1 << 12))
_LENGTHS_END: Final = 1 << 12
_DOUBLE: Final = struct.Struct("<d")
_FIXED64: Final = struct.Struct("<Q")
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_CACHE_MAX: Final = 4096
_CACHED_VALUE_CHARS: Final = 48
_key_fields: dict[str, bytes] = {}  # attribute key -> its encoded KeyValue.key field (keys are few and reused)
_pairs: dict[tuple[str, str], bytes] = {}  # (key, short string value) -> encoded KeyValue (such values repeat)


def _varint(n: int) -> bytes:
    if n < _LENGTHS_END:
        return _LENGTHS[n]
    out = bytearray()
    while n > 127:
        out.append((n & 127) | 128)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    n = len(payload)
    return tag + (_LENGTHS[n] if n < _LENGTHS_END else _varint(n)) + payload


def _any_value(value: object) -> bytes:
    """An encoded ``AnyValue`` (the SDK encoder's type order: None, bool, str, int, float, bytes, sequence)."""
    kind = type(value)
    if kind is str:
        return _field(b"\x0a", value.encode("utf-8"))  # type: ignore[attr-defined]  # lone surrogates raise
    if kind is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if kind is int:
        if not _INT64_MIN <= value <= _INT64_MAX:  # type: ignore[operator]  # the SDK's encoder drops it
            raise _Fallback
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # type: ignore[operator]
    if kind is float:
        return b"\x21" + _DOUBLE.pack(value)
    if kind is tuple or kind is list:
        return _field(b"\x2a", b"".join([_field(b"\x0a", _any_value(v)) for v in value]))  # type: ignore[attr-defined]
    if value is None:
        return b""
    raise _Fallback  # subclasses, bytes, mappings: rare, left to the SDK's encoder


def _key_field(key: str) -> bytes:
    """The encoded ``KeyValue.key`` field of ``key`` (cached: keys are few and reused)."""
    key_field = _key_fields.get(key)
    if key_field is None:
        if type(key) is not str:
            raise _Fallback
        key_field = _field(b"\x0a", key.encode("utf-8"))
        if len(_key_fields) >= _CACHE_MAX:
            _key_fields.clear()
        _key_fields[key] = key_field
    return key_field


def _plain_items(attributes: object) -> object:
    """The plain dict behind an SDK attribute mapping (``BoundedAttributes``): iterating it directly spares
    a lookup per item; the span has ended, so nothing changes it any more."""
    if type(attributes) is dict:
        return attributes
    inner = getattr(attributes, "_dict", None)
    return inner if type(inner) is dict else attributes


def _attributes(tag: bytes, attributes: object) -> bytes:
    """Repeated ``KeyValue`` fields (``tag`` is the field's tag) for an attribute mapping."""
    if not attributes:
        return b""
    parts = []
    pairs = _pairs
    keys = _key_fields
    lengths = _LENGTHS
    end = _LENGTHS_END
    for key, value in _plain_items(attributes).items():  # type: ignore[attr-defined]
        kind = type(value)
        if kind is str:
            if len(value) <= _CACHED_VALUE_CHARS:
                pair = pairs.get((key, value))
                if pair is None:
                    pair = _key_field(key) + _field(b"\x12", _field(b"\x0a", value.encode("utf-8")))
                    if len(pairs) >= _CACHE_MAX:
                        pairs.clear()
                    pairs[(key, value)] = pair
            else:  # a long string (a hash, a payload): written in pieces, never copied into a pair first
                data = value.encode("utf-8")  # lone surrogates raise: the SDK's encoder drops such a value
                key_field = keys.get(key) or _key_field(key)
                n = len(data)
                size = lengths[n] if n < end else _varint(n)
                n += 1 + len(size)
                any_size = lengths[n] if n < end else _varint(n)
                n += len(key_field) + 1 + len(any_size)
                parts.extend((tag, lengths[n] if n < end else _varint(n), key_field, b"\x12", any_size, b"\x0a", size,
                              data))
                continue
        elif kind is int and 0 <= value < end:
            size = lengths[value]
            pair = (keys.get(key) or _key_field(key)) + b"\x12" + _VARINT_SMALL[1 + len(size)] + b"\x18" + size
        else:
            pair = (keys.get(key) or _key_field(key)) + _field(b"\x12", _any_value(value))
        n = len(pair)
        parts.append(tag + (lengths[n] if n < end else _varint(n)) + pair)
    return b"".join(parts)


def _flags(context: object) -> bytes:
    # SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK (0x100), plus SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK (0x200) if remote
    return b"\x00\x03\x00\x00" if context is not None and context.is_remote else b"\x00\x01\x00\x00"  # type: ignore[attr-defined]


def _span(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    assert context is not None
    parts = [b"\x0a\x10", context.trace_id.to_bytes(16, "big"), b"\x12\x08", context.span_id.to_bytes(8, "big")]
    trace_state = context.trace_state
    if trace_state:  # most spans have none: skip building an empty text
        state = ",".join([f"{key}={value}" for key, value in trace_state.items()])
        if state:
            parts.append(_field(b"\x1a", state.encode("utf-8")))
    parent = span.parent
    if parent is not None:
        parts.append(b"\x22\x08")
        parts.append(parent.span_id.to_bytes(8, "big"))
    name = span.name
    if name:
        parts.append(_field(b"\x2a", name.encode("utf-8")))
    kind = span.kind.value + 1  # SpanKind.INTERNAL (0) is SPAN_KIND_INTERNAL (1), and so on
    if not 1 <= kind <= 5:
        raise _Fallback
    parts.append(b"\x30" + _VARINT_SMALL[kind])
    if span.start_time:
        parts.append(b"\x39" + _FIXED64.pack(span.start_time))
    if span.end_time:
        parts.append(b"\x41" + _FIXED64.pack(span.end_time))
    parts.append(_attributes(b"\x4a", getattr(span, "_attributes", None) or span.attributes))
    dropped = span.dropped_attributes
    if dropped:
        parts.append(b"\x50" + _varint(dropped))
    for event in span.events:
        body = []
        if event.timestamp:
            body.append(b"\x09" + _FIXED64.pack(event.timestamp))
        if event.name:
            body.append(_field(b"\x12", event.name.encode("utf-8")))
        body.append(_attributes(b"\x1a", event.attributes))
        dropped = event.dropped_attributes
        if dropped:
            body.append(b"\x20" + _varint(dropped))
        parts.append(_field(b"\x5a", b"".join(body)))
    dropped = span.dropped_events
    if dropped:
        parts.append(b"\x60" + _varint(dropped))
    for link in span.links:
        link_context = link.context
        body = [b"\x0a\x10", link_context.trace_id.to_bytes(16, "big"), b"\x12\x08",
                link_context.span_id.to_bytes(8, "big"), _attributes(b"\x22", link.attributes)]
        dropped = link.dropped_attributes
        if dropped:
            body.append(b"\x28" + _varint(dropped))
        body.append(b"\x35" + _flags(link_context))
        parts.append(_field(b"\x6a", b"".join(body)))
    dropped = span.dropped_links
    if dropped:
        parts.append(b"\x70" + _varint(dropped))
    status = span.status
    if status is not None:
        body = []
        if status.description:
            body.append(_field(b"\x12", status.description.encode("utf-8")))
        code = status.status_code.value
        if code:
            body.append(b"\x18" + _varint(code))
        parts.append(_field(b"\x7a", b"".join(body)))
    parts.append(b"\x85\x01" + _flags(parent))
    return _field(b"\x12", b"".join(parts))  # one ScopeSpans.spans field


def _scope(scope: object) -> bytes:
    """The ``ScopeSpans.scope`` field and, after the spans, its ``schema_url`` field."""
    if scope is None:
        return b"\x0a\x00"
    body = []
    if scope.name:  # type: ignore[attr-defined]
        body.append(_field(b"\x0a", scope.name.encode("utf-8")))  # type: ignore[attr-defined]
    if scope.version:  # type: ignore[attr-defined]
        body.append(_field(b"\x12", scope.version.encode("utf-8")))  # type: ignore[attr-defined]
    body.append(_attributes(b"\x1a", scope.attributes))  # type: ignore[attr-defined]
    return _field(b"\x0a", b"".join(body))


def _encode_request_fast(spans: Sequence[ReadableSpan]) -> bytes:
    # Group by resource, then scope, in order of first appearance, as the SDK's encoder does (it keys its
    # groups by value; the identity lookups only spare hashing a Resource per span).
    canonical: dict[int, object] = {}
    by_value: dict[object, object] = {}
    groups: dict[int, tuple[object, dict[int, tuple[object, list[bytes]]]]] = {}
    for span in spans:
        resource = span.resource
        scope = span.instrumentation_scope or None
        resource_key = canonical.get(id(resource))
        if resource_key is None:
            resource_key = canonical[id(resource)] = by_value.setdefault(resource, resource)
        scope_key = None
        if scope is not None:
            scope_key = canonical.get(id(scope))
            if scope_key is None:
                scope_key = canonical[id(scope)] = by_value.setdefault(("scope", scope), scope)
        group = groups.get(id(resource_key))
        if group is None:
            group = groups[id(resource_key)] = (resource_key, {})
        scoped = group[1].get(id(scope_key))
        if scoped is None:
            scoped = group[1][id(scope_key)] = (scope_key, [])
        scoped[1].append(_span(span))
    out = []
    for resource, scopes in groups.values():
        body = [_field(b"\x0a", _attributes(b"\x0a", resource.attributes))]  # type: ignore[attr-defined]
        for scope, encoded in scopes.values():
            scope_spans = [_scope(scope), *encoded]
            schema_url = scope.schema_url if scope is not None else None  # type: ignore[attr-defined]
            if schema_url:
                scope_spans.append(_field(b"\x1a", schema_url.encode("utf-8")))
            body.append(_field(b"\x12", b"".join(scope_spans)))
        schema_url = resource.schema_url  # type: ignore[attr-defined]
        if schema_url:
            body.append(_field(b"\x1a", schema_url.encode("utf-8")))
        out.append(_field(b"\x0a", b"".join(body)))
    return b"".join(out)


def encode_request(spans: Sequence[ReadableSpan]) -> bytes:
    """The binary OTLP ``ExportTraceServiceRequest`` of ``spans``: the bytes the SDK's
    ``encode_spans(spans).SerializeToString()`` gives, written directly (falls back to the SDK for values it
    does not handle the same way)."""
    try:
        return _encode_request_fast(spans)
    except (_Fallback, UnicodeEncodeError, AttributeError, TypeError, ValueError, OverflowError):
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        return encode_spans(spans).SerializeToString()


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

    def __init__(self, directory: str | os.PathLike[str] | None = None, *, segment_max_bytes: int | None = None,
                 fsync: str | None = None) -> None:
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
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork_in_child)

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
        except Exception:  # the telemetry path never raises into the host program
            _log.exception("otel-replay spool: could not encode %d span(s)", len(spans))
            return SpanExportResult.FAILURE
        with self._lock:
            try:
                self._append(record)
            except Exception as exc:
                self._write_failed(len(spans), exc)
                return SpanExportResult.FAILURE
            if self._failing_spans:
                _log.warning("otel-replay spool: writing to %s again; %d span(s) were dropped while it could not be "
                             "written", self.directory, self._failing_spans)
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
            _log.warning("otel-replay spool: could not write %d span(s) to %s (%s); they are dropped, the agent goes "
                         "on, and recording resumes as soon as the spool can be written again", count,
                         self.directory, exc.strerror or exc)
        else:
            _log.debug("otel-replay spool: still cannot write to %s; dropped %d more span(s)", self.directory, count)

    def _seal_or_warn_locked(self) -> bool:
        try:
            self._seal_locked()
            return True
        except Exception as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            _log.warning("otel-replay spool: could not seal the segment in %s (%s); it stays open and the next "
                         "flush seals it", self.directory, reason, exc_info=not isinstance(exc, OSError))
            return False

    def _open_locked(self) -> None:
        private_dir(self.directory)
        stem = f"{time.time_ns():020d}-{self._host}-{os.getpid()}-{secrets.token_hex(4)}"
        path = self.directory / (stem + OPEN_SUFFIX)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0),
                     0o600)
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
                _log.warning("otel-replay spool: fsync of %s failed (%s); the record is written but may not survive "
                             "a power loss", self._path, exc.strerror or exc)

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
            return SegmentRead(path=path, payloads=(), skipped=1,
                               problems=(f"{path.name}: torn segment header ({size} bytes)",))
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
            elif zlib.crc32(view[offset + header_size:end]) != crc:
                why = "checksum mismatch"
            else:
                if damaged_from is not None:
                    problems.append(f"{path.name}: skipped {offset - damaged_from} byte(s) at offset "
                                    f"{damaged_from}: {damaged_why}")
                    skipped += 1
                    damaged_from = None
                payloads.append(bytes(view[offset + header_size:end]))
                offset = end
                continue
        if damaged_from is None:  # damage starts here: resynchronise at the next record magic
            damaged_from, damaged_why = offset, why
        following = data.find(RECORD_MAGIC, offset + 1)
        if following < 0:
            break
        offset = following
    if damaged_from is not None:
        problems.append(f"{path.name}: skipped {size - damaged_from} byte(s) at offset {damaged_from}: "
                        f"{damaged_why}")
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
