"""Agents for tests/test_replay_safety.py: each one exercises one way a replay could slip or leak.

Side effects go to the file named by SAFETY_LEDGER (one line per real execution), so a test can count them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import otel_replay as orp


def _ledger(line: str) -> None:
    with Path(os.environ["SAFETY_LEDGER"]).open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def executions() -> list[str]:
    """Lines written by real executions so far."""
    path = Path(os.environ["SAFETY_LEDGER"])
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@orp.tool("wire_money", risk="high")
def wire_money(amount: int) -> dict[str, Any]:
    _ledger(f"wire_money {amount}")
    return {"wired": amount, "retry_after": dt.timedelta(seconds=5)}


@orp.tool("lookup", risk="read")
def lookup(key: str) -> str:
    return key.upper()


@orp.agent("threaded-payer")
def threaded_payer(amount: int) -> dict[str, Any]:
    lookup("a")
    with ThreadPoolExecutor(max_workers=1) as pool:  # the work item carries the run's (or the replay's) context
        return pool.submit(wire_money, amount).result()


@orp.agent("payer")
def payer(amount: int) -> dict[str, Any]:
    lookup("a")
    return wire_money(amount)


def _raw_wire(amount: int) -> str:
    _ledger(f"raw_wire {amount}")
    return "sent"


wire_alias = orp.tool("wire_alias", risk="high")(_raw_wire)


@orp.agent("alias-payer")
def alias_payer(amount: int) -> str:
    return wire_alias(amount)


@orp.tool("async_wire", risk="high")
async def async_wire(amount: int) -> int:
    _ledger(f"async_wire {amount}")
    return amount


@orp.agent("async-payer")
async def async_payer(amount: int) -> int:
    await asyncio.sleep(0)
    return await async_wire(amount)


class Client:
    """An object without a useful repr: its default repr holds a memory address."""


@orp.tool("query_db", risk="read")
def query_db(client: Client, sql: str, big: int) -> int:
    return len(sql)


@orp.agent("object-args")
def object_args() -> int:
    return query_db(Client(), "select 1", 7**6000)


@orp.agent("inner-drawer")
def inner_drawer() -> str:
    return str(orp.new_uuid())


@orp.agent("drawer")
def drawer() -> str:
    first = str(orp.new_uuid())
    lookup("x")
    middle = inner_drawer()
    last = str(orp.new_uuid())
    return "|".join((first, middle, last))


@orp.agent("stateful")
def stateful(n: int) -> int:
    for i in range(n):
        orp.record_state({"i": i})
    return n
