"""Scorers: how a replay compares with its original, per pair (built-in ones and the user's ``@orp.scorer``),
and the :class:`~otel_replay.lab.model.PairResult` of one replay built from its result.

(First cut: only ``output_equal``; the other built-in scorers, ``@scorer`` and the tape/tool-change fields
follow.)

It must never run the agent, read a store, or import anything a recorded value names.
"""

from __future__ import annotations

from typing import Any

from ..replay.engine import ReplayResult
from ..runs import Run
from .model import Lane, PairResult


def score_pair(original: Run, replay: Run | None, *, result: ReplayResult | None = None) -> dict[str, Any]:
    """Every scorer's value for one pair (None where a scorer does not apply)."""
    if replay is None:
        return {"output_equal": None}
    diff = result.diff if result is not None else None
    output = diff.sections.get("output") if diff is not None else None
    return {"output_equal": None if output is None else not output.changed}


def pair_result(original: Run, result: ReplayResult, *, lane: Lane = "candidate", repeat: int = 0) -> PairResult:
    """The pair one replay makes with its original."""
    first = result.first_divergence
    return PairResult(
        original_trace_id=original.trace_id,
        original_run_id=original.run_id,
        agent=original.agent,
        original_status=original.status,
        lane=lane,
        repeat=repeat,
        replay_trace_id=result.replay_trace_id,
        replay_run_id=result.replay_run_id,
        outcome=result.outcome,
        first_divergence=first.to_dict() if first is not None else None,
        divergences=[d.to_dict() for d in result.divergences],
        agent_error=result.agent_error,
        scores=score_pair(original, result.replay, result=result),
        tape=dict(result.tape or {}),
        diff=result.diff.to_json() if result.diff is not None else None,
    )


def error_pair(original: Run, message: str, *, lane: Lane = "candidate", repeat: int = 0) -> PairResult:
    """The pair of a run the lab could not replay (``outcome`` ``error``, ``message`` saying why)."""
    return PairResult(
        original_trace_id=original.trace_id,
        original_run_id=original.run_id,
        agent=original.agent,
        original_status=original.status,
        lane=lane,
        repeat=repeat,
        outcome="error",
        error=message,
    )
