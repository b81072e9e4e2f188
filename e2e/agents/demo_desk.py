"""A user's program around the demo's support agent: ``python demo_desk.py QUESTION`` answers one customer
question, records the run, and exits 1 when the agent raised (the run is recorded either way)."""

from __future__ import annotations

import sys

import otel_replay as orp
from otel_replay.demo.agent import support_agent

if __name__ == "__main__":
    with orp.identity(tenant="e2e", role="customer", session="desk-1"):
        try:
            print(support_agent(sys.argv[1], customer="dana")["answer"])
        except Exception as exc:  # noqa: BLE001 - a user's program reports the agent's error and exits 1
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(1)
        finally:
            orp.flush()
