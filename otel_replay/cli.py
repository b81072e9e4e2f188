"""The ``otel-replay`` command: a thin shell over the library.

Each command parses its arguments, calls the library, and prints either rich text for people or, with
``--json``, one JSON document on stdout. Errors are one line on stderr (``error: …``) and exit code 2,
never a traceback (``OTEL_REPLAY_DEBUG=1`` shows one). Exit code 1 is kept for "completed, but the answer
is negative" (a replay that diverged).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

from .wording import plural

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text
    from rich.tree import Tree

    from .replay.engine import ReplayResult
    from .runs import Run, RunSummary, Step
    from .terminal import SafeConsole

app = typer.Typer(
    name="otel-replay",
    help="Record AI-agent runs as OpenTelemetry traces; list, show, replay and diff them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rendering it with Rich costs more than the 0.3 s --help may take
)
db_app = typer.Typer(help="Manage the ClickHouse schema.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(db_app, name="db")
case_app = typer.Typer(
    help="Regression cases: export a recorded run to a file, replay case files in CI.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(case_app, name="case")

EXIT_ERROR = 2
F = TypeVar("F", bound=Callable[..., Any])

_STORE_HELP = (
    "Store URL (chdb:///path or http(s)://user:pass@host:8123/db); default: $OTEL_REPLAY_STORE or the embedded store."
)


def version() -> str:
    """The installed otel-replay version: the distribution's metadata, else the package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as distribution_version

    try:
        return distribution_version("otel-replay")
    except PackageNotFoundError:
        from . import __version__

        return __version__


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"otel-replay {version()}\n")
        raise typer.Exit(0)


@app.callback()
def _main_options(
    show_version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version (otel-replay X.Y.Z) and exit.",
    ),
) -> None:
    """Record AI-agent runs as OpenTelemetry traces, list them, show them, replay them."""


def _out() -> SafeConsole:
    # Piped output (files, CI logs) gets a wide console instead of Rich's 80-column default.
    from .terminal import SafeConsole

    wide = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    return SafeConsole(soft_wrap=True, width=200 if wide else None)


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print one error line on stderr and exit."""
    from rich.text import Text

    from .redaction import scrub_message
    from .terminal import SafeConsole

    line = " ".join(scrub_message(message).split())
    SafeConsole(stderr=True, soft_wrap=True).print(Text(f"error: {line}", style="bold red"))
    raise typer.Exit(code)


def _handled(func: F) -> F:
    """Turn every failure of a command into one error line and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Exception as exc:  # the CLI promises no tracebacks
            if os.environ.get("OTEL_REPLAY_DEBUG"):
                raise
            from .errorlines import error_line

            fail(error_line(exc))

    return wrapper  # type: ignore[return-value]


_HTML_HELP = (
    "Write a self-contained HTML report to FILE (links to Jaeger / Grafana from $OTEL_REPLAY_JAEGER_URL / "
    "$OTEL_REPLAY_GRAFANA_URL)."
)


def _write_html(path: str, page: str, *, quiet: bool = False) -> None:
    from .report import write_report
    from .terminal import SafeConsole

    written = write_report(path, page)
    SafeConsole(stderr=quiet, soft_wrap=True).print(f"wrote HTML report {written}")


@contextlib.contextmanager
def _output_to_stderr(active: bool) -> Iterator[None]:
    """With ``--json``, stdout holds one JSON document and nothing else: while the replayed agent runs, what it
    prints goes to stderr, whether it prints through ``sys.stdout``, writes to file descriptor 1 itself, or
    starts a process that inherits it."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _print_json(value: Any) -> None:
    from .terminal import escape_json_text

    sys.stdout.write(escape_json_text(json.dumps(value, indent=2, ensure_ascii=False, default=str)) + "\n")


def _open_store(url: str | None) -> Any:
    from .storage.store import Store

    return Store.open(url)


def _nothing_stored(url: str | None) -> bool:
    """True when the store this command would open is an embedded one that does not exist yet and no spool
    segment waits to be ingested into it: then there is nothing to read, and the command answers without
    starting chDB (which takes a second). The store is found as :meth:`Store.open` finds it (argument, the
    runtime ``configure()`` built, ``OTEL_REPLAY_STORE``, the home's embedded store). Any doubt (a server URL,
    a store folder or a spool file present) is False: the store is opened as usual."""
    from . import settings

    settings.resolve_lock_timeout()  # a bad setting is an error whether or not the store exists yet
    given_home: Path | None = None
    setup = sys.modules.get("otel_replay.exporting.setup")  # loaded when configure() may have run in-process
    configured = setup.current_runtime() if setup is not None else None
    if configured is not None:  # what the application passed to configure() rules, as in Store.open
        given_home = configured.home if configured.home_given else None
        url = url or configured.store_url
    home = settings.resolve_home(given_home)
    resolved = settings.resolve_store_url(url, home)
    scheme, _, rest = resolved.partition("://")
    if scheme.lower() != "chdb" or not rest.startswith("/") or "?" in rest or "#" in rest:
        return False
    from urllib.parse import unquote

    path = Path(unquote(rest)).expanduser()
    if not path.is_absolute() or path.exists():
        return False
    spool = home / "spool"
    try:
        return not spool.exists() or not any(spool.iterdir())
    except OSError:
        return False


class StatusFilter(str, Enum):
    """Run status."""

    ok = "ok"
    error = "error"


class KindFilter(str, Enum):
    """Run kind."""

    original = "original"
    replay = "replay"


# -------------------------------------------------------------------------------------------------- runs


def _runs_table(summaries: list[RunSummary]) -> Table:
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
@_handled
def runs_command(
    agent: str | None = typer.Option(None, "--agent", help="Only runs of this agent."),
    status: StatusFilter | None = typer.Option(None, "--status", help="Only runs that ended ok / in error."),
    kind: KindFilter | None = typer.Option(None, "--kind", help="Only original runs, or only replays."),
    limit: int = typer.Option(50, "--limit", min=1, max=100000, help="At most this many runs."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
    store_url: str | None = typer.Option(None, "--store", help=_STORE_HELP),
) -> None:
    """List recorded runs (originals and replays), newest first."""
    if _nothing_stored(store_url):
        summaries: list[RunSummary] = []
    else:
        with _open_store(store_url) as store:
            summaries = store.runs(
                agent=agent, status=status.value if status else None, kind=kind.value if kind else None, limit=limit
            )
    if as_json:
        _print_json([s.to_dict() for s in summaries])
        return
    if not summaries:
        _out().print("No runs recorded yet. Run `otel-replay demo`, or decorate an agent with @otel_replay.agent.")
        return
    _out().print(_runs_table(summaries))


# -------------------------------------------------------------------------------------------------- show


def _preview(payload: Any, width: int = 110) -> str:
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
        line.append(_preview(snap.payload))
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
@_handled
def show_command(
    trace_id: str = typer.Argument(..., help="Trace id of the run (32 hex characters)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run as a JSON object."),
    html: str | None = typer.Option(None, "--html", metavar="FILE", help=_HTML_HELP),
    store_url: str | None = typer.Option(None, "--store", help=_STORE_HELP),
) -> None:
    """Show one run as a tree of steps and snapshots."""
    from .records import parse_trace_id

    tid = parse_trace_id(trace_id)
    with _open_store(store_url) as store:
        run = store.load_run(tid)
    if html:
        from .report import Links, run_report

        _write_html(html, run_report(run, links=Links.from_env()), quiet=as_json)
    if as_json:
        _print_json(run.to_dict())
    elif not html:
        _out().print(render_run(run))


# -------------------------------------------------------------------------------------------------- demo


class DemoSdk(str, Enum):
    """Which demo agent."""

    builtin = "builtin"
    openai = "openai"
    langgraph = "langgraph"


def _sdk_demo(sdk: DemoSdk) -> None:
    """Record an agent built on a real SDK (offline), show it, and replay it with no call leaving the process."""
    from . import instrumentation
    from .exporting.setup import flush
    from .replay.engine import replay

    console = _out()
    needed = {"openai": "openai", "langgraph": "langchain"}[sdk.value]
    if instrumentation.instrument(needed) != [needed]:
        fail(f"the {sdk.value} demo needs its SDK: pip install 'otel-replay[{sdk.value}]'")
    from .demo import sdk_agents

    question = "What is the weather in Paris?"
    if sdk is DemoSdk.openai:
        from .demo.fake_llm import FakeLLMServer

        with FakeLLMServer() as server:
            console.print(f"Recording the OpenAI agent against a local fake OpenAI server at {server.openai_url} …")
            answer = sdk_agents.openai_weather_agent(question, base_url=server.openai_url)
            requests_after_recording = server.count
            agent_name = "openai-weather-agent"
            flush()
            with _open_store(None) as store:
                (summary,) = store.runs(agent=agent_name, kind="original", limit=1)
                run = store.load_run(summary.trace_id)
            console.print(f"answer: {answer}")
            console.print(render_run(run))
            for mode in ("mock", "deterministic"):
                console.rule(f"{mode} replay: the SDK gets its recorded responses back as OpenAI objects")
                _render_result(replay(summary.trace_id, mode=mode, reason="sdk demo"))
            sent = server.count - requests_after_recording
        console.print(f"HTTP requests the replays sent to the OpenAI server: {sent}")
    else:
        console.print("Recording the LangGraph agent (scripted chat model, real LangGraph, real ToolNode) …")
        answer = sdk_agents.langgraph_weather_agent(question)
        flush()
        with _open_store(None) as store:
            (summary,) = store.runs(agent="langgraph-weather-agent", kind="original", limit=1)
            run = store.load_run(summary.trace_id)
        console.print(f"answer: {answer}")
        console.print(render_run(run))
        for mode in ("mock", "deterministic"):
            console.rule(f"{mode} replay: LangChain gets its recorded messages back")
            _render_result(replay(summary.trace_id, mode=mode, reason="sdk demo"))


@app.command("demo")
@_handled
def demo_command(
    sdk: DemoSdk = typer.Option(DemoSdk.builtin, "--sdk", help="builtin (no SDK), openai or langgraph."),
) -> None:
    """Run a bundled sample agent offline, record it, list and show its runs, and replay them."""
    from rich.text import Text

    from . import settings
    from .demo.agent import QUESTIONS, run_demo

    if sdk is not DemoSdk.builtin:
        _sdk_demo(sdk)
        return

    console = _out()
    home = settings.resolve_home()
    console.print(f"Recording {plural(len(QUESTIONS), 'run')} of the demo support agent into {home} …")
    outcomes = run_demo()
    for question, error in outcomes:
        mark = Text("ok   ", style="green") if error is None else Text("error", style="bold red")
        console.print(Text.assemble("  ", mark, f"  {question}", (f"  → {error}" if error else "", "red")))
    with _open_store(None) as store:
        summaries = store.runs(agent="support-agent", kind="original", limit=len(QUESTIONS))
        console.print()
        console.print(_runs_table(summaries))
        if not summaries:
            fail("the demo runs did not reach the store")
        # Show the richest successful run (the refund: retrieval, approval, high-risk tool).
        target = max((s for s in summaries if s.status == "ok"), key=lambda s: s.step_count or 0, default=summaries[0])
        run = store.load_run(target.trace_id)
    console.print()
    console.print(render_run(run))

    failed = next((s for s in summaries if s.status == "error"), None)
    if failed is not None:
        from .replay.engine import replay

        console.print()
        console.rule("The failed run, reproduced: mock replay (no model, tool or retrieval is really called)")
        _render_result(replay(failed.trace_id, mode="mock", reason="reproduce the demo failure"))
        console.print()
        console.rule("After the fix: partial live replay from step 2, refunds approved for this replay")
        fixed = replay(
            failed.trace_id,
            mode="live",
            from_step=2,
            approvals=["issue_refund"],
            reason="verify the fix for unknown order ids",
            entrypoint="otel_replay.demo.agent:support_agent_fixed",
        )
        _render_result(fixed)
        if fixed.replay is not None:
            _demo_case(fixed.replay, home)
    console.print()
    commands = [
        "otel-replay runs",
        "otel-replay show TRACE_ID --json",
        "otel-replay replay TRACE_ID --mode mock",
        "otel-replay audit",
        f"otel-replay case run {home / 'cases'}",
    ]
    console.print(
        Text.assemble(
            "Next: ", *[part for i, command in enumerate(commands) for part in ((", " if i else ""), (command, "bold"))]
        )
    )


def _demo_case(fixed: Run, home: Any) -> None:
    """Freeze the fixed run into a regression case and run it, as CI would."""
    from rich.text import Text

    from .cases import CASE_SUFFIX, case_document, describe_failure, load_case, run_case, write_case
    from .exporting.setup import runtime

    console = _out()
    console.print()
    console.rule("The fix, frozen: a regression case that CI replays without a store")
    folder = home / "cases"
    folder.mkdir(parents=True, exist_ok=True)
    name = "support-unknown-order"
    document = case_document(fixed, name=name, expect=["output", "tools"], redactor=runtime().redactor)
    path = write_case(document, folder / f"{name}{CASE_SUFFIX}", force=True)
    console.print(f"otel-replay case export {fixed.trace_id} -o {path} --expect output --expect tools")
    result = run_case(load_case(path))
    if result.passed:
        console.print(Text.assemble(("PASS ", "green"), f"{name}: the fixed agent still answers as recorded"))
    else:
        console.print(Text(describe_failure(result), style="red"))


# ------------------------------------------------------------------------------------------------ replay


class ModeChoice(str, Enum):
    """Replay mode."""

    dry = "dry"
    mock = "mock"
    deterministic = "deterministic"
    live = "live"


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
    if flag:
        console.print(
            Text.assemble(
                "to approve it, replay again with ",
                (flag, "bold"),
                f" (the replay stopped before {_where(call.get('step_index'))}; nothing after it ran)",
            )
        )
    elif call:
        console.print(f"the replay stopped before {_where(call.get('step_index'))}; nothing after it ran")


def _render_result(result: Any) -> None:
    from rich.text import Text

    console = _out()
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
                for line in first.diff.splitlines():
                    style = (
                        "dim"
                        if line.startswith(("---", "+++", "@@"))
                        else "red"
                        if line.startswith("-")
                        else "green"
                        if line.startswith("+")
                        else ""
                    )
                    console.print(Text(f"  {line}", style=style))
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
        from .replay.diff import render_diff

        console.print(render_diff(result.diff))


_ALLOW_SIDE_EFFECTS_HELP = (
    "Turn the side-effect guard off: the replayed code may spawn processes, change files and open connections for real."
)


def _warn_side_effects_allowed() -> None:
    """The loud line every run with --allow-side-effects prints on stderr before any code runs."""
    from rich.text import Text

    from .terminal import SafeConsole

    SafeConsole(stderr=True, soft_wrap=True).print(
        Text(
            "warning: --allow-side-effects: the side-effect guard is off; the replayed code may spawn processes, "
            "change files and open connections for real",
            style="bold yellow",
        )
    )


def _exit_for(result: Any) -> None:
    if result.outcome == "refused":
        raise typer.Exit(EXIT_ERROR)
    if result.outcome == "diverged":
        raise typer.Exit(1)


@app.command("replay")
@_handled
def replay_command(
    trace_id: str = typer.Argument(..., help="Trace id of the run to replay."),
    mode: ModeChoice = typer.Option(..., "--mode", help="dry, mock, deterministic or live."),
    from_step: int | None = typer.Option(None, "--from-step", min=0, help="Answer steps before N from the recording."),
    approve: list[str] = typer.Option(
        [],
        "--approve",
        help="A write/high tool this replay may execute: NAME (one call), NAME:N or NAME:* (repeatable).",
    ),
    actor: str | None = typer.Option(None, "--actor", help="Who replays (default: the OS user)."),
    reason: str | None = typer.Option(None, "--reason", help="Why (required for live)."),
    app_spec: str | None = typer.Option(
        None, "--app", help="Entrypoint module:function to run instead of the recorded one."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    html: str | None = typer.Option(None, "--html", metavar="FILE", help=_HTML_HELP),
    store_url: str | None = typer.Option(None, "--store", help=_STORE_HELP),
    allow_side_effects: bool = typer.Option(False, "--allow-side-effects", help=_ALLOW_SIDE_EFFECTS_HELP),
) -> None:
    """Replay a run. Exit 0: matched; 1: diverged; 2: refused or impossible."""
    from .replay.engine import replay

    if allow_side_effects:
        _warn_side_effects_allowed()
    with _output_to_stderr(as_json):
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
        )
    if as_json:
        _print_json(result.to_dict())
    else:
        _render_result(result)
    if html and result.original is not None:
        from .report import Links, replay_report

        _write_html(html, replay_report(result, result.original, links=Links.from_env()), quiet=as_json)
    _exit_for(result)


class ToolModeChoice(str, Enum):
    """Tool replay mode."""

    mock = "mock"
    live = "live"


@app.command("replay-tool")
@_handled
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
    store_url: str | None = typer.Option(None, "--store", help=_STORE_HELP),
) -> None:
    """Re-run one recorded tool call and compare its result. Exit 0 same, 1 different, 2 refused."""
    from rich.text import Text

    from .replay.scopes import replay_tool

    args = None
    if args_json is not None:
        try:
            args = json.loads(args_json)
        except ValueError as exc:
            fail(f"--args is not valid JSON: {exc}")
        if not isinstance(args, dict):
            fail("--args must be a JSON object of argument names to values")
    with _output_to_stderr(as_json):
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
        _print_json(result.to_dict())
    else:
        style = {"matched": "green", "diverged": "yellow", "refused": "bold red"}[result.outcome]
        console = _out()
        console.print(
            Text.assemble(
                f"{result.mode} replay of tool {result.tool!r} (step {result.step}): ", (result.outcome, style)
            )
        )
        if result.refusal:
            console.print(Text(f"refused: {result.refusal}", style="red"))
        console.print(f"recorded: {_preview(result.recorded_error or result.recorded_result, 160)}")
        console.print(f"now:      {_preview(result.error or result.result, 160)}")
        versions = result.schema_version
        if versions["recorded"] != versions["current"]:
            console.print(
                Text(f"tool schema version changed: {versions['recorded']} → {versions['current']}", style="yellow")
            )
    _exit_for(result)


@app.command("replay-session")
@_handled
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
    store_url: str | None = typer.Option(None, "--store", help=_STORE_HELP),
) -> None:
    """Replay every run of one conversation in order; a diff per turn and the first turn that diverged."""
    from .replay.scopes import replay_session

    with _output_to_stderr(as_json):
        result = replay_session(
            session_id,
            mode=mode.value,
            approvals=approve,
            actor=actor,
            reason=reason,
            store=store_url,
            entrypoint=app_spec,
        )
    if as_json:
        _print_json(result.to_dict())
    else:
        for i, turn in enumerate(result.turns):
            _out().rule(f"turn {i}")
            _render_result(turn)
        first = result.first_diverged_turn
        _out().print(
            f"session {session_id}: {result.outcome}"
            + (f" (first diverged turn: {first})" if first is not None else "")
        )
    _exit_for(result)


@app.command("diff")
@_handled
def diff_command(
    trace_a: str = typer.Argument(..., help="Trace id of the first run (e.g. the original)."),
    trace_b: str = typer.Argument(..., help="Trace id of the second run (e.g. the replay)."),
    as_json: bool = typer.Option(False, "--json", help="Print the diff as JSON."),
    html: str | None = typer.Option(None, "--html", metavar="FILE", help=_HTML_HELP),
    store_url: str | None = typer.Option(None, "--store", help=_STORE_HELP),
) -> None:
    """Diff two runs: output, state, tools, citations, cost, latency, safety. Exit 1 when they differ."""
    from .records import parse_trace_id
    from .replay.diff import diff_runs, render_diff

    a, b = parse_trace_id(trace_a), parse_trace_id(trace_b)
    with _open_store(store_url) as store:
        run_a, run_b = store.load_run(a), store.load_run(b)
    result = diff_runs(run_a, run_b)
    if as_json:
        _print_json(result.to_dict())
    else:
        _out().print(render_diff(result))
    if html:
        from .report import Links, diff_report

        _write_html(html, diff_report(run_a, run_b, result, links=Links.from_env()), quiet=as_json)
    if result.changed:
        raise typer.Exit(1)


@app.command("audit")
@_handled
def audit_command(
    limit: int = typer.Option(1000, "--limit", min=1, max=100000, help="At most this many replays."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
    verify: bool = typer.Option(False, "--verify", help="Exit 1 if any row's MAC does not verify (forged or edited)."),
    store_url: str | None = typer.Option(None, "--store", help=_STORE_HELP),
) -> None:
    """Every replay: when, who (actor and OS user), why, mode, from step, approvals and executions, original and
    replay trace, outcome, status, and whether its MAC verifies. Exit 1 with --verify when one does not."""
    from rich.text import Text

    from .replay.audit import AUDIT_ALL, audit
    from .terminal import SafeConsole

    # --verify checks every replay the store and the journal hold, not only the rows it prints.
    entries = audit(store=store_url, limit=AUDIT_ALL if verify else limit)
    checked, entries = entries, entries[:limit]
    if as_json:
        _print_json([e.to_dict() for e in entries])
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
        _out().print(table)
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
@_handled
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
    store_url: str | None = typer.Option(None, "--store", help=_STORE_HELP),
) -> None:
    """Write one self-contained, redacted case file for a recorded run."""
    from rich.text import Text

    from .cases import CASE_SUFFIX, case_document, dumps_case, write_case
    from .exporting.setup import runtime
    from .records import parse_trace_id
    from .terminal import SafeConsole, escape_json_text

    tid = parse_trace_id(trace_id)
    with _open_store(store_url) as store:
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
        _print_json(summary)
    else:
        _out().print(
            f"wrote case {summary['name']} ({plural(summary['spans'], 'span')}, {summary['mode']}, expect "
            f"{', '.join(summary['expect'])}) to {path}"
        )


@case_app.command("run")
@_handled
def case_run_command(
    paths: list[str] = typer.Argument(..., help="Case files, or folders searched for *.case.json."),
    mode: CaseModeChoice | None = typer.Option(
        None, "--mode", help="Replay every case in this mode instead of its own."
    ),
    app_spec: str | None = typer.Option(
        None, "--app", help="Entrypoint module:function for every case instead of its own."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    allow_side_effects: bool = typer.Option(False, "--allow-side-effects", help=_ALLOW_SIDE_EFFECTS_HELP),
) -> None:
    """Replay case files against the current code, no store needed. Exit 0: all hold; 1: a case failed;
    2: a case could not run."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.text import Text

    from .cases import (
        CaseError,
        CaseResult,
        describe_failure,
        find_cases,
        load_case,
        run_case,
    )
    from .terminal import SafeConsole

    files = find_cases(paths)
    if not files:
        fail(f"no case files (*.case.json) in {', '.join(paths)}")
    if allow_side_effects:
        _warn_side_effects_allowed()
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
    with progress, _output_to_stderr(as_json):
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
                    )
                )
            progress.advance(task)
    counts = {status: sum(r.status == status for r in results) for status in ("passed", "failed", "error")}
    if as_json:
        _print_json({"cases": [r.to_dict() for r in results], **counts})
    else:
        console = _out()
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
    if counts["error"]:
        raise typer.Exit(EXIT_ERROR)
    if counts["failed"]:
        raise typer.Exit(1)


# ---------------------------------------------------------------------------------------------------- db


@db_app.command("init")
@_handled
def db_init_command(
    store_url: str | None = typer.Option(None, "--store", help=_STORE_HELP),
    cluster: str | None = typer.Option(None, "--cluster", help="Create ON CLUSTER with Replicated engines."),
    ttl: int | None = typer.Option(None, "--ttl", min=1, help="Keep spans this many days."),
    print_only: bool = typer.Option(False, "--print", help="Print the DDL instead of running it."),
) -> None:
    """Create (or print) the Collector exporter's tables: otel_traces and the trace-id lookup."""
    from .storage import ddl

    if print_only:
        sys.stdout.write(ddl.render_script(cluster=cluster, ttl_days=ttl))
        return
    with _open_store(store_url) as store:
        store.init_schema(cluster=cluster, ttl_days=ttl)
        _out().print(f"schema ready in {store.describe()}")


class _WarningLines(logging.Handler):
    """otel-replay's own warnings (an ingest that skipped a torn record, say) as ``warning:`` lines on stderr:
    one line each, no traceback, apart from the one ``error:`` line a failing command prints. Every record
    is scrubbed of secrets first (the redaction module is imported with the first record, not at start)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from rich.text import Text

            from .redaction import ScrubbingLogFilter
            from .terminal import SafeConsole

            if not ScrubbingLogFilter().filter(record):
                return
            text = " ".join(record.getMessage().split()).removeprefix("otel-replay ingest: ")
            SafeConsole(stderr=True, soft_wrap=True).print(Text(f"warning: {text}", style="yellow"))
        except Exception:  # noqa: BLE001 - a warning never breaks a command
            pass


def main() -> None:
    """Console-script entry point: usage errors too are one ``error:`` line and exit code 2."""
    # Driver libraries log their own copy of errors the CLI already reports in one line.
    logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)
    ours = logging.getLogger("otel_replay")
    if not ours.handlers:
        ours.addHandler(_WarningLines(logging.WARNING))
        ours.propagate = False
    try:
        code = app(standalone_mode=False)
    except (typer.Exit, SystemExit):
        raise
    except typer.Abort:
        sys.exit(130)
    except Exception as exc:  # click's (or typer's vendored click's) usage errors, matched by shape
        kinds = {c.__name__ for c in type(exc).__mro__}
        context = getattr(exc, "ctx", None)
        if "NoArgsIsHelpError" in kinds and context is not None:
            sys.stdout.write(context.get_help() + "\n")
            sys.exit(0)
        if "UsageError" not in kinds and "ClickException" not in kinds:
            raise
        hint = f" (see `{context.command_path} --help`)" if context is not None else ""
        from rich.text import Text

        from .errorlines import usage_line
        from .redaction import scrub_message
        from .terminal import SafeConsole

        formatter = getattr(exc, "format_message", None)
        message = usage_line(str(formatter() if callable(formatter) else exc))
        SafeConsole(stderr=True, soft_wrap=True).print(
            Text(f"error: {' '.join(scrub_message(message).split())}{hint}", style="bold red")
        )
        sys.exit(EXIT_ERROR if "UsageError" in kinds else getattr(exc, "exit_code", EXIT_ERROR) or EXIT_ERROR)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
