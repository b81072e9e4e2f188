"""``otel-replay replay``, ``replay-tool`` and ``replay-session``: a recorded run, one tool call or one
conversation replayed from the command line.

It must never print the replayed agent's own output on stdout under ``--json``, or import the engine at module
level.
"""

from __future__ import annotations

import json
from enum import Enum

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
    write_html,
)
from .listing import preview
from .outcome import (
    ALLOW_ADDRESS_HELP,
    ALLOW_PATH_HELP,
    ALLOW_SIDE_EFFECTS_HELP,
    exit_for,
    render_result,
    warn_side_effects_allowed,
)

# ------------------------------------------------------------------------------------------------ replay


class ModeChoice(str, Enum):
    """Replay mode."""

    dry = "dry"
    mock = "mock"
    deterministic = "deterministic"
    live = "live"


class ReplayModeChoice(str, Enum):
    """Replay mode of ``replay`` (``whatif``: models called for real, tools from the recording)."""

    dry = "dry"
    mock = "mock"
    deterministic = "deterministic"
    live = "live"
    whatif = "whatif"


class ToolModeChoice(str, Enum):
    """Tool replay mode."""

    mock = "mock"
    live = "live"


@app.command("replay")
@handled
def replay_command(
    trace_id: str = typer.Argument(..., help="Trace id of the run to replay."),
    mode: ReplayModeChoice = typer.Option(
        ...,
        "--mode",
        help="dry, mock, deterministic, live or whatif (models called for real, tools from the recording).",
    ),
    from_step: int | None = typer.Option(None, "--from-step", min=0, help="Answer steps before N from the recording."),
    approve: list[str] = typer.Option(
        [],
        "--approve",
        help="A write/high tool this replay may execute: NAME (one call), NAME:N or NAME:* (repeatable).",
    ),
    actor: str | None = typer.Option(None, "--actor", help="Who replays (default: the OS user)."),
    reason: str | None = typer.Option(None, "--reason", help="Why (required for live and whatif)."),
    app_spec: str | None = typer.Option(
        None, "--app", help="Entrypoint module:function to run instead of the recorded one."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    html: str | None = typer.Option(None, "--html", metavar="FILE", help=HTML_HELP),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
    allow_side_effects: bool = typer.Option(False, "--allow-side-effects", help=ALLOW_SIDE_EFFECTS_HELP),
    allow_path: list[str] = typer.Option([], "--allow-path", metavar="PATH", help=ALLOW_PATH_HELP),
    allow_address: list[str] = typer.Option([], "--allow-address", metavar="HOST:PORT", help=ALLOW_ADDRESS_HELP),
) -> None:
    """Replay a run. Exit 0: matched; 1: diverged; 2: refused or impossible."""
    from ..replay.engine import replay

    without_dataframes()

    if allow_side_effects:
        warn_side_effects_allowed()
    with output_to_stderr(as_json):
        result = replay(
            trace_id,
            mode=mode.value,
            from_step=from_step,
            approvals=approve,
            actor=actor,
            reason=reason,
            store=store_url,
            entrypoint=app_spec,
            allow_side_effects=allow_side_effects,
            allow_paths=allow_path,
            allow_addresses=allow_address,
        )
    if as_json:
        print_json(result.to_dict())
    else:
        render_result(result)
    if html and result.original is not None:
        from ..report import Links, replay_report

        write_html(html, replay_report(result, result.original, links=Links.from_env()), quiet=as_json)
    exit_for(result)


@app.command("replay-tool")
@handled
def replay_tool_command(
    trace_id: str = typer.Argument(..., help="Trace id of the run."),
    step: int = typer.Option(..., "--step", min=0, help="Index of the tool step to re-run."),
    mode: ToolModeChoice = typer.Option(
        ToolModeChoice.mock, "--mode", help="mock (answer from the recording) or live."
    ),
    args_json: str | None = typer.Option(
        None, "--args", help="Arguments as a JSON object instead of the recorded ones."
    ),
    approve: bool = typer.Option(False, "--approve", help="Allow a write/high tool to execute (live)."),
    actor: str | None = typer.Option(None, "--actor", help="Who replays (default: the OS user)."),
    reason: str | None = typer.Option(None, "--reason", help="Why (required for live)."),
    app_spec: str | None = typer.Option(
        None,
        "--app",
        help="Module (or module:object) holding the LangChain tool, for a run that recorded no entrypoint.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Re-run one recorded tool call and compare its result. Exit 0 same, 1 different, 2 refused."""
    from rich.text import Text

    from ..replay.scopes import replay_tool

    without_dataframes()

    args = None
    if args_json is not None:
        try:
            args = json.loads(args_json)
        except ValueError as exc:
            fail(f"--args is not valid JSON: {exc}")
        if not isinstance(args, dict):
            fail("--args must be a JSON object of argument names to values")
    with output_to_stderr(as_json):
        result = replay_tool(
            trace_id,
            step,
            mode=mode.value,
            args=args,
            approve=approve,
            actor=actor,
            reason=reason,
            store=store_url,
            app=app_spec,
        )
    if as_json:
        print_json(result.to_dict())
    else:
        style = {"matched": "green", "diverged": "yellow", "refused": "bold red"}[result.outcome]
        console = out_console()
        console.print(
            Text.assemble(
                f"{result.mode} replay of tool {result.tool!r} (step {result.step}): ", (result.outcome, style)
            )
        )
        if result.refusal:
            console.print(Text(f"refused: {result.refusal}", style="red"))
        console.print(f"recorded: {preview(result.recorded_error or result.recorded_result, 160)}")
        console.print(f"now:      {preview(result.error or result.result, 160)}")
        if result.sandbox:
            console.print(f"sandbox: {result.sandbox}")
        versions = result.schema_version
        if versions["recorded"] != versions["current"]:
            console.print(
                Text(f"tool schema version changed: {versions['recorded']} → {versions['current']}", style="yellow")
            )
    exit_for(result)


@app.command("replay-session")
@handled
def replay_session_command(
    session_id: str = typer.Argument(..., help="Session (conversation) id shared by the runs."),
    mode: ModeChoice = typer.Option(..., "--mode", help="dry, mock, deterministic or live."),
    approve: list[str] = typer.Option(
        [],
        "--approve",
        help="A write/high tool the replay may execute: NAME (one call in all turns), NAME:N or NAME:* (repeatable).",
    ),
    actor: str | None = typer.Option(None, "--actor", help="Who replays (default: the OS user)."),
    reason: str | None = typer.Option(None, "--reason", help="Why (required for live)."),
    app_spec: str | None = typer.Option(None, "--app", help="Entrypoint module:function to run instead."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
    allow_path: list[str] = typer.Option([], "--allow-path", metavar="PATH", help=ALLOW_PATH_HELP),
    allow_address: list[str] = typer.Option([], "--allow-address", metavar="HOST:PORT", help=ALLOW_ADDRESS_HELP),
) -> None:
    """Replay every run of one conversation in order; a diff per turn and the first turn that diverged."""
    from ..replay.scopes import replay_session

    without_dataframes()

    with output_to_stderr(as_json):
        result = replay_session(
            session_id,
            mode=mode.value,
            approvals=approve,
            actor=actor,
            reason=reason,
            store=store_url,
            entrypoint=app_spec,
            allow_paths=allow_path,
            allow_addresses=allow_address,
        )
    if as_json:
        print_json(result.to_dict())
    else:
        for i, turn in enumerate(result.turns):
            out_console().rule(f"turn {i}")
            render_result(turn)
        first = result.first_diverged_turn
        out_console().print(
            f"session {session_id}: {result.outcome}"
            + (f" (first diverged turn: {first})" if first is not None else "")
        )
    exit_for(result)
