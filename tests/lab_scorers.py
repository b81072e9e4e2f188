"""A user scorer for the lab tests (``@otel_replay.lab.scoring.scorer``): imported by the tests that need it, and
by ``--scorers lab_scorers`` in a lab's worker processes."""

from __future__ import annotations

from typing import Any

from otel_replay.lab.scoring import scorer  # type: ignore[attr-defined,unused-ignore]


@scorer(name="lab_test_answer_has_order")
def answer_has_order(original: Any, replay: Any) -> bool | None:
    """Whether the replay's answer still names an order number (None when the replay recorded no run)."""
    if replay is None:
        return None
    output = replay.snapshots.get("output") or {}
    return "order" in str(output).lower()
