"""``otel-replay lab``: a change backtested against a cohort of recorded runs (see ``docs/lab.md``).

Exit codes: 0 the lab ran and no ``--fail-if`` gate held; 1 a gate held; 2 bad input or a refusal (one error
line); 130 Ctrl-C (what finished is reported, ``interrupted`` true).

It must never print anything but the one JSON document on stdout under ``--json`` (the replayed agents' output
goes to stderr), print a stored value without the terminal's escaping, or import the engine at module level.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

import typer

from .app import (
    HTML_HELP,
    STORE_HELP,
    app,
    fail,
    handled,
    out_console,
    output_to_stderr,
    print_json,
    without_dataframes,
)
from .outcome import ALLOW_ADDRESS_HELP, ALLOW_PATH_HELP

if TYPE_CHECKING:
    from ..lab.model import LabResult
    from ..terminal import SafeConsole

EXIT_GATE = 1
EXIT_INTERRUPTED = 130


class LabModeChoice(str, Enum):
    """Lab mode."""

    deterministic = "deterministic"
    whatif = "whatif"
    mock = "mock"


class ToolMatchChoice(str, Enum):
    """How a tool call finds its recorded answer."""

    strict = "strict"
    sequence = "sequence"


class ExecutorChoice(str, Enum):
    """Where the replays run."""

    local = "local"
    ray = "ray"


class LabStatusChoice(str, Enum):
    """Run status."""

    ok = "ok"
    error = "error"


def _pairs(values: list[str], parse: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for text in values:
        key, value = parse(text)
        out[key] = value
    return out


@app.command("lab")
@handled
def lab_command(
    agent: str | None = typer.Option(None, "--agent", help="Cohort: runs of this agent."),
    status: LabStatusChoice | None = typer.Option(None, "--status", help="Cohort: runs that ended ok / in error."),
    since: str | None = typer.Option(None, "--since", help="Cohort: runs started at or after (ISO date or time)."),
    until: str | None = typer.Option(None, "--until", help="Cohort: runs started before (ISO date or time)."),
    trace_id: list[str] = typer.Option([], "--trace-id", help="Cohort: this run (repeatable)."),
    tag: list[str] = typer.Option([], "--tag", metavar="KEY=VALUE", help="Cohort: root-span attribute (repeatable)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Cohort: at most this many runs, newest first."),
    sample: int | None = typer.Option(None, "--sample", min=1, help="Cohort: a deterministic sample of N runs."),
    seed: int = typer.Option(0, "--seed", help="Seed of --sample and of --inject's draws."),
    cases: list[str] = typer.Option([], "--cases", metavar="PATH", help="Cohort: case files or folders."),
    app_spec: str | None = typer.Option(None, "--app", help="Candidate entrypoint module:function."),
    mode: LabModeChoice = typer.Option(LabModeChoice.deterministic, "--mode", help="deterministic, whatif or mock."),
    model: str | None = typer.Option(None, "--model", help="Every model call asks for this model."),
    set_param: list[str] = typer.Option(
        [], "--set-param", metavar="K=V", help="Request parameter on every model call (JSON value, else text)."
    ),
    prompt_file: list[str] = typer.Option(
        [], "--prompt-file", metavar="ROLE=PATH", help="Replace that role's prompt with the file's text."
    ),
    tool_from_recording: bool = typer.Option(
        True, "--tool-from-recording", help="Tools answer from the recording (the default)."
    ),
    tool_live: list[str] = typer.Option([], "--tool-live", metavar="NAME", help="Run this tool for real (repeatable)."),
    tool_match: ToolMatchChoice = typer.Option(ToolMatchChoice.strict, "--tool-match", help="strict or sequence."),
    inject: list[str] = typer.Option(
        [], "--inject", metavar="TOOL:error=KIND[:p=P]", help="Fault a recorded tool answer (repeatable)."
    ),
    baseline: bool = typer.Option(False, "--baseline", help="Replay the unchanged candidate first."),
    repeats: int = typer.Option(1, "--repeats", min=1, help="Replay each lane N times."),
    workers: int | None = typer.Option(None, "--workers", min=1, help="Worker processes (default: CPU count)."),
    executor: ExecutorChoice = typer.Option(ExecutorChoice.local, "--executor", help="local or ray."),
    approve: list[str] = typer.Option(
        [], "--approve", help="A write/high --tool-live tool allowed: NAME, NAME:N or NAME:*."
    ),
    actor: str | None = typer.Option(None, "--actor", help="Who runs the lab (default: the OS user)."),
    reason: str | None = typer.Option(None, "--reason", help="Why (required for whatif and --tool-live)."),
    allow_path: list[str] = typer.Option([], "--allow-path", metavar="PATH", help=ALLOW_PATH_HELP),
    allow_address: list[str] = typer.Option([], "--allow-address", metavar="HOST:PORT", help=ALLOW_ADDRESS_HELP),
    scorers: list[str] = typer.Option([], "--scorers", metavar="MODULE", help="Import user scorers from MODULE."),
    fail_if: list[str] = typer.Option([], "--fail-if", metavar="EXPR", help="Exit 1 when EXPR holds (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="Print the lab result as one JSON document."),
    html: str | None = typer.Option(None, "--html", metavar="FILE", help=HTML_HELP),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Backtest the current code (and overrides) against recorded runs. Exit 0 ok, 1 a --fail-if held, 2 error."""
    from ..lab.api import lab
    from ..lab.gates import parse_gate
    from ..lab.spec import check_once, check_params, check_roles, parse_param, parse_tag

    without_dataframes()
    try:
        check_roles([text.partition("=")[0] for text in prompt_file])
        check_once(set_param, flag="--set-param", what="parameter")
        check_once(tag, flag="--tag", what="key")
        params = _pairs(set_param, parse_param)
        check_params(params)
        tags = _pairs(tag, parse_tag)
        prompt_files = _pairs(prompt_file, lambda text: text.split("=", 1) if "=" in text else (text, ""))
        for text in fail_if:
            parse_gate(text)
    except ValueError as exc:
        fail(str(exc))
    del tool_from_recording  # the default; named so the command line can say it
    progress = _Progress() if _stderr_is_terminal() else None
    with output_to_stderr(as_json):
        try:
            result = lab(
                agent=agent,
                status=status.value if status else None,
                since=since,
                until=until,
                trace_ids=trace_id,
                tags=tags,
                limit=limit,
                sample=sample,
                seed=seed,
                cases=cases,
                app=app_spec,
                mode=mode.value,
                model=model,
                params=params,
                prompt_files=prompt_files,
                tool_live=tool_live,
                tool_match=tool_match.value,
                inject=inject,
                baseline=baseline,
                repeats=repeats,
                workers=workers,
                executor=executor.value,
                reason=reason,
                actor=actor,
                approvals=approve,
                allow_paths=allow_path,
                allow_addresses=allow_address,
                scorers=scorers,
                fail_if=fail_if,
                store=store_url,
                progress=progress,
            )
        except KeyboardInterrupt:  # before the replays started, or while the store ingested them
            fail("interrupted: the lab stopped before it could report", EXIT_INTERRUPTED)
        finally:
            if progress is not None:
                progress.stop()
    if as_json:
        print_json(result.to_dict())
    else:
        _print_lab(result, out_console())
    if html:
        _write_lab_html(result, html, quiet=as_json)
    if result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if result.failed:
        raise typer.Exit(EXIT_GATE)


def _stderr_is_terminal() -> bool:
    import sys

    return sys.stderr.isatty()


class _Progress:
    """A Rich progress bar with ETA on stderr, fed ``(done, total)``."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from ..terminal import SafeConsole

        self._bar = Progress(
            TextColumn("replaying"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=SafeConsole(stderr=True),
            transient=True,
        )
        self._task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task("lab", total=total)
        self._bar.update(self._task, completed=done, total=total)

    def stop(self) -> None:
        if self._task is not None:
            self._bar.stop()


def _print_lab(result: LabResult, console: SafeConsole) -> None:
    """The terminal report."""
    from ..lab import render

    render.print_lab(result, console=console)


def _write_lab_html(result: LabResult, path: str, *, quiet: bool) -> None:
    """``--html FILE`` through the report part's writer."""
    from ..lab.html import write_lab_html
    from ..terminal import SafeConsole

    try:
        written = write_lab_html(result, path)
    except OSError as exc:  # ReportWriteError: one line saying what to do; the lab's replays are stored
        fail(str(exc))
    SafeConsole(stderr=quiet, soft_wrap=True).print(f"wrote HTML report {written}")
