"""A divergence: one place where a replay did not follow the original, kept as data.

It must never hold a value the replay did not redact (reasons and diffs are built from redacted payloads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TextDiff:
    """A line diff of one long or multi-line text a ``request`` or ``arguments`` divergence changed (a message's
    content, a system prompt, a tool description), built by :mod:`otel_replay.replay.matching.sentdiff`."""

    path: str
    """Where the text is in what the step sent: ``messages[0].content``, ``system[0].text``, ``prompt``."""
    role: str | None
    """The ``role`` of the message holding it, when there is one."""
    recorded_lines: int | None
    """How many lines the recorded text is shown as (None: the recording has no text there)."""
    replayed_lines: int | None
    """How many lines the replayed text is shown as (None: the replay has no text there)."""
    diff: str
    """The unified diff's hunks (``@@ -a,b +c,d @@``, then `` ``, ``-`` and ``+`` lines), numbered by the
    text's own lines, with three lines of context."""

    @property
    def title(self) -> str:
        """``messages[0].content (system)``: where the text is, and its message's role."""
        return f"{self.path} ({self.role})" if self.role else self.path

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": self.path,
            "role": self.role,
            "recorded_lines": self.recorded_lines,
            "replayed_lines": self.replayed_lines,
            "diff": self.diff,
        }


@dataclass(frozen=True, kw_only=True)
class Divergence:
    """One place where the replay did not follow the original."""

    step_index: int | None
    """Index of the original step it is reported at (the closest recorded step), or None."""
    kind: str
    """``arguments``, ``request``, ``extra_call``, ``missing_call``, ``unanswerable``, ``output``, ``approval``,
    ``side_effect`` (an operation the side-effect guard blocked, see :mod:`otel_replay.replay.safety.guard`),
    ``unrecorded_tool`` (a tool call the model asked for was answered by code outside the firewall, see
    :mod:`otel_replay.replay.matching.toolcalls`), ``redacted`` (a live model call would have sent a redaction
    marker)."""
    reason: str
    expected: str | None = None
    actual: str | None = None
    diff: str | None = None
    """For ``request`` and ``arguments`` divergences: a unified diff of what the step sent in the recording
    (``---``) and in the replay (``+++``), as indented JSON, then the line diff of each changed long text (the
    :attr:`text_diffs`, each under a ``=== path (role)`` line); redacted parts show as their markers."""
    text_diffs: tuple[TextDiff, ...] = ()
    """For ``request`` and ``arguments`` divergences: each long or multi-line text that changed, as a line diff
    of its own (the JSON part of :attr:`diff` shows a placeholder in its place)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "step_index": self.step_index,
            "kind": self.kind,
            "reason": self.reason,
            "expected": self.expected,
            "actual": self.actual,
            "diff": self.diff,
            "text_diffs": [t.to_dict() for t in self.text_diffs],
        }
