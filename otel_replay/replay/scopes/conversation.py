"""The widest replay scope: :func:`replay_session` replays the runs of one conversation (same session id) in their
original order and reports a result per turn, each turn a whole-run replay by
:func:`~otel_replay.replay.engine.replay` (its session, firewall and audit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import semconv
from ...errors import ReplayRefused
from ...semconv import ReplayMode
from ..engine import ReplayResult, replay
from ..safety.approvals import Approvals


@dataclass(frozen=True, kw_only=True)
class SessionReplayResult:
    """The runs of one conversation replayed in order, one result per turn."""

    session_id: str
    mode: str
    turns: tuple[ReplayResult, ...] = field(default=())

    @property
    def first_diverged_turn(self) -> int | None:
        """Index (from 0) of the first turn that did not match, or None."""
        return next((i for i, t in enumerate(self.turns) if t.outcome != "matched"), None)

    @property
    def outcome(self) -> str:
        """``refused`` if a turn was refused, else ``diverged`` if one diverged, else ``matched``."""
        outcomes = {t.outcome for t in self.turns}
        return "refused" if "refused" in outcomes else "diverged" if "diverged" in outcomes else "matched"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``otel-replay replay-session --json``)."""
        return {
            "session_id": self.session_id,
            "mode": self.mode,
            "outcome": self.outcome,
            "diverged": self.outcome == "diverged",
            "first_diverged_turn": self.first_diverged_turn,
            "turns": [{"turn": i, **t.to_dict()} for i, t in enumerate(self.turns)],
        }


def replay_session(
    session_id: str,
    *,
    mode: str | ReplayMode,
    approvals: Sequence[str] = (),
    actor: str | None = None,
    reason: str | None = None,
    store: Any = None,
    entrypoint: str | None = None,
    mocks: Mapping[str, Any] | None = None,
    allow_paths: Sequence[str] = (),
    allow_addresses: Sequence[str] = (),
) -> SessionReplayResult:
    """Replay every original run of conversation ``session_id`` in the order they ran. Each turn replays
    against the state the earlier replayed turns left behind (the agent's own memory); a refused turn ends
    the conversation replay. ``allow_paths`` / ``allow_addresses`` hold for every turn, as for :func:`replay`."""
    if not session_id or not str(session_id).strip():
        raise ReplayRefused("a session id is required")
    budget = Approvals.of(approvals)  # one budget for the whole conversation: NAME is one call in all turns
    from ...storage.store import open_given  # the store (and the rows encoder) load only when a store is used

    opened, close_store = open_given(store)
    try:
        roots = opened.run_rows(session=str(session_id), kind=semconv.RunKind.ORIGINAL.value, limit=10_000)
        if not roots:
            raise ReplayRefused(f"no runs with session id {session_id!r} in the store; see `otel-replay runs`")
        turns: list[ReplayResult] = []
        for root in sorted(roots, key=lambda r: r.timestamp_ns):
            result = replay(
                root.trace_id,
                mode=mode,
                approvals=budget,
                actor=actor,
                reason=reason,
                store=opened,
                entrypoint=entrypoint,
                mocks=mocks,
                allow_paths=allow_paths,
                allow_addresses=allow_addresses,
            )
            turns.append(result)
            if result.outcome == "refused":
                break
        return SessionReplayResult(session_id=str(session_id), mode=str(ReplayMode(mode).value), turns=tuple(turns))
    finally:
        if close_store:
            opened.close()
