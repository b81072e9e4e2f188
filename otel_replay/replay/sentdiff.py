"""What a recorded step sent against what the replay's call sends: whether they agree once volatile ids are put
aside (:mod:`otel_replay.replay.volatile`), and the unified diff a ``request`` or ``arguments`` divergence
carries (indented JSON, volatile ids as their placeholders, cut at a bounded length).

It must never call two values equal that it cannot compare (a value not at hand is never a match), or
change a recorded value.
"""

from __future__ import annotations

import difflib
import json
from typing import Final

from ..runs import Step
from . import volatile
from .hashing import MISSING, stored_value

_DIFF_MAX_LINES: Final = 200
"""Longest request diff kept on a divergence; a longer one is cut with a line saying how many lines are left."""


def _same_but_volatile(
    recorded: Step, attribute: str, sent: str | None, rules: tuple[volatile.VolatileRule, ...]
) -> bool:
    """Whether what step ``recorded`` sent (the stored field behind its hash ``attribute``) and what the
    replay's call sends agree once their volatile ids are put aside (:mod:`otel_replay.replay.volatile`).
    False when either is not at hand: a hash that cannot be checked is never taken as a match."""
    stored = stored_value(recorded, attribute)
    if sent is None or stored is MISSING:
        return False
    try:
        return volatile.same(stored, json.loads(sent), rules=rules)
    except (TypeError, ValueError, RecursionError):
        return False


def _sent_diff(
    recorded: Step, attribute: str, sent: str | None, rules: tuple[volatile.VolatileRule, ...] | None = None
) -> str | None:
    """A unified diff of what step ``recorded`` sent (the stored field behind its hash ``attribute``) and what
    the replay's call sends, as indented JSON with sorted keys (so a changed system prompt shows as its changed
    lines), volatile ids shown as their placeholders (``<id:1>``, see :mod:`otel_replay.replay.volatile`),
    or None when either is not at hand."""
    stored = stored_value(recorded, attribute)
    if sent is None or stored is MISSING:
        return None
    try:
        stored, replayed = volatile.comparable(stored, json.loads(sent), rules=rules)
        before = json.dumps(stored, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
        after = json.dumps(replayed, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    except (TypeError, ValueError, RecursionError):
        return None
    lines = list(difflib.unified_diff(before, after, f"recorded step {recorded.index}", "replay", lineterm="", n=2))
    if len(lines) > _DIFF_MAX_LINES:
        lines = [*lines[:_DIFF_MAX_LINES], f"… {len(lines) - _DIFF_MAX_LINES} more diff lines"]
    return "\n".join(lines) or None
