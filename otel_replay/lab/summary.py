"""A lab's summary from its pairs: totals, per-scorer improved/regressed, the divergence histogram, cost and
latency deltas, the tool-call change matrix, the worst runs, baseline stability.

(First cut: totals only; the other sections follow.)

It must never read a store, run a replay or look at anything but the pairs it is given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from .model import PairResult


def summarize(pairs: Sequence[PairResult]) -> dict[str, Any]:
    """The summary of a lab's pairs (the ``summary`` of ``otel-replay lab --json``)."""
    candidate = [p for p in pairs if p.lane == "candidate"]
    outcomes = Counter(p.outcome for p in candidate)
    return {
        "totals": {
            "runs": len({p.original_trace_id for p in candidate}),
            "replays": len(candidate),
            "matched": outcomes.get("matched", 0),
            "diverged": outcomes.get("diverged", 0),
            "refused": outcomes.get("refused", 0),
            "errors": outcomes.get("error", 0),
        }
    }
