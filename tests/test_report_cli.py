"""``--html FILE`` on ``show``, ``replay`` and ``diff``: the CLI writes the report pages of ``otel_replay.report``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fork_server
import replay_agents as ra
from cli_in_process import run_cli, runs_in_process

import otel_replay as orp
from otel_replay.storage.store import Store

TESTS_DIR = Path(__file__).resolve().parent


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        **env,
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_REPLAY_JAEGER_URL", "OTEL_REPLAY_GRAFANA_URL"):
        if name not in env:
            full.pop(name, None)
    if runs_in_process(args):  # show and diff: the same main(), without a second of interpreter start-up
        return run_cli(args, env=full, cwd=home.parent)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        cwd=home.parent,
    )


def test_show_replay_and_diff_write_html_reports(home: Path, tmp_path: Path) -> None:
    ra.FLEX.update(ra.FLEX_DEFAULTS)
    ra.flex_agent("refund order A1")
    orp.flush()
    with Store.open(home=home) as store:
        (original,) = [s.trace_id for s in store.runs()]

    run_page = tmp_path / "run.html"
    out = cli(home, "show", original, "--html", str(run_page))
    assert out.returncode == 0, out.stderr
    assert f"wrote HTML report {run_page}" in out.stdout
    page = run_page.read_text(encoding="utf-8")
    assert original in page and "lookup_order" in page and "http://jaeger" not in page

    replay_page = tmp_path / "replay.html"
    out = cli(
        home,
        "replay",
        original,
        "--mode",
        "mock",
        "--app",
        "replay_agents:flex_agent_variant",
        "--json",
        "--html",
        str(replay_page),
        OTEL_REPLAY_JAEGER_URL="http://jaeger.example:16686",
    )
    assert out.returncode == 1, out.stderr  # the variant diverges
    result = json.loads(out.stdout)  # stdout stays one JSON document; the note goes to stderr
    assert "wrote HTML report" in out.stderr
    page = replay_page.read_text(encoding="utf-8")
    assert 'id="first-divergence"' in page
    assert f"http://jaeger.example:16686/trace/{result['replay_trace_id']}" in page

    diff_page = tmp_path / "diff.html"
    out = cli(home, "diff", original, result["replay_trace_id"], "--html", str(diff_page))
    # answered from the recording: same calls and output, but the variant's prompt changed (requests)
    assert out.returncode == 1 and diff_page.stat().st_size > 0
    assert "v2 | refund order A1" in diff_page.read_text(encoding="utf-8")
    assert result["replay_trace_id"] in diff_page.read_text(encoding="utf-8")

    out = cli(home, "show", original, "--html", str(tmp_path / "no" / "such" / "dir" / "r.html"))
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot write the report") and "Traceback" not in out.stderr
