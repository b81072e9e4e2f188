"""The comparing parts of a replay or diff page, as views: the two runs side by side step by step, the
divergences in step order, and the diff's sections.

Must never produce HTML (the templates do) or show a value the runs, the replay result or the diff do not hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .. import semconv
from ..replay.diff import RunDiff
from ..replay.session import Divergence
from ..runs import Run, Step
from . import values as v
from .views import (
    RELATIONS,
    Badge,
    ErrorView,
    Row,
    RunSnapshot,
    StepView,
    Timeline,
    Usage,
    badge,
    error_view,
    run_snapshots,
    run_usage,
    step_view,
)

FIRST: Final = "first-divergence"
"""Element id of the first divergence's row (the page's script scrolls to it)."""


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of a divergence's diff: ``cls`` is ``dl-head`` (the ``---`` / ``+++`` headers), ``dl-hunk``
    (``@@``), ``dl-text`` (a text's ``=== path (role)`` heading), ``dl-del``, ``dl-add`` or ``dl-ctx``."""

    cls: str
    pieces: tuple[v.Piece, ...]


@dataclass(frozen=True, slots=True)
class DivergenceView:
    """A divergence: where (``step N`` or ``run``), its kind, its reason, the short expected / actual hashes,
    and the lines of its diff (a ``request`` or ``arguments`` divergence: the JSON, then each changed text's
    line diff)."""

    where: str
    kind: str
    reason: tuple[v.Piece, ...]
    expected: str | None
    actual: str | None
    diff: tuple[DiffLine, ...] = ()


def _line_class(line: str) -> str:
    if line.startswith(("--- recorded ", "+++ replay")):
        return "dl-head"
    if line.startswith("@@ "):
        return "dl-hunk"
    if line.startswith("=== "):
        return "dl-text"
    return "dl-del" if line.startswith("-") else "dl-add" if line.startswith("+") else "dl-ctx"


def diff_lines(diff: str | None) -> tuple[DiffLine, ...]:
    """A divergence's diff as classed lines (split at newlines only), inline redaction markers marked."""
    if not diff:
        return ()
    return tuple(DiffLine(_line_class(line), v.pieces(line)) for line in diff.split("\n"))


def divergence_text(first: Any) -> str:
    """A divergence as ``--json`` gives it (a dict), in one line: ``step 2 tool file_ticket: arguments: …``; ``""``
    for anything else."""
    if not isinstance(first, dict):
        return ""
    where = "run" if first.get("step_index") is None else f"step {first.get('step_index')}"
    named = " ".join(str(x) for x in (first.get("step_kind"), first.get("step_name")) if x)
    return f"{where}{' ' + named if named else ''}: {first.get('kind')}: {first.get('reason')}"


def _short(value: str | None) -> str:
    if value is None:
        return "—"
    return value if len(value) <= 20 else value[:16] + "…"


def divergence_view(d: Divergence) -> DivergenceView:
    """The view of one divergence (expected and actual only when either is known)."""
    shown = bool(d.expected or d.actual)
    return DivergenceView(
        where=f"step {d.step_index}" if d.step_index is not None else "run",
        kind=d.kind,
        reason=v.pieces(d.reason),
        expected=_short(d.expected) if shown else None,
        actual=_short(d.actual) if shown else None,
        diff=diff_lines(d.diff),
    )


@dataclass(frozen=True, slots=True)
class SideRow:
    """One line of the side-by-side view: the step of each run (None: no call there), how they relate, the
    divergences and tool-call notes found there."""

    id: str
    classes: str
    symbol: str
    meaning: str
    a: StepView | None
    b: StepView | None
    divergences: tuple[DivergenceView, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunSide:
    """A run in the last line of the side-by-side view: its status, totals, error and run-level snapshots."""

    agent: str
    usage: Usage
    error: ErrorView | None
    snapshots: tuple[RunSnapshot, ...]


@dataclass(frozen=True, slots=True)
class RunRow:
    """The last line of the side-by-side view: the runs themselves."""

    id: str
    classes: str
    symbol: str
    a: RunSide
    b: RunSide
    divergences: tuple[DivergenceView, ...]


@dataclass(frozen=True, slots=True)
class SideBySide:
    """Two runs side by side: a head (labels and trace ids), the aligned step rows, the run row."""

    labels: tuple[str, str]
    trace_ids: tuple[str, str]
    rows: tuple[SideRow, ...]
    run_row: RunRow


def _run_error(run: Run) -> dict[str, str] | None:
    output = run.snapshots.get(semconv.SnapshotKind.OUTPUT.value)
    error = output.get("error") if isinstance(output, dict) else None
    if isinstance(error, dict) and (error.get("type") or error.get("message")):
        return {"type": str(error.get("type") or ""), "message": str(error.get("message") or "")}
    return None


def _run_side(run: Run) -> RunSide:
    return RunSide(run.agent, run_usage(run), error_view(_run_error(run)), run_snapshots(run))


def _side(step: Step | None, timeline: Timeline, side: str) -> StepView | None:
    return step_view(step, timeline, side=side) if step is not None else None


def side_by_side(
    a: Run,
    b: Run,
    rows: list[Row],
    *,
    first: int | None,
    run_row_divergences: Sequence[Divergence],
    run_row_first: bool,
    output_changed: bool,
    labels: tuple[str, str],
) -> SideBySide:
    """The two runs side by side, one line per aligned step, then a line for the runs themselves."""
    ta, tb = Timeline.of(a), Timeline.of(b)
    lines = []
    for pos, row in enumerate(rows):
        symbol, meaning = RELATIONS[row.relation]
        classes = ["sbs-row", row.relation]
        if row.divergent:
            classes.append("divergence")
        row_id = f"row-{pos}"
        if first == pos:
            classes.append(FIRST)
            row_id = FIRST
        lines.append(
            SideRow(
                id=row_id,
                classes=" ".join(classes),
                symbol=symbol,
                meaning=meaning,
                a=_side(row.a, ta, "a"),
                b=_side(row.b, tb, "b"),
                divergences=tuple(divergence_view(d) for d in row.divergences),
                notes=tuple(row.notes),
            )
        )
    classes = ["sbs-row", "run-row", "changed" if output_changed else "same"]
    if run_row_divergences:
        classes.append("divergence")
    if run_row_first:
        classes.append(FIRST)
    run_row = RunRow(
        id=FIRST if run_row_first else "run-row",
        classes=" ".join(classes),
        symbol="≠" if output_changed else "=",
        a=_run_side(a),
        b=_run_side(b),
        divergences=tuple(divergence_view(d) for d in run_row_divergences),
    )
    return SideBySide(labels=labels, trace_ids=(a.trace_id, b.trace_id), rows=tuple(lines), run_row=run_row)


@dataclass(frozen=True, slots=True)
class DivergenceItem:
    """A divergence in the list above the side-by-side view: a link to its row (``anchor``), or, without a
    side-by-side view, only the words ``first divergence`` on the first one."""

    view: DivergenceView
    first: bool
    anchor: str | None


def divergence_list(
    divergences: Sequence[Divergence],
    first: Divergence | None,
    placed: dict[int, int | None] | None,
    first_pos: int | None,
    run_row_id: str,
) -> tuple[DivergenceItem, ...]:
    """The divergences in step order, each linked to its row of the side-by-side view (when there is one)."""
    items = []
    for d in sorted(divergences, key=lambda d: (d.step_index is None, d.step_index or 0)):
        anchor = None
        if placed is not None:
            pos = placed.get(id(d))
            anchor = run_row_id if pos is None else (FIRST if pos == first_pos else f"row-{pos}")
        items.append(DivergenceItem(divergence_view(d), d is first, anchor))
    return tuple(items)


@dataclass(frozen=True, slots=True)
class SectionRow:
    """One section of a diff: name, changed or not, its summary and its details as JSON."""

    name: str
    changed: bool
    mark: Badge
    summary: tuple[v.Piece, ...]
    details: tuple[v.Token, ...]


def sections(diff: RunDiff | None) -> tuple[SectionRow, ...] | None:
    """The rows of the diff's sections table, or None when there is no diff."""
    if diff is None:
        return None
    return tuple(
        SectionRow(
            name=name,
            changed=section.changed,
            mark=badge("changed", "b-changed") if section.changed else badge("unchanged", "b-same"),
            summary=v.pieces(section.summary),
            details=v.json_tokens(section.to_dict().get("details") or {}),
        )
        for name, section in diff.sections.items()
    )


def legend() -> tuple[tuple[str, str, str], ...]:
    """(name, symbol, meaning) of each relation of aligned steps."""
    return tuple((name, symbol, meaning) for name, (symbol, meaning) in RELATIONS.items())
