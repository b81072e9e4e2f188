"""How a replay's result reads in the terminal (dry readiness, a refusal, divergences, the agent's error, the
diff) and the exit code it gives; the warning ``--allow-side-effects`` prints.

It must never run a replay, open a store, or import Rich or the engine at module level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from ..wording import plural
from .app import EXIT_ERROR, out_console

if TYPE_CHECKING:
    from rich.text import Text

    from ..replay.engine import ReplayResult
    from ..terminal import SafeConsole


def _where(step_index: int | None) -> str:
    return f"step {step_index}" if step_index is not None else "run"


def agent_error_line(error: dict[str, Any]) -> Text:
    """``agent raised Type: message at file:line in function``: what the replayed agent raised, and where in
    its own code."""
    from rich.text import Text

    line = Text("agent raised ", style="bold red")
    line.append(error.get("type") or "an exception", style="bold red")
    if error.get("message"):
        line.append(f": {error['message']}", style="red")
    if error.get("file"):
        line.append(f"  at {error['file']}:{error.get('line')} in {error.get('function')}", style="dim")
    return line


def _render_dry(result: ReplayResult, console: SafeConsole) -> None:
    """A dry replay ran nothing: it says whether the recording is intact and which modes it is ready for."""
    from rich.text import Text

    readiness = result.readiness or {}
    problems = readiness.get("integrity", {}).get("problems", [])
    head = Text(f"dry replay of {result.original_trace_id}: ")
    if problems:
        head.append(f"recording damaged ({plural(len(problems), 'problem')})", style="bold red")
    else:
        head.append("recording intact", style="green")
    head.append(", nothing ran")
    if result.replay_trace_id:
        head.append(f"  → check recorded as trace {result.replay_trace_id}", style="dim")
    console.print(head)
    for problem in problems:
        console.print(Text(f"  problem: {problem}", style="red"))
    ready = result.ready_modes or []
    modes = readiness.get("modes", {})
    waiting = [mode for mode in modes if mode not in ready]
    summary = Text("ready to replay: ")
    summary.append(", ".join(ready) if ready else "no mode", style="green" if ready else "bold red")
    if waiting:
        summary.append("; not ready: ")
        summary.append(", ".join(waiting), style="yellow")
    console.print(summary)
    for mode, info in modes.items():
        for missing in info.get("missing", []):
            console.print(Text(f"  {mode}: {missing}", style="yellow"))
    undeclared = list(getattr(result, "unfirewalled_risky", ()))
    if undeclared:
        risky = readiness.get("risky_tools", {})
        named = ", ".join(f"{name} (recorded risk {risky.get(name, {}).get('risk', 'high')})" for name in undeclared)
        console.print(
            Text(
                f"not firewalled by the current code: {named}: the recorded function no longer carries "
                "@otel_replay.tool; a live replay still needs its --approve flag, and is refused (exit 2) when "
                "the tool runs undeclared",
                style="yellow",
            )
        )
    for server in readiness.get("servers") or []:
        console.print(
            Text(
                f"MCP server {server.get('server')} (steps {', '.join(map(str, server.get('steps', [])))}): not "
                "started by mock and deterministic replays (answered from the recording); started by a live one"
            )
        )
    enforcement = readiness.get("sandbox") or {}
    if enforcement:
        console.print(Text(f"sandbox of mock and deterministic replays: {enforcement.get('enforcement')}"))
        for gap in enforcement.get("not_covered", []):
            console.print(Text(f"  not covered: {gap}", style="dim"))
        prefix = enforcement.get("live_from_step") or {}
        if prefix:
            console.print(
                Text(f"sandbox of the recorded steps of a live --from-step replay: {prefix.get('enforcement')}")
            )
            for gap in prefix.get("not_covered", []):
                console.print(Text(f"  not covered: {gap}", style="dim"))
    approvals = modes.get("live", {}).get("needs_approval") or []
    if approvals:
        flags = " ".join(f"--approve {name}" for name in approvals)
        console.print(
            Text(
                f"live replay executes {plural(len(approvals), 'write/high tool')} only when approved: {flags}",
                style="magenta",
            )
        )


def _render_refusal(result: ReplayResult, console: SafeConsole) -> None:
    """A refused live replay: what was refused and the exact flag that approves it; no diff (the replay
    stopped before that call, so a diff would only list what did not run)."""
    from rich.text import Text

    console.print(Text(f"refused: {result.refusal}", style="red"))
    call = result.refused_call or {}
    flag = call.get("approve_with")
    if flag and getattr(result, "refused_before_start", False):
        console.print(
            Text.assemble(
                "to approve it, replay again with ",
                (flag, "bold"),
                " (the replay was refused before the agent started; nothing ran)",
            )
        )
    elif getattr(result, "unfirewalled_risky", ()) and result.mode != "dry":
        console.print(
            f"the current code no longer declares {', '.join(result.unfirewalled_risky)}: no --approve flag lets "
            "the replay count a tool it cannot see; re-add its @otel_replay.tool(risk=...) and replay again"
        )
    elif flag:
        console.print(
            Text.assemble(
                "to approve it, replay again with ",
                (flag, "bold"),
                f" (the replay stopped before {_where(call.get('step_index'))}; nothing after it ran)",
            )
        )
    elif call:
        console.print(f"the replay stopped before {_where(call.get('step_index'))}; nothing after it ran")


def _diff_style(line: str) -> str:
    """The style of one line of a divergence's diff: its headers dim, a text's heading bold, removed lines red,
    added lines green."""
    if line.startswith(("--- recorded ", "+++ replay", "@@ ")):  # not "---": a removed text line may start so
        return "dim"
    if line.startswith("=== "):
        return "bold"
    return "red" if line.startswith("-") else "green" if line.startswith("+") else ""


def render_result(result: Any) -> None:
    from rich.text import Text

    console = out_console()
    if result.mode == "dry" and result.readiness is not None:
        _render_dry(result, console)
    else:
        style = {"matched": "green", "diverged": "yellow", "refused": "bold red"}[result.outcome]
        head = Text()
        head.append(f"{result.mode} replay of {result.original_trace_id}: ")
        head.append(result.outcome, style=style)
        if result.replay_trace_id:
            head.append(f"  → replay trace {result.replay_trace_id}", style="dim")
        console.print(head)
        if getattr(result, "sandbox", ""):
            allowed = getattr(result, "allowed_effects", ())
            shown = f"sandbox: {result.sandbox}" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
            console.print(Text(shown, style="dim"))
    error = getattr(result, "agent_error", None)
    if error:
        console.print(agent_error_line(error))
    if result.refusal:
        _render_refusal(result, console)
    else:
        first = result.first_divergence
        if first is not None and result.mode != "dry":
            console.print(Text(f"first divergence at {_where(first.step_index)}: {first.reason}", style="yellow"))
            if first.diff:
                from ..terminal import clean

                # split at newlines only, and escaped before Rich sees them: Text() would drop BEL, BS, VT, FF
                # and CR silently, and a changed prompt is exactly where they must stay visible
                for line in first.diff.split("\n"):
                    console.print(Text(clean(f"  {line}"), style=_diff_style(line)))
        for d in result.divergences[1:6] if result.mode != "dry" else ():
            console.print(Text(f"  also at {_where(d.step_index)}: {d.reason}", style="dim"))
        hidden = len(result.divergences) - 6
        if hidden > 0 and result.mode != "dry":
            console.print(Text(f"  and {plural(hidden, 'more divergence')} (--json lists them all)", style="dim"))
    for change in getattr(result, "schema_changes", ()):
        console.print(
            Text(
                f"tool {change['tool']!r} (step {change['step_index']}) schema version changed: "
                f"{change['recorded']} → {change['current']}",
                style="yellow",
            )
        )
    for note in getattr(result, "notes", ()):
        console.print(Text(f"note: {note}", style="yellow"))
    if result.mode == "dry" and (getattr(result, "readiness", None) or {}).get("executes_code"):
        console.print(
            Text(
                "executes model-written code: the run's agent runs Python its model wrote; a tool that code "
                "calls is answered from the recording only when it is a recorded step",
                style="yellow",
            )
        )
    unfirewalled = getattr(result, "not_firewalled", ())
    if unfirewalled:
        console.print(
            Text(
                f"not firewalled: {', '.join(unfirewalled)} (the model called these tools and no tool step "
                "recorded them: a replay runs them for real; decorate them with @otel_replay.tool)",
                style="yellow",
            )
        )
    if result.diff is not None and result.mode != "dry" and not result.refusal:
        from ..replay.diff import render_diff

        console.print(render_diff(result.diff))


ALLOW_SIDE_EFFECTS_HELP = (
    "Turn the side-effect guard off: the replayed code may spawn processes, change files and open connections for real."
)

ALLOW_PATH_HELP = (
    "A file or folder the replayed code may change (repeatable): the kernel sandbox and the guard let it through, "
    "and the replay's audit records it."
)

ALLOW_ADDRESS_HELP = "A HOST:PORT the replayed code may connect to (repeatable), recorded in the replay's audit."


def warn_side_effects_allowed() -> None:
    """The loud line every run with --allow-side-effects prints on stderr before any code runs."""
    from rich.text import Text

    from ..terminal import SafeConsole

    SafeConsole(stderr=True, soft_wrap=True).print(
        Text(
            "warning: --allow-side-effects: the side-effect guard is off; the replayed code may spawn processes, "
            "change files and open connections for real",
            style="bold yellow",
        )
    )


def exit_for(result: Any) -> None:
    if result.outcome == "refused":
        raise typer.Exit(EXIT_ERROR)
    if result.outcome == "diverged":
        raise typer.Exit(1)
