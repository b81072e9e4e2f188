"""The demo agent: a support desk that answers order questions and issues refunds.

Everything runs offline: the "model" is a scripted policy, retrieval scores a small bundled corpus by word
overlap, orders live in a dict. It exercises every part of the recording API: config with a (fake) secret
that must be redacted, identity, an attached file, retrieval, context and state snapshots, a read tool, a
flaky read tool that fails once and is retried, a high-risk write tool behind a recorded approval, a safety
verdict, and a run that ends in an error (an unknown order the agent does not handle).

The refund tool has a real side effect: it appends a line to ``refunds.log`` in the otel-replay home, so a
replay that must not execute it can be checked.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import otel_replay as orp
from otel_replay import settings

MODEL = "demo-scripted-1"

CONFIG = {
    "model": MODEL,
    "prompt_version": "support-v3",
    "route_policy": "kb-first",
    "tool_policy": {"issue_refund": "needs-approval"},
    "budget": {"max_steps": 12, "max_cost_usd": 0.05},
    # A planted credential: it must never appear in the spool, the store or any output.
    "api_key": "sk-demo-" + "9f3Kx7Qw2Lm8Zp4Rt6Yv1Nb5",
}

ORDERS: dict[str, dict[str, Any]] = {
    "1042": {"order_id": "1042", "status": "delivered", "item": "kettle", "sku": "KT-200", "amount_eur": 89.0},
    "2077": {"order_id": "2077", "status": "in transit", "item": "headphones", "sku": "HP-77", "amount_eur": 249.0},
}

flaky_calls: dict[str, int] = {}


def _corpus() -> list[dict[str, str]]:
    docs = []
    for entry in sorted(resources.files("otel_replay.demo").joinpath("corpus").iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".md"):
            docs.append(
                {
                    "id": entry.name.removesuffix(".md"),
                    "content": entry.read_text(encoding="utf-8"),
                    "source": f"kb://{entry.name}",
                }
            )
    return docs


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3}


@orp.retriever("kb_search")
def kb_search(query: str, *, top_k: int = 2, filters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Score the bundled corpus by word overlap with the query."""
    wanted = _words(query)
    scored: list[dict[str, Any]] = []
    for doc in _corpus():
        overlap = len(wanted & _words(doc["content"]))
        if overlap:
            scored.append({**doc, "score": round(overlap / max(len(wanted), 1), 3)})
    scored.sort(key=lambda d: (-d["score"], d["id"]))
    return scored[:top_k]


@orp.model("support_llm", provider="scripted", model=MODEL)
def support_llm(messages: list[dict[str, str]], *, temperature: float = 0.0) -> dict[str, Any]:
    """A scripted stand-in for a chat model: decides the next action from the conversation."""
    question = messages[-1]["content"].lower()
    order = re.search(r"\b(\d{4})\b", question)
    if messages[-1]["role"] == "tool":
        text = messages[-1]["content"]
        action = {"action": "answer", "text": text}
    elif "refund" in question and order:
        action = {"action": "refund", "order_id": order.group(1)}
    elif order:
        action = {"action": "status", "order_id": order.group(1)}
    else:
        action = {"action": "answer", "text": "I can help with orders, refunds and warranty questions."}
    prompt_tokens = sum(len(m["content"].split()) for m in messages) + 12
    return {
        "model": MODEL,
        "choices": [{"message": action, "finish_reason": "stop"}],
        "usage": {"input_tokens": prompt_tokens, "output_tokens": 9},
        "cost_usd": round(prompt_tokens * 2e-6, 8),
    }


@orp.tool("lookup_order", risk="read", schema_version="1")
def lookup_order(order_id: str) -> dict[str, Any]:
    """Read an order."""
    return dict(ORDERS[order_id])  # KeyError for an unknown order: the demo's bug


@orp.tool("check_inventory", risk="read", schema_version="1")
def check_inventory(sku: str) -> dict[str, Any]:
    """Read stock for a SKU; the warehouse service times out on the first call of each SKU."""
    flaky_calls[sku] = flaky_calls.get(sku, 0) + 1
    if flaky_calls[sku] == 1:
        raise TimeoutError(f"inventory service did not answer for {sku}")
    return {"sku": sku, "in_stock": 14}


@orp.tool("issue_refund", risk="high", schema_version="2")
def issue_refund(order_id: str, amount_eur: float) -> dict[str, Any]:
    """Issue a refund: a real side effect, one line appended to ``refunds.log`` in the otel-replay home."""
    ledger = settings.resolve_home() / "refunds.log"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with ledger.open("a", encoding="utf-8") as fh:
        fh.write(f"refund order={order_id} amount_eur={amount_eur}\n")
    return {"order_id": order_id, "refunded_eur": amount_eur, "status": "issued"}


SYSTEM_RULES = "You are a support agent. Cite the knowledge base. Never refund without an approval."


@orp.agent("support-agent", config=CONFIG)
def support_agent(question: str, *, customer: str = "anonymous", receipt: bytes | None = None) -> dict[str, Any]:
    """Answer one customer question (with the customer's receipt, when they sent one)."""
    return support(question, customer=customer, receipt=receipt, fixed=False)


@orp.agent("support-agent", config=CONFIG)
def support_agent_fixed(question: str, *, customer: str = "anonymous", receipt: bytes | None = None) -> dict[str, Any]:
    """The same agent after the fix for the demo's bug: an unknown order id gets an answer, not a crash."""
    return support(question, customer=customer, receipt=receipt, fixed=True)


def support(question: str, *, customer: str, receipt: bytes | None, fixed: bool) -> dict[str, Any]:
    if receipt is not None:
        orp.attach_file(receipt, name="receipt.txt", media_type="text/plain")
    orp.record_state({"stage": "received", "customer": customer}, transition="start->received")
    docs = kb_search(question, top_k=2)
    citations = [d["source"] for d in docs]
    history = [{"role": "system", "content": SYSTEM_RULES}, {"role": "user", "content": question}]
    orp.record_context(system_rules=SYSTEM_RULES, rag_context=[d["content"] for d in docs], history=history)
    decision = support_llm(history)["choices"][0]["message"]
    orp.record_state({"stage": "decided", "action": decision["action"]}, transition="received->decided")

    if fixed and decision["action"] in ("status", "refund") and decision["order_id"] not in ORDERS:
        orp.record_state({"stage": "unknown-order", "order_id": decision["order_id"]}, transition="decided->unknown")
        text = f"I cannot find order {decision['order_id']}; please check the number on your confirmation email."
    elif decision["action"] == "status":
        order = lookup_order(decision["order_id"])
        stock = _with_retry(check_inventory, order["sku"])
        text = f"Order {order['order_id']} ({order['item']}) is {order['status']}; {stock['in_stock']} in stock."
    elif decision["action"] == "refund":
        order = lookup_order(decision["order_id"])
        orp.record_approval(
            f"appr-{order['order_id']}", status="approved", approver="lead@support", tool="issue_refund"
        )
        refund = issue_refund(order["order_id"], order["amount_eur"])
        text = f"Refund of {refund['refunded_eur']} EUR for order {order['order_id']} is {refund['status']}."
    else:
        text = decision["text"]

    history.append({"role": "tool", "content": text})
    final = support_llm(history)["choices"][0]["message"]["text"]
    orp.record_safety({"verdict": "pass", "checker": "demo-policy", "checks": ["no-pii", "cited"]})
    orp.record_state({"stage": "answered"}, transition="decided->answered")
    return {"answer": final, "citations": citations}


def _with_retry(func: Any, *args: Any, attempts: int = 3) -> Any:
    for attempt in range(1, attempts + 1):
        try:
            return func(*args)
        except TimeoutError:
            orp.record_state({"stage": "retrying", "tool": func.__name__}, retry_count=attempt)
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


QUESTIONS: list[tuple[str, str]] = [
    ("Where is my order 1042?", "ana"),
    ("Please refund order 2077, it arrived broken.", "ben"),
    ("Refund order 9999 please, it never came.", "chen"),
]

RECEIPT = b"receipt for order 2077: headphones, 249.00 EUR, card ****4242\n"


def run_demo() -> list[tuple[str, str | None]]:
    """Run the three demo conversations; returns (question, error or None) for each."""
    outcomes: list[tuple[str, str | None]] = []
    for i, (question, customer) in enumerate(QUESTIONS):
        receipt = RECEIPT if "2077" in question else None
        with orp.identity(tenant="acme-eu", role="customer", session=f"demo-session-{i + 1}"):
            try:
                support_agent(question, customer=customer, receipt=receipt)
            except Exception as exc:  # noqa: BLE001 - the demo's third run fails on purpose
                outcomes.append((question, f"{type(exc).__name__}: {exc}"))
                continue
        outcomes.append((question, None))
    orp.flush()
    return outcomes
