"""How two recorded values compare in every section: redaction and truncation markers reduced to what they stand
for, volatile ids put aside (:mod:`otel_replay.replay.volatile`), and the small helpers the summaries share.

It must never decode, restore or look up a value, or change one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

from ... import semconv
from ...markers import token_fingerprint
from ...snapshots import REDACTED_TAG, TRUNCATED_TAG, canonical_json
from .. import volatile

_LIST_LIMIT: Final = 3  # items named in a one-line summary before "…"

# Enum values read once: the diff compares them for every step and snapshot of both runs.
MODEL_KIND: Final = semconv.StepKind.MODEL.value
RETRIEVAL_KIND: Final = semconv.StepKind.RETRIEVAL.value
TOOL_SNAPSHOT: Final = semconv.SnapshotKind.TOOL.value
RETRIEVAL_SNAPSHOT: Final = semconv.SnapshotKind.RETRIEVAL.value
STATE_SNAPSHOT: Final = semconv.SnapshotKind.STATE.value


# ------------------------------------------------------------------------------------------ values


def normalize(value: Any) -> Any:
    """A payload value in the form the diff compares: redaction markers reduced to their fingerprint
    (``{"$redacted": fp}``, scope dropped), and so is a string that is wholly one inline token (the same redacted
    value, see :func:`~otel_replay.markers.token_fingerprint`); truncation markers to the sha256 of what they
    replaced."""
    if isinstance(value, str):
        fingerprint = token_fingerprint(value)
        return value if fingerprint is None else {REDACTED_TAG: fingerprint}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        if REDACTED_TAG in value and len(value) <= 2 and set(value) <= {REDACTED_TAG, "scope"}:
            return {REDACTED_TAG: value[REDACTED_TAG]}
        if value.get(TRUNCATED_TAG) is True:
            return {TRUNCATED_TAG: value.get("original_sha256")}
        return {k: normalize(v) for k, v in value.items()}
    return value


def value_key(value: Any) -> str:
    """Canonical text of a normalised value, volatile ids as placeholders (:mod:`.volatile`): an identity to
    compare and to key sets with."""
    try:
        return canonical_json(volatile.normalise(normalize(value)))
    except (TypeError, ValueError):
        return repr(value)


def same_value(x: Any, y: Any) -> bool:
    """Whether two values agree: in the same form (an SDK object's encoded form vs its JSON form, see
    :func:`.volatile.aligned`), volatile ids put aside."""
    try:
        return volatile.same(normalize(x), normalize(y))
    except RecursionError:
        return value_key(x) == value_key(y)


def a_b(x: Any, y: Any) -> dict[str, Any]:
    return {"a": x, "b": y}


def listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_LIST_LIMIT])
    return shown + (", …" if len(items) > _LIST_LIMIT else "")


def as_float(text: str | None) -> float | None:
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
