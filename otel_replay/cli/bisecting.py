"""``otel-replay bisect``: the commit, prompt version or model that first breaks a recorded run, found by replaying
it (see ``docs/bisect.md``).

Exit codes: 0 a first bad revision was found; 1 the bad revision is not bad or the good one is not good (said
plainly); 2 bad input (one error line); 130 Ctrl-C (the steps so far are reported, the worktrees removed).

It must never print anything but the one JSON document on stdout under ``--json`` (the steps' agents print to
stderr), print a stored value without the terminal's escaping, or import the bisect at module level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from .app import HTML_HELP, app, fail, handled, out_console, print_json, write_html

if TYPE_CHECKING:
    from ..bisect import BisectResult, Step

EXIT_INTERRUPTED = 130
COHORT_KEYS = ("agent", "status", "since", "until", "limit", "sample", "seed")
"""``--cohort`` filter names (the lab's cohort options), plus ``tag.NAME=VALUE``."""


def parse_cohort(text: str) -> dict[str, Any]:
    """``agent=support status=ok since=2026-11-01 limit=50 tag.tenant=acme`` (spaces or commas) as the lab's
    cohort keywords."""
    cohort: dict[str, Any] = {}
    tags: dict[str, str] = {}
    for item in text.replace(",", " ").split():
        key, sep, value = item.partition("=")
        if not sep or not value:
            fail(f"--cohort takes NAME=VALUE filters ({', '.join(COHORT_KEYS)}, tag.NAME), got {item[:80]!r}")
        if key.startswith("tag.") and len(key) > 4:
            tags[key[4:]] = value
        elif key in ("limit", "sample", "seed"):
            if not value.isdigit():
                fail(f"--cohort {key} takes a whole number, got {value[:40]!r}")
            cohort[key] = int(value)
        elif key in COHORT_KEYS:
            cohort[key] = value
        else:
            fail(f"--cohort has no filter {key[:40]!r}: use {', '.join(COHORT_KEYS)} or tag.NAME")
    if tags:
        cohort["tags"] = tags
    if not cohort:
        fail("--cohort needs at least one filter, e.g. --cohort 'agent=support-agent since=2026-11-01'")
    return cohort


@app.command("bisect")
@handled
def bisect_command(
    good: str | None = typer.Option(None, "--good", metavar="REV", help="A revision whose replays pass."),
    bad: str | None = typer.Option(None, "--bad", metavar="REV", help="A later revision whose replays fail."),
    case: list[str] = typer.Option([], "--case", metavar="PATH", help="Case files: passing is their expectations."),
    trace: list[str] = typer.Option([], "--trace", metavar="TRACE_ID", help="Recorded runs: passing is matched."),
    cohort: str | None = typer.Option(
        None, "--cohort", metavar="FILTERS", help="A lab cohort (agent=NAME status=ok since=DATE limit=N tag.K=V)."
    ),
    mode: str = typer.Option(
        "deterministic", "--mode", help="deterministic or mock (live with --reason; a prompt/model bisect: whatif)."
    ),
    fail_if: list[str] = typer.Option(
        [], "--fail-if", metavar="EXPR", help="A cohort's gate, as the lab's (default: diverged > 0)."
    ),
    repo: str | None = typer.Option(None, "--repo", metavar="PATH", help="The git repository (default: here)."),
    prompt_file: str | None = typer.Option(
        None, "--prompt-file", metavar="ROLE=DIR", help="Bisect the prompt files of DIR (by name) for ROLE."
    ),
    model: str | None = typer.Option(None, "--model", metavar="A,B,C", help="Bisect these models, oldest first."),
    reason: str | None = typer.Option(None, "--reason", help="Why (kept in the audit; needed for real calls)."),
    actor: str | None = typer.Option(None, "--actor", help="Who bisects (default: the OS user)."),
    approve: list[str] = typer.Option([], "--approve", metavar="TOOL", help="Approve a risky tool (live)."),
    workers: int | None = typer.Option(None, "--workers", min=1, help="A cohort's lab workers."),
    html: str | None = typer.Option(None, "--html", metavar="FILE", help=HTML_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (docs/bisect.schema.json)."),
) -> None:
    """Find the first commit (or prompt file, or model) at which replays go from passing to failing: each step
    checks the revision out into a temporary git worktree and replays there. Exit 0 found; 1 the bad revision
    is not bad or the good one not good; 2 bad input; 130 Ctrl-C."""
    from rich.text import Text

    from ..bisect import bisect
    from ..terminal import SafeConsole

    prompt: tuple[str, str] | None = None
    if prompt_file is not None:
        role, sep, folder = prompt_file.partition("=")
        if not sep or not role or not folder:
            fail(f"--prompt-file takes ROLE=DIR (system=prompts/), got {prompt_file[:80]!r}")
        prompt = (role, folder)
    err = SafeConsole(stderr=True, soft_wrap=True)

    def shown(step: Step) -> None:
        err.print(_step_line(step))

    result = bisect(
        good=good,
        bad=bad,
        cases=case,
        traces=trace,
        cohort=parse_cohort(cohort) if cohort is not None else None,
        mode=mode,
        fail_if=fail_if,
        repo=repo,
        prompt_file=prompt,
        models=model,
        reason=reason,
        actor=actor,
        approvals=approve,
        workers=workers,
        progress=shown,
    )
    if html:
        from ..bisect.html import render_bisect

        write_html(html, render_bisect(result), quiet=as_json)
    if as_json:
        print_json(result.to_dict())
    else:
        _print(result, out_console())
        if result.first_bad is None and not result.interrupted:
            err.print(Text(f"error: {result.message}", style="bold red"))
    if result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if result.problem is not None:
        raise typer.Exit(1)


_MARKS = {"good": ("good", "green"), "bad": ("bad ", "bold red"), "skip": ("skip", "yellow")}


def _step_line(step: Step) -> Any:
    from rich.text import Text

    word, style = _MARKS[step.verdict]
    line = Text.assemble((f"  {word} ", style), step.revision.label, (f"  {step.seconds:.1f} s", "dim"))
    if step.verdict != "good":
        line.append(f"  {step.why[:200]}", style="dim")
    return line


def _print(result: BisectResult, console: Any) -> None:
    from rich.text import Text

    if result.first_bad is None:
        console.print(Text(result.message))
        return
    head = Text("first bad: ", style="bold")
    head.append(result.first_bad.label, style="bold red")
    console.print(head)
    if result.first_bad.author:
        console.print(Text(f"  {result.first_bad.author}  {result.first_bad.date}", style="dim"))
    if result.last_good is not None:
        console.print(Text.assemble(("last good: ", "bold"), (result.last_good.label, "green")))
    document = result.to_dict()
    first = document.get("first_divergence")
    if first:
        console.print(
            Text(f"first divergence: step {first.get('step_index')} {first.get('kind')}: {first.get('reason')}")
        )
        if first.get("diff"):
            console.print(Text(str(first["diff"])))
    elif document.get("why"):
        console.print(Text(f"why: {document['why']}"))
    if result.ambiguous:
        console.print(Text(result.message, style="yellow"))
    skipped = result.skipped
    console.print(
        Text(
            f"{result.replays} steps for {result.candidates} candidates"
            + (f", {len(skipped)} skipped" if skipped else "")
            + f"; bisect {result.bisect_id} (otel-replay runs --bisect {result.bisect_id})",
            style="dim",
        )
    )
