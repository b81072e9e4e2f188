"""Snapshot payloads: a deterministic JSON form for any Python value, and how a payload rides on span events.

Everything a run saw or did is stored as canonical JSON (sorted keys, no spaces, UTF-8) inside a string
attribute of an ``otel_replay.snapshot.<kind>`` event. Collector and ClickHouse stringify other attribute
types and lose them (``1``, ``1.0`` and ``"1"`` all become ``1``); a string that already holds our own
encoding survives the trip byte for byte.

Values JSON cannot hold are encoded with a ``$type`` tag (datetimes, bytes, sets, tuples, dataclasses,
pydantic models, enums, decimals, UUIDs, paths, non-finite floats, arbitrary objects, cycles), always the
same way for the same value, so hashes of equal values are equal. :func:`from_jsonable` turns the tags that
can be rebuilt without importing user code back into Python values.

This module must never raise while encoding: whatever it is given, it returns a tree (worst case an
``object`` tag holding the value's type name). Redaction is applied to the tree before it is serialised.
The payload of each kind is documented in ``docs/semconv.md``; readers take unknown keys as they come, so
newer minor versions still read.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal
import enum
import hashlib
import itertools
import json
import math
import re
import uuid
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any, Final

from pydantic import BaseModel

from . import semconv
from .settings import env_number

OTEL_REPLAY_SNAPSHOT_MAX_BYTES: Final = "OTEL_REPLAY_SNAPSHOT_MAX_BYTES"
"""Environment variable: size cap (UTF-8 bytes) of one snapshot payload; larger ones are truncated."""

OTEL_REPLAY_SNAPSHOT_CHUNK_CHARS: Final = "OTEL_REPLAY_SNAPSHOT_CHUNK_CHARS"
"""Environment variable: payloads longer than this many characters are split over several events."""

OTEL_REPLAY_ATTACHMENT_MAX_BYTES: Final = "OTEL_REPLAY_ATTACHMENT_MAX_BYTES"
"""Environment variable: attached files up to this size keep their (redacted) content in the input snapshot."""

_DEFAULT_MAX_BYTES: Final = 4 * 1024 * 1024
_DEFAULT_ATTACHMENT_MAX_BYTES: Final = 64 * 1024
_DEFAULT_CHUNK_CHARS: Final = 64 * 1024
_PREVIEW_CHARS: Final = 1024
_MAX_DEPTH: Final = 64
PLAIN_MAX_DEPTH: Final = _MAX_DEPTH
"""Containers nested this deep or deeper are never plain JSON for :func:`to_jsonable` (they are tagged)."""
_MAX_REPR: Final = 64 * 1024
_MAX_INT_BITS: Final = 12_000  # json refuses ints over 4,300 digits; larger ones are tagged

TYPE_TAG: Final = "$type"
"""Key of the tag object that encodes a value JSON cannot hold."""

TRUNCATED_TAG: Final = "$truncated"
"""Key of the marker object that replaces a payload larger than the cap."""

REDACTED_TAG: Final = "$redacted"
"""Key of the marker object that replaces a secret (see :mod:`otel_replay.redaction`)."""


class RedactedValue(str):
    """A value that was redacted in a recording, as a replay hands it back to the agent.

    It reads as the text ``[REDACTED:<fingerprint>]`` (so string code keeps working) and is recorded again as
    the same marker, with the same fingerprint, wherever the agent passes it on. The secret itself is never
    restored: a replay that needs it must read it from its own environment."""

    fingerprint: str
    scope: str

    def __new__(cls, fingerprint: str, scope: str) -> RedactedValue:
        value = super().__new__(cls, f"[REDACTED:{fingerprint}]")
        value.fingerprint, value.scope = fingerprint, scope
        return value

    def __reduce__(self) -> Any:
        return (RedactedValue, (self.fingerprint, self.scope))


# A user dict holding one of these keys is encoded in the ``dict`` pair form, so it can never pose as a marker.
_RESERVED_KEYS: Final = (TYPE_TAG, TRUNCATED_TAG, REDACTED_TAG)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SnapshotLimits:
    """Size limits for snapshot payloads."""

    max_bytes: int = _DEFAULT_MAX_BYTES
    chunk_chars: int = _DEFAULT_CHUNK_CHARS
    attachment_max_bytes: int = _DEFAULT_ATTACHMENT_MAX_BYTES

    @classmethod
    def from_env(cls) -> SnapshotLimits:
        """Limits from ``OTEL_REPLAY_SNAPSHOT_MAX_BYTES``, ``OTEL_REPLAY_SNAPSHOT_CHUNK_CHARS`` and
        ``OTEL_REPLAY_ATTACHMENT_MAX_BYTES``, or the defaults; bad values raise ValueError at setup."""
        return cls(
            max_bytes=env_number(OTEL_REPLAY_SNAPSHOT_MAX_BYTES, _DEFAULT_MAX_BYTES, minimum=1, unit="bytes"),
            chunk_chars=env_number(
                OTEL_REPLAY_SNAPSHOT_CHUNK_CHARS, _DEFAULT_CHUNK_CHARS, minimum=1, unit="characters"
            ),
            attachment_max_bytes=env_number(
                OTEL_REPLAY_ATTACHMENT_MAX_BYTES, _DEFAULT_ATTACHMENT_MAX_BYTES, minimum=0, unit="bytes"
            ),
        )


# ------------------------------------------------------------------------------------------ encoding


_MODULE_ALIASES: dict[str, str] = {}


def register_module_alias(alias: str, module: str) -> None:
    """Name classes and functions of module ``alias`` as ``module`` (a script loaded again under another
    name by the replay engine is still ``__main__``, so its values encode and hash as when recorded)."""
    _MODULE_ALIASES[alias] = module


def module_for(name: str) -> list[str]:
    """Module names that may hold what was recorded under module ``name`` (``__main__`` → its aliases too)."""
    return [name, *(alias for alias, original in _MODULE_ALIASES.items() if original == name)]


_SLOTTED: dict[type, tuple[str, ...]] = {}
"""Classes registered as slotted value classes (:func:`otel_replay.register_type`): encoded by their slots."""


def encode_by_slots(cls: type, slots: tuple[str, ...]) -> None:
    """Encode values of ``cls`` (a class with ``__slots__`` and no dataclass fields, such as LangGraph's
    ``Send``) as the fields ``slots`` hold, tagged ``dataclass``, instead of by their ``repr``."""
    _SLOTTED[cls] = slots


def qualname_of(obj: Any) -> str:
    """``module:qualname`` of a class or function."""
    module = getattr(obj, "__module__", "?")
    return f"{_MODULE_ALIASES.get(module, module)}:{getattr(obj, '__qualname__', type(obj).__qualname__)}"


def _float(value: float) -> Any:
    if math.isfinite(value):
        return value
    return {TYPE_TAG: "float", "value": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _safe_repr(value: Any) -> str:
    """repr without memory addresses (so equal objects encode equal), capped only very high: redaction runs on
    the whole text later, and a cut could split a secret so that no rule sees it."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not break recording
        return f"<unrepresentable {type(value).__qualname__}>"
    text = _ADDRESS.sub("", text)
    return text if len(text) <= _MAX_REPR else text[:_MAX_REPR] + "…"


_SCALARS: Final = frozenset({str, int, bool, type(None)})


def _plain(value: Any, depth: int) -> bool:
    """True when ``value`` is already plain JSON (str-keyed dicts, lists, finite numbers): no copy needed."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth >= _MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not (type(item) in _SCALARS or _plain(item, depth + 1)):
                return False
        return not (TYPE_TAG in value or TRUNCATED_TAG in value or REDACTED_TAG in value)
    if kind is list:
        for item in value:
            if not (type(item) in _SCALARS or _plain(item, depth + 1)):
                return False
        return True
    return False


def to_jsonable(value: Any) -> Any:
    """A JSON-able tree for any value: plain JSON types as they are, everything else behind a ``$type`` tag.

    Never raises. Deterministic: equal values give equal trees (sets are sorted by their encoding). A value
    that is already plain JSON is returned as it is (not copied): serialise it before it can change.
    """
    try:
        if _plain(value, 0):
            return value
        return _encode(value, 0, set())
    except RecursionError:
        return {TYPE_TAG: "depth_limit", "class": type(value).__qualname__}
    except Exception:  # pragma: no cover  # noqa: BLE001 - last line of defence, _encode handles its own cases
        return {TYPE_TAG: "object", "class": type(value).__qualname__, "repr": "<unencodable>"}


def _encode(value: Any, depth: int, active: set[int]) -> Any:  # noqa: C901 - one flat dispatch is clearest
    if value is None or value is True or value is False:
        return value
    kind = type(value)
    if kind is str:
        return value
    if kind is int:
        return value if value.bit_length() < _MAX_INT_BITS else {TYPE_TAG: "bigint", "hex": hex(value)}
    if kind is float:
        return _float(value)
    if depth >= _MAX_DEPTH:
        return {TYPE_TAG: "depth_limit", "class": kind.__qualname__}
    if kind is dict or kind is list or kind is tuple or isinstance(value, (Mapping, list, tuple, set, frozenset)):
        ident = id(value)
        if ident in active:
            return {TYPE_TAG: "cycle", "class": kind.__qualname__}
        active.add(ident)
        try:
            return _encode_container(value, depth, active)
        finally:
            active.discard(ident)
    if kind is RedactedValue:
        return {REDACTED_TAG: value.fingerprint, "scope": value.scope}
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, enum.Enum):
        return {
            TYPE_TAG: "enum",
            "class": qualname_of(kind),
            "name": value.name,
            "value": _encode(value.value, depth + 1, active),
        }
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, str):
        return str(value)
    if isinstance(value, _dt.datetime):
        return {TYPE_TAG: "datetime", "value": value.isoformat()}
    if isinstance(value, _dt.date):
        return {TYPE_TAG: "date", "value": value.isoformat()}
    if isinstance(value, _dt.time):
        return {TYPE_TAG: "time", "value": value.isoformat()}
    if isinstance(value, _dt.timedelta):
        return {TYPE_TAG: "timedelta", "seconds": value.total_seconds()}
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:  # text stays text, so redaction can see a secret inside it; only binary is base64
            return {TYPE_TAG: "bytes", "text": raw.decode("utf-8")}
        except UnicodeDecodeError:
            return {TYPE_TAG: "bytes", "base64": base64.b64encode(raw).decode("ascii")}
    if isinstance(value, decimal.Decimal):
        return {TYPE_TAG: "decimal", "value": str(value)}
    if isinstance(value, uuid.UUID):
        return {TYPE_TAG: "uuid", "value": str(value)}
    if isinstance(value, PurePath):
        return {TYPE_TAG: "path", "value": str(value)}
    if isinstance(value, complex):
        return {TYPE_TAG: "complex", "real": _float(value.real), "imag": _float(value.imag)}
    ident = id(value)
    if ident in active:
        return {TYPE_TAG: "cycle", "class": kind.__qualname__}
    active.add(ident)
    try:
        if isinstance(value, BaseModel):
            try:
                dumped = value.model_dump(mode="python")
            except Exception:  # noqa: BLE001 - a model whose dump fails is encoded field by field
                dumped = None
            if isinstance(dumped, dict):
                # model_dump made a new tree: when it is plain JSON already (most models), it is used as it is
                fields = dumped if _plain(dumped, depth + 1) else _encode(dumped, depth + 1, active)
                return {TYPE_TAG: "pydantic", "class": qualname_of(kind), "fields": fields}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
            return {TYPE_TAG: "dataclass", "class": qualname_of(kind), "fields": _encode(fields, depth + 1, active)}
        slots = _SLOTTED.get(kind)
        if slots is not None:
            fields = {name: getattr(value, name, None) for name in slots}
            return {TYPE_TAG: "dataclass", "class": qualname_of(kind), "fields": _encode(fields, depth + 1, active)}
        return {TYPE_TAG: "object", "class": qualname_of(kind), "repr": _safe_repr(value)}
    finally:
        active.discard(ident)


_BUILTIN_CONTAINERS: Final[tuple[type[Any], ...]] = (dict, list, tuple, set, frozenset)


def _held(value: Any, iterable: Any) -> Any:
    """``iterable`` cut at the number of items ``value`` holds: a subclass of a built-in container whose
    iterator never ends (or yields more than it holds) cannot make encoding run forever."""
    for base in _BUILTIN_CONTAINERS:
        if isinstance(value, base):
            return itertools.islice(iterable, base.__len__(value))
    return itertools.islice(iterable, len(value))


def _encode_container(value: Any, depth: int, active: set[int]) -> Any:
    if isinstance(value, Mapping):
        items = list(value.items() if type(value) is dict else _held(value, value.items()))
        if all(type(k) is str for k, _ in items) and not any(k in _RESERVED_KEYS for k, _ in items):
            return {k: _encode(v, depth + 1, active) for k, v in items}
        pairs = [[_encode(k, depth + 1, active), _encode(v, depth + 1, active)] for k, v in items]
        pairs.sort(key=lambda pair: canonical_json(pair[0]))
        return {TYPE_TAG: "dict", "items": pairs}
    if type(value) is list:
        return [_encode(v, depth + 1, active) for v in value]
    if isinstance(value, tuple):
        return {TYPE_TAG: "tuple", "items": [_encode(v, depth + 1, active) for v in _held(value, value)]}
    if isinstance(value, (set, frozenset)):
        items = [_encode(v, depth + 1, active) for v in _held(value, value)]
        items.sort(key=canonical_json)
        return {TYPE_TAG: "frozenset" if isinstance(value, frozenset) else "set", "items": items}
    return [_encode(v, depth + 1, active) for v in _held(value, value)]


_encode_str = json.encoder.encode_basestring  # C implementation of the string escaping json.dumps uses
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(tree: Any) -> str:
    """Canonical JSON text of a JSON-able tree: sorted keys, no whitespace, UTF-8 characters kept."""
    try:
        return _CANONICAL.encode(tree)
    except ValueError:  # an int too long for json: tag it through the full encoder
        return _CANONICAL.encode(_encode(tree, 0, set()))


_ORDERED = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def ordered_json(tree: Any) -> str:
    """JSON text of a JSON-able tree keeping each object's own key order (no whitespace, UTF-8 kept).

    Used for recorded values a replay hands back to the agent (results, responses, arguments of the run), so
    a dict comes back in the order the agent saw it; hashes are always taken of :func:`canonical_json`.
    """
    try:
        return _ORDERED.encode(tree)
    except ValueError:
        return _ORDERED.encode(_encode(tree, 0, set()))


@dataclasses.dataclass(frozen=True, slots=True)
class RawJSON:
    """Canonical JSON text already serialised, to be spliced into a larger payload by :func:`compose_json`."""

    text: str


_LAYOUTS: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}
"""Field names of a composed payload -> its names in canonical order, each with its ``"name":`` text (a
payload kind always has the same names, so this stays a handful of entries)."""
_LAYOUTS_MAX: Final = 256


def compose_json(fields: Mapping[str, Any]) -> str:
    """Canonical JSON of an object whose values are plain JSON values or :class:`RawJSON` texts.

    Equal to ``canonical_json`` of the decoded object, without serialising the spliced parts again.
    """
    names = tuple(fields)
    layout = _LAYOUTS.get(names)
    if layout is None:
        layout = tuple((key, _encode_str(key) + ":") for key in sorted(fields))
        if len(_LAYOUTS) < _LAYOUTS_MAX:
            _LAYOUTS[names] = layout
    parts = []
    for key, prefix in layout:
        value = fields[key]
        kind = type(value)
        if kind is RawJSON:
            text = value.text
        elif value is None:
            text = "null"
        elif kind is str:
            text = _encode_str(value)
        else:
            text = _CANONICAL.encode(value)
        parts.append(prefix + text)
    return "{" + ",".join(parts) + "}"


def sha256_hex(text: str) -> str:
    """Hex sha256 of the UTF-8 bytes of ``text``."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def from_jsonable(tree: Any) -> Any:
    """Turn ``$type`` tags back into Python values where that needs no user code; other tags stay dicts."""
    if isinstance(tree, list):
        return [from_jsonable(v) for v in tree]
    if not isinstance(tree, dict):
        return tree
    tag = tree.get(TYPE_TAG)
    if tag is None:
        return {k: from_jsonable(v) for k, v in tree.items()}
    try:
        if tag == "tuple":
            return tuple(from_jsonable(v) for v in tree["items"])
        if tag == "set":
            return {from_jsonable(v) for v in tree["items"]}
        if tag == "frozenset":
            return frozenset(from_jsonable(v) for v in tree["items"])
        if tag == "dict":
            return {from_jsonable(k): from_jsonable(v) for k, v in tree["items"]}
        if tag == "bytes":
            return tree["text"].encode("utf-8") if "text" in tree else base64.b64decode(tree["base64"])
        if tag == "bigint":
            return int(tree["hex"], 16)
        if tag == "datetime":
            return _dt.datetime.fromisoformat(tree["value"])
        if tag == "date":
            return _dt.date.fromisoformat(tree["value"])
        if tag == "time":
            return _dt.time.fromisoformat(tree["value"])
        if tag == "timedelta":
            return _dt.timedelta(seconds=tree["seconds"])
        if tag == "decimal":
            return decimal.Decimal(tree["value"])
        if tag == "uuid":
            return uuid.UUID(tree["value"])
        if tag == "float":
            return float(tree["value"].replace("Infinity", "inf"))
        if tag == "path":
            return PurePath(tree["value"])
    except Exception:  # noqa: BLE001 - an unreadable tag (out of range, malformed) stays as recorded
        return tree
    return tree


# --------------------------------------------------------------------------------------- event payloads


def payload_events(
    payload: str, *, limits: SnapshotLimits, redactions: int = 0, content_hash: Callable[[bytes], str] | None = None
) -> list[dict[str, Any]]:
    """Event attribute sets carrying one canonical payload: one set, or one per chunk, or a truncation marker.

    The stored text is hashed with plain sha256 (``otel_replay.snapshot.sha256``: an integrity check of bytes
    that are stored anyway). A payload over the size cap is not stored, so its marker's ``original_sha256`` is
    ``content_hash`` of it (the redactor's keyed hash), or absent when none is given: a plain hash of text
    that is not stored would let anyone confirm a guess of it."""
    try:
        data = payload.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (undecodable file names): keep them as JSON escapes
        payload = payload.encode("utf-8", "backslashreplace").decode("utf-8")
        data = payload.encode("utf-8")
    size = len(data)
    common: dict[str, Any] = {semconv.SNAPSHOT_SCHEMA_VERSION: semconv.SCHEMA_VERSION, semconv.SNAPSHOT_SIZE: size}
    if redactions:
        common[semconv.SNAPSHOT_REDACTIONS] = redactions
    if size > limits.max_bytes:
        marker = {
            TRUNCATED_TAG: True,
            "original_size": size,
            "original_sha256": content_hash(data) if content_hash is not None else None,
            "preview": payload[: min(_PREVIEW_CHARS, limits.chunk_chars // 2)],
        }
        payload = canonical_json(marker)
        data = payload.encode("utf-8")
        common[semconv.SNAPSHOT_TRUNCATED] = True
    common[semconv.SNAPSHOT_SHA256] = hashlib.sha256(data).hexdigest()
    step = limits.chunk_chars
    if len(payload) <= step:
        return [{**common, semconv.SNAPSHOT_PAYLOAD: payload}]
    chunks = [payload[i : i + step] for i in range(0, len(payload), step)]
    return [
        {
            **common,
            semconv.SNAPSHOT_PAYLOAD: chunk,
            semconv.SNAPSHOT_CHUNK_INDEX: i,
            semconv.SNAPSHOT_CHUNK_COUNT: len(chunks),
        }
        for i, chunk in enumerate(chunks)
    ]
