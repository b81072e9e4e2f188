"""Compare two runs section by section: what the replay of a run (or any other run) did differently.

:func:`diff_runs` takes two :class:`~otel_replay.runs.Run` objects, usually an original and its replay, and
returns a frozen :class:`RunDiff` with one :class:`SectionDiff` per aspect a user checks after a replay:

``output``     how the run ended: status, answer, structured output, error type and message
``state``      the sequence of state snapshots: transitions, final ``task_state``, first differing position
``tools``      the ordered tool calls, aligned by name: added, removed and changed calls with step indices
``citations``  the output's citations and the ids of the documents the retrievals returned
``cost``       input / output tokens and cost in US dollars, with deltas
``latency``    total and per-step-kind durations with deltas and ratios; changed only past a threshold
``safety``     the guardrail verdicts recorded with ``record_safety``

``docs/diff.md`` documents every rule. Three rules hold throughout:

* Redaction markers (``{"$redacted": <fingerprint>, "scope": <where>}``) compare by their fingerprint alone,
  and ``$truncated`` markers by the sha256 of the payload they replaced, so where a secret was found or how
  large a payload was never makes two runs differ.
* Volatile ids (message, response and tool-call ids, ``created`` timestamps, system fingerprints; the rules of
  :mod:`otel_replay.replay.volatile`) compare as placeholders numbered in order of first appearance, and an
  SDK object's encoded form compares with its JSON form by its fields, so a fresh id is never a change.
* The diff only ever shows values that are already in the runs: it never decodes, restores or looks up
  anything. It reads the runs and never changes them.
"""

from __future__ import annotations

import difflib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .. import semconv
from ..records import stored_int as _int
from ..runs import Run, Step
from ..snapshots import REDACTED_TAG, TRUNCATED_TAG, canonical_json
from . import volatile
from .hashing import MISSING, same_content

SECTIONS: Final = ("output", "state", "tools", "citations", "cost", "latency", "safety")
"""The sections of every :class:`RunDiff`, in display order."""

LATENCY_THRESHOLD_MS: Final = 100.0
"""Latency counts as changed only when the total duration differs by more than this many milliseconds …"""

LATENCY_THRESHOLD_RATIO: Final = 0.5
"""… and by more than this fraction of run ``a``'s total duration (0.5 = 50 %)."""

_LIST_LIMIT: Final = 3  # items named in a one-line summary before "…"

# Enum values read once: the diff compares them for every step and snapshot of both runs.
_TOOL: Final = semconv.StepKind.TOOL.value
_MODEL: Final = semconv.StepKind.MODEL.value
_RETRIEVAL: Final = semconv.StepKind.RETRIEVAL.value
_TOOL_SNAPSHOT: Final = semconv.SnapshotKind.TOOL.value
_RETRIEVAL_SNAPSHOT: Final = semconv.SnapshotKind.RETRIEVAL.value
_STATE_SNAPSHOT: Final = semconv.SnapshotKind.STATE.value


# ------------------------------------------------------------------------------------------ results


@dataclass(frozen=True, kw_only=True)
class SectionDiff:
    """How one aspect of two runs compares."""

    name: str
    """Section name, one of :data:`SECTIONS`."""
    changed: bool
    """Whether the section differs between the two runs."""
    summary: str
    """One line for people, e.g. ``1 added, 1 changed (of 2 → 3 calls)``."""
    details: dict[str, Any] = field(default_factory=dict)
    """JSON-ready specifics of the section (documented per section in ``docs/diff.md``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"changed": bool, "summary": str, "details": {...}}``."""
        return {"changed": self.changed, "summary": self.summary, "details": _jsonable(self.details)}


@dataclass(frozen=True, kw_only=True)
class RunDiff:
    """The comparison of run ``a`` (usually the original) with run ``b`` (usually its replay)."""

    a_trace_id: str
    """Trace id of run ``a``."""
    b_trace_id: str
    """Trace id of run ``b``."""
    sections: dict[str, SectionDiff]
    """One entry per name in :data:`SECTIONS`, in that order."""

    @property
    def changed(self) -> bool:
        """True when any section changed (latency only counts past its threshold, see ``docs/diff.md``)."""
        return any(section.changed for section in self.sections.values())

    @property
    def changed_sections(self) -> list[str]:
        """Names of the sections that changed, in display order."""
        return [name for name, section in self.sections.items() if section.changed]

    def to_json(self) -> dict[str, Any]:
        """The diff's one JSON form, described by ``docs/diff.schema.json``: one entry per section name, in the
        order of :data:`SECTIONS`, each ``{"changed": bool, "summary": str, "details": {...}}``.

        It is the ``diff`` of ``otel-replay replay --json``, of ``otel-replay diff --json`` and of each case of
        ``otel-replay case run --json``, so a script reads ``.diff`` the same way whichever command printed it.
        """
        return {name: section.to_dict() for name, section in self.sections.items()}

    def to_dict(self) -> dict[str, Any]:
        """The document ``otel-replay diff --json`` prints: ``a`` and ``b`` (the trace ids), ``changed``, and
        the diff (:meth:`to_json`) twice, under ``diff`` (its name in every command) and under ``sections`` (its
        name in this document before ``diff`` was added, kept so existing readers keep working)."""
        shared = self.to_json()
        return {"a": self.a_trace_id, "b": self.b_trace_id, "changed": self.changed, "sections": shared, "diff": shared}


def diff_runs(
    a: Run,
    b: Run,
    *,
    latency_threshold_ms: float = LATENCY_THRESHOLD_MS,
    latency_threshold_ratio: float = LATENCY_THRESHOLD_RATIO,
) -> RunDiff:
    """Compare run ``a`` with run ``b`` in the sections of :data:`SECTIONS`.

    Any two runs can be compared; direction matters only for wording (``added`` is in ``b`` and not in ``a``)
    and for the latency threshold, which is relative to ``a``. Never changes either run.
    """
    if latency_threshold_ms < 0 or latency_threshold_ratio < 0:
        raise ValueError("latency thresholds must not be negative")
    sections = [
        _output(a, b),
        _state(a, b),
        _tools(a, b),
        _citations(a, b),
        _cost(a, b),
        _latency(a, b, latency_threshold_ms, latency_threshold_ratio),
        _safety(a, b),
    ]
    return RunDiff(a_trace_id=a.trace_id, b_trace_id=b.trace_id, sections={s.name: s for s in sections})


# ------------------------------------------------------------------------------------------ values


def normalize(value: Any) -> Any:
    """A payload value in the form the diff compares: redaction markers reduced to their fingerprint
    (``{"$redacted": fp}``, scope dropped) and truncation markers to the sha256 of what they replaced."""
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        if REDACTED_TAG in value and len(value) <= 2 and set(value) <= {REDACTED_TAG, "scope"}:
            return {REDACTED_TAG: value[REDACTED_TAG]}
        if value.get(TRUNCATED_TAG) is True:
            return {TRUNCATED_TAG: value.get("original_sha256")}
        return {k: normalize(v) for k, v in value.items()}
    return value


def _key(value: Any) -> str:
    """Canonical text of a normalised value, volatile ids as placeholders (:mod:`.volatile`): an identity to
    compare and to key sets with."""
    try:
        return canonical_json(volatile.normalise(normalize(value)))
    except (TypeError, ValueError):
        return repr(value)


def _same(x: Any, y: Any) -> bool:
    """Whether two values agree: in the same form (an SDK object's encoded form vs its JSON form, see
    :func:`.volatile.aligned`), volatile ids put aside."""
    try:
        return volatile.same(normalize(x), normalize(y))
    except RecursionError:
        return _key(x) == _key(y)


def _jsonable(value: Any) -> Any:
    """A deep copy that ``json.dumps`` accepts (non-finite floats become None, other objects strings)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _ab(x: Any, y: Any) -> dict[str, Any]:
    return {"a": x, "b": y}


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_LIST_LIMIT])
    return shown + (", …" if len(items) > _LIST_LIMIT else "")


def _float(text: str | None) -> float | None:
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ------------------------------------------------------------------------------------------ output


def _output_fields(run: Run) -> dict[str, Any]:
    payload = run.snapshots.get(semconv.SnapshotKind.OUTPUT.value)
    payload = payload if isinstance(payload, dict) else {}
    if payload.get(TRUNCATED_TAG) is True:
        # the whole output was too large to keep: only its fingerprint can be compared
        payload = {"structured": payload}
    error = payload.get("error")
    error = error if isinstance(error, dict) else ({"type": "", "message": str(error)} if error else {})
    if not error and run.status == "error":
        error_type = run.attributes.get(semconv.ERROR_TYPE, "")
        error = {"type": error_type, "message": ""}
    return {
        "status": run.status,
        "answer": payload.get("answer"),
        "structured": payload.get("structured"),
        "error_type": error.get("type") or None,
        "error_message": error.get("message") or None,
    }


def _output(a: Run, b: Run) -> SectionDiff:
    fa, fb = _output_fields(a), _output_fields(b)
    differences = {name: _ab(fa[name], fb[name]) for name in fa if not _same(fa[name], fb[name])}
    parts = []
    if "status" in differences:
        parts.append(f"status {fa['status']} → {fb['status']}")
    parts.extend(f"{name.replace('_', ' ')} changed" for name in differences if name != "status")
    return SectionDiff(
        name="output",
        changed=bool(differences),
        summary="; ".join(parts) or "unchanged",
        details={"status": _ab(fa["status"], fb["status"]), "differences": differences},
    )


# ------------------------------------------------------------------------------------------- state


def _states(run: Run) -> list[dict[str, Any]]:
    out = []
    for snap in run.timeline:
        if snap.kind != _STATE_SNAPSHOT:
            continue
        payload = snap.payload if isinstance(snap.payload, dict) else {"task_state": snap.payload}
        out.append(
            {
                "step_index": snap.step_index,
                "task_state": payload.get("task_state"),
                "step_state": payload.get("step_state"),
                "transition": payload.get("transition"),
                "retry_count": payload.get("retry_count"),
                "extra": payload.get("extra") or {},
            }
        )
    return out


def _state_key(state: dict[str, Any]) -> str:
    return _key({k: v for k, v in state.items() if k != "step_index"})


def _state(a: Run, b: Run) -> SectionDiff:
    sa, sb = _states(a), _states(b)
    first: dict[str, Any] | None = None
    for position in range(max(len(sa), len(sb))):
        x = sa[position] if position < len(sa) else None
        y = sb[position] if position < len(sb) else None
        if x is None or y is None or _state_key(x) != _state_key(y):
            first = {"position": position, "a": x, "b": y}
            break
    final_a = sa[-1]["task_state"] if sa else None
    final_b = sb[-1]["task_state"] if sb else None
    details = {
        "count": _ab(len(sa), len(sb)),
        "transitions": _ab([s["transition"] for s in sa], [s["transition"] for s in sb]),
        "final_task_state": _ab(final_a, final_b),
        "first_difference": first,
    }
    if first is None:
        summary = f"unchanged ({len(sa)} state snapshots)" if sa else "unchanged (no state snapshots)"
    else:
        parts = [f"first difference at state {first['position']}"]
        if len(sa) != len(sb):
            parts.append(f"{len(sa)} → {len(sb)} snapshots")
        if not _same(final_a, final_b):
            parts.append("final task_state changed")
        summary = "; ".join(parts)
    return SectionDiff(name="state", changed=first is not None, summary=summary, details=details)


# ------------------------------------------------------------------------------------------- tools


@dataclass(frozen=True, kw_only=True)
class _Call:
    step: Step
    args_hash: str | None
    result_hash: str | None
    arguments: Any
    result: Any
    approval_status: str | None
    approval_id: str | None

    @classmethod
    def of(cls, step: Step) -> _Call:
        attrs = step.attributes
        snap = step.snapshots.get(_TOOL_SNAPSHOT)
        snap = snap if isinstance(snap, dict) else {}
        return cls(
            step=step,
            args_hash=attrs.get(semconv.TOOL_ARGS_HASH) or snap.get("args_hash"),
            result_hash=attrs.get(semconv.TOOL_RESULT_HASH) or snap.get("result_hash"),
            arguments=snap.get("arguments"),
            result=snap.get("result"),
            approval_status=attrs.get(semconv.APPROVAL_STATUS) or snap.get("approval_status") or None,
            approval_id=attrs.get(semconv.APPROVAL_ID) or snap.get("approval_id") or None,
        )


def _hashed_same(hash_a: str | None, hash_b: str | None, value_a: Any, value_b: Any) -> bool:
    """Equal hashes are equal; different hashes are re-checked on the normalised snapshot values, so a
    redaction marker found under another scope still compares by its fingerprint."""
    if hash_a == hash_b:
        return True
    if value_a is None and value_b is None:
        return False
    return same_content(hash_a, hash_b, text_a=_key(value_a), text_b=_key(value_b))


def _changed_keys(x: Any, y: Any) -> list[str]:
    if not isinstance(x, dict) or not isinstance(y, dict):
        return []
    return sorted(k for k in set(x) | set(y) if k not in x or k not in y or not _same(x[k], y[k]))


def _compare_calls(x: _Call, y: _Call) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if not _hashed_same(x.args_hash, y.args_hash, x.arguments, y.arguments):
        fields["args_hash"] = _ab(x.args_hash, y.args_hash)
        keys = _changed_keys(x.arguments, y.arguments)
        if keys:
            fields["args_hash"]["keys"] = keys
    if not _hashed_same(x.result_hash, y.result_hash, x.result, y.result):
        fields["result_hash"] = _ab(x.result_hash, y.result_hash)
    if x.step.status != y.step.status:
        fields["status"] = _ab(x.step.status, y.step.status)
    if x.approval_status != y.approval_status:
        fields["approval"] = _ab(x.approval_status, y.approval_status)
    return fields


def _call_ref(call: _Call) -> dict[str, Any]:
    return {
        "name": call.step.name,
        "status": call.step.status,
        "args_hash": call.args_hash,
        "result_hash": call.result_hash,
        "approval": call.approval_status,
    }


def _label(entry: dict[str, Any], side: str) -> str:
    """``b#3 notify`` (added), ``a#2 refund`` (removed), ``a#2→b#3 lookup: args_hash`` (changed)."""
    if side == "ab":
        fields = "/".join(entry["fields"])
        return f"a#{entry['a_index']}→b#{entry['b_index']} {entry['name']}: {fields}"
    return f"{side}#{entry[side + '_index']} {entry['name']}"


def _tools(a: Run, b: Run) -> SectionDiff:
    ca = [_Call.of(s) for s in a.steps if s.kind == _TOOL]
    cb = [_Call.of(s) for s in b.steps if s.kind == _TOOL]
    names_a, names_b = [c.step.name for c in ca], [c.step.name for c in cb]
    if names_a == names_b:  # the common case (a faithful replay): no alignment needed, and difflib is O(n^2) here
        opcodes: Sequence[tuple[str, int, int, int, int]] = [("equal", 0, len(ca), 0, len(cb))] if ca else []
    else:
        opcodes = difflib.SequenceMatcher(None, names_a, names_b, autojunk=False).get_opcodes()
    added: list[dict[str, Any]] = []
    removed: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []
    for op, i1, i2, j1, j2 in opcodes:
        if op == "equal":
            for x, y in zip(ca[i1:i2], cb[j1:j2], strict=True):
                fields = _compare_calls(x, y)
                if fields:
                    changed.append(
                        {"name": x.step.name, "a_index": x.step.index, "b_index": y.step.index, "fields": fields}
                    )
            continue
        removed.extend({"a_index": x.step.index, "b_index": None, **_call_ref(x)} for x in ca[i1:i2])
        added.extend({"a_index": None, "b_index": y.step.index, **_call_ref(y)} for y in cb[j1:j2])
    parts = []
    if added:
        parts.append(f"{len(added)} added ({_names([_label(e, 'b') for e in added])})")
    if removed:
        parts.append(f"{len(removed)} removed ({_names([_label(e, 'a') for e in removed])})")
    if changed:
        labels = [_label(e, "ab") for e in changed]
        parts.append(f"{len(changed)} changed ({_names(labels)})")
    is_changed = bool(added or removed or changed)
    counts = f"{len(ca)} → {len(cb)} calls" if len(ca) != len(cb) else f"{len(ca)} calls"
    summary = f"{', '.join(parts)}; {counts}" if is_changed else f"unchanged ({counts})"
    return SectionDiff(
        name="tools",
        changed=is_changed,
        summary=summary,
        details={"count": _ab(len(ca), len(cb)), "added": added, "removed": removed, "changed": changed},
    )


# --------------------------------------------------------------------------------------- citations


def _citation_key(citation: Any) -> str:
    value = normalize(citation)
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and REDACTED_TAG not in value:
        for name in ("id", "doc_id", "document_id", "source", "url", "uri", "citation"):
            if value.get(name) is not None:
                inner = value[name]
                return inner if isinstance(inner, str) else canonical_json(inner)
    return canonical_json(value)


def _output_citations(run: Run) -> list[str]:
    payload = run.snapshots.get(semconv.SnapshotKind.OUTPUT.value)
    citations = payload.get("citations") if isinstance(payload, dict) else None
    if citations is None:
        return []
    items = citations if isinstance(citations, list) else [citations]
    return _unique(_citation_key(c) for c in items)


def _documents(run: Run) -> dict[str, tuple[str | None, Any]]:
    """Identity → (content hash, stored content text or MISSING) of every document the run's retrievals
    returned, in order. The content is read from the retrieval's ``returned`` value at the document's position
    (content hashes are keyed per installation: two runs recorded with different keys compare by content)."""
    docs: dict[str, tuple[str | None, Any]] = {}
    for step in run.steps:
        if step.kind != _RETRIEVAL:
            continue
        snap = step.snapshots.get(_RETRIEVAL_SNAPSHOT)
        results = snap.get("results") if isinstance(snap, dict) else None
        returned = snap.get("returned") if isinstance(snap, dict) else None
        for position, doc in enumerate(results if isinstance(results, list) else []):
            if not isinstance(doc, dict):
                continue
            ident = next((doc[k] for k in ("id", "citation", "content_hash") if doc.get(k) is not None), None)
            if ident is None:
                continue
            key = ident if isinstance(ident, str) else canonical_json(normalize(ident))
            stored = (
                _doc_content(returned[position]) if isinstance(returned, list) and position < len(returned) else MISSING
            )
            docs.setdefault(key, (doc.get("content_hash"), stored))
    return docs


def _doc_content(doc: Any) -> Any:
    """The content text of one returned document as stored (a dict, or a tagged dataclass / pydantic model)."""
    if not isinstance(doc, dict):
        return MISSING
    given = doc.get("fields")
    fields = given if isinstance(given, dict) and "$type" in doc else doc
    for name in ("content", "text", "page_content"):
        value = fields.get(name)
        if value is not None:
            return value if isinstance(value, str) else _key(value)
    return MISSING


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _citations(a: Run, b: Run) -> SectionDiff:
    oa, ob = _output_citations(a), _output_citations(b)
    da, db = _documents(a), _documents(b)
    out_added = [c for c in ob if c not in oa]
    out_removed = [c for c in oa if c not in ob]
    doc_added = [d for d in db if d not in da]
    doc_removed = [d for d in da if d not in db]
    doc_changed = [d for d in da if d in db and not same_content(da[d][0], db[d][0], text_a=da[d][1], text_b=db[d][1])]
    parts = []
    if out_added or out_removed:
        parts.append(f"citations +{len(out_added)} -{len(out_removed)}")
    if doc_added or doc_removed:
        parts.append(f"retrieved documents +{len(doc_added)} -{len(doc_removed)}")
    if doc_changed:
        parts.append(f"{len(doc_changed)} retrieved document(s) with changed content ({_names(doc_changed)})")
    changed = bool(parts)
    summary = "; ".join(parts) if changed else f"unchanged ({len(oa)} citations, {len(da)} retrieved documents)"
    return SectionDiff(
        name="citations",
        changed=changed,
        summary=summary,
        details={
            "citations": {"a": oa, "b": ob, "added": out_added, "removed": out_removed},
            "retrieved": {
                "a": list(da),
                "b": list(db),
                "added": doc_added,
                "removed": doc_removed,
                "content_changed": doc_changed,
            },
        },
    )


# ---------------------------------------------------------------------------------------------- cost


def _usage(run: Run) -> dict[str, int | float | None]:
    attrs = run.attributes
    models = [s for s in run.steps if s.kind == _MODEL]

    def summed(key: str, parse: Any) -> Any:
        values = [parse(s.attributes.get(key)) for s in models]
        values = [v for v in values if v is not None]
        return sum(values) if values else None

    input_tokens = _int(attrs.get(semconv.RUN_INPUT_TOKENS))
    output_tokens = _int(attrs.get(semconv.RUN_OUTPUT_TOKENS))
    cost = _float(attrs.get(semconv.RUN_COST_USD))
    return {
        "input_tokens": input_tokens if input_tokens is not None else summed(semconv.GEN_AI_USAGE_INPUT_TOKENS, _int),
        "output_tokens": (
            output_tokens if output_tokens is not None else summed(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, _int)
        ),
        "cost_usd": cost if cost is not None else summed(semconv.MODEL_COST_USD, _float),
    }


def _cost(a: Run, b: Run) -> SectionDiff:
    ua, ub = _usage(a), _usage(b)
    details: dict[str, Any] = {}
    parts = []
    for name in ("input_tokens", "output_tokens", "cost_usd"):
        x, y = ua[name], ub[name]
        delta = (y - x) if x is not None and y is not None else None
        if name == "cost_usd":
            same = (x is None and y is None) or (
                x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
            )
            delta = round(delta, 12) if delta is not None else None
        else:
            same = x == y
        details[name] = {"a": x, "b": y, "delta": delta, "changed": not same}
        if not same:
            shown = f"{delta:+g}" if delta is not None else f"{x} → {y}"
            parts.append(f"{name.replace('_', ' ')} {shown}")
    changed = bool(parts)
    return SectionDiff(
        name="cost", changed=changed, summary="; ".join(parts) if changed else "unchanged", details=details
    )


# ------------------------------------------------------------------------------------------- latency


def _ratio(x: float, y: float) -> float | None:
    return round(y / x, 4) if x > 0 else None


def _latency(a: Run, b: Run, threshold_ms: float, threshold_ratio: float) -> SectionDiff:
    ta, tb = a.summary.duration_ms, b.summary.duration_ms
    delta = tb - ta
    changed = abs(delta) > threshold_ms and (ta <= 0 or abs(delta) > threshold_ratio * ta)
    kinds: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for side, run in enumerate((a, b)):
        for step in run.steps:
            kinds[step.kind][side] += step.duration_ms
    by_kind = {
        kind: {"a_ms": round(x, 3), "b_ms": round(y, 3), "delta_ms": round(y - x, 3), "ratio": _ratio(x, y)}
        for kind, (x, y) in sorted(kinds.items())
    }
    ratio = _ratio(ta, tb)
    shown = f"{ta:.1f} ms → {tb:.1f} ms ({delta:+.1f} ms" + (f", ×{ratio:.2f})" if ratio is not None else ")")
    summary = shown if changed else f"within threshold: {shown}"
    return SectionDiff(
        name="latency",
        changed=changed,
        summary=summary,
        details={
            "total": {"a_ms": round(ta, 3), "b_ms": round(tb, 3), "delta_ms": round(delta, 3), "ratio": ratio},
            "by_kind": by_kind,
            "threshold": {"ms": threshold_ms, "ratio": threshold_ratio},
        },
    )


# -------------------------------------------------------------------------------------------- safety


def _verdict_of(result: Any) -> str:
    """The verdict word of one safety result, read the way ``record_safety`` reads it."""
    verdict = result
    if isinstance(result, dict) and REDACTED_TAG not in result:
        verdict = next((result[k] for k in ("verdict", "decision", "status") if result.get(k) is not None), None)
    if isinstance(verdict, bool):
        return "pass" if verdict else "block"
    if verdict is None:
        return "unknown"
    return verdict if isinstance(verdict, str) else _key(verdict)


def _safety_results(run: Run) -> tuple[list[str], list[Any]]:
    """Verdicts and payloads of the run's safety events (any span, in time order), else of its output."""
    events = sorted(
        ((e.timestamp_ns, e) for span in run.spans for e in span.events if e.name == semconv.EVENT_SAFETY),
        key=lambda pair: pair[0],
    )
    if events:
        verdicts, payloads = [], []
        for _, event in events:
            text = event.attributes.get(semconv.SAFETY_PAYLOAD)
            try:
                payload = json.loads(text) if text else None
            except ValueError:
                payload = text
            verdicts.append(event.attributes.get(semconv.SAFETY_VERDICT) or _verdict_of(payload))
            payloads.append(payload)
        return verdicts, payloads
    output = run.snapshots.get(semconv.SnapshotKind.OUTPUT.value)
    safety = output.get("safety") if isinstance(output, dict) else None
    if safety is None:
        return [], []
    if isinstance(safety, dict) and isinstance(safety.get("verdicts"), list) and "last" in safety:
        results = list(safety["verdicts"])
    else:
        results = [safety]
    return [_verdict_of(r) for r in results], results


def _safety(a: Run, b: Run) -> SectionDiff:
    va, pa = _safety_results(a)
    vb, pb = _safety_results(b)
    changed = va != vb
    payloads_differ = not _same(pa, pb)
    if changed:
        summary = f"verdicts {_names(va) or 'none'} → {_names(vb) or 'none'}"
    elif va:
        summary = f"unchanged ({_names(va)})" + ("; verdict details differ" if payloads_differ else "")
    else:
        summary = "unchanged (no safety verdicts)"
    return SectionDiff(
        name="safety",
        changed=changed,
        summary=summary,
        details={
            "verdicts": _ab(va, vb),
            "last": _ab(pa[-1] if pa else None, pb[-1] if pb else None),
            "payloads_differ": payloads_differ,
        },
    )


# ------------------------------------------------------------------------------------------- render


def render_diff(diff: RunDiff) -> Any:
    """A rich renderable for the CLI: one row per section with changed / unchanged and its summary.

    Summaries are shown as plain text (never parsed as rich markup), so values from the runs print as they are.
    """
    from rich.table import Table
    from rich.text import Text

    title = Text(f"diff {diff.a_trace_id} → {diff.b_trace_id}: ")
    title.append("changed" if diff.changed else "unchanged", style="bold red" if diff.changed else "bold green")
    table = Table(title=title, show_header=True, header_style="bold", expand=False)
    table.add_column("section", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("summary", overflow="fold")
    for name, section in diff.sections.items():
        mark = Text("changed", style="red") if section.changed else Text("unchanged", style="green")
        table.add_row(Text(name), mark, Text(section.summary))
    return table
