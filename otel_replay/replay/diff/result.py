"""The diff's result and its one JSON form: :class:`SectionDiff`, :class:`RunDiff` (``to_json()`` is the ``diff``
of every command, ``docs/diff.schema.json``), the section names and the latency thresholds.

It must never compare anything or read a run: the sections build these objects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

SECTIONS: Final = ("output", "state", "requests", "tools", "citations", "cost", "latency", "safety")
"""The sections of every :class:`RunDiff`, in display order."""

LATENCY_THRESHOLD_MS: Final = 100.0
"""Latency counts as changed only when the total duration differs by more than this many milliseconds …"""

LATENCY_THRESHOLD_RATIO: Final = 0.5
"""… and by more than this fraction of run ``a``'s total duration (0.5 = 50 %)."""


# ------------------------------------------------------------------------------------------ results


@dataclass(frozen=True, kw_only=True)
class SectionDiff:
    """How one aspect of two runs compares."""

    name: str
    """Section name, one of :data:`SECTIONS`."""
    changed: bool
    """Whether the section differs between the two runs."""
    summary: str
    """One line for people, e.g. ``1 added, 1 changed (of 2 → 3 calls)``."""
    details: dict[str, Any] = field(default_factory=dict)
    """JSON-ready specifics of the section (documented per section in ``docs/diff.md``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"changed": bool, "summary": str, "details": {...}}``."""
        return {"changed": self.changed, "summary": self.summary, "details": _jsonable(self.details)}


@dataclass(frozen=True, kw_only=True)
class RunDiff:
    """The comparison of run ``a`` (usually the original) with run ``b`` (usually its replay)."""

    a_trace_id: str
    """Trace id of run ``a``."""
    b_trace_id: str
    """Trace id of run ``b``."""
    sections: dict[str, SectionDiff]
    """One entry per name in :data:`SECTIONS`, in that order."""

    @property
    def changed(self) -> bool:
        """True when any section changed (latency only counts past its threshold, see ``docs/diff.md``)."""
        return any(section.changed for section in self.sections.values())

    @property
    def changed_sections(self) -> list[str]:
        """Names of the sections that changed, in display order."""
        return [name for name, section in self.sections.items() if section.changed]

    def to_json(self) -> dict[str, Any]:
        """The diff's one JSON form, described by ``docs/diff.schema.json``: one entry per section name, in the
        order of :data:`SECTIONS`, each ``{"changed": bool, "summary": str, "details": {...}}``.

        It is the ``diff`` of ``otel-replay replay --json``, of ``otel-replay diff --json`` and of each case of
        ``otel-replay case run --json``, so a script reads ``.diff`` the same way whichever command printed it.
        """
        return {name: section.to_dict() for name, section in self.sections.items()}

    def to_dict(self) -> dict[str, Any]:
        """The document ``otel-replay diff --json`` prints: ``a`` and ``b`` (the trace ids), ``changed``, and
        the diff (:meth:`to_json`) twice, under ``diff`` (its name in every command) and under ``sections`` (its
        name in this document before ``diff`` was added, kept so existing readers keep working)."""
        shared = self.to_json()
        return {"a": self.a_trace_id, "b": self.b_trace_id, "changed": self.changed, "sections": shared, "diff": shared}


def _jsonable(value: Any) -> Any:
    """A deep copy that ``json.dumps`` accepts (non-finite floats become None, other objects strings)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)
