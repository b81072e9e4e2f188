"""Per-run overhead of recording a LangGraph agent: ``create_react_agent`` with ``langchain_openai.ChatOpenAI``
and two tools, recorded with ``orp.instrument()``, against the same agent uninstrumented, both on the same local
fake OpenAI server (``otel_replay.demo.fake_llm``) in the same run.

One agent run is ``graph.invoke`` of one question: a model call that asks for a tool, the tool, and a model
call that answers (two HTTP requests to the fake server, which runs in this process as a real server would
run next to it). Recorded, that is one run of three steps (model, tool, model), each with its request,
response and context snapshots, written to the spool (otel-replay's default exporter, in a temporary
``OTEL_REPLAY_HOME``, flushed inside the timed region). Uninstrumented, ``orp.uninstrument()`` has removed
every wrapper. The sides alternate in blocks of ``--runs`` agent runs (``--blocks`` blocks each; a recorded
block ends with the spool's flush, so the export is in the time); a sample is a block's time per run. On a
shared, noisy machine one slow moment can double a block's time, so the figures are medians: the ratio
reported is the median recorded sample over the median uninstrumented sample (the median of the ratios of
adjacent blocks is printed too), ``added_ms_per_run`` their difference. The process CPU time per run (this
process: the agent, the fake server's threads and the export thread) is printed as well, with its ratio (of
the medians, and the median of adjacent blocks' ratios): it moves less with the machine's load than the wall
time does. The machine's load averages before and after the timed blocks are printed with the figures.

    python benchmarks/langgraph_overhead.py [--runs 10] [--blocks 30]
    python benchmarks/langgraph_overhead.py --recording-only [--runs 300]

``--recording-only`` measures otel-replay's own part alone: the recorder calls the LangChain instrumentor makes
for one agent run (begin the run, the model, tool and model steps, end the run, with the values LangChain gave
it) are captured once, then made again ``--runs`` times in a loop, without LangChain, the model or the server;
it prints the CPU time per agent run of this thread (the caller's share) and of the process (with the export
thread), medians of 7 rounds. The redactor remembers the repeated strings, as it does in a real run's steps.

Target (issue 13): ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from typing import Any

import otel_replay as orp
from otel_replay.demo.fake_llm import FakeLLMServer
from otel_replay.exporting import setup

TARGET = 1.05
QUESTION = {"messages": [{"role": "user", "content": "What is the weather in Lyon, and what time is it there?"}]}


def build_agent(url: str) -> Any:
    """The agent of LangGraph's prebuilt README, on ChatOpenAI, with two tools."""
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return f"It is always sunny in {city}."

    @tool
    def get_time(city: str) -> str:
        """The local time in a city."""
        return f"It is noon in {city}."

    model = ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="sk-bench", max_retries=0, temperature=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        return create_react_agent(model, [get_weather, get_time])


def timed(agent: Any, runs: int, *, recorded: bool) -> tuple[float, float]:
    """(wall, process CPU) seconds of ``runs`` agent runs; a recorded block ends with the spool's flush."""
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(runs):
        agent.invoke(QUESTION)
    if recorded:
        setup.flush()
    return time.perf_counter() - start, time.process_time() - cpu


def recording_only(url: str, runs: int) -> dict[str, Any]:
    """CPU time per agent run of the recorder calls of one captured run, made again ``runs`` times."""
    from otel_replay import recording
    from otel_replay.instrumentation import _guarded, _langchain_models, _langchain_runs, langchain

    # the modules of the LangChain instrumentation that call the recorder: each call site uses its own module's
    # name, so every call is captured once
    callers = (langchain, _langchain_models, _langchain_runs, _guarded)

    names = ("begin_run", "end_run", "begin_model_call", "begin_tool_call", "end_call")
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any], Any]] = []

    def capturing(original: Any, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            handle = original(*args, **kwargs)
            calls.append((name, args, kwargs, handle))
            return handle

        return call

    orp.instrument("langchain", "openai")
    agent = build_agent(url)
    timed(agent, 3, recorded=True)
    saved = [(module, name, getattr(module, name)) for module in callers for name in names if hasattr(module, name)]
    for module, name, original in saved:
        setattr(module, name, capturing(original, name))
    try:
        agent.invoke(QUESTION)
    finally:
        for module, name, original in saved:
            setattr(module, name, original)

    def one_run() -> None:
        handles: dict[int, Any] = {}
        for name, args, kwargs, handle in calls:
            if name.startswith("begin_"):
                handles[id(handle)] = getattr(recording, name)(*args, **kwargs)
            elif name == "end_run":
                recording.end_run(handles[id(args[0])], **kwargs)
            else:
                recording.end_call(handles[id(args[0])], **kwargs)

    for _ in range(30):
        one_run()
    setup.flush()
    thread_us, process_us = [], []
    for _ in range(7):
        thread_start, process_start = time.thread_time(), time.process_time()
        for _ in range(runs):
            one_run()
        setup.flush()
        thread_us.append((time.thread_time() - thread_start) / runs * 1e6)
        process_us.append((time.process_time() - process_start) / runs * 1e6)
    return {
        "load_average": _load(),
        "recorder_calls_per_run": [name for name, *_ in calls],
        "runs": runs,
        "caller_thread_cpu_us_per_run": round(statistics.median(thread_us)),
        "process_cpu_us_per_run": round(statistics.median(process_us)),
    }


def _load() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages (the benchmark shares a loaded machine)."""
    return [round(x, 2) for x in os.getloadavg()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="agent runs per block")
    parser.add_argument("--blocks", type=int, default=30, help="blocks of each side")
    parser.add_argument("--recording-only", action="store_true", help="time the recorder calls of one run alone")
    args = parser.parse_args()
    if args.recording_only:
        home = tempfile.mkdtemp()
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        with FakeLLMServer(tool_args_for={"get_weather": {"city": "Lyon"}, "get_time": {"city": "Lyon"}}) as server:
            orp.configure(home=home, exporter="spool")
            print(json.dumps(recording_only(server.openai_url, args.runs), indent=2))
        return 0
    home = tempfile.mkdtemp()
    # removed after otel-replay's own exit flush (atexit runs last-registered first)
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    with FakeLLMServer(tool_args_for={"get_weather": {"city": "Lyon"}, "get_time": {"city": "Lyon"}}) as server:
        orp.configure(home=home, exporter="spool")
        sdks = orp.instrument("langchain", "openai")
        agent = build_agent(server.openai_url)
        timed(agent, 10, recorded=True)  # warm up both paths, the connection pool and the recorder
        orp.uninstrument()
        timed(agent, 10, recorded=False)
        load_before = _load()
        plain_s, recorded_s, ratios, plain_cpu, recorded_cpu, cpu_ratios = [], [], [], [], [], []
        for i in range(args.blocks):
            result: dict[bool, tuple[float, float]] = {}
            for recorded in (False, True) if i % 2 == 0 else (True, False):
                if recorded:
                    orp.instrument("langchain", "openai")
                    result[True] = timed(agent, args.runs, recorded=True)
                    orp.uninstrument()
                else:
                    result[False] = timed(agent, args.runs, recorded=False)
            plain_s.append(result[False][0] / args.runs)
            recorded_s.append(result[True][0] / args.runs)
            plain_cpu.append(result[False][1] / args.runs)
            recorded_cpu.append(result[True][1] / args.runs)
            ratios.append(result[True][0] / result[False][0])
            cpu_ratios.append(result[True][1] / result[False][1])
        with orp.Store.open() as store:
            summaries = store.runs(limit=1)
            steps = [(s.kind, s.name) for s in store.load_run(summaries[0].trace_id).steps] if summaries else []
    plain, recorded_ = statistics.median(plain_s), statistics.median(recorded_s)
    ratio = recorded_ / plain
    report = {
        "instrumented": sdks,
        "runs_per_block": args.runs,
        "blocks": args.blocks,
        "steps_per_recorded_run": [f"{kind} {name}" for kind, name in steps],
        "uninstrumented_ms_per_run": round(plain * 1e3, 3),
        "recorded_ms_per_run": round(recorded_ * 1e3, 3),
        "added_ms_per_run": round((recorded_ - plain) * 1e3, 3),
        "ratio": round(ratio, 3),
        "ratio_of_adjacent_blocks_median": round(statistics.median(ratios), 3),
        "process_cpu_ms_per_run": {
            "uninstrumented": round(statistics.median(plain_cpu) * 1e3, 3),
            "recorded": round(statistics.median(recorded_cpu) * 1e3, 3),
        },
        "process_cpu_ratio": round(statistics.median(recorded_cpu) / statistics.median(plain_cpu), 3),
        "process_cpu_ratio_of_adjacent_blocks_median": round(statistics.median(cpu_ratios), 3),
        "load_average": {"before": load_before, "after": _load()},
        "target": TARGET,
        "requests_served": server.count,
        "python": sys.version.split()[0],
    }
    print(json.dumps(report, indent=2))
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
