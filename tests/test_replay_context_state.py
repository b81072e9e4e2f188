"""A replay's state is its context: two replays in two threads, and a recording next to a replay, do not see
each other.

The agent below records a read tool and a high-risk tool (each real execution is written to ``LEDGER``). A
test holds a replay inside the agent (between its two tools) with two events, so the other thread acts while
that replay is certainly running; no sleeps, and a broken handshake fails the test instead of hanging it.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import otel_replay as orp
from otel_replay.recording import ReplayInterrupt
from otel_replay.replay.engine import ReplayRefused, replay_run
from otel_replay.run_model import Run
from otel_replay.storage.store import Store

LEDGER: list[str] = []
"""Real executions of the tools, in order."""

HOLD: dict[str, tuple[threading.Event, threading.Event]] = {}
"""Per agent key: (the agent reached its hold, the agent may go on). Set by a test."""

WAIT = 60
"""Seconds a handshake may take before the test fails (a deadlock guard, never a synchronisation)."""


@orp.tool("ctx_lookup", risk="read")
def lookup(key: str) -> str:
    LEDGER.append(f"lookup {key}")
    return key.upper()


@orp.tool("ctx_pay", risk="high")
def pay(amount: int) -> dict[str, int]:
    LEDGER.append(f"pay {amount}")
    return {"paid": amount}


@orp.agent("ctx-payer")
def payer(key: str, amount: int) -> dict[str, Any]:
    looked = lookup(key)
    hold = HOLD.get(key)
    if hold is not None:
        reached, go_on = hold
        reached.set()
        if not go_on.wait(WAIT):
            raise RuntimeError("the test never let the agent go on")
    return {"looked": looked, "paid": pay(amount)}


@orp.agent("ctx-plain")
def plain(key: str, amount: int) -> dict[str, Any]:
    return {"looked": lookup(key), "paid": pay(amount)}


@pytest.fixture
def clean() -> Iterator[None]:
    LEDGER.clear()
    HOLD.clear()
    yield
    for _, go_on in HOLD.values():
        go_on.set()  # never leave a replay thread waiting
    HOLD.clear()


def _record(home: Path, *calls: tuple[str, int]) -> list[Run]:
    for key, amount in calls:
        payer(key, amount)
    orp.flush()
    with Store.open() as store:
        by_key = {}
        for summary in store.runs(agent="ctx-payer", kind="original"):
            run = store.load_run(summary.trace_id)
            by_key[run.snapshots["output"]["structured"]["looked"].lower()] = run
    return [by_key[key] for key, _ in calls]


def _in_thread(target: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = target()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            box["error"] = exc

    thread = threading.Thread(target=run, name="replay-under-test")
    return thread, box


def test_two_concurrent_replays_answer_each_from_its_own_recording(home: Path, clean: None) -> None:
    first, second = _record(home, ("a", 1), ("b", 2))
    assert LEDGER == ["lookup a", "pay 1", "lookup b", "pay 2"]
    LEDGER.clear()
    HOLD["a"] = (threading.Event(), threading.Event())
    HOLD["b"] = (threading.Event(), threading.Event())

    one, one_box = _in_thread(lambda: replay_run(first, mode="mock"))
    two, two_box = _in_thread(lambda: replay_run(second, mode="mock"))
    one.start()
    two.start()
    # both replays are inside their agent at once, each between its two tools
    assert HOLD["a"][0].wait(WAIT) and HOLD["b"][0].wait(WAIT)
    HOLD["a"][1].set()
    HOLD["b"][1].set()
    one.join(WAIT)
    two.join(WAIT)

    assert "error" not in one_box and "error" not in two_box, (one_box, two_box)
    for box, original, paid in ((one_box, first, 1), (two_box, second, 2)):
        result = box["result"]
        assert result.outcome == "matched", result.divergences
        assert result.original_trace_id == original.trace_id
        assert [s.name for s in result.replay.steps] == ["ctx_lookup", "ctx_pay"]
        assert result.replay.snapshots["output"]["structured"]["paid"] == {"paid": paid}
    assert LEDGER == []  # every tool call of both replays was answered from its own recording


def test_a_thread_outside_the_replay_records_its_runs_as_usual_and_refuses_a_high_tool_outside_any_run(
    home: Path, clean: None
) -> None:
    (original,) = _record(home, ("c", 3))
    LEDGER.clear()
    HOLD["c"] = (threading.Event(), threading.Event())
    replaying, box = _in_thread(lambda: replay_run(original, mode="mock"))
    replaying.start()
    try:
        assert HOLD["c"][0].wait(WAIT)
        # This thread existed before the replay and never received its context. A run recorded here is an
        # original run of its own, its tools executed and recorded; a high tool outside any run is refused
        # while a replay runs in the process (it could be the replayed agent's, in a thread that carries no
        # context), never executed.
        assert plain("d", 4) == {"looked": "D", "paid": {"paid": 4}}
        with pytest.raises(ReplayInterrupt, match="outside any run while a replay runs"):
            pay(5)
    finally:
        HOLD["c"][1].set()
        replaying.join(WAIT)

    assert "error" not in box, box
    result = box["result"]
    assert result.outcome == "matched", result.divergences
    assert [s.name for s in result.replay.steps] == ["ctx_lookup", "ctx_pay"]
    assert LEDGER == ["lookup d", "pay 4"]  # nothing of the replay ran, and the refused call did not run
    assert pay(7) == {"paid": 7}  # once no replay runs, the same call outside a run just runs
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="ctx-plain")
        assert summary.kind == "original"
        run = store.load_run(summary.trace_id)
    assert [(s.name, s.attributes.get("otel_replay.replay.served")) for s in run.steps] == [
        ("ctx_lookup", None),
        ("ctx_pay", None),
    ]


@orp.agent("ctx-raw-thread")
def raw_thread_agent(amount: int) -> dict[str, Any]:
    """Pays from a thread started with ``_thread.start_new_thread``: it carries no context at all."""
    done = threading.Event()
    box: dict[str, Any] = {}

    def worker() -> None:
        try:
            box["paid"] = pay(amount)
        except BaseException as exc:  # noqa: BLE001 - reported in the output
            box["paid"] = f"refused: {type(exc).__name__}"
        done.set()

    _thread.start_new_thread(worker, ())
    if not done.wait(WAIT):
        raise RuntimeError("the worker never finished")
    return {"paid": box["paid"]}


def test_a_high_tool_in_a_thread_that_carries_no_context_never_runs_in_a_mock_replay(home: Path, clean: None) -> None:
    assert raw_thread_agent(8) == {"paid": {"paid": 8}}  # recorded: outside a replay the worker just pays
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="ctx-raw-thread")
        original = store.load_run(summary.trace_id)
    LEDGER.clear()
    result = replay_run(original, mode="mock")
    assert LEDGER == []  # the high tool was refused in the bare thread, not executed
    assert result.outcome != "matched"


def test_a_high_tool_called_in_the_replays_context_outside_the_run_is_refused(home: Path, clean: None) -> None:
    (original,) = _record(home, ("e", 6))
    LEDGER.clear()
    # An entrypoint that is a tool, not an agent: it is called in the replay's context, and no run begins.
    with pytest.raises(ReplayRefused, match="did not start a run"):
        replay_run(original, mode="mock", entrypoint=f"{__name__}:pay")
    assert LEDGER == []
