"""Agents and checks shared by the fault tests (``tests/test_faults_*.py``) and the child processes they start.

Every value an agent sees or returns carries its run's marker (``<…>``), so a step recorded under the wrong run
shows up as a foreign marker in that run's snapshots. ``spans_of(tools)`` is the exact number of spans one run
records: the root, a retrieval, a model call, ``tools`` tool calls, a nested agent and its tool call.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace

import otel_replay as orp

MARKER = re.compile(r"<[A-Za-z0-9_.-]+>")
"""What a run marker looks like inside any payload."""


def spans_of(tools: int) -> int:
    """Spans recorded by one run of :func:`fault_agent` / :func:`fault_agent_async` with ``tools`` tool calls."""
    return tools + 5


def _trace_id() -> str:
    return format(trace.get_current_span().get_span_context().trace_id, "032x")


@orp.retriever("kb_search")
def kb_search(query: str, top_k: int = 2) -> list[dict[str, Any]]:
    return [{"id": f"{query}-d{i}", "content": f"doc {i} about {query}", "score": 1 - i / 10} for i in range(top_k)]


@orp.model(provider="fake", model="fake-1")
def chat(messages: list[dict[str, str]]) -> dict[str, Any]:
    text = messages[-1]["content"]
    return {"text": f"answer to {text}", "usage": {"prompt_tokens": len(text), "completion_tokens": 3}}


@orp.tool(risk="read")
def lookup(key: str) -> str:
    return key.upper()


@orp.agent("fault-sub")
def sub_agent(task: str) -> str:
    return lookup(f"{task}/sub")


@orp.agent("fault-agent")
def fault_agent(marker: str, tools: int = 2, pad: str = "", pause: float = 0.0) -> dict[str, str]:
    """One run: retrieve, ask the model, call ``tools`` tools, call a nested agent (sleeping ``pause`` seconds
    between steps, so that concurrent runs interleave). Returns its trace id."""
    docs = kb_search(marker)
    time.sleep(pause)
    reply = chat([{"role": "user", "content": f"{marker} {docs[0]['content']} {pad}"}])
    for i in range(tools):
        time.sleep(pause)
        lookup(f"{marker}/{i}")
    sub_agent(marker)
    return {"marker": marker, "trace_id": _trace_id(), "reply": reply["text"][:80]}


@orp.retriever("kb_search")
async def kb_search_async(query: str, top_k: int = 2) -> list[dict[str, Any]]:
    await asyncio.sleep(0)
    return [{"id": f"{query}-d{i}", "content": f"doc {i} about {query}", "score": 1 - i / 10} for i in range(top_k)]


@orp.model(provider="fake", model="fake-1")
async def chat_async(messages: list[dict[str, str]]) -> dict[str, Any]:
    await asyncio.sleep(0)
    text = messages[-1]["content"]
    return {"text": f"answer to {text}", "usage": {"prompt_tokens": len(text), "completion_tokens": 3}}


@orp.tool("lookup", risk="read")
async def lookup_async(key: str) -> str:
    await asyncio.sleep(0)
    return key.upper()


@orp.agent("fault-sub")
async def sub_agent_async(task: str) -> str:
    return await lookup_async(f"{task}/sub")


@orp.agent("fault-agent")
async def fault_agent_async(marker: str, tools: int = 2, pad: str = "", pause: float = 0.0) -> dict[str, str]:
    """:func:`fault_agent` with every step awaited (so concurrent tasks interleave inside a run)."""
    docs = await kb_search_async(marker)
    await asyncio.sleep(pause)
    reply = await chat_async([{"role": "user", "content": f"{marker} {docs[0]['content']} {pad}"}])
    for i in range(tools):
        await asyncio.sleep(pause)
        await lookup_async(f"{marker}/{i}")
    await sub_agent_async(marker)
    return {"marker": marker, "trace_id": _trace_id(), "reply": reply["text"][:80]}


# ------------------------------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class Expected:
    """A run the agent finished (and, for the kill tests, flushed): its trace, marker and span count."""

    trace_id: str
    marker: str
    spans: int


def append_line(fd: int, runs: list[Expected]) -> None:
    """Append runs to a side file with one write and an fsync (what a killed process wrote is on disk)."""
    if runs:
        os.write(fd, "".join(json.dumps(run.__dict__) + "\n" for run in runs).encode())
        os.fsync(fd)


def read_side_file(path: Path) -> list[Expected]:
    """Runs listed in a side file; a last line cut short by a kill is ignored."""
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.split("\n")[:-1]  # complete lines only
    return [Expected(**json.loads(line)) for line in lines]


def span_counts(store: orp.Store) -> Counter[tuple[str, str]]:
    """How many rows each (TraceId, SpanId) has in the store."""
    rows = store.client.query(
        f"SELECT TraceId, SpanId, count() FROM {store.traces_table} GROUP BY TraceId, SpanId"
    ).result_rows
    return Counter({(row[0], row[1]): int(row[2]) for row in rows})


def assert_stored_exactly_once(store: orp.Store, runs: list[Expected]) -> Counter[tuple[str, str]]:
    """No (TraceId, SpanId) is stored twice, and every run of ``runs`` has all of its spans."""
    counts = span_counts(store)
    duplicated = {key: n for key, n in counts.items() if n != 1}
    assert not duplicated, f"spans stored more than once: {sorted(duplicated.items())[:5]}"
    per_trace = Counter(trace_id for trace_id, _ in counts)
    incomplete = [
        (run.marker, run.spans, per_trace[run.trace_id]) for run in runs if per_trace[run.trace_id] != run.spans
    ]
    assert not incomplete, (
        f"{len(incomplete)} of {len(runs)} runs incomplete (marker, expected, stored): {incomplete[:5]}"
    )
    return counts
