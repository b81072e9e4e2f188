"""The lab's terminal report: the summary table (runs, matched, diverged, refused, errors, improved / regressed
per scorer), the divergence histogram, cost and latency deltas, the tool-call change matrix, the tool tape, the
worst runs with their first divergence, baseline stability and the gates.

Every string that comes from a lab (agent, tool and step names, divergence reasons, errors, scorer names) is
data a recording or a user's code wrote: it goes into a cell as :class:`rich.text.Text` after
:func:`otel_replay.terminal.clean`, never as markup, so it cannot drive the terminal.

It must never print with a console it was not given, or read anything but the :class:`LabResult`.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..terminal import clean
from .model import LabResult
from .summary import delta_sections


def _t(value: Any, style: str = "") -> Text:
    """A cell of data: cleaned, never parsed as markup."""
    return Text(clean("—" if value is None else value), style=style)


def _pct(value: Any, *, signed: bool = True) -> Text:
    if value is None:
        return _t(None, "dim")
    number = float(value)
    style = "red" if signed and number > 0 else ("green" if signed and number < 0 else "")
    return Text(f"{number:+.1f}%" if signed else f"{number:.1f}%", style=style)


def _rate(value: Any) -> Text:
    if value is None:
        return _t(None, "dim")
    number = float(value) * 100
    return Text(f"{number:.1f}%", style="green" if number >= 99.95 else ("yellow" if number >= 90 else "red"))


def _count(value: Any, bad: bool = False) -> Text:
    number = int(value or 0)
    return Text(str(number), style="red" if bad and number else "")


def _title(result: LabResult) -> Text:
    title = Text("lab ")
    title.append_text(_t(result.lab_id, "bold"))
    title.append(" · ")
    title.append_text(_t(result.mode))
    if result.interrupted:
        title.append(" · interrupted: only the replays that finished", style="yellow")
    return title


def summary_table(result: LabResult) -> Table:
    """Totals, then one row per scorer (improved / regressed / same / n/a, pass rate)."""
    totals = result.summary.get("totals") or {}
    table = Table(title=_title(result), show_header=True, header_style="bold", expand=False)
    table.add_column("runs", justify="right")
    table.add_column("replays", justify="right")
    table.add_column("matched", justify="right")
    table.add_column("diverged", justify="right")
    table.add_column("refused", justify="right")
    table.add_column("errors", justify="right")
    table.add_column("agent raised", justify="right")
    table.add_column("baseline replays", justify="right")
    table.add_row(
        _count(totals.get("runs")),
        _count(totals.get("replays")),
        Text(str(totals.get("matched", 0)), style="green"),
        _count(totals.get("diverged"), bad=True),
        _count(totals.get("refused"), bad=True),
        _count(totals.get("errors"), bad=True),
        _count(totals.get("agent_errors"), bad=True),
        _count(totals.get("baseline_replays")),
    )
    return table


def scorers_table(result: LabResult) -> Table | None:
    """One row per scorer: against what, improved, regressed, same, not applicable, flaky, pass rate."""
    scorers = result.summary.get("scorers") or {}
    if not scorers:
        return None
    table = Table(title=Text("scorers"), show_header=True, header_style="bold", expand=False)
    for name in ("scorer", "against", "improved", "regressed", "same", "n/a", "flaky", "errors", "pass rate"):
        table.add_column(name, justify="left" if name in ("scorer", "against") else "right")
    for name, s in scorers.items():
        table.add_row(
            _t(name),
            _t(s.get("against")),
            Text(str(s.get("improved", 0)), style="green" if s.get("improved") else ""),
            _count(s.get("regressed"), bad=True),
            _count(s.get("same")),
            _count(s.get("not_applicable")),
            _count(s.get("flaky"), bad=True),
            _count(s.get("errors"), bad=True),
            _rate(s.get("pass_rate")),
        )
    return table


def divergence_table(result: LabResult) -> Table | None:
    """The first divergent step of each diverged replay, grouped by the original step's kind and name."""
    rows = result.summary.get("divergences") or []
    if not rows:
        return None
    table = Table(title=Text("first divergence by step"), show_header=True, header_style="bold", expand=False)
    table.add_column("step kind")
    table.add_column("step name")
    table.add_column("replays", justify="right")
    table.add_column("divergence kinds")
    for row in rows:
        kinds = ", ".join(f"{clean(k)} {n}" for k, n in (row.get("kinds") or {}).items())
        table.add_row(
            _t(row.get("step_kind") or "(run)"),
            _t(row.get("step_name") or "—"),
            _count(row.get("count")),
            _t(kinds),
        )
    return table


def deltas_table(result: LabResult) -> Table:
    """Cost and latency: the relative change replay vs original, p50 / p95 / mean, over how many replays; with a
    baseline lane, also the candidate's change against the baseline's replays (rows ``… vs baseline``)."""
    table = Table(title=Text("cost and latency, replay vs original"), show_header=True, header_style="bold")
    for name in ("", "p50", "p95", "mean", "replays measured"):
        table.add_column(name, justify="left" if not name else "right")
    for key, label in delta_sections(result.summary):
        d = result.summary.get(key) or {}
        table.add_row(Text(label), _pct(d.get("p50")), _pct(d.get("p95")), _pct(d.get("mean")), _count(d.get("n")))
    return table


def tools_table(result: LabResult) -> Table | None:
    """Tool × added / removed / changed arguments."""
    matrix = result.summary.get("tools") or {}
    if not matrix:
        return None
    table = Table(title=Text("tool calls, replay vs original"), show_header=True, header_style="bold", expand=False)
    table.add_column("tool")
    table.add_column("added", justify="right")
    table.add_column("removed", justify="right")
    table.add_column("changed args", justify="right")
    for tool, row in matrix.items():
        table.add_row(
            _t(tool),
            _count(row.get("added"), bad=True),
            _count(row.get("removed"), bad=True),
            _count(row.get("changed_args"), bad=True),
        )
    return table


def tape_line(result: LabResult) -> Text | None:
    """``tool tape: unused 1, drift 0, refused 0, injected 2`` when the tape has any entry."""
    tape = result.summary.get("tape") or {}
    if not any(tape.values()):
        return None
    return Text(clean("tool tape: " + ", ".join(f"{k} {int(v)}" for k, v in tape.items())), style="bold")


def _first(first: Any) -> Text:
    if not isinstance(first, dict):
        return _t(None, "dim")
    where = "run" if first.get("step_index") is None else f"step {first.get('step_index')}"
    named = " ".join(str(x) for x in (first.get("step_kind"), first.get("step_name")) if x)
    text = Text(clean(f"{where}{' ' + named if named else ''}: "), style="bold")
    text.append_text(_t(f"{first.get('kind')}: {first.get('reason')}"))
    return text


def worst_table(result: LabResult) -> Table | None:
    """The worst runs (by badness, see ``docs/lab.md``) with their first divergence."""
    rows = result.summary.get("worst") or []
    if not rows:
        return None
    table = Table(title=Text("worst runs"), show_header=True, header_style="bold", expand=False)
    table.add_column("original trace", no_wrap=True)
    table.add_column("agent")
    table.add_column("outcome")
    table.add_column("regressed")
    table.add_column("first divergence", overflow="fold")
    for row in rows:
        outcome = str(row.get("outcome"))
        first = _first(row.get("first_divergence")) if row.get("first_divergence") else _t(row.get("error"), "dim")
        table.add_row(
            _t(row.get("original_trace_id")),
            _t(row.get("agent")),
            _t(outcome, "green" if outcome == "matched" else "red"),
            _t(", ".join(row.get("regressed") or []) or "—"),
            first,
        )
    return table


def stability_line(result: LabResult) -> Text | None:
    """``baseline: 3 stable-same, 1 stable-changed, 0 flaky`` (labs with a baseline lane)."""
    stable = result.summary.get("stability") or {}
    if not stable.get("baseline"):
        return None
    counts = stable.get("counts") or {}
    line = Text("baseline stability: ", style="bold")
    line.append(f"{counts.get('stable-same', 0)} stable-same, ", style="green")
    line.append(f"{counts.get('stable-changed', 0)} stable-changed, ", style="yellow")
    line.append(f"{counts.get('flaky', 0)} flaky", style="red" if counts.get("flaky") else "")
    return line


def gates_table(result: LabResult) -> Table | None:
    """Each ``--fail-if`` gate, its measured value and whether it held (failed the lab)."""
    if not result.gates:
        return None
    table = Table(title=Text("gates (--fail-if)"), show_header=True, header_style="bold", expand=False)
    table.add_column("expression")
    table.add_column("value", justify="right")
    table.add_column("result")
    for gate in result.gates:
        value = _t(None, "dim") if gate.value is None else Text(f"{gate.value:g}")
        verdict = Text("FAIL", style="bold red") if gate.held else Text("pass", style="green")
        if gate.note:
            verdict.append_text(_t(f" ({gate.note})", "dim"))
        table.add_row(_t(gate.expression), value, verdict)
    return table


def lab_renderable(result: LabResult) -> RenderableType:
    """The whole terminal report as one renderable (the sections that have something to show)."""
    parts: list[RenderableType | None] = [
        summary_table(result),
        scorers_table(result),
        divergence_table(result),
        deltas_table(result),
        tools_table(result),
        tape_line(result),
        worst_table(result),
        stability_line(result),
        gates_table(result),
    ]
    verdict = Text("lab failed: a --fail-if gate held", style="bold red") if result.failed else None
    return Group(*(p for p in (*parts, verdict) if p is not None))


def print_lab(result: LabResult, *, console: Console) -> None:
    """Print the lab's report on ``console`` (the CLI's :class:`~otel_replay.terminal.SafeConsole`)."""
    console.print(lab_renderable(result))
