"""Agents the replay tests record and replay, importable as ``replay_agents:NAME``.

They live in a module (not in a test function) because a replay re-imports the recorded entrypoint. Tools
with a real side effect count their executions outside the process's memory, so a replay run by the CLI in a
subprocess is counted too: ``record_*`` / ``write_*`` / ``send_email`` append one line to a file under
``$REPLAY_TEST_SIDE_DIR``; ``wire_funds`` connects to a TCP server on 127.0.0.1:``$REPLAY_TEST_PORT``.

The ``FLEX`` dict changes what ``flex_agent`` does, so a test can record a run, change the agent and replay.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from pathlib import Path
from typing import Any

import otel_replay as orp

SIDE_DIR_ENV = "REPLAY_TEST_SIDE_DIR"
PORT_ENV = "REPLAY_TEST_PORT"


def _mark(name: str) -> None:
    side = Path(os.environ[SIDE_DIR_ENV])
    with (side / f"{name}.log").open("a", encoding="utf-8") as fh:
        fh.write(f"{name} pid={os.getpid()}\n")


def executions(name: str, side_dir: Path) -> int:
    """How many times the tool ``name`` really ran (lines in its log)."""
    path = side_dir / f"{name}.log"
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


class WireServer:
    """A TCP server on 127.0.0.1 that counts the connections made to it (the high-risk tool's side effect).

    Bounded: one daemon thread polling ``accept`` with a short timeout, each connection read with a timeout;
    :meth:`close` stops the thread and closes the socket.
    """

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port: int = self.sock.getsockname()[1]
        self.messages: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="wire-server", daemon=True)
        self._thread.start()

    @property
    def hits(self) -> int:
        with self._lock:
            return len(self.messages)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # timeout, or closed
                continue
            with conn:
                conn.settimeout(5)
                try:
                    data = conn.recv(1024)
                    conn.sendall(b"ack")
                except OSError:
                    continue
            with self._lock:
                self.messages.append(data.decode(errors="replace"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


# ------------------------------------------------------------------------------------ side-effect matrix


@orp.model("planner", provider="scripted", model="scripted-1")
def planner(prompt: str) -> dict[str, Any]:
    return {"text": f"plan: {prompt}", "usage": {"input_tokens": len(prompt.split()), "output_tokens": 3}}


@orp.tool("read_ledger", risk="read")
def read_ledger(account: str) -> dict[str, Any]:
    _mark("read_ledger")
    return {"account": account, "balance": 100}


@orp.tool("write_ledger", risk="write")
def write_ledger(account: str, amount: int) -> dict[str, Any]:
    _mark("write_ledger")
    return {"account": account, "balance": 100 - amount}


@orp.tool("wire_funds", risk="high")
def wire_funds(account: str, amount: int) -> dict[str, Any]:
    """High risk: its side effect is a hit on a local TCP server."""
    with socket.create_connection(("127.0.0.1", int(os.environ[PORT_ENV])), timeout=5) as conn:
        conn.sendall(f"wire {account} {amount}\n".encode())
        ack = conn.recv(16)
    return {"wired": amount, "ack": ack.decode()}


@orp.tool  # no risk declared: the name says it sends a message, so it is treated as high
def send_email(to: str, body: str) -> str:
    _mark("send_email")
    return "sent"


@orp.agent("matrix-agent")
def matrix_agent(account: str) -> dict[str, Any]:
    """Steps: 0 planner (model), 1 read_ledger (read), 2 write_ledger (write), 3 wire_funds (high),
    4 send_email (undeclared → high). The original run carries a recorded approval for wire_funds."""
    plan = planner(f"settle account {account}")
    read_ledger(account)
    write_ledger(account, 5)
    orp.record_approval("appr-wire-1", status="approved", approver="lead@example.com", tool="wire_funds")
    wired = wire_funds(account, 5)
    send_email("ops@example.com", f"wired {wired['wired']}")
    return {"answer": plan["text"], "wired": wired["wired"]}


# -------------------------------------------------------------------------------- changeable agent

FLEX_DEFAULTS: dict[str, Any] = {
    "prompt": "v1",
    "order": "A1",
    "extra_call": False,
    "skip_lookup": False,
    "top_k": 2,
    "docs": ("refund-policy", "shipping"),
    "skip_final": False,
}
FLEX: dict[str, Any] = dict(FLEX_DEFAULTS)


@orp.retriever("kb")
def kb(query: str, top_k: int = 2) -> list[dict[str, Any]]:
    return [{"id": d, "content": f"text of {d}", "source": f"kb://{d}"} for d in FLEX["docs"]][:top_k]


@orp.tool("lookup_order", risk="read")
def lookup_order(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "status": "delivered"}


@orp.tool("note", risk="read")
def note(text: str) -> str:
    return f"noted: {text}"


@orp.agent("flex-agent")
def flex_agent(question: str) -> dict[str, Any]:
    """Steps: 0 kb (retrieval), 1 planner (model; its prompt holds the documents), 2 lookup_order (tool),
    3 note (tool), 4 planner (model)."""
    docs = kb(question, top_k=FLEX["top_k"])
    plan = planner(f"{FLEX['prompt']} | {question} | docs: {', '.join(d['content'] for d in docs)}")
    status = "unknown"
    if not FLEX["skip_lookup"]:
        status = lookup_order(FLEX["order"])["status"]
    if FLEX["extra_call"]:
        lookup_order("B2")
    note(f"order status {status}")
    if FLEX["skip_final"]:
        return {"answer": plan["text"], "citations": [d["source"] for d in docs]}
    final = planner(f"answer: {plan['text']}")
    return {"answer": final["text"], "citations": [d["source"] for d in docs]}


@orp.agent("flex-agent")
def flex_agent_variant(question: str) -> dict[str, Any]:
    """The same agent after a prompt change (replayed with ``entrypoint=``)."""
    docs = kb(question, top_k=2)
    plan = planner(f"v2 | {question} | docs: {', '.join(d['content'] for d in docs)}")
    status = lookup_order("A1")["status"]
    note(f"order status {status}")
    final = planner(f"answer: {plan['text']}")
    return {"answer": final["text"], "citations": [d["source"] for d in docs]}


# ------------------------------------------------------------------------------------------ others


@orp.agent("async-agent")
async def async_agent(question: str) -> dict[str, Any]:
    docs = await async_kb(question)
    plan = await async_planner(f"{question} {len(docs)}")
    results = await asyncio.gather(async_lookup("A1"), async_lookup("A2"))
    return {"answer": plan["text"], "orders": [r["order_id"] for r in results]}


@orp.retriever("async_kb")
async def async_kb(query: str) -> list[dict[str, Any]]:
    await asyncio.sleep(0)
    return [{"id": "doc-1", "content": query}]


@orp.model("async_planner", provider="scripted", model="scripted-1")
async def async_planner(prompt: str) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"text": f"async plan: {prompt}"}


@orp.tool("async_lookup", risk="read")
async def async_lookup(order_id: str) -> dict[str, Any]:
    _mark("async_lookup")
    await asyncio.sleep(0)
    return {"order_id": order_id}


class InventoryTimeout(Exception):
    """A project-defined exception a flaky tool raises (replay must raise this very type again)."""


FLAKY_CALLS: dict[str, int] = {}


@orp.tool("check_inventory", risk="read")
def check_inventory(sku: str) -> dict[str, Any]:
    """Fails on the first call of each SKU in this process, then succeeds."""
    _mark("check_inventory")
    FLAKY_CALLS[sku] = FLAKY_CALLS.get(sku, 0) + 1
    if FLAKY_CALLS[sku] == 1:
        raise InventoryTimeout(f"inventory service did not answer for {sku}")
    return {"sku": sku, "in_stock": 7}


@orp.agent("retry-agent")
def retry_agent(sku: str) -> dict[str, Any]:
    for attempt in range(1, 4):
        try:
            stock = check_inventory(sku)
        except InventoryTimeout:
            orp.record_state({"stage": "retrying"}, retry_count=attempt)
            continue
        return {"answer": f"{stock['in_stock']} in stock", "attempts": attempt}
    raise RuntimeError("gave up")


@orp.tool("find_order", risk="read")
def find_order(order_id: str) -> dict[str, Any]:
    orders = {"1042": {"order_id": "1042"}}
    return dict(orders[order_id])  # KeyError for an unknown order


@orp.agent("crashing-agent")
def crashing_agent(order_id: str) -> dict[str, Any]:
    planner(f"find {order_id}")
    order = find_order(order_id)  # raises KeyError, not handled: the run ends in error
    return {"answer": order["order_id"]}


@orp.agent("inner-agent")
def inner_agent(order_id: str) -> dict[str, Any]:
    return lookup_order(order_id)


@orp.agent("outer-agent")
def outer_agent(question: str) -> dict[str, Any]:
    plan = planner(question)
    first = inner_agent("A1")
    second = inner_agent("A2")
    note(f"{first['order_id']} {second['order_id']}")
    return {"answer": plan["text"], "orders": [first["order_id"], second["order_id"]]}


@orp.tool("stamp", risk="read")
def stamp(at: str, ident: str, roll: float) -> str:
    return f"{at}/{ident}/{roll}"


@orp.agent("value-agent")
def value_agent(label: str) -> dict[str, Any]:
    at, ident, roll = orp.now(), orp.new_uuid(), orp.random()
    stamped = stamp(at.isoformat(), str(ident), roll)
    return {"answer": stamped, "at": at.isoformat(), "uuid": str(ident), "random": roll}


@orp.agent("secret-agent")
def secret_agent(question: str, *, api_key: str) -> dict[str, Any]:
    return {"answer": planner(question)["text"]}


@orp.tool("export_report", risk="read")
def export_report(rows: int) -> str:
    return "row of data " * rows


@orp.agent("big-agent")
def big_agent(rows: int) -> dict[str, Any]:
    report = export_report(rows)
    return {"answer": f"{len(report)} characters"}
