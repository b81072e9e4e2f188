"""``orp.instrument()`` and the ``opentelemetry-instrument`` entry points import no SDK: each SDK is patched
when the application imports it (at once when it already has), and ``uninstrument()`` disarms it.

Every case runs a fresh interpreter (what ``sys.modules`` holds is the point), records into the test's home
against the fake OpenAI / Anthropic server, and reads the runs back from the store.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anthropic  # noqa: F401 - a package of the [test] extra: missing, the module fails
import langchain_openai  # noqa: F401 - a package of the [test] extra: missing, the module fails
import langgraph  # noqa: F401 - a package of the [test] extra: missing, the module fails
import openai  # noqa: F401 - a package of the [test] extra: missing, the module fails
import pytest
from fake_llm_servers import FakeLLMServer

import otel_replay as orp

ROOT = Path(__file__).resolve().parents[1]
SDK_MODULES = ("openai", "anthropic", "langchain_core", "langgraph", "agents")

PRELUDE = textwrap.dedent("""
    import json, sys
    SDKS = ("openai", "anthropic", "langchain_core", "langgraph", "agents")

    def loaded():
        return [m for m in SDKS if m in sys.modules]

    def say(**values):
        print(json.dumps(values), flush=True)

    def chat(url):
        from openai import OpenAI
        client = OpenAI(base_url=url, api_key="sk-test-" + "1" * 32, max_retries=0)
        return client.chat.completions.create(model="gpt-lazy", messages=[{"role": "user", "content": "hello"}])

    def message(url):
        from anthropic import Anthropic
        client = Anthropic(base_url=url, api_key="sk-ant-test-" + "1" * 32, max_retries=0)
        return client.messages.create(model="claude-lazy", max_tokens=64,
                                      messages=[{"role": "user", "content": "hello"}])
""")


def _run(
    home: Path,
    body: str,
    server: FakeLLMServer,
    *,
    launcher: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    script = home.parent / "app.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    env = {**os.environ, "OTEL_REPLAY_HOME": str(home), **(extra_env or {})}
    env.pop("OTEL_REPLAY_STORE", None)
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    out = subprocess.run(
        [*(launcher or []), sys.executable, str(script), server.openai_url, server.anthropic_url],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def _runs(home: Path) -> list[tuple[str, list[tuple[str, str]]]]:
    """(agent, [(step kind, step name)]) of every run in the home's store, oldest first."""
    orp.configure(home=home, exporter="spool")
    with orp.Store.open() as store:
        summaries = sorted(store.runs(), key=lambda s: s.started_at)
        return [(s.agent, [(step.kind, step.name) for step in store.load_run(s.trace_id).steps]) for s in summaries]


def test_instrument_imports_no_sdk_and_arms_every_installed_one(home: Path) -> None:
    with FakeLLMServer() as server:
        (said,) = _run(
            home,
            """
            import otel_replay as orp
            from otel_replay.instrumentation import instrumented
            got = orp.instrument()
            say(got=got, instrumented=instrumented(), loaded=loaded(),
                ours=sorted(m for m in sys.modules if m.startswith("otel_replay.") and "instrumentation" not in m))
        """,
            server,
        )
    assert {"openai", "anthropic", "langchain"} <= set(said["got"])
    assert said["instrumented"] == said["got"]  # armed counts as instrumented
    assert said["loaded"] == []
    # neither the recorder nor the exporters are loaded yet: only the leaf modules the package itself needs
    assert said["ours"] == ["otel_replay._version", "otel_replay.errors", "otel_replay.runtime", "otel_replay.semconv"]


def test_sdks_imported_after_instrument_are_recorded(home: Path) -> None:
    with FakeLLMServer() as server:
        said = _run(
            home,
            """
            import otel_replay as orp
            orp.instrument()
            say(loaded=loaded())
            chat(sys.argv[1])
            message(sys.argv[2])
            say(loaded=loaded())
        """,
            server,
        )
        assert server.count == 2
    assert said[0]["loaded"] == []
    assert {"openai", "anthropic"} <= set(said[1]["loaded"])
    assert sorted(_runs(home)) == [
        ("anthropic.messages", [("model", "anthropic.messages")]),
        ("openai.chat.completions", [("model", "openai.chat.completions")]),
    ]


def test_a_langgraph_agent_imported_after_instrument_is_one_run(home: Path) -> None:
    with FakeLLMServer(tool_args_for={"get_weather": {"city": "Paris"}}) as server:
        said = _run(
            home,
            """
            import otel_replay as orp
            orp.instrument()
            say(loaded=loaded())
            from langchain_core.tools import tool
            from langchain_openai import ChatOpenAI
            from langgraph.prebuilt import create_react_agent

            @tool
            def get_weather(city: str) -> str:
                \"\"\"The weather in a city.\"\"\"
                return "sunny in " + city

            @tool
            def get_time(city: str) -> str:
                \"\"\"The local time in a city.\"\"\"
                return "noon in " + city

            model = ChatOpenAI(model="gpt-lazy", base_url=sys.argv[1], api_key="sk-test-" + "1" * 32, max_retries=0)
            agent = create_react_agent(model, [get_weather, get_time])
            out = agent.invoke({"messages": [{"role": "user", "content": "Weather in Paris?"}]})
            say(answer=out["messages"][-1].content)
        """,
            server,
        )
    assert said[0]["loaded"] == []
    assert "sunny in Paris" in said[1]["answer"]
    (run,) = _runs(home)  # one run for the graph, not one per model call
    assert run[1] == [("model", "ChatOpenAI"), ("tool", "get_weather"), ("model", "ChatOpenAI")]


def test_langgraph_imported_before_langchain_core_is_patched_too(home: Path) -> None:
    # `import langgraph.pregel` first imports LangChain core while its own import is still running: LangGraph's
    # patch must wait for the end of that import rather than be lost
    with FakeLLMServer() as server:
        said = _run(
            home,
            """
            import otel_replay as orp
            orp.instrument()
            import langgraph.pregel
            from langgraph.pregel import Pregel
            say(wrapped=type(Pregel.__dict__["invoke"]).__name__ != "function")
        """,
            server,
        )
    assert said == [{"wrapped": True}]


def test_an_sdk_imported_before_instrument_is_patched_at_once(home: Path) -> None:
    with FakeLLMServer() as server:
        said = _run(
            home,
            """
            import openai
            import otel_replay as orp
            got = orp.instrument("openai")
            chat(sys.argv[1])
            say(got=got, loaded=loaded())
        """,
            server,
        )
        assert server.count == 1
    assert said == [{"got": ["openai"], "loaded": ["openai"]}]
    assert _runs(home) == [("openai.chat.completions", [("model", "openai.chat.completions")])]


def test_uninstrument_before_the_import_leaves_the_sdk_unpatched(home: Path) -> None:
    with FakeLLMServer() as server:
        said = _run(
            home,
            """
            import otel_replay as orp
            from otel_replay.instrumentation import instrumented
            armed = orp.instrument()
            undone = orp.uninstrument()
            chat(sys.argv[1])
            message(sys.argv[2])

            @orp.agent("control")
            def control():
                return "recorded"

            control()
            say(armed=armed, undone=undone, instrumented=instrumented())
        """,
            server,
        )
        assert server.count == 2
    assert said[0]["undone"] == said[0]["armed"] and said[0]["instrumented"] == []
    assert _runs(home) == [("control", [])]  # the SDK calls went unrecorded; the store did record


def test_the_entry_point_classes_arm_without_importing(home: Path) -> None:
    with FakeLLMServer() as server:
        said = _run(
            home,
            """
            from otel_replay.instrumentation import entry_points
            from otel_replay.instrumentation import instrumented
            entry_points.openai().instrument()
            entry_points.langchain().instrument()
            say(loaded=loaded(), instrumented=instrumented())
            chat(sys.argv[1])
        """,
            server,
        )
        assert server.count == 1
    assert said == [{"loaded": [], "instrumented": ["openai", "langchain"]}]
    assert _runs(home) == [("openai.chat.completions", [("model", "openai.chat.completions")])]


def _source_tree_metadata(tmp_path: Path) -> Path:
    """A folder with the source tree's distribution metadata (its entry points), to put first on the path:
    ``opentelemetry-instrument`` then loads this checkout's entry points, whatever was installed."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11 on")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = tmp_path / "meta" / f"otel_replay-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items()) + "\n"
            for group, points in project["entry-points"].items()
        )
    )
    return info.parent


def test_opentelemetry_instrument_imports_no_sdk_and_records_the_app(home: Path, tmp_path: Path) -> None:
    launcher = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
    assert launcher, "no opentelemetry-instrument next to this Python (opentelemetry-instrumentation, [test] extra)"
    path = os.pathsep.join([str(_source_tree_metadata(tmp_path)), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {
        "PYTHONPATH": path,
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai_v2,openai",
    }
    with FakeLLMServer() as server:
        said = _run(
            home,
            """
            from importlib.metadata import entry_points
            say(loaded=loaded(), ours=sorted(e.value for e in entry_points(group="opentelemetry_instrumentor")
                                             if e.name.startswith("otel_replay_")))
            chat(sys.argv[1])
        """,
            server,
            launcher=[launcher],
            extra_env=env,
        )
        assert server.count == 1
    assert said[0]["loaded"] == []
    assert all(value.startswith("otel_replay.instrumentation.entry_points:") for value in said[0]["ours"])
    assert _runs(home) == [("openai.chat.completions", [("model", "openai.chat.completions")])]


def test_bad_options_are_refused_before_the_sdk_is_imported(home: Path) -> None:
    with FakeLLMServer() as server:
        said = _run(
            home,
            """
            import otel_replay as orp
            from otel_replay.instrumentation import instrumented
            try:
                orp.instrument("langchain", tool_risks={"send_email": "dangerous"})
            except ValueError as exc:
                say(refused=str(exc), loaded=loaded(), instrumented=instrumented())
        """,
            server,
        )
    assert said and "risk must be one of" in said[0]["refused"]
    assert said[0]["loaded"] == [] and said[0]["instrumented"] == []


def test_bad_openai_agents_options_are_refused_before_the_sdk_is_imported(home: Path) -> None:
    with FakeLLMServer() as server:
        said = _run(
            home,
            """
            import otel_replay as orp
            from otel_replay.instrumentation import instrumented
            for options in ({"tool_risks": {"send_email": "dangerous"}}, {"tracing": "sometimes"}):
                try:
                    orp.instrument("openai_agents", **options)
                except ValueError as exc:
                    say(refused=str(exc), loaded=loaded(), instrumented=instrumented())
        """,
            server,
        )
    assert [s["loaded"] for s in said] == [[], []] and [s["instrumented"] for s in said] == [[], []]
    assert "risk must be one of" in said[0]["refused"]
    assert said[1]["refused"].startswith("tracing must be one of bridge")
