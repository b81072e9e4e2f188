"""Agents the regression-case tests record, importable as ``case_agents:NAME``.

``DESK`` changes what ``desk_agent`` does, so a test can record a run, change the agent and run its case.
"""

from __future__ import annotations

from typing import Any

import otel_replay as orp

DESK_DEFAULTS: dict[str, Any] = {"refund_cents": 1500, "greeting": "Hello"}
DESK: dict[str, Any] = dict(DESK_DEFAULTS)


@orp.model("desk_llm", provider="scripted", model="scripted-1")
def desk_llm(prompt: str) -> dict[str, Any]:
    return {"text": f"{DESK['greeting']}: {prompt}", "usage": {"input_tokens": len(prompt.split()), "output_tokens": 4}}


@orp.tool("find_order", risk="read")
def find_order(order_id: str, api_key: str) -> dict[str, Any]:
    """Reads an order with a credential: the key must never reach a snapshot or a case file."""
    return {"order_id": order_id, "paid_cents": 1500, "authorised": api_key.startswith("sk-")}


@orp.tool("refund", risk="write")
def refund(order_id: str, cents: int) -> dict[str, Any]:
    return {"order_id": order_id, "refunded_cents": cents}


@orp.agent("desk-agent")
def desk_agent(question: str, *, api_key: str) -> dict[str, Any]:
    """Steps: 0 find_order (tool), 1 desk_llm (model), 2 refund (write tool), 3 desk_llm (model)."""
    order = find_order(question.split()[-1], api_key=api_key)
    plan = desk_llm(f"refund {order['order_id']}?")
    done = refund(order["order_id"], DESK["refund_cents"])
    final = desk_llm(f"refunded {done['refunded_cents']} cents")
    return {"answer": final["text"], "plan": plan["text"], "refunded_cents": done["refunded_cents"]}
