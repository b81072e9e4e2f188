"""The recorded write/high tools of a run (otel_replay.replay.safety.riskytools): the approvals a live replay needs
before it starts, the watch that sees a recorded risky tool run with no tool step, and what a dry replay can
tell about the current code from its source alone. End to end through real agents:
tests/adversarial/test_adv_undeclared_tools.py."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from otel_replay import semconv
from otel_replay.replay.safety.approvals import Approvals
from otel_replay.replay.safety.riskytools import UndeclaredWatch, declared_now, recorded_risky, unapproved
from otel_replay.runs import Run


def run_of(*steps: tuple[str, str, str | None]) -> Run:
    """A stand-in run with ``(kind, name, risk)`` steps, indexed in order."""
    made = [
        SimpleNamespace(index=i, kind=kind, name=name, attributes={semconv.TOOL_RISK: risk} if risk else {})
        for i, (kind, name, risk) in enumerate(steps)
    ]
    return cast(Run, SimpleNamespace(steps=made))


RUN = run_of(
    ("model", "openai.chat.completions", None),
    ("tool", "lookup", "read"),
    ("tool", "book_table", "write"),
    ("tool", "book_table", "write"),
    ("tool", "legacy", None),  # no recorded risk: counts as high
    ("model", "openai.chat.completions", None),
)


def test_every_recorded_write_or_high_tool_needs_an_approval_and_earlier_steps_none() -> None:
    risky = recorded_risky(RUN)
    assert {name: (t.risk, t.step_index, t.calls) for name, t in risky.items()} == {
        "book_table": ("write", 2, 2),
        "legacy": ("high", 4, 1),
    }
    assert risky["book_table"].approve_flag == "--approve book_table:2"
    assert [t.name for t in unapproved(RUN, None, Approvals())] == ["book_table", "legacy"]
    assert [t.name for t in unapproved(RUN, None, Approvals(["book_table"]))] == ["legacy"]
    assert unapproved(RUN, None, Approvals(["book_table:*", "legacy"])) == []
    # --from-step 3: the first booking is answered from the recording; the second still needs an approval.
    assert {t.name: t.calls for t in unapproved(RUN, 3, Approvals())} == {"book_table": 1, "legacy": 1}
    assert unapproved(RUN, 5, Approvals()) == []


def _asks(*calls: tuple[str, str]) -> dict[str, Any]:
    return {
        "choices": [
            {
                "message": {
                    "tool_calls": [{"id": i, "type": "function", "function": {"name": n}} for n, i in calls],
                }
            }
        ]
    }


def _carries(*ids: str) -> str:
    return json.dumps({"messages": [{"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids]})


def test_the_watch_sees_a_risky_tool_run_with_no_tool_step() -> None:
    watch = UndeclaredWatch(RUN)
    watch.answered(_asks(("lookup", "c0"), ("book_table", "c1")))
    # a read tool is not watched; the booking's result going back with no tool step of it is
    tool = watch.carried(_carries("c0", "c1"))
    assert tool is not None and (tool.name, tool.risk, tool.step_index) == ("book_table", "write", 2)
    assert [t.name for t in watch.unanswered()] == ["book_table"]
    watch.tool_step("book_table")
    assert watch.carried(_carries("c0", "c1")) is None and watch.unanswered() == []
    # asked again: its result not back yet, but by the end of the run no tool step answered it
    watch.answered_text(json.dumps(_asks(("book_table", "c2"))))
    assert watch.carried(_carries("c1")) is None
    assert [t.name for t in watch.unanswered()] == ["book_table"]


def test_the_watch_counts_risky_tools_called_in_model_written_code() -> None:
    """A code agent's run (marked by its instrumentor, naming its tools): a risky tool the live model's code
    calls with no tool step is unanswered by the end of the run, unless the replay saw it as a step, or the
    current code instruments the framework (every call the code reaches is a step: a branch not taken)."""
    run = run_of(("model", "openai.chat.completions", None), ("tool", "book_table", "write"))
    run.attributes = {semconv.RUN_EXECUTES_CODE: True, semconv.RUN_CODE_TOOLS: '["book_table", "lookup"]'}  # type: ignore[misc]
    code = {"choices": [{"message": {"content": '<code>\nif busy:\n    book_table(restaurant="x")\n</code>'}}]}
    watch = UndeclaredWatch(run)
    watch.answered_text(json.dumps(code))
    assert watch.carried(_carries("c0")) is None  # no id to follow: never stopped before a model call
    assert [t.name for t in watch.unanswered()] == ["book_table"]
    assert watch.unanswered(code_firewalled=True) == []
    watch.tool_step("book_table")  # a step of it: the tool is firewalled now, a call not reached is no run
    watch.answered_text(json.dumps(code))
    assert watch.unanswered() == []
    plain = UndeclaredWatch(run_of(("model", "openai.chat.completions", None), ("tool", "book_table", "write")))
    plain.answered_text(json.dumps(code))  # not a code agent's run: code is only text
    assert plain.unanswered() == []


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OTEL_REPLAY_TRUSTED_MODULES", raising=False)
    return tmp_path


def _module(folder: Path, name: str, source: str) -> str:
    (folder / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    assert name not in sys.modules
    return name


def test_dry_reads_the_decorator_from_the_source_without_importing(project: Path) -> None:
    module = _module(
        project,
        "rt_booking_agent",
        """
        import otel_replay as orp
        from otel_replay import tool as declare
        from agents import function_tool

        raise SystemExit("imported")  # a dry replay never runs this


        @function_tool
        @orp.tool(risk="write")
        def book_table(restaurant: str) -> str: ...


        @declare("cancel", risk="high")
        async def cancel_table(restaurant: str) -> str: ...


        @function_tool
        def pay_bill(amount: int) -> str: ...


        class Booker:
            @orp.tool
            def move_table(self) -> None: ...
        """,
    )
    assert declared_now(f"{module}:book_table") is True
    assert declared_now(f"{module}:cancel_table") is True
    assert declared_now(f"{module}:Booker.move_table") is True
    assert declared_now(f"{module}:pay_bill") is False  # decorated, but not by otel-replay
    assert declared_now(f"{module}:gone") is None  # renamed or removed: cannot tell
    assert declared_now(f"{module}:run.<locals>.inner") is None
    assert declared_now(None) is None and declared_now("no-colon") is None
    assert module not in sys.modules


def test_dry_does_not_read_code_a_replay_would_not_run(project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    module = _module(elsewhere, "rt_outside_agent", "import otel_replay as orp\n\n@orp.tool\ndef book(): ...\n")
    sys.path.insert(0, str(elsewhere))
    try:
        assert declared_now(f"{module}:book") is None  # outside the project folder, not trusted
        assert declared_now("os:system") is None  # the standard library
    finally:
        sys.path.remove(str(elsewhere))


_END_AGENT = """
import os

import otel_replay as orp


@orp.model("planner", provider="scripted", model="scripted-1")
def planner(prompt: str) -> dict:
    return {"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "book_table"}}]}


def _book(restaurant: str) -> str:
    with open(os.environ["RT_BOOKINGS"], "a", encoding="utf-8") as bookings:
        bookings.write(restaurant + "\\n")
    return "booked"


book_table = orp.tool("book_table", risk="write")(_book)


@orp.agent("end-agent")
def run(question: str) -> str:
    planner(question)
    return book_table("Chez Paul")  # the result never goes back to a model


@orp.agent("end-agent")
def run_undeclared(question: str) -> str:
    planner(question)
    return _book("Chez Paul")  # the same tool, its declaration removed
"""


def test_a_risky_tool_asked_for_and_never_answered_by_a_step_ends_a_live_replay_refused(
    project: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import otel_replay as orp

    bookings = project / "bookings.txt"
    monkeypatch.setenv("RT_BOOKINGS", str(bookings))
    module = _module(project, "rt_end_agent", _END_AGENT)
    monkeypatch.syspath_prepend(str(project))
    try:
        agent = __import__(module)
        agent.run("book")
        orp.flush()
        with orp.Store.open() as store:
            trace_id = store.runs(kind="original", limit=1)[0].trace_id
        result = orp.replay(
            trace_id,
            mode="live",
            approvals=["book_table"],
            reason="the booking after the decorator went",
            entrypoint=f"{module}:run_undeclared",
        )
    finally:
        sys.modules.pop(module, None)
    # The run completed; the model asked for the recorded write tool and no tool step answered it.
    assert bookings.read_text(encoding="utf-8").splitlines() == ["Chez Paul", "Chez Paul"]
    assert result.outcome == "refused" and result.unfirewalled_risky == ("book_table",)
    assert result.refusal is not None and "no tool step of that name answered it" in result.refusal
    assert {d.kind for d in result.divergences} == {"undeclared_tool"}
    assert result.refused_call is not None and result.refused_call["approve_with"] is None
