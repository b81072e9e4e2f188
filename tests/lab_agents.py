"""Agents the lab tests record and replay (imported by name: tests/ is on the path of the lab's workers).

``counter_agent`` looks one number up through a read tool and returns it doubled. While the environment
variable :data:`INTERRUPT_ENV` names its input, it raises ``KeyboardInterrupt`` instead of calling the tool: the
lab tests' deterministic stand-in for a Ctrl-C pressed while that run is being replayed (no timing involved).
"""

from __future__ import annotations

import os
from typing import Any

import otel_replay as orp

INTERRUPT_ENV = "OTEL_REPLAY_TEST_LAB_INTERRUPT_AT"
DIE_ENV = "OTEL_REPLAY_TEST_LAB_DIE_AT"
"""While it names ``counter_agent``'s input, that run ends its process at once (``os._exit``): a worker process
that dies mid-chunk."""


@orp.tool("read_number", risk="read")
def read_number(n: int) -> dict[str, Any]:
    """Read one number (a pure function: nothing outside the process is touched)."""
    return {"n": n, "value": n * 10}


@orp.agent("counter-agent")
def counter_agent(n: int) -> dict[str, Any]:
    """Double the number the tool reads for ``n``."""
    if os.environ.get(INTERRUPT_ENV) == str(n):
        raise KeyboardInterrupt
    if os.environ.get(DIE_ENV) == str(n):
        os._exit(3)
    value = read_number(n)["value"]
    return {"n": n, "doubled": value * 2}
