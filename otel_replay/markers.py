"""Where a value holds a redaction marker: the structured form and the inline form inside strings.

A recorded secret is stored either as a marker object (``{"$redacted": "<fingerprint>", "scope": ...}``, a
whole value under a secret key) or as an inline token inside a string (``my key is
[REDACTED:openai_api_key:hmac-sha256:…]``, a secret found in a user message). Both mean the same thing to a
replay: the recording holds no secret there, only its fingerprint. A live replay uses :func:`marker_paths` to
refuse before it would send either form to a model, or start an agent whose recorded input holds one.

This module must never restore, guess or look up a secret; it only says where a marker is.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .snapshots import REDACTED_TAG

INLINE_MARKER: Final = re.compile(r"\[REDACTED:(?:[A-Za-z0-9_.\-]+:)?(?:hmac-sha256:[0-9a-f]+|error)\]")
"""The inline token of a redaction in a string: ``[REDACTED:<rule>:<fingerprint>]``, ``[REDACTED:error]``, and
the text a replayed redacted value reads as (``[REDACTED:<fingerprint>]``). A user's own ``[REDACTED:PII]`` is
text, not a marker: only otel-replay's keyed fingerprints (``hmac-sha256:…``) and ``error`` count."""

_WHOLE_TOKEN: Final = re.compile(r"\s*\[REDACTED:(?:[A-Za-z0-9_.\-]+:)?(hmac-sha256:[0-9a-f]{16})\]\s*")

_MAX_DEPTH: Final = 200


def has_inline_marker(text: str) -> bool:
    """True when ``text`` holds an inline redaction token."""
    return "[REDACTED:" in text and INLINE_MARKER.search(text) is not None


def token_fingerprint(text: str) -> str | None:
    """The fingerprint of a string that is wholly one inline redaction token (surrounding whitespace aside):
    ``[REDACTED:<rule>:<fingerprint>]``, or ``[REDACTED:<fingerprint>]``, the text a replayed redacted value reads
    as. Such a string is the same redacted value as a marker object with that fingerprint, in another form (a
    recorded model answer hands a tool the key the user gave as its token). None for any other string, text
    around a token and ``[REDACTED:error]`` included."""
    if "[REDACTED:" not in text:
        return None
    m = _WHOLE_TOKEN.fullmatch(text)
    return m.group(1) if m is not None else None


def marker_paths(tree: Any, *, root: str = "") -> list[str]:
    """Paths (``messages[1].content``) of the redaction markers in a JSON tree: marker objects and strings that
    hold an inline token. A replayed redacted value (:class:`~otel_replay.snapshots.RedactedValue`) is a string
    that reads as its token, so it is found either way."""
    found: list[str] = []

    def walk(value: Any, path: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(value, str):
            if has_inline_marker(value):
                found.append(path or "(value)")
        elif isinstance(value, dict):
            if REDACTED_TAG in value:
                found.append(path or "(value)")
                return
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else str(key), depth + 1)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]", depth + 1)

    walk(tree, root, 0)
    return found
