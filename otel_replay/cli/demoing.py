"""``otel-replay demo``: record the demo agent's runs (or an SDK demo's), show them, replay the failure, write a
regression case.

It must never reach the network beyond the local fake LLM server, or import the demo agents at module level.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

import typer

from ..wording import plural
from .app import app, fail, handled, open_store, out_console
from .listing import render_run, runs_table
from .outcome import render_result

if TYPE_CHECKING:
    from ..runs import Run


# -------------------------------------------------------------------------------------------------- demo


class DemoSdk(str, Enum):
    """Which demo agent."""

    builtin = "builtin"
    openai = "openai"
    langgraph = "langgraph"


def _sdk_demo(sdk: DemoSdk) -> None:
    """Record an agent built on a real SDK (offline), show it, and replay it with no call leaving the process."""
    from .. import instrumentation
    from ..exporting.setup import flush
    from ..replay.engine import replay

    console = out_console()
    needed = {"openai": "openai", "langgraph": "langchain"}[sdk.value]
    if instrumentation.instrument(needed) != [needed]:
        fail(f"the {sdk.value} demo needs its SDK: pip install 'otel-replay[{sdk.value}]'")
    from ..demo import sdk_agents

    question = "What is the weather in Paris?"
    if sdk is DemoSdk.openai:
        from ..demo.fake_llm import FakeLLMServer

        with FakeLLMServer() as server:
            console.print(f"Recording the OpenAI agent against a local fake OpenAI server at {server.openai_url} …")
            answer = sdk_agents.openai_weather_agent(question, base_url=server.openai_url)
            requests_after_recording = server.count
            agent_name = "openai-weather-agent"
            flush()
            with open_store(None) as store:
                (summary,) = store.runs(agent=agent_name, kind="original", limit=1)
                run = store.load_run(summary.trace_id)
            console.print(f"answer: {answer}")
            console.print(render_run(run))
            for mode in ("mock", "deterministic"):
                console.rule(f"{mode} replay: the SDK gets its recorded responses back as OpenAI objects")
                render_result(replay(summary.trace_id, mode=mode, reason="sdk demo"))
            sent = server.count - requests_after_recording
        console.print(f"HTTP requests the replays sent to the OpenAI server: {sent}")
    else:
        console.print("Recording the LangGraph agent (scripted chat model, real LangGraph, real ToolNode) …")
        answer = sdk_agents.langgraph_weather_agent(question)
        flush()
        with open_store(None) as store:
            (summary,) = store.runs(agent="langgraph-weather-agent", kind="original", limit=1)
            run = store.load_run(summary.trace_id)
        console.print(f"answer: {answer}")
        console.print(render_run(run))
        for mode in ("mock", "deterministic"):
            console.rule(f"{mode} replay: LangChain gets its recorded messages back")
            render_result(replay(summary.trace_id, mode=mode, reason="sdk demo"))


@app.command("demo")
@handled
def demo_command(
    sdk: DemoSdk = typer.Option(DemoSdk.builtin, "--sdk", help="builtin (no SDK), openai or langgraph."),
) -> None:
    """Run a bundled sample agent offline, record it, list and show its runs, and replay them."""
    from rich.text import Text

    from .. import settings
    from ..demo.agent import QUESTIONS, run_demo

    if sdk is not DemoSdk.builtin:
        _sdk_demo(sdk)
        return

    console = out_console()
    home = settings.resolve_home()
    console.print(f"Recording {plural(len(QUESTIONS), 'run')} of the demo support agent into {home} …")
    outcomes = run_demo()
    for question, error in outcomes:
        mark = Text("ok   ", style="green") if error is None else Text("error", style="bold red")
        console.print(Text.assemble("  ", mark, f"  {question}", (f"  → {error}" if error else "", "red")))
    with open_store(None) as store:
        summaries = store.runs(agent="support-agent", kind="original", limit=len(QUESTIONS))
        console.print()
        console.print(runs_table(summaries))
        if not summaries:
            fail("the demo runs did not reach the store")
        # Show the richest successful run (the refund: retrieval, approval, high-risk tool).
        target = max((s for s in summaries if s.status == "ok"), key=lambda s: s.step_count or 0, default=summaries[0])
        run = store.load_run(target.trace_id)
    console.print()
    console.print(render_run(run))

    failed = next((s for s in summaries if s.status == "error"), None)
    if failed is not None:
        from ..replay.engine import replay

        console.print()
        console.rule("The failed run, reproduced: mock replay (no model, tool or retrieval is really called)")
        render_result(replay(failed.trace_id, mode="mock", reason="reproduce the demo failure"))
        console.print()
        console.rule("After the fix: partial live replay from step 2, refunds approved for this replay")
        fixed = replay(
            failed.trace_id,
            mode="live",
            from_step=2,
            approvals=["issue_refund"],
            reason="verify the fix for unknown order ids",
            entrypoint="otel_replay.demo.agent:support_agent_fixed",
        )
        render_result(fixed)
        if fixed.replay is not None:
            _demo_case(fixed.replay, home)
    console.print()
    commands = [
        "otel-replay runs",
        "otel-replay show TRACE_ID --json",
        "otel-replay replay TRACE_ID --mode mock",
        "otel-replay audit",
        f"otel-replay case run {home / 'cases'}",
    ]
    console.print(
        Text.assemble(
            "Next: ", *[part for i, command in enumerate(commands) for part in ((", " if i else ""), (command, "bold"))]
        )
    )


def _demo_case(fixed: Run, home: Any) -> None:
    """Freeze the fixed run into a regression case and run it, as CI would."""
    from rich.text import Text

    from ..cases import CASE_SUFFIX, case_document, describe_failure, load_case, run_case, write_case
    from ..exporting.setup import runtime

    console = out_console()
    console.print()
    console.rule("The fix, frozen: a regression case that CI replays without a store")
    folder = home / "cases"
    folder.mkdir(parents=True, exist_ok=True)
    name = "support-unknown-order"
    document = case_document(fixed, name=name, expect=["output", "tools"], redactor=runtime().redactor)
    path = write_case(document, folder / f"{name}{CASE_SUFFIX}", force=True)
    console.print(f"otel-replay case export {fixed.trace_id} -o {path} --expect output --expect tools")
    result = run_case(load_case(path))
    if result.passed:
        console.print(Text.assemble(("PASS ", "green"), f"{name}: the fixed agent still answers as recorded"))
    else:
        console.print(Text(describe_failure(result), style="red"))
