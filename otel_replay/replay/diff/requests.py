"""The ``requests`` section of a diff: what the two runs asked their models, model call by model call.

A replay whose prompt changed diverges at the changed request; this section shows that change between any two
stored runs (an original and its replay, two recordings, a bisect's two sides): the model calls paired in
order, each pair compared as a replay compares a call with its recording (volatile ids put aside, tool
definitions in any order), and each changed pair's unified diff, long texts (a system prompt) as their own line
diffs.

It must never change a run, or show a value the runs do not hold.
"""

from __future__ import annotations

from typing import Any

from ... import semconv
from ...runs import Run
from .. import volatile
from ..matching.hashing import MISSING, steps_agree, stored_value
from ..matching.sentdiff import comparable, request_diff
from .result import SectionDiff
from .values import MODEL_KIND

_HASH: Any = semconv.MODEL_REQUEST_HASH


def requests_section(a: Run, b: Run) -> SectionDiff:
    ma = [s for s in sorted(a.steps, key=lambda s: s.index) if s.kind == MODEL_KIND]
    mb = [s for s in sorted(b.steps, key=lambda s: s.index) if s.kind == MODEL_KIND]
    rules = volatile.current_rules()
    changed: list[dict[str, Any]] = []
    unknown = 0
    for sa, sb in zip(ma, mb, strict=False):
        if sa.name != sb.name:
            changed.append({"a_index": sa.index, "b_index": sb.index, "name": f"{sa.name} → {sb.name}", "diff": None})
            continue
        recorded, replayed = stored_value(sa, _HASH), stored_value(sb, _HASH)
        if recorded is MISSING or replayed is MISSING:
            unknown += 1
            continue
        if steps_agree(sa, sb, _HASH):
            continue
        recorded, replayed = comparable(sa, recorded, replayed, sb)
        if volatile.same(recorded, replayed, rules=rules):
            continue  # a request rebuilt from another dialect's recording that holds what the other one sent
        diff, texts = request_diff(recorded, replayed, f"a step {sa.index}", rules=rules)
        changed.append(
            {
                "a_index": sa.index,
                "b_index": sb.index,
                "name": sa.name,
                "diff": diff.replace("+++ replay", f"+++ b step {sb.index}", 1) if diff else diff,
                "texts": [
                    {
                        "title": t.title,
                        "a_lines": t.recorded_lines,
                        "b_lines": t.replayed_lines,
                        "diff": t.diff,
                    }
                    for t in texts
                ],
            }
        )
    added, removed = max(0, len(mb) - len(ma)), max(0, len(ma) - len(mb))
    parts = []
    if changed:
        steps = ", ".join(f"a#{c['a_index']}" for c in changed[:3]) + ("…" if len(changed) > 3 else "")
        parts.append(f"{len(changed)} changed ({steps})")
    if added:
        parts.append(f"{added} more in b")
    if removed:
        parts.append(f"{removed} fewer in b")
    if unknown:
        parts.append(f"{unknown} not comparable (recorded without their request)")
    total = f"of {len(ma)} → {len(mb)} model calls"
    return SectionDiff(
        name="requests",
        changed=bool(changed or added or removed),
        summary=f"{', '.join(parts)} ({total})" if parts else f"same ({total})",
        details={"changed": changed, "added": added, "removed": removed, "not_comparable": unknown},
    )
