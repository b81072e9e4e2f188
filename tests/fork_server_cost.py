"""What one CLI replay costs through :mod:`fork_server` against a real subprocess (run by hand, not collected).

    PYTHONPATH=. python tests/fork_server_cost.py [--replays 5]

Records the real-world LangGraph agent once against the fake server (``tests/realworld/rw_langgraph_agent.py``),
then runs ``otel-replay replay TRACE --mode mock --app rw_langgraph_agent:agent.invoke --json`` the given number
of times each way and prints the CPU (user + system, every process each way started, the fork server's start
reported apart) per replay. CPU rather than wall time: the figures are meant for a shared, loaded machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import fork_server
from fake_llm_servers import FakeLLMServer

HERE = Path(__file__).resolve().parent / "realworld"


def _children_cpu() -> float:
    """CPU of this process (the fork client's checks) and of every process it waited for."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=5)
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="fork-cost-"))
    (folder / "outbox").mkdir()
    with FakeLLMServer(volatile_ids=True) as server:
        env = {
            **os.environ,
            "OTEL_REPLAY_HOME": str(folder / "home"),
            "RW_OUTBOX": str(folder / "outbox"),
            "OPENAI_BASE_URL": server.openai_url,
            "OPENAI_API_KEY": "sk-test-" + "1" * 32,
            "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p),
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
        }
        python = sys.executable
        recorded = subprocess.run(
            [python, str(HERE / "rw_langgraph_agent.py")], capture_output=True, text=True, env=env, cwd=HERE, check=True
        )
        assert "postcard" in recorded.stdout, recorded.stdout
        runs = subprocess.run(
            [python, "-m", "otel_replay.cli", "runs", "--json"], capture_output=True, text=True, env=env, check=True
        )
        trace_id = json.loads(runs.stdout)[0]["trace_id"]
        command = [python, "-m", "otel_replay.cli", "replay", trace_id, "--mode", "mock"]
        command += ["--app", "rw_langgraph_agent:agent.invoke", "--json"]

        results: dict[str, float] = {}
        before = _children_cpu()
        for _ in range(options.replays):
            out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=HERE, timeout=300)
            assert json.loads(out.stdout)["outcome"] == "matched", out.stderr
        results["subprocess"] = (_children_cpu() - before) / options.replays

        before = _children_cpu()
        started = fork_server._Server()  # the server's imports alone: started and stopped without a call
        started.stop()
        results["server start"] = _children_cpu() - before

        log = folder / "fork.log"
        os.environ[fork_server.LOG] = str(log)
        before = _children_cpu()
        for _ in range(options.replays):
            out = fork_server.run(command, capture_output=True, text=True, env=env, cwd=HERE, timeout=300)
            assert json.loads(out.stdout)["outcome"] == "matched", out.stderr
        fork_server.stop_servers()  # its children's CPU is counted once it has waited for them and exited
        results["fork"] = (_children_cpu() - before - results["server start"]) / options.replays
        assert log.read_text().split("\n")[:-1] == ["fork"] * options.replays, log.read_text()
    for name, seconds in results.items():
        print(f"{name:>14}: {seconds:6.2f} s CPU" + ("" if name == "server start" else " per replay"))


if __name__ == "__main__":
    main()
