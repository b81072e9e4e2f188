"""``otel-replay proxy``: the recording proxy for agents in any language (:mod:`otel_replay.wire.proxy`).

It must never bind anything but loopback unless ``--host`` is given, or import the wire package at module level.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import typer

from .app import app, fail, handled

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
    from ..wire.proxy import Proxy, Upstream
    from ..wire.runs import WireRuns

    upstreams = {}
    if openai_upstream:
        upstreams["openai"] = Upstream.parse(openai_upstream, "--openai-upstream")
    if anthropic_upstream:
        upstreams["anthropic"] = Upstream.parse(anthropic_upstream, "--anthropic-upstream")
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


def _write_ready(path: str, url: str) -> None:
    """Write ``url`` to ``path`` whole (a reader never sees half of it)."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    partial.write_text(url + "\n", encoding="utf-8")
    os.replace(partial, target)
