"""Agents for tests/adversarial/test_adv_audit.py: approvals that count, risks that must not be lowered, and a
tool that can be killed right after its side effect.

Every real execution of a tool appends one line to the file named by ``ADV_AUDIT_LEDGER``, so a test counts
side effects outside the process. ``blocking_refund`` can hold a replay still right after its side effect:
when ``ADV_AUDIT_READY_FD`` / ``ADV_AUDIT_GO_FD`` name inherited pipe ends, it writes one byte to the first
(the side effect is done) and then waits to read from the second, which the test never writes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import otel_replay as orp

LEDGER_ENV = "ADV_AUDIT_LEDGER"
READY_FD_ENV = "ADV_AUDIT_READY_FD"
GO_FD_ENV = "ADV_AUDIT_GO_FD"


def _ledger(line: str) -> None:
    with Path(os.environ[LEDGER_ENV]).open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def executions() -> list[str]:
    """Lines written by real tool executions so far."""
    path = Path(os.environ[LEDGER_ENV])
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


# ------------------------------------------------------------------------------------ downgrade attempt


# The name alone says nothing risky: only the declaration makes it high.
@orp.tool("apply_discount", risk="high")
def apply_discount(order: str, percent: int) -> dict[str, Any]:
    _ledger(f"apply_discount {order} {percent}")
    return {"order": order, "percent": percent}


@orp.agent("discount-agent")
def discount_agent(order: str) -> dict[str, Any]:
    return {"answer": apply_discount(order, 10)}


# The same tool name in "current code" passed with --app, now declared read.
@orp.tool("apply_discount", risk="read")
def apply_discount_relabelled(order: str, percent: int) -> dict[str, Any]:
    _ledger(f"apply_discount {order} {percent}")
    return {"order": order, "percent": percent}


@orp.agent("discount-agent")
def discount_agent_relabelled(order: str) -> dict[str, Any]:
    return {"answer": apply_discount_relabelled(order, 10)}


@orp.tool  # undeclared: the name says it sends a message
def sendsms(to: str) -> str:
    _ledger(f"sendsms {to}")
    return "sent"


@orp.agent("discount-agent")
def discount_agent_texting(order: str) -> dict[str, Any]:
    """The current code calls a tool the recording never had."""
    sendsms("+100")
    return {"answer": order}


# ------------------------------------------------------------------------------------- counted approvals


@orp.tool("credit_account", risk="write")
def credit_account(account: str, amount: int) -> dict[str, Any]:
    _ledger(f"credit_account {account} {amount}")
    return {"account": account, "credited": amount}


@orp.agent("batch-agent")
def batch_agent(account: str) -> dict[str, Any]:
    """Three calls of the same write tool in one run."""
    return {"answer": [credit_account(account, n)["credited"] for n in (1, 2, 3)]}


# ------------------------------------------------------------------------------ killed after the effect


@orp.tool("blocking_refund", risk="high")
def blocking_refund(order: str) -> str:
    _ledger(f"blocking_refund {order}")
    ready, go = os.environ.get(READY_FD_ENV), os.environ.get(GO_FD_ENV)
    if ready and go:
        os.write(int(ready), b"!")  # the side effect happened
        os.read(int(go), 1)  # held here until the test kills the process
    return "refunded"


@orp.agent("refund-agent")
def refund_agent(order: str) -> dict[str, Any]:
    return {"answer": blocking_refund(order)}


def replay_live_from_file(path: str, approvals: list[str], reason: str) -> None:
    """A live replay, in this process, of the run saved as OTLP JSON at ``path``: the store stays closed here,
    so another process may read the audit while this replay is held inside ``blocking_refund``."""
    import json

    from otel_replay.otlp_json import from_otlp_json
    from otel_replay.replay.engine import replay_run
    from otel_replay.runs import build_run

    original = build_run(from_otlp_json(json.loads(Path(path).read_text(encoding="utf-8"))))
    replay_run(
        original,
        mode="live",
        approvals=approvals,
        reason=reason,
        actor="kill-test",
        entrypoint="adv_audit_agents:refund_agent",
    )
