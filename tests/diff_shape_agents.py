"""An agent whose every diff section can differ between two runs, for the diff-shape tests.

``VARIANT`` (or the ``DIFF_SHAPE_VARIANT`` environment variable in a replaying subprocess) changes what the
agent does: variant 1 retrieves other documents, calls one more tool, walks other states, gets another safety
verdict and answers differently, so a diff of a variant-0 run against a variant-1 run fills every section.
"""

from __future__ import annotations

import os
from typing import Any

import otel_replay as orp

VARIANT_ENV = "DIFF_SHAPE_VARIANT"
VARIANT: dict[str, int] = {"value": 0}


def _variant() -> int:
    return int(os.environ.get(VARIANT_ENV, VARIANT["value"]))


@orp.retriever("shape_kb")
def shape_kb(query: str) -> list[dict[str, Any]]:
    docs = ("policy", "shipping") if _variant() == 0 else ("policy", "returns")
    return [{"id": d, "content": f"text of {d}"} for d in docs]


@orp.model("shape_planner", provider="scripted", model="scripted-1")
def shape_planner(prompt: str) -> dict[str, Any]:
    tokens = 40 if _variant() == 0 else 55
    return {
        "text": f"plan for {prompt[:20]}",
        "usage": {"input_tokens": tokens, "output_tokens": 9, "cost_usd": tokens / 100_000},
    }


@orp.tool("shape_lookup", risk="read")
def shape_lookup(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "status": "delivered"}


@orp.agent("shape-agent")
def shape_agent(question: str) -> dict[str, Any]:
    """retrieve, plan, look one order up (two in variant 1), record states and a verdict, answer."""
    variant = _variant()
    docs = shape_kb(question)
    shape_planner(question)
    shape_lookup("A1")
    if variant:
        shape_lookup("B2")
    previous = None
    for state in ("triage", "done") if variant == 0 else ("triage", "escalated"):
        orp.record_state(state, transition=f"{previous} -> {state}")
        previous = state
    orp.record_safety({"verdict": "pass" if variant == 0 else "block", "checker": "policy"})
    return {"answer": "refund approved" if variant == 0 else "refund escalated", "citations": [d["id"] for d in docs]}
