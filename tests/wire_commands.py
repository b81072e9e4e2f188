"""Starting the wire commands (``otel-replay proxy``, ``otel-replay serve``) as their users do: a process of
their own on a free port, its base URL read from ``--ready-file`` once it listens."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WAIT = 90
"""Seconds a command may take to get ready (a deadlock guard, never a synchronisation)."""


def start(*args: str, ready: Path) -> tuple[subprocess.Popen[str], str]:
    """``otel-replay ARGS --port 0 --ready-file READY`` started; the process and its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_replay.cli", *args, "--port", "0", "--ready-file", str(ready)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + WAIT
    while not ready.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{args[0]} did not get ready"
        time.sleep(0.02)
    return process, ready.read_text().strip()


def start_proxy(upstream: Any, ready: Path) -> tuple[subprocess.Popen[str], str]:
    """``otel-replay proxy`` in front of a fake OpenAI + Anthropic server (``fake_llm_servers.FakeLLMServer``)."""
    return start(
        "proxy", "--openai-upstream", upstream.openai_url, "--anthropic-upstream", upstream.anthropic_url, ready=ready
    )
