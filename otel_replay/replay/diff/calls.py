"""The ``tools`` and ``citations`` sections of a diff: tool calls aligned by name (added, removed, changed) and the
citations and retrieved document ids of two runs.

It must never change a run, or show a value the runs do not hold.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ... import semconv
from ...runs import Run, Step
from ...snapshots import REDACTED_TAG, canonical_json
from ..matching.hashing import MISSING, same_content
from .result import SectionDiff
from .values import (
    RETRIEVAL_KIND,
    RETRIEVAL_SNAPSHOT,
    TOOL_SNAPSHOT,
    a_b,
    listed,
    normalize,
    same_value,
    value_key,
)

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
        snap = None
        for snapshot in step.snapshot_list:  # step.snapshots[TOOL_SNAPSHOT] without building the whole dict
            if snapshot.kind == TOOL_SNAPSHOT:
                snap = snapshot.payload  # the last one, as in step.snapshots
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
    return same_content(hash_a, hash_b, text_a=value_key(value_a), text_b=value_key(value_b))


def _changed_keys(x: Any, y: Any) -> list[str]:
    if not isinstance(x, dict) or not isinstance(y, dict):
        return []
    return sorted(k for k in set(x) | set(y) if k not in x or k not in y or not same_value(x[k], y[k]))


def _compare_calls(x: _Call, y: _Call) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if not _hashed_same(x.args_hash, y.args_hash, x.arguments, y.arguments):
        fields["args_hash"] = a_b(x.args_hash, y.args_hash)
        keys = _changed_keys(x.arguments, y.arguments)
        if keys:
            fields["args_hash"]["keys"] = keys
    if not _hashed_same(x.result_hash, y.result_hash, x.result, y.result):
        fields["result_hash"] = a_b(x.result_hash, y.result_hash)
    if x.step.status != y.step.status:
        fields["status"] = a_b(x.step.status, y.step.status)
    if x.approval_status != y.approval_status:
        fields["approval"] = a_b(x.approval_status, y.approval_status)
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


def tools_section(a: Run, b: Run) -> SectionDiff:
    ca = [_Call.of(s) for s in a.steps if s.kind in semconv.TOOL_CALL_KINDS]
    cb = [_Call.of(s) for s in b.steps if s.kind in semconv.TOOL_CALL_KINDS]
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
        parts.append(f"{len(added)} added ({listed([_label(e, 'b') for e in added])})")
    if removed:
        parts.append(f"{len(removed)} removed ({listed([_label(e, 'a') for e in removed])})")
    if changed:
        labels = [_label(e, "ab") for e in changed]
        parts.append(f"{len(changed)} changed ({listed(labels)})")
    is_changed = bool(added or removed or changed)
    counts = f"{len(ca)} → {len(cb)} calls" if len(ca) != len(cb) else f"{len(ca)} calls"
    summary = f"{', '.join(parts)}; {counts}" if is_changed else f"unchanged ({counts})"
    return SectionDiff(
        name="tools",
        changed=is_changed,
        summary=summary,
        details={"count": a_b(len(ca), len(cb)), "added": added, "removed": removed, "changed": changed},
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
        if step.kind != RETRIEVAL_KIND:
            continue
        snap = step.snapshots.get(RETRIEVAL_SNAPSHOT)
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
            return value if isinstance(value, str) else value_key(value)
    return MISSING


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def citations_section(a: Run, b: Run) -> SectionDiff:
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
        parts.append(f"{len(doc_changed)} retrieved document(s) with changed content ({listed(doc_changed)})")
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
