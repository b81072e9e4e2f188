"""`opentelemetry-instrument python app.py` finds otel-replay's instrumentors through their entry points and
records an unchanged OpenAI app, with no otel-replay call in the app at all."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import openai  # noqa: F401 - a package of the [test] extra: missing, the module fails
from fake_llm_servers import FakeLLMServer

import otel_replay as orp

APP = textwrap.dedent("""
    import sys
    from openai import OpenAI

    client = OpenAI(base_url=sys.argv[1], api_key="sk-test-" + "1" * 32, max_retries=0)
    reply = client.chat.completions.create(model="gpt-auto", messages=[{"role": "user", "content": "hello"}])
    print(reply.choices[0].message.content)
""")


def test_opentelemetry_instrument_records_an_unchanged_app(home: Path, tmp_path: Path) -> None:
    launcher = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
    assert launcher, "no opentelemetry-instrument next to this Python (opentelemetry-instrumentation, [test] extra)"
    app = tmp_path / "app.py"
    app.write_text(APP)
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai_v2,openai",
    }
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    with FakeLLMServer() as server:
        out = subprocess.run(
            [launcher, sys.executable, str(app), server.openai_url],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert "echo: hello" in out.stdout
        assert server.count == 1
    with orp.Store.open() as store:
        (summary,) = store.runs()
        run = store.load_run(summary.trace_id)
    assert [(s.kind, s.name) for s in run.steps] == [("model", "openai.chat.completions")]
    assert run.steps[0].snapshots["model"]["request"]["messages"] == [{"role": "user", "content": "hello"}]
