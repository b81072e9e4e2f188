"""``otel-replay diff`` and ``otel-replay audit``: two runs compared, the audit trail of live replays.

It must never write the store or the journal, or import the engine at module level.
"""

from __future__ import annotations

import typer

from ..wording import plural
from .app import HTML_HELP, STORE_HELP, app, handled, open_store, out_console, print_json, write_html


@app.command("diff")
@handled
def diff_command(
    trace_a: str = typer.Argument(..., help="Trace id of the first run (e.g. the original)."),
    trace_b: str = typer.Argument(..., help="Trace id of the second run (e.g. the replay)."),
    as_json: bool = typer.Option(False, "--json", help="Print the diff as JSON."),
    html: str | None = typer.Option(None, "--html", metavar="FILE", help=HTML_HELP),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Diff two runs: output, state, tools, citations, cost, latency, safety. Exit 1 when they differ."""
    from ..records import parse_trace_id
    from ..replay.diff import diff_runs, render_diff

    a, b = parse_trace_id(trace_a), parse_trace_id(trace_b)
    with open_store(store_url) as store:
        run_a, run_b = store.load_run(a), store.load_run(b)
    result = diff_runs(run_a, run_b)
    if as_json:
        print_json(result.to_dict())
    else:
        out_console().print(render_diff(result))
    if html:
        from ..report import Links, diff_report

        write_html(html, diff_report(run_a, run_b, result, links=Links.from_env()), quiet=as_json)
    if result.changed:
        raise typer.Exit(1)


@app.command("audit")
@handled
def audit_command(
    limit: int = typer.Option(1000, "--limit", min=1, max=100000, help="At most this many replays."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
    verify: bool = typer.Option(False, "--verify", help="Exit 1 if any row's MAC does not verify (forged or edited)."),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Every replay: when, who (actor and OS user), why, mode, from step, approvals and executions, original and
    replay trace, outcome, status, and whether its MAC verifies. Exit 1 with --verify when one does not."""
    from rich.text import Text

    from ..replay.safety.audit import AUDIT_ALL, audit
    from ..terminal import SafeConsole

    # --verify checks every replay the store and the journal hold, not only the rows it prints.
    entries = audit(store=store_url, limit=AUDIT_ALL if verify else limit)
    checked, entries = entries, entries[:limit]
    if as_json:
        print_json([e.to_dict() for e in entries])
    else:
        from rich.table import Table

        table = Table(title=f"{plural(len(entries), 'replay')}, newest first", title_justify="left")
        for column in (
            "when (UTC)",
            "actor",
            "os user",
            "mode",
            "from",
            "approvals",
            "ran",
            "outcome",
            "status",
            "mac",
            "original",
            "replay",
            "reason",
        ):
            table.add_column(column, no_wrap=column in ("original", "replay"))
        for e in entries:
            style = {"matched": "green", "diverged": "yellow", "refused": "bold red"}.get(e.outcome, "")
            table.add_row(
                e.at.strftime("%Y-%m-%d %H:%M:%S"),
                Text(e.actor),
                Text(e.os_user),
                Text(e.mode),
                "" if e.from_step is None else str(e.from_step),
                Text(",".join(e.approvals)),
                Text(",".join(f"{k}={v}" for k, v in e.executions.items())),
                Text(e.outcome, style=style),
                Text(e.status, style="" if e.status == "recorded" else "bold yellow"),
                Text("ok", style="green") if e.mac_valid else Text("INVALID", style="bold red"),
                Text(e.original_trace_id),
                Text(e.replay_trace_id),
                Text(e.reason or ""),
            )
        out_console().print(table)
    if verify and not all(e.mac_valid for e in checked):
        bad = sum(not e.mac_valid for e in checked)
        SafeConsole(stderr=True, soft_wrap=True).print(
            Text(
                f"audit: {plural(bad, 'row')} whose MAC does not verify (written outside otel-replay, edited, "
                "or made with another installation's key)",
                style="bold red",
            )
        )
        raise typer.Exit(1)
