"""``otel-replay mcp-proxy`` and ``otel-replay mcp-serve``, as an MCP client starts them: the MCP Python SDK's
client (``stdio_client`` + ``ClientSession``, no otel-replay in it) against the realworld stdio server
(``tests/realworld/rw_mcp_server.py``: a read-only tool, a side-effecting ``file_ticket``, a resource, a prompt).

Recorded through ``mcp-proxy``: the client gets the server's own answers, the session is one run of steps
(``initialize`` and the listings as retrieval steps, ``tools/call`` a tool step with the server's annotations as
its risk) and the ticket is filed once. Served by ``mcp-serve``: the same answers, no server started (no second
ticket), ``matched``; a call with other arguments gets an MCP error naming the divergence, and the replay is
``diverged`` (exit 1).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from otel_replay import semconv
from otel_replay.storage.store import Store

SERVER = Path(__file__).resolve().parent / "realworld" / "rw_mcp_server.py"


async def _session(args: list[str], note: str = "arrived damaged") -> tuple[Any, ...]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "otel_replay.cli", *args], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        policy = await session.read_resource("policy://refunds")
        filed = await session.call_tool("file_ticket", {"order_id": "A-17", "note": note})
        return (
            [t.name for t in tools.tools],
            [c.text for c in policy.contents],
            [c.text for c in filed.content],
        )


@pytest.fixture
def recorded(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, tuple[Any, ...], Path]:
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    monkeypatch.setenv("RW_OUTBOX", str(outbox))
    answers = asyncio.run(_session(["mcp-proxy", "--name", "support-desk", "--", sys.executable, str(SERVER)]))
    with Store.open() as store:
        (summary,) = store.runs(kind="original")
    return summary.trace_id, answers, outbox / "tickets.txt"


def test_the_session_is_recorded_as_one_run_of_steps(recorded: Any) -> None:
    trace_id, answers, tickets = recorded
    assert answers == (
        ["lookup_order", "file_ticket"],
        ["Damaged orders are refunded in full."],
        ["ticket filed for A-17"],
    )
    assert tickets.read_text().splitlines() == ["A-17: arrived damaged"]
    with Store.open() as store:
        run = store.load_run(trace_id)
    assert (run.agent, run.attributes[semconv.RUN_BOUNDARY]) == ("support-desk", "wire")
    steps = [(s.kind, s.name, s.attributes.get(semconv.TOOL_RISK)) for s in run.steps]
    assert [s for s in steps if s[1] != "mcp server/discover"] == [
        ("retrieval", "mcp initialize", None),
        ("retrieval", "mcp tools/list", None),
        ("retrieval", "mcp resources/read", None),
        ("tool", "file_ticket", "write"),  # annotated neither read-only nor destructive
    ]
    tool = run.steps[-1]
    assert tool.attributes[semconv.MCP_METHOD_NAME] == "tools/call"
    assert tool.attributes[semconv.MCP_SERVER].endswith(" rw_mcp_server.py")
    assert tool.snapshots["tool"]["arguments"] == {"order_id": "A-17", "note": "arrived damaged"}


def test_mcp_serve_answers_the_session_from_the_recording(recorded: Any, tmp_path: Path) -> None:
    trace_id, answers, tickets = recorded
    report = tmp_path / "replay.json"
    assert asyncio.run(_session(["mcp-serve", trace_id, "--json-file", str(report)])) == answers
    result = json.loads(report.read_text())
    assert (result["outcome"], result["original_trace_id"]) == ("matched", trace_id), result["divergences"]
    assert tickets.read_text().splitlines() == ["A-17: arrived damaged"]  # no server started: no second ticket


def test_a_call_with_other_arguments_gets_an_mcp_error_and_the_replay_diverges(recorded: Any, tmp_path: Path) -> None:
    trace_id, _, tickets = recorded
    report = tmp_path / "replay.json"
    with pytest.raises(BaseException) as raised:
        asyncio.run(_session(["mcp-serve", trace_id, "--json-file", str(report)], note="lost in transit"))
    assert "different arguments than step" in repr(
        raised.value.exceptions if hasattr(raised.value, "exceptions") else raised.value
    )
    result = json.loads(report.read_text())
    assert result["outcome"] == "diverged" and result["first_divergence"]["kind"] == "arguments"
    assert tickets.read_text().splitlines() == ["A-17: arrived damaged"]


def test_mcp_proxy_and_mcp_serve_refuse_bad_input(recorded: Any) -> None:
    trace_id, _, _ = recorded
    for args, needle in (
        (["mcp-proxy"], "after --"),
        (["mcp-proxy", "--", "/no/such/server"], "cannot start"),
        (["mcp-serve", trace_id, "--name", "other-desk"], "not 'other-desk'"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "otel_replay.cli", *args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)


def test_a_session_in_the_agents_trace_is_a_run_in_that_trace(home: Path, tmp_path: Path, monkeypatch: Any) -> None:
    """The MCP client puts the agent's trace context in each request's ``_meta`` (``traceparent``): the
    session's run joins that trace, as the model proxy's runs join a request's ``traceparent``."""
    from opentelemetry.sdk.trace import TracerProvider

    monkeypatch.setenv("RW_OUTBOX", str(tmp_path))
    with TracerProvider().get_tracer("the agent").start_as_current_span("agent run") as span:
        asyncio.run(_session(["mcp-proxy", "--name", "traced-desk", "--", sys.executable, str(SERVER)]))
    with Store.open() as store:
        (summary,) = store.runs(kind="original")
        run = store.load_run(summary.trace_id)
    assert run.trace_id == f"{span.get_span_context().trace_id:032x}"
    root = next(s for s in run.spans if semconv.RUN_ID in s.span_attributes)
    assert root.parent_span_id == ""  # a run root as every run's, linked to the request's span
    assert [link.trace_id for link in root.links] == [run.trace_id], root.links


def _initialized(process: subprocess.Popen[bytes]) -> None:
    """Send ``initialize`` on the session's stdin and read its answer: the command is then waiting for the next
    message."""
    assert process.stdin is not None and process.stdout is not None
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    process.stdin.write(json.dumps(request).encode() + b"\n")
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    assert answer["id"] == 1 and "result" in answer, answer


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_session_as_closing_its_input_does(home: Path, tmp_path: Path, signum: int) -> None:
    """MCP clients SIGTERM a stdio server that has not exited soon after they closed its input: the session
    winds down as if it had been closed (the proxy's run ended and stored, the replay stored and audited)."""
    cli = [sys.executable, "-m", "otel_replay.cli"]

    def session(command: list[str]) -> int:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _initialized(process)
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
        assert b"Traceback" not in err, err.decode()
        return process.returncode

    assert session([*cli, "mcp-proxy", "--name", "signalled", "--", sys.executable, str(SERVER)]) == 0
    with Store.open() as store:
        (summary,) = store.runs(kind="original")
    assert (summary.agent, summary.step_count) == ("signalled", 1)
    report = tmp_path / "replay.json"
    assert session([*cli, "mcp-serve", summary.trace_id, "--json-file", str(report)]) == 0
    assert json.loads(report.read_text())["outcome"] == "matched"
    with Store.open() as store:
        assert [r.replay_of for r in store.runs(kind="replay")] == [summary.trace_id]
    audit = subprocess.run([*cli, "audit", "--json"], capture_output=True, text=True, timeout=60)
    assert [row["original_trace_id"] for row in json.loads(audit.stdout)] == [summary.trace_id], audit.stderr
