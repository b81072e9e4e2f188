"""A recorded run written as a case file: its spans scrubbed a second time, the document built
(:func:`case_document`), serialised with sorted keys (:func:`dumps_case`) and written atomically
(:func:`write_case`).

It must never write a file over another unless asked (``force``), or leave a half-written file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import semconv
from ..otlp_json import to_otlp_json
from ..records import EventRecord, SpanRecord
from ..runs import Run
from ..snapshots import sha256_hex
from .model import (
    CASE_FORMAT,
    ENTRYPOINT,
    CaseError,
    checked_expectations,
    checked_mode,
    default_case_name,
    name_problem,
)


def _scrub_spans(spans: Sequence[SpanRecord], redactor: Any) -> tuple[list[SpanRecord], int]:
    """A second redaction pass over every recorded string, for traces that reached the store without
    otel-replay's own redaction (other instrumentations' spans): shape-matching secrets are replaced inline.
    A snapshot whose text changes is rejoined into one chunk with a new sha256, so it stays intact."""
    total = 0

    def scrub(text: str, scope: str) -> str:
        nonlocal total
        clean: str
        hits: int
        clean, hits = redactor.scrub_text(text, scope)
        total += hits
        return clean

    def scrub_map(mapping: dict[str, str], scope: str) -> dict[str, str]:
        return {k: scrub(v, scope) for k, v in mapping.items()}

    out: list[SpanRecord] = []
    for span in spans:
        events: list[EventRecord] = []
        # snapshot chunks are scrubbed joined (a secret may straddle two chunks), in the group's first slot
        groups: dict[tuple[str, str], tuple[int, list[EventRecord]]] = {}
        for event in span.events:
            if event.name.startswith(semconv.SNAPSHOT_EVENT_PREFIX) and semconv.SNAPSHOT_PAYLOAD in event.attributes:
                key = (event.name, event.attributes.get(semconv.SNAPSHOT_SEQ, ""))
                if key not in groups:
                    groups[key] = (len(events), [])
                    events.append(event)
                groups[key][1].append(event)
                continue
            events.append(replace(event, attributes=scrub_map(event.attributes, "export")))
        for position, chunks in sorted(groups.values(), key=lambda g: -g[0]):  # back to front: slots stay put
            ordered = sorted(chunks, key=lambda e: int(e.attributes.get(semconv.SNAPSHOT_CHUNK_INDEX, "0") or 0))
            text = "".join(e.attributes[semconv.SNAPSHOT_PAYLOAD] for e in ordered)
            before = total
            clean = scrub(text, "export")
            if total == before:
                events[position : position + 1] = [
                    replace(
                        e,
                        attributes={
                            k: v if k == semconv.SNAPSHOT_PAYLOAD else scrub(v, "export")
                            for k, v in e.attributes.items()
                        },
                    )
                    for e in ordered
                ]
                continue
            attributes = {
                k: v
                for k, v in ordered[0].attributes.items()
                if k not in (semconv.SNAPSHOT_CHUNK_INDEX, semconv.SNAPSHOT_CHUNK_COUNT)
            }
            redactions = int(attributes.get(semconv.SNAPSHOT_REDACTIONS, "0") or 0) + total - before
            attributes.update(
                {
                    semconv.SNAPSHOT_PAYLOAD: clean,
                    semconv.SNAPSHOT_SHA256: sha256_hex(clean),
                    semconv.SNAPSHOT_REDACTIONS: str(redactions),
                }
            )
            events[position] = replace(ordered[0], attributes=attributes)
        out.append(
            replace(
                span,
                span_attributes=scrub_map(span.span_attributes, "export"),
                resource_attributes=scrub_map(span.resource_attributes, "export"),
                status_message=scrub(span.status_message, "export"),
                events=tuple(events),
                links=tuple(replace(link, attributes=scrub_map(link.attributes, "export")) for link in span.links),
            )
        )
    return out, total


def case_document(
    run: Run,
    *,
    expect: Iterable[str] = (),
    mode: str = "mock",
    name: str | None = None,
    entrypoint: str | None = None,
    redactor: Any = None,
) -> dict[str, Any]:
    """The case file content for a recorded run (see ``docs/cases.md``).

    ``entrypoint`` replaces the recorded one (needed when the run was started as a script). Raises
    :class:`CaseError` when the run cannot be replayed in ``mode`` (what is missing is named).
    """
    from ..replay.engine import readiness

    mode = checked_mode(mode)
    expectations = checked_expectations(expect)
    case_name = name or default_case_name(run)
    problem = name_problem(case_name)
    if problem:
        raise CaseError(f"case name {case_name[:80]!r} {problem}: pass --name with letters, digits, '-', '_' or '.'")
    entry = entrypoint or run.entrypoint or ""
    if not entry or ":" not in entry:
        raise CaseError(f"run {run.trace_id} records no entrypoint: pass --app module:function")
    if entry.startswith("__main__:"):
        raise CaseError(
            f"run {run.trace_id} was started as a script ({entry}); a case must name an importable "
            "function: pass --app module:function"
        )
    if not ENTRYPOINT.fullmatch(entry):
        raise CaseError(
            f"entrypoint {entry[:120]!r} is not module:function (dotted Python names): pass --app module:function"
        )
    missing = [m for m in readiness(run)["modes"][mode]["missing"] if not m.startswith("no entrypoint")]
    if missing:
        raise CaseError(f"run {run.trace_id} cannot be replayed in {mode} mode: {'; '.join(missing)}")
    spans = list(run.spans)
    redactions = 0
    if redactor is not None:
        spans, redactions = _scrub_spans(spans, redactor)
    return {
        "otel_replay_case": CASE_FORMAT,
        "name": case_name,
        "agent": run.agent,
        "entrypoint": entry,
        "mode": mode,
        "expect": list(expectations),
        "convention": run.schema_version or semconv.SCHEMA_VERSION,
        "source": {
            "trace_id": run.trace_id,
            "run_id": run.run_id,
            "kind": run.summary.kind,
            "redactions_at_export": redactions,
        },
        "trace": to_otlp_json(spans),
    }


def dumps_case(document: dict[str, Any]) -> str:
    """The file text of a case: sorted keys, two-space indent, UTF-8, a final newline."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_case(document: dict[str, Any], path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write a case file atomically, creating its missing folders; an existing file is replaced only with
    ``force``."""
    target = Path(path)
    if target.exists() and not force:
        raise CaseError(f"{target} exists: pass --force to replace it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CaseError(
            f"cannot write {target}: cannot create folder {target.parent} ({(exc.strerror or 'error').lower()})"
        ) from None
    if not target.parent.is_dir():
        raise CaseError(f"cannot write {target}: {target.parent} is not a folder")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(dumps_case(document))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
