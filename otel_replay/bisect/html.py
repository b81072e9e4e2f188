"""The bisect's HTML report: one self-contained page with the answer (the first bad revision, the last good one,
the first divergence there and its diff), the path of the search (each revision tried, in the order tried, its
verdict and why) and every candidate in history order, tried or not.

The page is rendered by :func:`otel_replay.report.render.render_page` (the report package's frame, autoescape and
Content-Security-Policy); every value reaches it through autoescape, never marked safe.

It must never read a store, fetch anything, or put a value into the page but through the template engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..report import compare
from ..report.render import render_page
from .run import BisectResult, Step


@dataclass(frozen=True, slots=True)
class _Tried:
    order: int
    step: Step
    first: str


def _first_text(step: Step) -> str:
    """The first divergence of the step's replays, in one line."""
    return next(
        (compare.divergence_text(r.get("first_divergence")) for r in step.replays if r.get("first_divergence")), ""
    )


def render_bisect(result: BisectResult) -> str:
    """The bisect as a self-contained HTML page."""
    document = result.to_dict()
    first: dict[str, Any] | None = document.get("first_divergence")
    verdicts = {s.revision.id: s for s in result.steps}
    page = {
        "result": result,
        "document": document,
        "tried": [_Tried(n + 1, s, _first_text(s)) for n, s in enumerate(result.steps)],
        "first": first,
        "diff": compare.diff_lines(first.get("diff") if first else None),
        "verdicts": verdicts,
    }
    title = f"otel-replay · bisect {result.bisect_id}"
    return render_page("bisect.html.j2", title, has_first=False, bisect=page)
