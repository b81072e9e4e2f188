"""Volatile ids: values that differ in every run although nothing changed, put aside when runs are compared.

Model APIs and agent frameworks give every answer fresh ids: OpenAI completion, response, item and tool-call
ids (``chatcmpl-…``, ``resp_…``, ``msg_…``, ``fc_…``, ``call_…``), Anthropic message and tool-use ids
(``msg_…``, ``toolu_…``), LangChain / LangGraph message ids (``run-…``, ``lc_run--…``, uuid4s), ``created`` /
``created_at`` timestamps and ``system_fingerprint``. They reach the next model request (the conversation
carries the ids of the last answer and of the tool results referring to it) and the run's output, so a replay
compared value for value would differ from its original at every step.

Before a recorded value is compared with a replayed one (deterministic and mock request matching, the request
diff of a divergence, the replay's output check, the run diff), both are passed through :func:`normalise`:
each value a :class:`VolatileRule` names is replaced by a stable placeholder. Ids become ``<id:1>``,
``<id:2>``, … numbered in order of first appearance (dict keys in sorted order, lists in order), the same id
always getting the same number, so the ``id`` of a tool call and the ``tool_call_id`` of the tool message
answering it still have to agree: the *structure* of the references is compared, only their spelling is not.
Timestamps and fingerprints become one constant placeholder (``<created>``, ``<system_fingerprint>``).

The rules are data: :data:`DEFAULT_RULES`, then one reference rule per key named in the environment variable
:data:`OTEL_REPLAY_VOLATILE_KEYS`, then the rules given for one replay (``replay(..., volatile_keys=...)``,
which holds them in a context variable for the duration of that replay, see :func:`extended`). ``docs/replay.md``
lists the defaults.

:func:`aligned` makes the two sides of a comparison alike in form: an SDK object recorded in its encoded form
(``{"$type": "pydantic", "class": …, "fields": …}``) and the same object recorded as its JSON form (a plain
dict, e.g. ``model_dump(exclude_unset=True)``) compare by their fields, a field that one side leaves out and
the other holds as ``null`` not counting as a difference.

A redaction marker and a string that is wholly one inline token of the same fingerprint are one redacted value in
two forms (:func:`aligned`); a marker is otherwise compared whole.

Tool lists are sets: the providers' APIs give the order of the tool definitions of a request no meaning (OpenAI
chat completions' ``tools`` and legacy ``functions``, the Responses API's ``tools``, Anthropic's ``tools``), and
frameworks build them from dicts and sets whose order changes from one process to the next (a hash seed is
enough). :func:`normalise` puts a list under one of :data:`UNORDERED_LISTS` whose every item is a tool definition
(a dict with a ``name``, or a ``function`` holding one) in one canonical order. A changed definition still
differs; a list of anything else (a user's ``{"tools": ["saw", "hammer"]}``) keeps its order.

This module must never change a stored run, never hide a change of any value no rule names (a changed system
prompt, tool definition or tool result always differs), and never read more of a redaction marker than its
fingerprint.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final, Literal

from ..markers import token_fingerprint
from ..snapshots import REDACTED_TAG, TRUNCATED_TAG, TYPE_TAG, canonical_json

OTEL_REPLAY_VOLATILE_KEYS: Final = "OTEL_REPLAY_VOLATILE_KEYS"
"""Environment variable: comma-separated payload keys whose values are volatile ids of the user's own
(``session_ref,ticket_id``), added to :data:`DEFAULT_RULES` as reference rules (any text or number under that
key, anywhere in a payload, is replaced by an ``<id:N>`` placeholder when recorded and replayed values are
compared). Unset: the defaults only."""

RuleKind = Literal["reference", "constant", "timestamp"]


@dataclass(frozen=True, kw_only=True)
class VolatileRule:
    """One kind of volatile value: where it is found and how it is put aside.

    A value matches when it sits under ``key`` (any key when None), is text or a number (never a boolean,
    None, a list or a dict), and, when ``pattern`` is given, is text matching it in full."""

    key: str | None = None
    """The dict key holding the value (exact, case-sensitive); None: under any key (``pattern`` required)."""
    pattern: str | None = None
    """A regular expression the whole text value must match (:func:`re.fullmatch`); None: any value."""
    kind: RuleKind = "reference"
    """``reference``: an id; the same value gets the same ``<id:N>`` placeholder wherever it appears.
    ``constant``: replaced by ``<label>``. ``timestamp``: a number replaced by ``<label>`` (text is kept)."""
    label: str = "id"
    """Placeholder name: ``<label:N>`` for references, ``<label>`` otherwise."""
    compiled: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.key is None and self.pattern is None:
            raise ValueError("a volatile rule needs a key, a pattern or both")
        if self.kind not in ("reference", "constant", "timestamp"):
            raise ValueError(f"volatile rule kind must be reference, constant or timestamp, not {self.kind!r}")
        if self.pattern is not None:
            try:
                compiled = re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"volatile rule pattern is not a regular expression: {exc}") from None
            object.__setattr__(self, "compiled", compiled)

    def matches(self, value: Any) -> bool:
        """Whether ``value`` (found under this rule's key, if it has one) is volatile by this rule."""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return False
        if self.kind == "timestamp" and isinstance(value, str):
            return False
        if self.compiled is not None:
            return isinstance(value, str) and self.compiled.fullmatch(value) is not None
        return True


_UUID: Final = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_PREFIXES: Final = r"chatcmpl-|call_|toolu_|srvtoolu_|msg_|resp_|fc_|rs_|ws_|fp_|run-|lc_run--"

ID_PATTERN: Final = rf"(?:{_PREFIXES})[A-Za-z0-9_-]+|{_UUID}"
"""An id by its look: a provider or framework prefix and anything after it, or a uuid (matched under ``id``)."""

RANDOM_ID_PATTERN: Final = (
    rf"(?:chatcmpl-|call_|toolu_|srvtoolu_|resp_|fc_|msg_)[A-Za-z0-9]{{16,}}"
    rf"|(?:run-|lc_run--){_UUID}(?:-\d+)?"
    rf"|lc_{_UUID}"
)
"""A provider id with a long random part, a LangChain run id, or the id LangChain gives a content block
(``lc_`` and a uuid): volatile under any key."""

DEFAULT_RULES: Final[tuple[VolatileRule, ...]] = (
    VolatileRule(key="id", pattern=ID_PATTERN),
    VolatileRule(key="tool_call_id"),
    VolatileRule(key="call_id"),
    VolatileRule(key="tool_use_id"),
    VolatileRule(key="item_id"),
    VolatileRule(key="response_id"),
    VolatileRule(key="previous_response_id"),
    VolatileRule(pattern=RANDOM_ID_PATTERN),
    VolatileRule(key="prompt_cache_key", pattern=r"agents-sdk:run:[0-9a-f]{32}"),
    VolatileRule(key="system_fingerprint", kind="constant", label="system_fingerprint"),
    VolatileRule(key="created", kind="timestamp", label="created"),
    VolatileRule(key="created_at", kind="timestamp", label="created_at"),
    VolatileRule(key="completed_at", kind="timestamp", label="completed_at"),
)
"""The rules every comparison uses (documented in ``docs/replay.md``): message, response and tool-call ids of
OpenAI, Anthropic and LangChain / LangGraph (under ``id`` only when they look like one: a known prefix or a
uuid, so an order number under ``id`` is still compared), the keys that refer to them, the prompt cache key the
OpenAI Agents SDK makes up for each run, system fingerprints and the creation timestamps of answers."""

_extra: ContextVar[tuple[VolatileRule, ...]] = ContextVar("otel_replay_volatile_rules", default=())


def rule_for_key(key: str) -> VolatileRule:
    """A reference rule for one user key (as named in :data:`OTEL_REPLAY_VOLATILE_KEYS`)."""
    return VolatileRule(key=key)


@lru_cache(maxsize=8)
def _env_rules(raw: str) -> tuple[VolatileRule, ...]:
    return tuple(rule_for_key(k.strip()) for k in raw.split(",") if k.strip())


def as_rules(given: Iterable[str | VolatileRule] | None) -> tuple[VolatileRule, ...]:
    """Rules from what a user gives: key names (reference rules) and :class:`VolatileRule` objects."""
    if given is None:
        return ()
    if isinstance(given, (str, VolatileRule)):
        given = [given]
    out: list[VolatileRule] = []
    for item in given:
        if isinstance(item, VolatileRule):
            out.append(item)
        elif isinstance(item, str) and item.strip():
            out.append(rule_for_key(item.strip()))
        else:
            raise TypeError("volatile_keys must be key names or VolatileRule objects")
    return tuple(out)


def current_rules() -> tuple[VolatileRule, ...]:
    """The rules in force: :data:`DEFAULT_RULES`, the keys of :data:`OTEL_REPLAY_VOLATILE_KEYS`, and the rules
    of the replay in progress in this context (:func:`extended`)."""
    return DEFAULT_RULES + _env_rules(os.environ.get(OTEL_REPLAY_VOLATILE_KEYS, "")) + _extra.get()


@contextlib.contextmanager
def extended(given: Iterable[str | VolatileRule] | None) -> Iterator[tuple[VolatileRule, ...]]:
    """Add rules (key names or :class:`VolatileRule` objects) to :func:`current_rules` in this context."""
    rules = as_rules(given)
    if not rules:
        yield current_rules()
        return
    token = _extra.set(_extra.get() + rules)
    try:
        yield current_rules()
    finally:
        _extra.reset(token)


class _Indexed:
    """The rules of one comparison, indexed by key, and the placeholders handed out so far."""

    __slots__ = ("anywhere", "by_key", "seen")

    def __init__(self, rules: tuple[VolatileRule, ...]) -> None:
        self.by_key: dict[str, list[VolatileRule]] = {}
        self.anywhere: list[VolatileRule] = []
        for rule in rules:
            if rule.key is None:
                self.anywhere.append(rule)
            else:
                self.by_key.setdefault(rule.key, []).append(rule)
        self.seen: dict[tuple[str, Any], str] = {}

    def replace(self, key: str | None, value: Any) -> Any:
        rules = self.by_key.get(key, ()) if key is not None else ()
        for rule in (*rules, *self.anywhere):
            if rule.matches(value):
                if rule.kind != "reference":
                    return f"<{rule.label}>"
                ident = (type(value).__name__ if not isinstance(value, str) else "str", value)
                placeholder = self.seen.get(ident)
                if placeholder is None:
                    placeholder = self.seen[ident] = f"<{rule.label}:{len(self.seen) + 1}>"
                return placeholder
        return value


def normalise(value: Any, *, rules: tuple[VolatileRule, ...] | None = None) -> Any:
    """A copy of a payload value with every volatile value replaced by its placeholder (see the module
    docstring); ``rules`` default to :func:`current_rules`. Redaction and truncation markers are kept whole."""
    indexed = _Indexed(current_rules() if rules is None else rules)
    return _walk(value, None, indexed)


UNORDERED_LISTS: Final = frozenset({"tools", "functions"})
"""Request keys whose list of tool definitions has no order in the providers' APIs (see the module docstring)."""


def _tool_definition(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    function = item.get("function")
    return isinstance(item.get("name"), str) or (isinstance(function, dict) and isinstance(function.get("name"), str))


def _canonical_order(items: list[Any]) -> list[Any]:
    """Tool definitions in one order whatever order they came in: by their canonical JSON."""

    def key(item: Any) -> str:
        try:
            return canonical_json(item)
        except (TypeError, ValueError):
            return repr(item)

    return sorted(items, key=key)


def _walk(value: Any, key: str | None, indexed: _Indexed) -> Any:
    if isinstance(value, dict):
        if REDACTED_TAG in value or TRUNCATED_TAG in value:
            return value
        return {k: _walk(value[k], k if isinstance(k, str) else None, indexed) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        items = list(value)
        if key in UNORDERED_LISTS and len(items) > 1 and all(_tool_definition(item) for item in items):
            items = _canonical_order(items)
        return [_walk(v, None, indexed) for v in items]
    return indexed.replace(key, value)


def _typed(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get(TYPE_TAG) in ("pydantic", "dataclass")
        and isinstance(value.get("fields"), dict)
    )


def aligned(a: Any, b: Any) -> tuple[Any, Any]:
    """``a`` and ``b`` in the same form where one holds an SDK object in its encoded form and the other the
    same object as plain JSON: the encoded one is reduced to its fields, and in that part a key that one side
    leaves out and the other holds as ``null`` is dropped. Two encoded objects of the same class compare
    field by field. Where one side holds a redaction marker and the other, in the same place, a string that is
    wholly one inline token of the same fingerprint, both hold the marker (a recorded model answer handed the
    value to a tool as its token). Everything else is returned as it is."""
    return _align(a, b, loose=False)


def _same_redacted(a: Any, b: Any) -> Any:
    """The marker, when one of ``a`` and ``b`` is a redaction marker and the other a string that is wholly one
    inline token of the same fingerprint (one redacted value in two forms, see
    :func:`~otel_replay.markers.token_fingerprint`); else None. Only the fingerprints are read."""
    if isinstance(a, dict) and isinstance(b, str):
        marker, text = a, b
    elif isinstance(b, dict) and isinstance(a, str):
        marker, text = b, a
    else:
        return None
    fingerprint = marker.get(REDACTED_TAG)
    if not isinstance(fingerprint, str) or not set(marker) <= {REDACTED_TAG, "scope"}:
        return None
    return marker if token_fingerprint(text) == fingerprint else None


def _align(a: Any, b: Any, *, loose: bool) -> tuple[Any, Any]:
    if type(a) is not type(b):
        marker = _same_redacted(a, b)
        if marker is not None:
            return marker, marker
    ta, tb = _typed(a), _typed(b)
    if ta and tb:
        if a.get("class") != b.get("class"):
            return a, b
        fa, fb = _align(a["fields"], b["fields"], loose=loose)
        return {**a, "fields": fa}, {**b, "fields": fb}
    if ta and isinstance(b, dict) and TYPE_TAG not in b:
        return _align(a["fields"], b, loose=True)
    if tb and isinstance(a, dict) and TYPE_TAG not in a:
        return _align(a, b["fields"], loose=True)
    if isinstance(a, dict) and isinstance(b, dict) and TYPE_TAG not in a and TYPE_TAG not in b:
        out_a: dict[Any, Any] = {}
        out_b: dict[Any, Any] = {}
        for k in a.keys() | b.keys():
            if k in a and k in b:
                out_a[k], out_b[k] = _align(a[k], b[k], loose=loose)
            elif loose and (a.get(k, None) is None and b.get(k, None) is None):
                continue
            elif k in a:
                out_a[k] = a[k]
            else:
                out_b[k] = b[k]
        return out_a, out_b
    if isinstance(a, list) and isinstance(b, list):
        pairs = [_align(x, y, loose=loose) for x, y in zip(a, b, strict=False)]
        n = len(pairs)
        return [p[0] for p in pairs] + a[n:], [p[1] for p in pairs] + b[n:]
    return a, b


def comparable(a: Any, b: Any, *, rules: tuple[VolatileRule, ...] | None = None) -> tuple[Any, Any]:
    """``a`` and ``b`` as a comparison sees them: :func:`aligned`, then each :func:`normalise`-d."""
    rules = current_rules() if rules is None else rules
    x, y = aligned(a, b)
    return normalise(x, rules=rules), normalise(y, rules=rules)


def same(a: Any, b: Any, *, rules: tuple[VolatileRule, ...] | None = None) -> bool:
    """Whether a recorded and a replayed value agree once put in the same form and volatile values are put
    aside (compared as canonical JSON)."""
    x, y = comparable(a, b, rules=rules)
    try:
        return canonical_json(x) == canonical_json(y)
    except (TypeError, ValueError):
        return bool(x == y)
