"""A divergence: one place where a replay did not follow the original, kept as data.

It must never hold a value the replay did not redact (reasons and diffs are built from redacted payloads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Divergence:
    """One place where the replay did not follow the original."""

    step_index: int | None
    """Index of the original step it is reported at (the closest recorded step), or None."""
    kind: str
    """``arguments``, ``request``, ``extra_call``, ``missing_call``, ``unanswerable``, ``output``, ``approval``,
    ``side_effect`` (an operation the side-effect guard blocked, see :mod:`otel_replay.replay.guard`),
    ``unrecorded_tool`` (a tool call the model asked for was answered by code outside the firewall, see
    :mod:`otel_replay.replay.toolcalls`), ``redacted`` (a live model call would have sent a redaction marker)."""
    reason: str
    expected: str | None = None
    actual: str | None = None
    diff: str | None = None
    """For ``request`` and ``arguments`` divergences: a unified diff of what the step sent in the recording
    (``---``) and in the replay (``+++``), as indented JSON; redacted parts show as their markers."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "step_index": self.step_index,
            "kind": self.kind,
            "reason": self.reason,
            "expected": self.expected,
            "actual": self.actual,
            "diff": self.diff,
        }
