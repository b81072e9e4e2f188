"""The lab's HTML report: one self-contained file with the terminal report's sections (summary, scorers,
divergence histogram, cost and latency deltas, tool-call change matrix, worst runs, baseline stability, gates),
every replay in a table, and for each replay an anchor (``#run-N``, N its position in ``runs`` of the JSON
document) holding its replay-vs-original diff rendered as the diff page renders its sections, with the
divergences, the tool tape, the tool-call changes and the scores. The full side-by-side page of one pair is one
command away (``otel-replay diff ORIGINAL REPLAY --html FILE``, shown in each run's section): the lab's
result holds the diff, not the runs, so the report never reads the store.

The page is rendered by :func:`otel_replay.report.render.render_page` (the report package's templates, its
autoescape, its Content-Security-Policy that forbids every fetch); every value reaches the page through
autoescape, never marked safe.

It must never read a store, fetch anything, or put a value into the page but through the template engine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..replay.diff import SECTIONS, RunDiff, SectionDiff
from ..report import compare
from ..report import values as v
from ..report.render import render_page
from ..report.writing import write_report
from ..snapshots import canonical_json
from .model import LabResult, PairResult
from .summary import delta_sections


@dataclass(frozen=True, slots=True)
class _Run:
    index: int
    anchor: str
    pair: PairResult
    first: str
    regressed: tuple[str, ...]
    scores: tuple[tuple[str, str, str], ...]
    """(scorer, shown value, class: good / bad / na)."""
    sections: tuple[compare.SectionRow, ...] | None
    diff_command: str | None
    tape: tuple[tuple[str, tuple[str, ...]], ...]
    diffs: tuple[tuple[compare.DiffLine, ...], ...] = ()
    """The lines of each divergence's diff, in the order of ``pair.divergences`` (empty: none)."""


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:+.3g}"
    return str(value)


def _score_class(value: Any, reference: Any) -> str:
    if value is None:
        return "na"
    if isinstance(value, bool) and isinstance(reference, bool):
        return "good" if value == reference else "bad"
    return ""


def _sections(diff: Any) -> tuple[compare.SectionRow, ...] | None:
    """The diff's sections table rows from the diff's JSON form (``docs/diff.schema.json``)."""
    if not isinstance(diff, dict):
        return None
    sections = {}
    for name in SECTIONS:
        section = diff.get(name)
        if isinstance(section, dict):
            details = section.get("details")
            sections[name] = SectionDiff(
                name=name,
                changed=bool(section.get("changed")),
                summary=str(section.get("summary") or ""),
                details=details if isinstance(details, dict) else {},
            )
    return compare.sections(RunDiff(a_trace_id="", b_trace_id="", sections=sections))


def _json(value: Any) -> str:
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)


def _tape(pair: PairResult) -> tuple[tuple[str, tuple[str, ...]], ...]:
    out = []
    for key in ("refused", "drift", "injected", "unused"):
        entries = pair.tape.get(key) or []
        if entries:
            lines = []
            for e in entries:
                extra = e.get("reason") or e.get("fault") or ""
                extra = extra if isinstance(extra, str) else _json(extra)
                lines.append(f"step {e.get('step_index')} {e.get('tool')}" + (f": {extra}" if extra else ""))
            out.append((key, tuple(lines)))
    return tuple(out)


def _runs(result: LabResult) -> tuple[_Run, ...]:
    regressed: dict[int, tuple[str, ...]] = {
        int(row["pair_index"]): tuple(row.get("regressed") or [])
        for row in result.summary.get("worst") or []
        if isinstance(row.get("pair_index"), int)
    }
    out = []
    for index, pair in enumerate(result.pairs):
        scores = tuple(
            (name, _shown(value), _score_class(value, pair.reference_scores.get(name)))
            for name, value in pair.scores.items()
        )
        command = (
            f"otel-replay diff {pair.original_trace_id} {pair.replay_trace_id} --html diff.html"
            if pair.replay_trace_id
            else None
        )
        out.append(
            _Run(
                index=index,
                anchor=f"run-{index}",
                pair=pair,
                first=compare.divergence_text(pair.first_divergence),
                regressed=regressed.get(index, ()),
                scores=scores,
                sections=_sections(pair.diff),
                diff_command=command,
                tape=_tape(pair),
                diffs=tuple(
                    compare.diff_lines(d.get("diff") if isinstance(d.get("diff"), str) else None)
                    for d in pair.divergences
                ),
            )
        )
    return tuple(out)


def _worst(result: LabResult) -> tuple[dict[str, Any], ...]:
    rows = []
    for row in result.summary.get("worst") or []:
        index = row.get("pair_index")
        rows.append(
            {
                "anchor": f"run-{index}" if isinstance(index, int) else None,
                "original_trace_id": str(row.get("original_trace_id") or ""),
                "agent": str(row.get("agent") or ""),
                "outcome": str(row.get("outcome") or ""),
                "badness": row.get("badness"),
                "regressed": ", ".join(str(r) for r in row.get("regressed") or []) or "—",
                "first": compare.divergence_text(row.get("first_divergence")) or str(row.get("error") or ""),
            }
        )
    return tuple(rows)


def _pct(value: Any) -> str:
    return "—" if value is None else f"{float(value):+.1f}%"


def lab_html(result: LabResult) -> str:
    """The lab's report as one self-contained HTML page (see the module docstring)."""
    summary = result.summary
    scorers = {
        name: {**s, "pass_rate_text": "—" if s.get("pass_rate") is None else f"{float(s['pass_rate']) * 100:.1f}%"}
        for name, s in (summary.get("scorers") or {}).items()
    }
    deltas = {
        key: {k: _pct((summary.get(key) or {}).get(k)) for k in ("p50", "p95", "mean")}
        | {"n": (summary.get(key) or {}).get("n", 0), "label": label}
        for key, label in delta_sections(summary)
    }
    gates = [
        {
            "expression": g.expression,
            "held": g.held,
            "value": "—" if g.value is None else f"{g.value:g}",
            "note": g.note or "",
        }
        for g in result.gates
    ]
    page = {
        "lab_id": result.lab_id,
        "mode": result.mode,
        "failed": result.failed,
        "interrupted": result.interrupted,
        "totals": summary.get("totals") or {},
        "scorers": scorers,
        "divergences": summary.get("divergences") or [],
        "deltas": deltas,
        "tools": summary.get("tools") or {},
        "tape": summary.get("tape") or {},
        "worst": _worst(result),
        "stability": summary.get("stability") or {},
        "gates": gates,
        "runs": _runs(result),
        "cohort": len(result.cohort),
        "spec": v.json_tokens(result.spec),
    }
    return render_page("lab.html.j2", f"otel-replay · lab {result.lab_id}", lab=page)


def write_lab_html(result: LabResult, path: str | os.PathLike[str]) -> Path:
    """Write :func:`lab_html` to ``path`` atomically (see :func:`otel_replay.report.write_report`); returns the path.
    Raises :class:`~otel_replay.report.ReportWriteError` (one line) when it cannot."""
    return write_report(path, lab_html(result))
