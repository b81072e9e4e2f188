"""An MCP client on the official ``@modelcontextprotocol/sdk`` npm package (``mcp_client.mjs``) against a Node
stdio MCP server on the same package (``mcp_server.mjs``: ``lookup_order`` read-only, ``file_ticket`` appending a
line to the outbox), recorded through ``otel-replay mcp-proxy`` and replayed through ``otel-replay mcp-serve``,
each started by the client itself as its stdio server, the way an agent's MCP configuration names one.

Replayed: the same output, the server never started (no second ticket), ``matched``. With a changed argument:
the client gets the MCP error naming the divergence, the ticket is not filed, and the result holds the
arguments' diff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from test_ts_agents import HERE, WAIT, _node

from otel_replay.storage.store import Store

OUTPUT = "tools: lookup_order, file_ticket\norder A-17: delivered, damaged\nticket filed for A-17\n"


def _written(path: Path) -> dict[str, object]:
    """The result ``mcp-serve --json-file`` writes once the client closed the session (the client's close waits
    for the server's exit for up to two seconds only, so the file may come a moment after the client ended)."""
    deadline = time.monotonic() + WAIT  # a deadlock guard, not a synchronisation
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.05)
    time.sleep(0.05)
    return json.loads(path.read_text())


def test_an_mcp_client_in_typescript_is_recorded_by_mcp_proxy_and_replayed_by_mcp_serve(
    home: Path, tmp_path: Path
) -> None:
    node = _node()
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    cli = [sys.executable, "-m", "otel_replay.cli"]

    def client(server: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "RW_OUTBOX": str(outbox), "MCP_SERVER": json.dumps(server), **extra}
        return subprocess.run([node, "mcp_client.mjs"], cwd=HERE, env=env, capture_output=True, text=True, timeout=WAIT)

    def tickets() -> list[str]:
        return (outbox / "tickets.txt").read_text().splitlines()

    recorded = client([*cli, "mcp-proxy", "--name", "desk", "--", node, "mcp_server.mjs"])
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == OUTPUT
    assert tickets() == ["A-17: arrived damaged"]
    with Store.open() as store:
        (summary,) = store.runs(kind="original")
        original = store.load_run(summary.trace_id)
    assert original.agent == "desk"
    assert [(s.kind, s.name, s.attributes.get("otel_replay.tool.risk")) for s in original.steps] == [
        ("retrieval", "mcp initialize", None),
        ("retrieval", "mcp tools/list", None),
        ("tool", "lookup_order", "read"),
        ("tool", "file_ticket", "write"),
    ]

    result = tmp_path / "matched.json"
    replayed = client([*cli, "mcp-serve", original.trace_id, "--name", "desk", "--json-file", str(result)])
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == OUTPUT
    matched = _written(result)
    assert (matched["outcome"], matched["original_trace_id"]) == ("matched", original.trace_id), matched
    assert tickets() == ["A-17: arrived damaged"]  # the recorded server was never started

    result = tmp_path / "diverged.json"
    changed = client([*cli, "mcp-serve", original.trace_id, "--json-file", str(result)], NOTE="box crushed in transit")
    assert changed.returncode == 1, changed.stderr
    assert "mcp error: MCP error -32000: otel-replay: the replay stopped: tool 'file_ticket'" in changed.stdout
    diverged = _written(result)
    first = diverged["first_divergence"]
    assert isinstance(first, dict) and (diverged["outcome"], first["kind"], first["step_index"]) == (
        "diverged",
        "arguments",
        3,
    ), diverged
    assert '+  "note": "box crushed in transit"' in first["diff"], first["diff"]
    assert tickets() == ["A-17: arrived damaged"]
    with Store.open() as store:
        replays = store.runs(kind="replay")
    assert sorted(r.replay_of for r in replays) == [original.trace_id] * 2
