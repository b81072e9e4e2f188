"""An SDK installed without otel-replay's matching extra is said once, never silently left unrecorded."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import sys
    sys.modules["wrapt"] = None  # what `pip install otel-replay` without the [openai] etc. extra leaves out
    import otel_replay as orp
    print(orp.instrument(), orp.instrument(), orp.instrument("openai"))
""")


def test_a_missing_extra_is_said_once_per_sdk_on_stderr(tmp_path: Path) -> None:
    env = {**os.environ, "OTEL_REPLAY_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] [] []"  # nothing claims to be instrumented
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    for sdk, extra in (
        ("openai", "openai"),
        ("anthropic", "anthropic"),
        ("langchain", "langchain"),
        ("openai_agents", "openai-agents"),
        ("smolagents", "smolagents"),
        ("llamaindex", "llamaindex"),
        ("pydantic_ai", "pydantic-ai"),
        ("mcp", "mcp"),
    ):
        said = [line for line in lines if line.startswith(f"otel-replay: {sdk} calls are not recorded")]
        assert len(said) == 1, out.stderr  # once, although instrument() ran three times
        assert f"pip install 'otel-replay[{extra}]'" in said[0] and "wrapt" in said[0]
    assert len(lines) == 8, out.stderr


def test_nothing_is_said_when_every_extra_is_there(tmp_path: Path) -> None:
    script = "import otel_replay as orp; print(sorted(orp.instrument()))"
    env = {**os.environ, "OTEL_REPLAY_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        "['anthropic', 'langchain', 'llamaindex', 'mcp', 'openai', 'openai_agents', 'pydantic_ai', 'smolagents']"
    )
    assert "not recorded" not in out.stderr
