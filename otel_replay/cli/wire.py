"""``otel-replay proxy`` and ``otel-replay serve``: the recording proxy and the replay server for agents in any
language (:mod:`otel_replay.wire`).

It must never bind anything but loopback unless ``--host`` is given, or import the wire package at module level.
"""

from __future__ import annotations

import enum
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from .app import STORE_HELP, app, fail, handled, open_store, print_json

READY_HELP = "Write the base URL to FILE once listening (for scripts and tests)."


@app.command("proxy")
@handled
def proxy_command(
    openai_upstream: str | None = typer.Option(
        None, "--openai-upstream", help="Base URL of the OpenAI API, as its SDK takes it (https://api.openai.com/v1)."
    ),
    anthropic_upstream: str | None = typer.Option(
        None,
        "--anthropic-upstream",
        help="Base URL of the Anthropic API, as its SDK takes it (https://api.anthropic.com).",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback unless given)."),
    port: int = typer.Option(8788, "--port", min=0, max=65535, help="Port to listen on (0: any free port)."),
    ready_file: str | None = typer.Option(None, "--ready-file", metavar="FILE", help=READY_HELP),
    run_idle_s: float = typer.Option(
        30.0, "--run-idle-s", min=0.05, help="Close a run after this many seconds without a request of it."
    ),
) -> None:
    """Record agents in any language at their model wire: forward chat completions, Responses and Messages
    requests to the real API and record each exchange as a model step (docs/any-language.md)."""
    from ..exporting.setup import flush
    from ..wire.proxy import Proxy
    from ..wire.runs import WireRuns

    upstreams = _upstreams(openai_upstream, anthropic_upstream)
    if not upstreams:
        fail("give --openai-upstream URL, --anthropic-upstream URL or both: the proxy forwards to them")

    def flushed(run: object) -> None:
        flush()  # a closed run reaches the store now, not when the proxy stops

    runs = WireRuns(idle_s=run_idle_s, closed=flushed)
    try:
        proxy = Proxy(upstreams, runs, host=host, port=port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server = threading.Thread(target=proxy.serve, name="otel-replay-proxy", daemon=True)
    server.start()
    if ready_file:
        _write_ready(ready_file, proxy.url)
    print(f"otel-replay proxy listening on {proxy.url}", file=sys.stderr, flush=True)
    tick = min(1.0, run_idle_s / 4)
    while not stop.wait(tick):
        runs.close_idle()
    proxy.stop()
    runs.close_all()
    flush()


def _upstreams(openai_upstream: str | None, anthropic_upstream: str | None) -> dict[str, Any]:
    """The upstreams given, by provider (a bad URL is refused with the option's name)."""
    from ..wire.forward import Upstream

    upstreams: dict[str, Any] = {}
    if openai_upstream:
        upstreams["openai"] = Upstream.parse(openai_upstream, "--openai-upstream")
    if anthropic_upstream:
        upstreams["anthropic"] = Upstream.parse(anthropic_upstream, "--anthropic-upstream")
    return upstreams


def _write_ready(path: str, url: str) -> None:
    """Write ``url`` to ``path`` whole (a reader never sees half of it)."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    partial.write_text(url + "\n", encoding="utf-8")
    os.replace(partial, target)


class ServeMode(str, enum.Enum):
    mock = "mock"
    deterministic = "deterministic"


@app.command("serve")
@handled
def serve_command(
    trace_id: str = typer.Argument(..., help="Trace id of the recorded run whose answers to serve."),
    mode: ServeMode = typer.Option(
        ServeMode.deterministic,
        "--mode",
        help="deterministic (a changed request is answered with 409) or mock (answered in order).",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback unless given)."),
    port: int = typer.Option(8788, "--port", min=0, max=65535, help="Port to listen on (0: any free port)."),
    ready_file: str | None = typer.Option(None, "--ready-file", metavar="FILE", help=READY_HELP),
    exit_after_s: float | None = typer.Option(
        None, "--exit-after-s", min=0.0, help="End the replay after this many seconds, whatever the agent did."
    ),
    then_live: bool = typer.Option(
        False,
        "--then-live",
        help="Forward every call after the first divergence, or past the recording, to the real API "
        "(needs an upstream and --reason; the replay then ends on SIGINT/SIGTERM or --exit-after-s).",
    ),
    openai_upstream: str | None = typer.Option(
        None, "--openai-upstream", help="With --then-live: the OpenAI API's base URL (https://api.openai.com/v1)."
    ),
    anthropic_upstream: str | None = typer.Option(
        None, "--anthropic-upstream", help="With --then-live: the Anthropic API's base URL."
    ),
    actor: str | None = typer.Option(None, "--actor", help="Who replays (default: the OS user)."),
    reason: str | None = typer.Option(None, "--reason", help="Why (kept in the audit; required with --then-live)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (the document of replay --json)."),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Replay a recorded run to an agent in any language: serve its recorded model answers on the endpoints the
    proxy records, until the agent has made as many calls; exit 0 matched, 1 diverged, 2 refused."""
    from ..records import parse_trace_id
    from ..replay.engine import replay_external
    from ..wire.forward import Forwarder
    from ..wire.serve import ReplayServer
    from .outcome import exit_for, render_result

    tid = parse_trace_id(trace_id)
    upstreams = _upstreams(openai_upstream, anthropic_upstream)
    live = None
    if then_live:
        if not upstreams:
            fail("--then-live forwards calls to the real API: give --openai-upstream, --anthropic-upstream or both")
        if not (reason or "").strip():
            fail("--then-live makes real calls: say why with --reason (it is kept in the audit)")
        live = Forwarder(ReplayServer.name, upstreams)
    elif upstreams:
        fail("--openai-upstream and --anthropic-upstream are for --then-live: give it too, or leave them out")
    with open_store(store_url) as store:
        original = store.load_run(tid)
        try:
            server = ReplayServer(
                original,
                host=host,
                port=port,
                exit_after_s=exit_after_s,
                ready=lambda url: _announce(url, ready_file),
                then_live=live,
            )
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: server.stop())
        result = replay_external(original, mode=mode.value, agent=server.run, actor=actor, reason=reason, store=store)
    if as_json:
        print_json(result.to_dict())
    else:
        render_result(result)
    exit_for(result)


def _announce(url: str, ready_file: str | None) -> None:
    if ready_file:
        _write_ready(ready_file, url)
    print(f"otel-replay serve listening on {url}", file=sys.stderr, flush=True)


@app.command("mcp-proxy", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@handled
def mcp_proxy_command(
    ctx: typer.Context,
    name: str = typer.Option("mcp-proxy", "--name", help="The run's agent name (one run per session)."),
) -> None:
    """Record an MCP session at its wire: start the stdio MCP server given after -- (COMMAND ARGS...), relay
    every message between it and the client unchanged, and record each request as a step."""
    from ..exporting.setup import flush
    from ..wire.mcp_proxy import McpProxy

    command = list(ctx.args)
    if not command:
        fail("give the server's command after --: otel-replay mcp-proxy -- python server.py")
    proxy = McpProxy(command, agent=name)
    _end_on_signals(proxy.lines.end)
    try:
        code = proxy.run()
    except OSError as exc:
        fail(f"cannot start the MCP server {command[0]!r}: {exc.strerror or exc}")
    flush()
    raise typer.Exit(code)


@app.command("mcp-serve")
@handled
def mcp_serve_command(
    trace_id: str = typer.Argument(..., help="Trace id of the MCP session mcp-proxy recorded."),
    name: str | None = typer.Option(None, "--name", help="Refuse unless the recorded session's name is NAME."),
    json_file: str | None = typer.Option(
        None, "--json-file", metavar="FILE", help="Write the result (the document of replay --json) to FILE."
    ),
    actor: str | None = typer.Option(None, "--actor", help="Who replays (default: the OS user)."),
    reason: str | None = typer.Option(None, "--reason", help="Why (kept in the audit)."),
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Replay a recorded MCP session as a stdio MCP server: answer it from the recording, starting no process;
    exit 0 matched, 1 diverged, 2 refused (the outcome on stderr: stdout is the MCP channel)."""
    import json

    from .. import semconv
    from ..records import parse_trace_id
    from ..replay.engine import replay_external
    from ..wire.mcp_serve import McpServe
    from ..wire.mcp_steps import RETRIEVALS
    from .outcome import exit_for

    tid = parse_trace_id(trace_id)
    with open_store(store_url) as store:
        original = store.load_run(tid)
        if name is not None and original.agent != name:
            fail(f"run {tid} is the session {original.agent!r}, not {name!r}")
        recorded = {s.attributes.get(semconv.MCP_METHOD_NAME) for s in original.steps}
        if not recorded & {*RETRIEVALS, "tools/call"}:
            fail(f"run {tid} holds no MCP session recorded at the wire (record one with otel-replay mcp-proxy)")
        server = next((s.attributes.get(semconv.MCP_SERVER) for s in original.steps), None)
        serve = McpServe(server=server)
        _end_on_signals(serve.lines.end)
        result = replay_external(
            original,
            mode="deterministic",
            agent=serve.run,
            actor=actor,
            reason=reason,
            store=store,
        )
    if json_file:
        Path(json_file).write_text(json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n")
    divergences = len(result.divergences)
    print(
        f"otel-replay mcp-serve: {result.outcome} ({divergences} divergence{'s' if divergences != 1 else ''}); "
        f"replay {result.replay_trace_id}",
        file=sys.stderr,
        flush=True,
    )
    exit_for(result)


def _end_on_signals(end: Callable[..., None]) -> None:
    """SIGINT and SIGTERM end a stdio session as closing its input does (MCP clients send SIGTERM when a server
    has not exited two seconds after they closed its input)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, end)
