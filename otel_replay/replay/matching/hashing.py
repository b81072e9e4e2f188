"""Comparing content hashes recorded on one installation with hashes taken on another.

Every content hash otel-replay records is keyed with the installation's redaction key (see
:meth:`otel_replay.redaction.Redactor.content_hash`), so the same arguments hash differently on the laptop
that recorded a run and in the CI job that replays its case file. Equal hashes still mean equal content; a
difference is only a divergence once the recorded side has been hashed again, from the payload stored next
to it, with the key in force now. :func:`same_content` is that one rule, used by deterministic matching
(``ReplaySession.intercept``), ``replay-tool`` and the diff.

This module must never treat a hash it cannot recompute as equal, and never hash anything with a plain
digest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ... import semconv
from ...snapshots import canonical_json

MISSING: Final[Any] = object()
"""Marks a side whose stored content is not known (not recorded, truncated, not captured)."""


def stored_text(value: Any) -> Any:
    """The text a recorded hash was taken of, rebuilt from the stored (decoded) payload value: its canonical
    JSON. :data:`MISSING` stays missing."""
    return value if value is MISSING else canonical_json(value)


def same_content(
    hash_a: str | None,
    hash_b: str | None,
    *,
    text_a: Any = MISSING,
    text_b: Any = MISSING,
    rehash: Callable[[str], str] | None = None,
) -> bool:
    """Whether two recorded or fresh hashes stand for the same content.

    Equal hashes agree. Otherwise each side whose stored text is given (``text_a`` / ``text_b``, exactly the
    text that was hashed, e.g. :func:`stored_text` of a snapshot field) is hashed again with ``rehash`` (the
    current redactor's ``content_hash``) and the results are compared; with both texts given the texts
    themselves are compared (the same as hashing both with any one key). A side with neither a hash nor a
    text never agrees.
    """
    if hash_a is not None and hash_a == hash_b:
        return True
    if text_a is not MISSING and text_b is not MISSING:
        return bool(text_a == text_b)
    if text_a is MISSING and text_b is MISSING:
        return False
    if rehash is None:
        rehash = current_rehash()
        if rehash is None:
            return False
    a = rehash(text_a) if text_a is not MISSING else hash_a
    b = rehash(text_b) if text_b is not MISSING else hash_b
    return a is not None and a == b


def current_rehash() -> Callable[[str], str] | None:
    """The configured redactor's ``content_hash`` (the key fresh hashes are taken with), or None before
    :func:`otel_replay.configure`."""
    from ...exporting.setup import current_runtime

    runtime = current_runtime()
    return runtime.redactor.content_hash if runtime is not None else None


_STORED_FIELD: Final = {
    semconv.TOOL_ARGS_HASH: ("tool", "arguments"),
    semconv.TOOL_RESULT_HASH: ("tool", "result"),
    semconv.MODEL_REQUEST_HASH: ("model", "request"),
    semconv.MODEL_RESPONSE_HASH: ("model", "response"),
    semconv.RETRIEVAL_ARGS_HASH: ("retrieval", "arguments"),
    semconv.RETRIEVAL_RESULTS_HASH: ("retrieval", "returned"),
}
"""Content-hash attribute of a step → the (snapshot kind, field) holding the content it was taken of."""


def stored_value(step: Any, attribute: str) -> Any:
    """The stored (decoded) snapshot field behind the content-hash ``attribute`` of a recorded step, or
    :data:`MISSING`."""
    where = _STORED_FIELD.get(attribute)
    if where is None:
        return MISSING
    payload = step.snapshots.get(where[0])
    if not isinstance(payload, dict) or where[1] not in payload:
        return MISSING
    return payload[where[1]]


def step_text(step: Any, attribute: str) -> Any:
    """The stored text behind the content-hash ``attribute`` of a recorded step (its snapshot field, as
    canonical JSON), or :data:`MISSING`."""
    return stored_text(stored_value(step, attribute))


def steps_agree(x: Any, y: Any, attribute: str) -> bool:
    """Whether two recorded steps agree on the content-hash ``attribute`` (recomputed from their stored
    payloads when the hashes differ, e.g. recorded under different keys, then compared with their volatile
    ids put aside, see :mod:`otel_replay.replay.volatile`). Other attributes compare as they are."""
    a, b = x.attributes.get(attribute), y.attributes.get(attribute)
    if a == b or attribute not in _STORED_FIELD:
        return bool(a == b)
    if same_content(a, b, text_a=step_text(x, attribute), text_b=step_text(y, attribute)):
        return True
    value_a, value_b = stored_value(x, attribute), stored_value(y, attribute)
    if value_a is MISSING or value_b is MISSING:
        return False
    from ..volatile import same

    return same(value_a, value_b)
