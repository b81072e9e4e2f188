"""Runs follow threads while recording, exactly as while replaying.

A tool called in a ``threading.Thread``, a ``ThreadPoolExecutor`` work item (the pool created before any run),
``asyncio.to_thread`` or ``loop.run_in_executor`` started inside a run is a step of that run, numbered in start
order and parented under the step (or run) current where the thread or work item was started; a thread started
outside any run stays outside; a thread that outlives its run records nothing into it. The runs recorded so
replay ``matched`` in ``mock`` mode and, with the write tool approved, in ``live`` mode (before, the tool was
missing from the recording: ``extra_call``, then ``diverged``). The same holds for an SDK instrumentor's model
call made in a pool inside an ``@orp.agent`` run (the OpenAI and the Anthropic clients, a pool and
``asyncio.to_thread``); made in a pool outside any run, it records a run of its own.
"""

from __future__ import annotations

import _thread
import asyncio
import functools
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_replay as orp
from otel_replay import semconv
from otel_replay.recording import threads
from otel_replay.recording.state import current_run
from otel_replay.replay.engine import replay_run
from otel_replay.storage.store import Store

LEDGER: list[str] = []
"""Real executions of the tools, in order (guarded by ``_LEDGER_LOCK``: tools run in several threads)."""
_LEDGER_LOCK = threading.Lock()
WAIT = 60
"""Seconds a handshake may take before the test fails (a deadlock guard, never a synchronisation)."""

POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="made-before-any-run")
"""Created at import, before any run: its workers hold no run; each work item carries its submitter's."""
POOL.submit(int).result()  # a worker exists before any run


def _note(text: str) -> None:
    with _LEDGER_LOCK:
        LEDGER.append(text)


@orp.tool("thr_lookup", risk="read")
def lookup(key: str) -> str:
    _note(f"lookup {key}")
    return key.upper()


@orp.tool("file_ticket", risk="write")
def file_ticket(title: str) -> dict[str, str]:
    _note(f"file {title}")
    return {"ticket": title}


# --------------------------------------------------------------------------- the four ways into a thread


def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.__setitem__("result", fn(*args)))
    thread.start()
    thread.join(WAIT)
    return box["result"]


def _in_pool(fn: Callable[..., Any], *args: Any) -> Any:
    return POOL.submit(fn, *args).result(WAIT)


def _to_thread(fn: Callable[..., Any], *args: Any) -> Any:
    return asyncio.run(asyncio.to_thread(fn, *args))


def _run_in_executor(fn: Callable[..., Any], *args: Any) -> Any:
    async def call() -> Any:
        return await asyncio.get_running_loop().run_in_executor(POOL, functools.partial(fn, *args))

    return asyncio.run(call())


WAYS: dict[str, Callable[..., Any]] = {
    "thread": _in_thread,
    "pool": _in_pool,
    "to_thread": _to_thread,
    "run_in_executor": _run_in_executor,
}


@orp.agent("thr-agent")
def decorated(way: str, title: str) -> dict[str, Any]:
    looked = lookup(title)
    ticket = WAYS[way](file_ticket, title)
    return {"looked": looked, "ticket": ticket, "after": lookup("after")}


def block(request: dict[str, str]) -> dict[str, Any]:
    """The same agent as a ``with orp.agent(...)`` block (and its ``--app`` function for a replay)."""
    with orp.agent("thr-block", input=request) as run:
        looked = lookup(request["title"])
        ticket = WAYS[request["way"]](file_ticket, request["title"])
        run.output = {"looked": looked, "ticket": ticket, "after": lookup("after")}
    return run.output  # type: ignore[no-any-return]


def _call(form: str, way: str, title: str) -> dict[str, Any]:
    return decorated(way, title) if form == "decorated" else block({"way": way, "title": title})


@orp.agent("thr-inner")
def inner(way: str) -> dict[str, str]:
    return WAYS[way](file_ticket, "nested")  # type: ignore[no-any-return]


@orp.agent("thr-outer")
def outer(way: str) -> dict[str, str]:
    return inner(way)


@orp.agent("thr-fan-out")
def fan_out(n: int) -> list[str]:
    return list(POOL.map(lookup, [f"k{i}" for i in range(n)]))


@pytest.fixture
def clean() -> Iterator[None]:
    LEDGER.clear()
    yield
    LEDGER.clear()


@pytest.fixture
def mem(home: Path) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    orp.configure(exporter=exporter, home=home)
    return exporter


def _spans(mem: InMemorySpanExporter) -> list[ReadableSpan]:
    orp.flush()
    return list(mem.get_finished_spans())


def _roots(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is None]


def _steps(spans: list[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    tid = root.context.trace_id
    return sorted(
        (s for s in spans if s.context.trace_id == tid and s is not root),
        key=lambda s: s.attributes[semconv.STEP_INDEX],
    )


# ------------------------------------------------------------------------------------------- recording


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("form", ["decorated", "block"])
def test_a_tool_called_in_a_thread_is_a_step_of_the_run(
    mem: InMemorySpanExporter, clean: None, form: str, way: str
) -> None:
    assert _call(form, way, "printer") == {"looked": "PRINTER", "ticket": {"ticket": "printer"}, "after": "AFTER"}
    spans = _spans(mem)
    (root,) = _roots(spans)
    steps = _steps(spans, root)
    assert [(s.attributes[semconv.STEP_NAME], s.attributes[semconv.STEP_INDEX]) for s in steps] == [
        ("thr_lookup", 0),
        ("file_ticket", 1),
        ("thr_lookup", 2),
    ]
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in steps)
    assert root.attributes[semconv.RUN_STEP_COUNT] == 3
    assert threads.carried() == 0  # the run ended: the wrappers are put back


@pytest.mark.parametrize("way", list(WAYS))
def test_a_step_started_in_a_thread_is_a_child_of_the_step_current_where_it_was_started(
    mem: InMemorySpanExporter, clean: None, way: str
) -> None:
    assert outer(way) == {"ticket": "nested"}
    spans = _spans(mem)
    (root,) = _roots(spans)
    agent_step, tool_step = _steps(spans, root)
    assert (agent_step.attributes[semconv.STEP_KIND], agent_step.attributes[semconv.STEP_INDEX]) == ("agent", 0)
    assert (tool_step.attributes[semconv.STEP_NAME], tool_step.attributes[semconv.STEP_INDEX]) == ("file_ticket", 1)
    assert tool_step.parent is not None and tool_step.parent.span_id == agent_step.context.span_id


def test_concurrent_steps_in_a_pool_take_distinct_indices_of_the_run(mem: InMemorySpanExporter, clean: None) -> None:
    assert fan_out(16) == [f"K{i}" for i in range(16)]
    spans = _spans(mem)
    (root,) = _roots(spans)
    steps = _steps(spans, root)
    assert sorted(s.attributes[semconv.STEP_INDEX] for s in steps) == list(range(16))
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in steps)
    assert root.attributes[semconv.RUN_STEP_COUNT] == 16


def test_threads_and_pool_work_started_outside_any_run_stay_outside(mem: InMemorySpanExporter, clean: None) -> None:
    start, submit = threading.Thread.start, ThreadPoolExecutor.submit
    # The wrappers are in place while another thread's run is open: work started here still stays outside.
    reached, go_on = threading.Event(), threading.Event()

    @orp.agent("thr-holder")
    def holder() -> str:
        reached.set()
        assert go_on.wait(WAIT)
        return "held"

    holding = threading.Thread(target=holder)
    holding.start()
    try:
        assert reached.wait(WAIT)
        assert threads.carried() == 1
        assert _in_thread(lookup, "bare") == "BARE"
        assert _in_pool(lookup, "pooled") == "POOLED"
        assert _to_thread(lookup, "async") == "ASYNC"
    finally:
        go_on.set()
        holding.join(WAIT)
    assert threads.carried() == 0
    assert (threading.Thread.start, ThreadPoolExecutor.submit) == (start, submit)
    spans = _spans(mem)
    (root,) = _roots(spans)
    assert root.name == "invoke_agent thr-holder"
    assert _steps(spans, root) == []  # none of the three tools above was recorded (they ran outside any run)
    assert LEDGER == ["lookup bare", "lookup pooled", "lookup async"]


@orp.agent("thr-leaver")
def leaver(go_on: threading.Event, box: dict[str, Any]) -> str:
    """Starts a thread that goes on after the run ended."""

    def later() -> None:
        assert go_on.wait(WAIT)
        box["ticket"] = file_ticket("late")
        box["own"] = decorated("pool", "own")

    thread = threading.Thread(target=later)
    thread.start()
    box["thread"] = thread
    return lookup("early")


def test_a_thread_that_outlives_its_run_records_nothing_into_it(mem: InMemorySpanExporter, clean: None) -> None:
    go_on, box = threading.Event(), {}
    assert leaver(go_on, box) == "EARLY"
    go_on.set()
    box["thread"].join(WAIT)
    assert box["ticket"] == {"ticket": "late"}  # the tool ran, outside any run
    spans = _spans(mem)
    (ended,) = [r for r in _roots(spans) if r.name == "invoke_agent thr-leaver"]
    assert [s.attributes[semconv.STEP_NAME] for s in _steps(spans, ended)] == ["thr_lookup"]
    assert ended.attributes[semconv.RUN_STEP_COUNT] == 1
    # an agent called there is a run of its own, its pool work included
    (own,) = [r for r in _roots(spans) if r.name == "invoke_agent thr-agent"]
    assert [s.attributes[semconv.STEP_NAME] for s in _steps(spans, own)] == ["thr_lookup", "file_ticket", "thr_lookup"]
    assert LEDGER == ["lookup early", "file late", "lookup own", "file own", "lookup after"]


@orp.agent("thr-raw")
def raw_thread_agent() -> str:
    """Calls a tool from a thread started with ``_thread.start_new_thread``: it carries no context at all."""
    done = threading.Event()
    box: dict[str, str] = {}

    def worker() -> None:
        box["looked"] = lookup("raw")
        done.set()

    _thread.start_new_thread(worker, ())
    assert done.wait(WAIT)
    return box["looked"]


def test_a_raw_thread_started_in_a_run_stays_outside(mem: InMemorySpanExporter, clean: None) -> None:
    assert raw_thread_agent() == "RAW"
    spans = _spans(mem)
    (root,) = _roots(spans)
    assert _steps(spans, root) == []
    assert LEDGER == ["lookup raw"]


def test_wrappers_wrapped_over_are_left_inert_and_never_stacked(mem: InMemorySpanExporter, clean: None) -> None:
    original = threading.Thread.start
    with threads.carrying():
        ours = threading.Thread.start
        assert ours is not original

        def theirs(self: threading.Thread) -> None:  # another library wraps Thread.start during the run
            ours(self)

        threading.Thread.start = theirs  # type: ignore[method-assign]
    try:
        assert threading.Thread.start is theirs and threads.carried() == 0  # ours stays under theirs
        token = current_run.set(object())  # type: ignore[arg-type]
        try:
            assert _in_thread(current_run.get) is None  # inert: nothing carried once no run or replay is open
        finally:
            current_run.reset(token)
        # A run later uses the wrapper still in the chain, without stacking another on top of theirs.
        assert decorated("thread", "again")["ticket"] == {"ticket": "again"}
        assert threading.Thread.start is theirs and threads.originals["start"] is original
        (root,) = _roots(_spans(mem))
        assert [s.attributes[semconv.STEP_NAME] for s in _steps(_spans(mem), root)] == [
            "thr_lookup",
            "file_ticket",
            "thr_lookup",
        ]
    finally:
        threading.Thread.start = ours  # type: ignore[method-assign]  # they unwrap: ours is outermost again
        with threads.carrying():
            pass
    assert threading.Thread.start is original


# ------------------------------------------------------------------------------------------------ replay


def _recorded(agent: str) -> Any:
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent=agent, kind="original")
        return store.load_run(summary.trace_id)


@pytest.mark.parametrize("way", ["thread", "pool", "to_thread", "run_in_executor"])
def test_a_run_with_a_tool_in_a_thread_replays_matched_in_mock_deterministic_and_live(
    home: Path, clean: None, way: str
) -> None:
    decorated(way, "printer")
    original = _recorded("thr-agent")
    assert [s.name for s in original.steps] == ["thr_lookup", "file_ticket", "thr_lookup"]
    LEDGER.clear()
    dry = replay_run(original, mode="dry")
    assert dry.readiness["modes"]["live"]["needs_approval"] == ["file_ticket"]
    for mode in ("mock", "deterministic"):
        replayed = replay_run(original, mode=mode)
        assert replayed.outcome == "matched", (mode, replayed.divergences)
        assert [s.name for s in replayed.replay.steps] == ["thr_lookup", "file_ticket", "thr_lookup"]
    assert LEDGER == []  # nothing ran: every call, the one in the thread included, was answered
    live = replay_run(original, mode="live", approvals=["file_ticket"], reason="the ticket tool in a thread")
    assert live.outcome == "matched", live.divergences
    assert LEDGER == ["lookup printer", "file printer", "lookup after"]


def test_a_block_run_with_a_tool_in_a_pool_replays_matched(home: Path, clean: None) -> None:
    block({"way": "pool", "title": "scanner"})
    original = _recorded("thr-block")
    assert [s.name for s in original.steps] == ["thr_lookup", "file_ticket", "thr_lookup"]
    LEDGER.clear()
    mock = replay_run(original, mode="mock", entrypoint=f"{__name__}:block")
    assert mock.outcome == "matched", mock.divergences
    assert LEDGER == []


# ----------------------------------------------------------------------------------- an SDK instrumentor


@orp.agent("thr-openai")
def openai_agent(base_url: str) -> list[str]:
    """Two Chat Completions calls, each made in a pool work item (one after the other)."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-test-not-a-key", max_retries=0)

    def ask(question: str) -> str:
        answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": question}])
        return answer.choices[0].message.content or ""

    return [POOL.submit(ask, q).result(WAIT) for q in ("one", "two")]


@pytest.fixture
def openai_server() -> Iterator[Any]:
    from fake_llm_servers import FakeLLMServer

    from otel_replay.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    try:
        with FakeLLMServer() as server:
            yield server
    finally:
        instrumentor.uninstrument()


def test_an_sdk_call_in_a_pool_is_a_model_step_of_the_run_and_outside_a_run_a_run_of_its_own(
    home: Path, openai_server: Any
) -> None:
    import openai

    url = openai_server.openai_url
    assert openai_agent(url) == ["echo: one", "echo: two"]
    original = _recorded("thr-openai")
    assert [(s.kind, s.index) for s in original.steps] == [("model", 0), ("model", 1)]
    (root,) = [span for span in original.spans if not span.parent_span_id]
    assert {s.parent_span_id for s in original.steps} == {root.span_id}

    # Outside any run, the instrumented call in a pool records a run of its own (the SDK call is the run).
    client = openai.OpenAI(base_url=url, api_key="sk-test-not-a-key", max_retries=0)
    outside = POOL.submit(
        client.chat.completions.create, model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]
    )
    outside.result(WAIT)
    orp.flush()
    with Store.open() as store:
        assert len(store.runs(kind="original")) == 2

    sent = openai_server.count
    mock = replay_run(original, mode="mock")
    assert mock.outcome == "matched", mock.divergences
    assert openai_server.count == sent  # answered from the recording: no request sent


@orp.agent("thr-anthropic")
def anthropic_agent(base_url: str) -> list[str]:
    """Two Messages calls on the Anthropic client: one in a pool work item, one through ``asyncio.to_thread``."""
    import anthropic

    client = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test-not-a-key", max_retries=0)

    def ask(question: str) -> str:
        answer = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": question}]
        )
        return "".join(block.text for block in answer.content if block.type == "text")

    first = POOL.submit(ask, "one").result(WAIT)
    second = asyncio.run(asyncio.to_thread(ask, "two"))
    return [first, second]


def test_an_anthropic_call_in_a_pool_or_to_thread_is_a_model_step_of_the_run(home: Path) -> None:
    from fake_llm_servers import FakeLLMServer

    from otel_replay.instrumentation.anthropic import AnthropicInstrumentor

    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    try:
        with FakeLLMServer() as server:
            assert anthropic_agent(server.anthropic_url) == ["echo: one", "echo: two"]
            original = _recorded("thr-anthropic")
            assert [(s.kind, s.name, s.index) for s in original.steps] == [
                ("model", "anthropic.messages", 0),
                ("model", "anthropic.messages", 1),
            ]
            (root,) = [span for span in original.spans if not span.parent_span_id]
            assert {s.parent_span_id for s in original.steps} == {root.span_id}
            sent = server.count
            mock = replay_run(original, mode="mock")
            assert mock.outcome == "matched", mock.divergences
            assert server.count == sent  # answered from the recording: no request sent
    finally:
        instrumentor.uninstrument()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_the_lock_is_held_can_start_runs() -> None:
    with threads.lock:
        pid = os.fork()
        if pid == 0:  # the child: the lock it inherited is a fresh one
            ok = threads.lock.acquire(timeout=WAIT)
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
