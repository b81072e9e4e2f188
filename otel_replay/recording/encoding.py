"""Snapshot encoding of the recording API: every value becomes payload, hash or attribute text here.

``encode_value`` / ``redacted`` (to JSON-able tree, redactor, canonical or ordered JSON), ``emit_snapshot`` (one
``otel_replay.snapshot.<kind>`` event per chunk, keyed hash on it), ``scrubbed_fields`` (the composed fields not
encoded yet), the redacted exception event (``record_exception``) and the identity attributes.

It must never let a value reach a payload, hash, event or attribute before redaction, hash content with
anything but the redactor's keyed hash, or raise into the agent on a value it cannot print.
"""

from __future__ import annotations

import traceback
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from .. import semconv
from ..runtime import Runtime
from ..semconv import SnapshotKind
from ..snapshots import RawJSON, canonical_json, compose_json, ordered_json, payload_events, qualname_of, to_jsonable
from .state import Run, identity_var

STATUS_OK = Status(StatusCode.OK)
_EVENT_NAMES: Final = {kind: semconv.snapshot_event_name(kind) for kind in SnapshotKind}
CUT_MARGIN: Final = 64 * 1024
"""Characters past the kept head of an over-long string that are scanned with it and then dropped: a secret
that begins in the head and is shorter than this is seen whole, and what a secret cut at the scanned end leaves
unrecognised lies in the dropped part."""
_CUT_DEPTH: Final = 4
"""How deep :func:`_cut_long_strings` looks into plain dicts, lists and tuples for over-long strings."""


def encode_value(rt: Runtime, value: Any, scope: str, *, ordered: bool = False) -> tuple[Any, str, int]:
    """Encode and redact one value: the only way a value reaches a payload or hash.

    Returns the redacted tree, its JSON text (canonical, or in the value's own key order with ``ordered``,
    for values a replay hands back) and the number of redactions. The tree may share structure with
    ``value`` when it is plain JSON without secrets: use the text for anything kept.
    """
    tree, n = redacted(rt, value, scope)
    return tree, (ordered_json if ordered else canonical_json)(tree), n


def redacted(rt: Runtime, value: Any, scope: str) -> tuple[Any, int]:
    """:func:`encode_value` without the JSON text, for callers that only keep the redacted tree (to encode it as part
    of a larger value)."""
    if rt.redactor.is_clean_json(value):  # plain JSON and clean, in one walk: the common case
        return value, 0
    value, cut = _cut_long_strings(rt, value, scope, 0)  # before the slower walks and the redaction
    clean, tree = rt.redactor.jsonable_if_clean(value)  # plain JSON and pydantic models, clean: one walk
    if clean:
        return tree, cut
    tree = to_jsonable(value)
    if rt.redactor.is_clean(tree):
        return tree, cut
    tree, n = rt.redactor.redact(tree, scope)
    return tree, n + cut


def _cut_long_strings(rt: Runtime, value: Any, scope: str, depth: int) -> tuple[Any, int]:
    """``value`` with each string longer than the snapshot cap plus :data:`CUT_MARGIN` cut to a scrubbed head,
    and the number of secrets replaced in those heads; ``value`` itself when no string is that long.

    Called once a value is known not to be clean plain JSON (the common case never walks it twice). Such a
    string makes its payload a truncation marker anyway, so redacting all of it (every rule over every
    character, several times over) only cost the host program time in proportion to the value. Its first
    ``max_bytes + CUT_MARGIN`` characters are scrubbed, the last ``CUT_MARGIN`` characters of the result are
    dropped (whatever a secret straddling the scanned end left unrecognised), and a note takes the rest's
    place: ``…[cut: <length> characters, <keyed hash of the whole string>]``, so values that differ past the
    cut still differ. Looks only into plain dicts (values), lists and tuples, :data:`_CUT_DEPTH` levels deep;
    never mutates ``value``.
    """
    limit = rt.limits.max_bytes + CUT_MARGIN
    kind = type(value)
    if kind is str:
        if len(value) <= limit:
            return value, 0
        head, n = rt.redactor.scrub_text(value[:limit], scope)
        note = f"…[cut: {len(value)} characters, {rt.redactor.content_hash(value)}]"
        return head[: max(len(head) - CUT_MARGIN, 0)] + note, n
    if depth >= _CUT_DEPTH or not (kind is dict or kind is list or kind is tuple):
        return value, 0
    deeper = depth + 1 < _CUT_DEPTH
    changed: dict[Any, Any] = {}
    total = 0
    for key, item in value.items() if kind is dict else enumerate(value):
        child = type(item)
        if child is str:
            if len(item) <= limit:
                continue
        elif not (deeper and (child is dict or child is list or child is tuple)):
            continue
        new, n = _cut_long_strings(rt, item, f"{scope}.{key}" if kind is dict else f"{scope}[{key}]", depth + 1)
        if new is not item:
            changed[key] = new
            total += n
    if not changed:
        return value, 0
    if kind is dict:
        return {**value, **changed}, total
    items = list(value)
    for index, new in changed.items():
        items[index] = new
    return (items if kind is list else tuple(items)), total


def emit_snapshot(
    run: Run,
    span: trace.Span,
    kind: SnapshotKind,
    payload: dict[str, Any] | RawJSON,
    redactions: int,
    *,
    timestamp: int | None = None,
    seq: int | None = None,
) -> str:
    """Add one snapshot (one event, or one per chunk) to ``span``; returns the payload's sha256.

    ``payload`` is an object whose values are plain JSON or :class:`RawJSON`, or a whole payload as RawJSON.
    """
    if not isinstance(payload, RawJSON):
        payload, n = scrubbed_fields(run.rt, payload, kind.value)
        redactions += n
    text = payload.text if isinstance(payload, RawJSON) else compose_json(payload)
    if seq is None:
        seq = next(run.snapshot_seq)
    name = _EVENT_NAMES[kind]
    events = payload_events(
        text, limits=run.rt.limits, redactions=redactions, content_hash=run.rt.redactor.content_hash
    )
    for attrs in events:
        attrs[semconv.SNAPSHOT_SEQ] = seq
        span.add_event(name, attrs, timestamp=timestamp)
    sha256: str = events[0][semconv.SNAPSHOT_SHA256]
    return sha256


_NOT_SCRUBBED: Final = frozenset({RawJSON, type(None), int, float, bool})
"""Types of composed fields :func:`scrubbed_fields` leaves alone: text already encoded and redacted (RawJSON),
and values that hold no string."""


def scrubbed_fields(rt: Runtime, fields: dict[str, Any], scope: str) -> tuple[dict[str, Any], int]:
    """The fields of a composed payload that were not encoded through :func:`encode_value` (names, identity,
    statuses, error and usage objects) redacted: strings inline (they stay strings), containers as trees.
    Returns ``fields`` itself when nothing changed."""
    rest = {}
    is_digest = rt.redactor.is_digest
    for key, value in fields.items():
        kind = type(value)
        if kind in _NOT_SCRUBBED or (kind is str and is_digest(value)):
            continue
        rest[key] = value
    if not rest or rt.redactor.is_clean(rest):
        return fields, 0  # one pre-check over the strings and keys not known clean yet
    out: dict[str, Any] | None = None
    total = 0
    for key, value in fields.items():
        kind = type(value)
        if kind in _NOT_SCRUBBED:
            continue
        if kind is str:
            new, n = rt.redactor.scrub_text(value, f"{scope}.{key}")
        else:
            new, n = rt.redactor.redact(value, f"{scope}.{key}")
        if n:
            if out is None:
                out = dict(fields)
            out[key] = new
            total += n
    return (out if out is not None else fields), total


def scrub(rt: Runtime, text: str, scope: str) -> str:
    return rt.redactor.scrub_text(text, scope)[0]


def identity_of(rt: Runtime) -> dict[str, str]:
    """The identity in force (tenant, role, session), redacted: it becomes span attributes and input fields."""
    ident = identity_var.get()
    if not ident:
        return {}
    return {k: scrub(rt, v, f"identity.{k}") for k, v in ident.items()}


def record_exception(rt: Runtime, span: trace.Span, exc: BaseException, scope: str) -> dict[str, str]:
    """Exception event with a redacted message and stack trace; error status on the span."""
    message = scrub(rt, safe_str(exc), f"{scope}.message")
    stack = scrub(rt, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), f"{scope}.stacktrace")
    type_name = qualname_of(type(exc)).replace(":", ".").removeprefix("builtins.")
    span.add_event(
        semconv.EXCEPTION_EVENT,
        {
            semconv.EXCEPTION_TYPE: type_name,
            semconv.EXCEPTION_MESSAGE: message,
            semconv.EXCEPTION_STACKTRACE: stack,
        },
    )
    span.set_attribute(semconv.ERROR_TYPE, type_name)
    span.set_status(Status(StatusCode.ERROR, f"{type_name}: {message}"[:500]))
    return {"type": type_name, "message": message}


def scalar_text(value: Any) -> str | None:
    """A scalar as attribute text; None for anything else (dicts, lists) so no Python repr is stored."""
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def safe_str(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001
        return f"<unprintable {type(value).__qualname__}>"


def set_attrs(span: trace.Span, attrs: dict[str, Any]) -> None:
    span.set_attributes({k: v for k, v in attrs.items() if v is not None})
