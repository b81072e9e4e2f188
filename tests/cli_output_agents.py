"""Agents the CLI output tests record and replay, importable as ``cli_output_agents:NAME``.

They live in a module (not in a test function) because a replay re-imports the recorded entrypoint.
``PAYOUTS`` counts the real executions of the write tool in this process (the CLI runs in process).
"""

from __future__ import annotations

from typing import Any

import otel_replay as orp

PAYOUTS: list[str] = []


@orp.model("drafter", provider="scripted", model="scripted-1")
def drafter(prompt: str) -> dict[str, Any]:
    return {"text": f"draft: {prompt}"}


@orp.tool("lookup_invoice", risk="read")
def lookup_invoice(invoice: str) -> dict[str, Any]:
    return {"invoice": invoice, "amount": 40}


@orp.tool("pay_out", risk="write")
def pay_out(invoice: str, amount: int) -> str:
    PAYOUTS.append(invoice)
    return f"paid {amount}"


@orp.agent("billing-agent")
def billing_agent(invoice: str) -> dict[str, Any]:
    """Steps: 0 drafter (model), 1 lookup_invoice (read tool), 2 pay_out (write tool)."""
    plan = drafter(f"settle {invoice}")
    found = lookup_invoice(invoice)
    receipt = pay_out(invoice, found["amount"])
    return {"answer": f"{plan['text']} / {receipt}"}


@orp.agent("billing-agent")
def billing_agent_broken(invoice: str) -> dict[str, Any]:
    """The same agent after a bad change: it raises in its own code once the invoice is looked up."""
    drafter(f"settle {invoice}")
    found = lookup_invoice(invoice)
    return {"answer": _total(found)}


def _total(found: dict[str, Any]) -> str:
    raise LookupError(f"no currency on invoice {found['invoice']}")  # the agent's own frame


@orp.agent("batch-agent")
def batch_agent(invoices: list[str]) -> dict[str, Any]:
    """Steps: one pay_out (write tool) per invoice."""
    return {"answer": [pay_out(invoice, 10) for invoice in invoices]}
