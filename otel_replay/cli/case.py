"""``otel-replay case export`` and ``otel-replay case run``: regression case files written from a run and run in CI.

It must never write a case file over another without ``--force``, or import the case runner at module level.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer

from ..errors import AgentCodeUnavailable
from ..wording import plural
from .app import (
    EXIT_ERROR,
    STORE_HELP,
    case_app,
    fail,
    handled,
    open_store,
    out_console,
    output_to_stderr,
    print_json,
    without_dataframes,
)
from .outcome import ALLOW_ADDRESS_HELP, ALLOW_PATH_HELP, ALLOW_SIDE_EFFECTS_HELP, warn_side_effects_allowed

# ------------------------------------------------------------------------------------------------- cases


class CaseModeChoice(str, Enum):
    """Replay mode of a case."""

    mock = "mock"
    deterministic = "deterministic"


class ExpectChoice(str, Enum):
    """What a case requires of its replay."""

    output = "output"
    tools = "tools"
    no_divergence = "no-divergence"


@case_app.command("export")
@handled
def case_export_command(
    trace_id: str = typer.Argument(..., help="Trace id of the run to freeze into a case."),
    output: str | None = typer.Option(
        None, "-o", "--output", help="Case file to write ('-' for stdout; default: ./<agent>-<trace>.case.json)."
    ),
    expect: list[ExpectChoice] = typer.Option(
        [], "--expect", help="What must hold: output, tools, no-divergence (repeatable; default no-divergence)."
    ),
    mode: CaseModeChoice = typer.Option(CaseModeChoice.mock, "--mode", help="Replay mode the case runs in."),
    name: str | None = typer.Option(None, "--name", help="Case name (default: <agent>-<trace id prefix>)."),
    app_spec: str | None = typer.Option(None, "--app", help="Entrypoint module:function instead of the recorded one."),
    force: bool = typer.Option(False, "--force", help="Replace an existing case file."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Write one self-contained, redacted case file for a recorded run."""
    from rich.text import Text

    from ..cases import CASE_SUFFIX, case_document, dumps_case, write_case
    from ..exporting.setup import runtime
    from ..records import parse_trace_id
    from ..terminal import SafeConsole, escape_json_text

    tid = parse_trace_id(trace_id)
    with open_store(store_url) as store:
        run = store.load_run(tid)
    document = case_document(
        run,
        expect=[e.value for e in expect],
        mode=mode.value,
        name=name,
        entrypoint=app_spec,
        redactor=runtime().redactor,
    )
    if output == "-":
        sys.stdout.write(escape_json_text(dumps_case(document)))
        return
    target = output or f"{document['name']}{CASE_SUFFIX}"
    if not Path(target).name.endswith(CASE_SUFFIX):
        SafeConsole(stderr=True, soft_wrap=True).print(
            Text(
                f"warning: {Path(target).name} does not end in {CASE_SUFFIX}: `otel-replay case run FOLDER` and the "
                f"pytest plugin will not collect it (name it NAME{CASE_SUFFIX}, or pass the file itself)",
                style="yellow",
            )
        )
    path = write_case(document, target, force=force)
    summary = {
        "path": str(path),
        "name": document["name"],
        "trace_id": tid,
        "entrypoint": document["entrypoint"],
        "mode": document["mode"],
        "expect": document["expect"],
        "convention": document["convention"],
        "spans": sum(len(ss["spans"]) for rs in document["trace"]["resourceSpans"] for ss in rs["scopeSpans"]),
    }
    if as_json:
        print_json(summary)
    else:
        out_console().print(
            f"wrote case {summary['name']} ({plural(summary['spans'], 'span')}, {summary['mode']}, expect "
            f"{', '.join(summary['expect'])}) to {path}"
        )


@case_app.command("run")
@handled
def case_run_command(
    paths: list[str] = typer.Argument(..., help="Case files, or folders searched for *.case.json."),
    mode: CaseModeChoice | None = typer.Option(
        None, "--mode", help="Replay every case in this mode instead of its own."
    ),
    app_spec: str | None = typer.Option(
        None, "--app", help="Entrypoint module:function for every case instead of its own."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    allow_side_effects: bool = typer.Option(False, "--allow-side-effects", help=ALLOW_SIDE_EFFECTS_HELP),
    allow_path: list[str] = typer.Option([], "--allow-path", metavar="PATH", help=ALLOW_PATH_HELP),
    allow_address: list[str] = typer.Option([], "--allow-address", metavar="HOST:PORT", help=ALLOW_ADDRESS_HELP),
) -> None:
    """Replay case files against the current code, no store needed. Exit 0: all hold; 1: a case failed;
    2: a case could not run; 125: the agent's code cannot be run as it stands (git bisect run skips the
    commit)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.text import Text

    from ..cases import (
        CaseError,
        CaseResult,
        describe_failure,
        find_cases,
        load_case,
        run_case,
    )
    from ..terminal import SafeConsole

    files = find_cases(paths)
    if not files:
        fail(f"no case files (*.case.json) in {', '.join(paths)}")
    if allow_side_effects:
        warn_side_effects_allowed()
    without_dataframes()
    results: list[CaseResult] = []
    err = SafeConsole(stderr=True)
    progress = Progress(
        TextColumn("cases"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}", markup=False),
        console=err,
        transient=True,
        disable=len(files) < 2 or not err.is_terminal,
    )
    with progress, output_to_stderr(as_json):
        task = progress.add_task("", total=len(files))
        for file in files:
            progress.update(task, description=file.name)
            try:
                case = load_case(file)
            except CaseError as exc:
                results.append(
                    CaseResult(name=file.name.removesuffix(".case.json"), path=file, status="error", error=str(exc))
                )
            else:
                results.append(
                    run_case(
                        case,
                        mode=mode.value if mode else None,
                        entrypoint=app_spec,
                        allow_side_effects=allow_side_effects,
                        allow_paths=allow_path,
                        allow_addresses=allow_address,
                    )
                )
            progress.advance(task)
    counts = {status: sum(r.status == status for r in results) for status in ("passed", "failed", "error")}
    if as_json:
        print_json({"cases": [r.to_dict() for r in results], **counts})
    else:
        console = out_console()
        for result in results:
            if result.passed:
                console.print(Text.assemble(("PASS ", "green"), f"{result.name}  ", (str(result.path), "dim")))
            else:
                label = ("FAIL ", "bold red") if result.status == "failed" else ("ERROR ", "bold red")
                console.print(Text.assemble(label, describe_failure(result).removeprefix("case ")))
        console.print(
            f"{plural(len(results), 'case')}: {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['error']} could not run"
        )
    if any(r.status == "error" and not r.cannot_test for r in results):
        raise typer.Exit(EXIT_ERROR)
    if counts["failed"]:
        raise typer.Exit(1)
    if counts["error"]:  # each because the agent's code cannot be run here
        raise typer.Exit(AgentCodeUnavailable.exit_code)
