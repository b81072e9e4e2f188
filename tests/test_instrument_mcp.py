"""MCP instrumentation in process: the real ``mcp`` client against a real ``MCPServer`` (the SDK's FastMCP)
served over streamable HTTP and SSE on loopback by uvicorn in a thread, and over stdio, recorded into a real store
and replayed. The server is stopped before the offline replays, so a replay that opened a connection would fail.

The agents live in this module (``test_instrument_mcp:NAME``) because a replay imports the entrypoint again.
``CALLS`` counts the server's real tool executions. The transports are looked up on their modules when called
(``mcp.client.stdio.stdio_client``): this module is imported before the instrumentor is turned on, and a name
imported from ``mcp`` before that is the unwrapped function (a replay turns the instrumentor on before it imports
the agent, so an agent's own ``from mcp.client.stdio import stdio_client`` gets the wrapped one).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.client.sse
import mcp.client.stdio
import mcp.client.streamable_http
import pytest
import uvicorn
from mcp import ClientSession, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation import uninstrument
from otel_replay.storage.store import Store

CALLS: Counter[str] = Counter()
URL: dict[str, str] = {}
STDIO_SERVER = Path(__file__).parent / "realworld" / "rw_mcp_server.py"
SECRET = "sk-live-" + "7" * 40

server = MCPServer("Desk")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup_order(order_id: str) -> str:
    CALLS["lookup_order"] += 1
    return f"order {order_id}: delivered"


@server.tool()
def file_ticket(order_id: str) -> str:
    CALLS["file_ticket"] += 1
    return f"ticket for {order_id}"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def close_account(user: str) -> str:
    CALLS["close_account"] += 1
    return f"closed {user}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def send_report(to: str) -> str:  # says read-only; its name says it sends
    CALLS["send_report"] += 1
    return f"sent to {to}"


@server.resource("policy://refunds")
def refund_policy() -> str:
    return "Damaged orders are refunded in full."


@server.prompt()
def triage(order_id: str) -> str:
    return f"Check order {order_id}."


def _text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


async def _session_work(session: ClientSession, tools: tuple[str, ...]) -> list[str]:
    await session.initialize()
    listed = await session.list_tools()
    policy = await session.read_resource("policy://refunds")
    prompt = await session.get_prompt("triage", {"order_id": "A-1"})
    out = [str(len(listed.tools)), policy.contents[0].text, prompt.messages[0].content.text]
    for name in tools:
        arguments = {"user": "ada"} if name == "close_account" else {"to": "ops"} if name == "send_report" else {}
        arguments = arguments or {"order_id": "A-1"}
        out.append(_text(await session.call_tool(name, arguments)))
    return out


@orp.agent("mcp-http")
async def ask_http(transport: str, tools: list[str]) -> list[str]:
    if transport == "sse":
        async with mcp.client.sse.sse_client(URL["sse"]) as (read, write), ClientSession(read, write) as session:
            return await _session_work(session, tuple(tools))
    async with (
        mcp.client.streamable_http.streamable_http_client(URL["http"]) as (read, write),
        ClientSession(read, write) as session,
    ):
        return await _session_work(session, tuple(tools))


@orp.agent("mcp-stdio")
async def ask_stdio(order_id: str) -> str:
    params = StdioServerParameters(command=sys.executable, args=[str(STDIO_SERVER), f"--api-key={SECRET}"])
    async with mcp.client.stdio.stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return _text(await session.call_tool("lookup_order", {"order_id": order_id}))


class _Served:
    """The module's server on loopback (streamable HTTP at ``/mcp``, SSE at ``/sse``) in a thread."""

    def __init__(self, transport: str) -> None:
        app = server.streamable_http_app() if transport == "http" else server.sse_app()
        self.uvicorn = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
        self.thread = threading.Thread(target=self.uvicorn.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.uvicorn.started:
            threading.Event().wait(0.01)
        port = self.uvicorn.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.uvicorn.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def mcp_on(home: Path) -> Iterator[None]:
    CALLS.clear()
    assert orp.instrument("mcp") == ["mcp"]
    yield
    uninstrument("mcp")


def _last_run(agent: str) -> orp.Run:
    orp.flush()
    with Store.open() as store:
        return store.load_run(store.runs(agent=agent, kind="original")[0].trace_id)


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_session_calls_are_steps_and_offline_replays_open_no_connection(mcp_on: None, transport: str) -> None:
    tools = ["lookup_order", "file_ticket"]
    with _Served(transport) as base:
        URL["http"], URL["sse"] = f"{base}/mcp", f"{base}/sse"
        out = asyncio.run(ask_http(transport, tools))
    assert out == [
        "4",
        "Damaged orders are refunded in full.",
        "Check order A-1.",
        "order A-1: delivered",
        "ticket for A-1",
    ]
    run = _last_run("mcp-http")
    assert [(s.kind, s.name, s.attributes.get(semconv.TOOL_RISK)) for s in run.steps] == [
        ("retrieval", "mcp tools/list", None),
        ("retrieval", "mcp resources/read", None),
        ("retrieval", "mcp prompts/get", None),
        ("tool", "lookup_order", "read"),
        ("tool", "file_ticket", "write"),
    ]
    lookup = run.steps[3]
    assert lookup.attributes[semconv.MCP_METHOD_NAME] == "tools/call"
    assert lookup.attributes[semconv.GEN_AI_TOOL_NAME] == "lookup_order"
    assert lookup.attributes[semconv.MCP_PROTOCOL_VERSION]
    assert lookup.attributes[semconv.MCP_SERVER] == f"http: {URL[transport]}"
    assert run.steps[1].attributes[semconv.MCP_RESOURCE_URI] == "policy://refunds"
    assert lookup.snapshots["tool"]["arguments"] == {"order_id": "A-1"}
    assert lookup.snapshots["tool"]["result"]["content"][0]["text"] == "order A-1: delivered"
    assert CALLS == {"lookup_order": 1, "file_ticket": 1}
    # the server is gone: an offline replay that connected would fail
    for mode in ("mock", "deterministic"):
        result = orp.replay(run.trace_id, mode=mode, entrypoint="test_instrument_mcp:ask_http")
        assert result.outcome == "matched", result.divergences
        assert result.agent_error is None
    assert CALLS == {"lookup_order": 1, "file_ticket": 1}
    dry = orp.replay(run.trace_id, mode="dry")
    assert dry.readiness is not None
    assert dry.readiness["servers"] == [
        {
            "server": f"http: {URL[transport]}",
            "steps": [0, 1, 2, 3, 4],
            "offline": "answered from the recording, not started",
            "live": "started",
        }
    ]
    assert dry.readiness["modes"]["live"]["needs_approval"] == ["file_ticket"]


def test_risk_is_the_servers_annotation_never_below_the_name_rule_and_tool_risks_wins(mcp_on: None) -> None:
    tools = ["lookup_order", "file_ticket", "close_account", "send_report"]
    with _Served("http") as base:
        URL["http"] = f"{base}/mcp"
        asyncio.run(ask_http("http", tools))
        risks = {s.name: s.attributes[semconv.TOOL_RISK] for s in _last_run("mcp-http").steps if s.kind == "tool"}
        # readOnlyHint, no annotation, destructiveHint, and readOnlyHint on a tool whose name says it sends
        assert risks == {"lookup_order": "read", "file_ticket": "write", "close_account": "high", "send_report": "high"}
        uninstrument("mcp")
        orp.instrument("mcp", tool_risks={"file_ticket": "read", "lookup_order": "high"})
        asyncio.run(ask_http("http", tools))
        risks = {s.name: s.attributes[semconv.TOOL_RISK] for s in _last_run("mcp-http").steps if s.kind == "tool"}
    assert risks == {"lookup_order": "high", "file_ticket": "read", "close_account": "high", "send_report": "high"}


def test_stdio_server_is_named_without_the_secret_in_its_arguments(mcp_on: None, tmp_path: Path) -> None:
    assert asyncio.run(ask_stdio("A-9")) == "order A-9: delivered, damaged in transit"
    run = _last_run("mcp-stdio")
    (step,) = run.steps
    named = step.attributes[semconv.MCP_SERVER]
    assert named.startswith("stdio: python") and "rw_mcp_server.py --api-key=" in named, named
    assert SECRET not in named and SECRET[8:20] not in named
    result = orp.replay(run.trace_id, mode="mock", entrypoint="test_instrument_mcp:ask_stdio")
    assert result.outcome == "matched", result.divergences


def test_uninstrument_puts_the_client_back(mcp_on: None) -> None:
    assert hasattr(ClientSession.call_tool, "__wrapped__")
    uninstrument("mcp")
    assert not hasattr(ClientSession.call_tool, "__wrapped__")
    assert not hasattr(mcp.client.stdio.stdio_client, "__wrapped__") or not hasattr(
        mcp.client.stdio.stdio_client, "_self_wrapper"
    )
    orp.instrument("mcp")


@orp.agent("mcp-unrecorded")
async def ask_templates() -> int:
    """A call the instrumentor does not record (``list_resource_templates``): its replay reaches the stand-in."""
    async with (
        mcp.client.streamable_http.streamable_http_client(URL["http"]) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return len((await session.list_resource_templates()).resource_templates)


def test_a_call_the_recording_cannot_answer_is_refused_by_the_stand_in_and_never_matched(mcp_on: None) -> None:
    with _Served("http") as base:
        URL["http"] = f"{base}/mcp"
        assert asyncio.run(ask_templates()) == 0
    run = _last_run("mcp-unrecorded")
    assert run.steps == ()
    result = orp.replay(run.trace_id, mode="mock", entrypoint="test_instrument_mcp:ask_templates")
    assert result.outcome == "diverged"
    (unanswerable,) = [d for d in result.divergences if d.kind == "unanswerable"]
    assert "resources/templates/list has no recorded step" in unanswerable.reason
    assert result.agent_error is not None  # the client got the stand-in's error: nothing was made up
