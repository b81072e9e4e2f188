"""``otel-replay runs`` and ``otel-replay show``: the table of recorded runs and the tree of one run.

It must never start chDB for a store that does not exist (``runs`` answers an empty home without it), or
import Rich or the store at module level.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import TYPE_CHECKING, Any

import typer

from .. import semconv
from ..wording import plural
from .app import (
    HTML_HELP,
    STORE_HELP,
    app,
    fail,
    handled,
    nothing_stored,
    open_store,
    out_console,
    print_json,
    write_html,
)

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text
    from rich.tree import Tree

    from ..runs import Run, RunSummary, Step


class StatusFilter(str, Enum):
    """Run status."""

    ok = "ok"
    error = "error"


class KindFilter(str, Enum):
    """Run kind."""

    original = "original"
    replay = "replay"
    dry = "dry"


# -------------------------------------------------------------------------------------------------- runs


def runs_table(summaries: list[RunSummary]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{plural(len(summaries), 'run')}, newest first", title_justify="left")
    for column in ("trace id", "agent", "status", "kind", "started (UTC)", "ms", "steps", "replay of"):
        table.add_column(column, no_wrap=column in ("trace id", "replay of"))
    for s in summaries:
        status = Text(s.status, style="green" if s.status == "ok" else "bold red")
        table.add_row(
            s.trace_id,
            s.agent,
            status,
            s.kind,
            s.started_at.strftime("%Y-%m-%d %H:%M:%S"),
            f"{s.duration_ms:.1f}",
            "" if s.step_count is None else str(s.step_count),
            s.replay_of or "",
        )
    return table


@app.command("runs")
@handled
def runs_command(
    agent: str | None = typer.Option(None, "--agent", help="Only runs of this agent."),
    status: StatusFilter | None = typer.Option(None, "--status", help="Only runs that ended ok / in error."),
    kind: KindFilter | None = typer.Option(
        None, "--kind", help="Only original runs, only replays (dry ones included), or only dry replays."
    ),
    every: bool = typer.Option(False, "--all", help="Every run, dry replays included."),
    limit: int = typer.Option(50, "--limit", min=1, max=100000, help="At most this many runs."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
    lab: str | None = typer.Option(None, "--lab", metavar="ID", help="Only the replays of this lab (otel-replay lab)."),
    bisect: str | None = typer.Option(
        None, "--bisect", metavar="ID", help="Only the replays of this bisect's steps (otel-replay bisect)."
    ),
) -> None:
    """List recorded runs (originals and replays), newest first. Dry replays (audited, with no step) are listed
    only with --kind dry, --kind replay or --all."""
    if every and kind is not None:
        fail("give --kind or --all, not both")
    if nothing_stored(store_url):
        summaries: list[RunSummary] = []
    else:
        with open_store(store_url) as store:
            summaries = store.runs(
                agent=agent,
                status=status.value if status else None,
                kind="all" if every else kind.value if kind else None,
                limit=limit,
                lab=lab,
                tags={semconv.REPLAY_BISECT_ID: bisect} if bisect else None,
            )
    if as_json:
        print_json([s.to_dict() for s in summaries])
        return
    if not summaries:
        out_console().print(
            "No runs recorded yet. Run `otel-replay demo`, or decorate an agent with @otel_replay.agent."
        )
        return
    out_console().print(runs_table(summaries))


# -------------------------------------------------------------------------------------------------- show


def preview(payload: Any, width: int = 110) -> str:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _step_label(step: Step) -> Text:
    from rich.text import Text

    label = Text()
    label.append(f"#{step.index} ", style="bold")
    label.append(f"{step.kind} ", style="cyan")
    label.append(step.name, style="bold")
    label.append("  ")
    label.append(step.status, style="green" if step.status == "ok" else "bold red")
    label.append(f"  {step.duration_ms:.1f} ms", style="dim")
    if step.attempt > 1:
        label.append(f"  attempt {step.attempt}", style="yellow")
    risk = step.attributes.get("otel_replay.tool.risk")
    if risk:
        label.append(f"  risk={risk}", style="magenta" if risk != "read" else "dim")
    approval = step.attributes.get("otel_replay.approval.status")
    if approval:
        label.append(f"  approval={approval}", style="magenta")
    if step.error:
        label.append(f"  {step.error.get('type')}: {step.error.get('message')}", style="red")
    return label


def _add_snapshots(node: Tree, snapshots: Any) -> None:
    from rich.text import Text

    for snap in sorted(snapshots, key=lambda s: s.seq):
        line = Text()
        line.append(f"{snap.kind}: ", style="blue")
        line.append(preview(snap.payload))
        if snap.redactions:
            line.append(f"  ({snap.redactions} redacted)", style="magenta")
        if snap.truncated:
            line.append("  (truncated)", style="yellow")
        if not snap.intact:
            line.append("  (damaged)", style="bold red")
        node.add(line)


def render_run(run: Run) -> Tree:
    """A rich tree of a run: root, then steps nested as their spans nest, each with its snapshots."""
    from rich.text import Text

    head = Text()
    head.append(f"invoke_agent {run.agent}  ", style="bold")
    head.append(run.status, style="green" if run.status == "ok" else "bold red")
    head.append(f"  {run.summary.duration_ms:.1f} ms  trace {run.trace_id}  run {run.run_id}", style="dim")
    if run.summary.kind != "original":
        head.append(f"  replay of {run.summary.replay_of}", style="yellow")
    from rich.tree import Tree

    tree = Tree(head)
    _add_snapshots(tree, run.snapshot_list)
    root_span = next((s.span_id for s in run.spans if not s.parent_span_id), "")
    nodes: dict[str, Tree] = {root_span: tree}
    for step in run.steps:
        parent = nodes.get(step.parent_span_id, tree)
        node = parent.add(_step_label(step))
        nodes[step.span_id] = node
        _add_snapshots(node, step.snapshot_list)
    for problem in run.problems:
        tree.add(Text(f"problem: {problem}", style="bold yellow"))
    return tree


@app.command("show")
@handled
def show_command(
    trace_id: str = typer.Argument(..., help="Trace id of the run (32 hex characters)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run as a JSON object."),
    html: str | None = typer.Option(None, "--html", metavar="FILE", help=HTML_HELP),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Show one run as a tree of steps and snapshots."""
    from ..records import parse_trace_id

    tid = parse_trace_id(trace_id)
    with open_store(store_url) as store:
        run = store.load_run(tid)
    if html:
        from ..report import Links, run_report

        write_html(html, run_report(run, links=Links.from_env()), quiet=as_json)
    if as_json:
        print_json(run.to_dict())
    elif not html:
        out_console().print(render_run(run))
