"""The replay audit trail: every replay is a run in the store; its root span says who, why, how and with what.

Nothing is kept outside the store: the audit is a query over replay root spans, so it covers replays made
from any machine that writes to the same ClickHouse, and it cannot drift from what was recorded.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from typing import Any

from .. import semconv
from ..records import SpanRecord


@dataclass(frozen=True, kw_only=True)
class AuditEntry:
    """One replay as the audit lists it."""

    at: _dt.datetime
    actor: str
    reason: str | None
    mode: str
    from_step: int | None
    approvals: tuple[str, ...]
    original_trace_id: str
    replay_trace_id: str
    outcome: str
    diverged: bool

    @classmethod
    def from_root(cls, root: SpanRecord) -> AuditEntry:
        """The entry of a replay's root span."""
        attrs = root.span_attributes
        raw_approvals = attrs.get(semconv.REPLAY_APPROVALS, "")
        try:
            approvals = tuple(str(a) for a in json.loads(raw_approvals)) if raw_approvals else ()
        except (ValueError, TypeError):
            approvals = (raw_approvals,)
        from_step = attrs.get(semconv.REPLAY_FROM_STEP)
        return cls(
            at=_dt.datetime.fromtimestamp(root.timestamp_ns / 1e9, tz=_dt.timezone.utc),
            actor=attrs.get(semconv.REPLAY_ACTOR, ""),
            reason=attrs.get(semconv.REPLAY_REASON) or None,
            mode=attrs.get(semconv.REPLAY_MODE, ""),
            from_step=int(from_step) if from_step and from_step.isdigit() else None,
            approvals=approvals,
            original_trace_id=attrs.get(semconv.REPLAY_OF_TRACE_ID, ""),
            replay_trace_id=root.trace_id,
            outcome=attrs.get(semconv.REPLAY_OUTCOME, "unknown"),
            diverged=attrs.get(semconv.REPLAY_DIVERGED) == "true",
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (items of ``otel-replay audit --json``)."""
        return {"at": self.at.isoformat(timespec="microseconds"), "actor": self.actor, "reason": self.reason,
                "mode": self.mode, "from_step": self.from_step, "approvals": list(self.approvals),
                "original_trace_id": self.original_trace_id, "replay_trace_id": self.replay_trace_id,
                "outcome": self.outcome, "diverged": self.diverged}


def audit(*, store: Any = None, limit: int = 1000) -> list[AuditEntry]:
    """Every replay in the store, newest first."""
    from .engine import _open_store

    opened, close_store = _open_store(store)
    try:
        return [AuditEntry.from_root(root) for root in opened.run_rows(kind=semconv.RunKind.REPLAY.value,
                                                                        limit=limit)]
    finally:
        if close_store:
            opened.close()
