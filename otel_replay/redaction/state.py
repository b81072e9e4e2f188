"""The attributes a :class:`~otel_replay.redaction.Redactor` holds, declared once for the parts of the class
(:mod:`.hashing`, :mod:`.key_names`, :mod:`.scanning`, :mod:`.memory`, :mod:`.walker`) that read them;
``Redactor.__init__`` sets them all.

It must never hold a value or behaviour of its own (declarations only).
"""

from __future__ import annotations

import hashlib
import re

from .config import RedactionConfig
from .gating import Gated
from .rules import Rule


class RedactorState:
    """The attributes ``Redactor.__init__`` sets (see there for their meaning)."""

    _key: bytes
    _inner: hashlib._Hash
    _outer: hashlib._Hash
    config: RedactionConfig
    _singles: frozenset[str]
    _suffixes: tuple[str, ...]
    _phrases: tuple[tuple[str, ...], ...]
    _neutral: frozenset[str]
    _usage: frozenset[str]
    _extra_singles: frozenset[str]
    _extra_suffixes: tuple[str, ...]
    _extra_phrases: tuple[tuple[str, ...], ...]
    _safe: frozenset[str]
    _safe_json_keys: tuple[str, ...]
    _key_cache: dict[str, bool]
    _key_scrub_cache: dict[str, tuple[str, int]]
    _clean: dict[str, None]
    _clean_chars: int
    _quiet_keys: dict[str, None]
    _key_hints: tuple[str, ...]
    _gated_key_hints: Gated
    _allowed: frozenset[str]
    _allowed_res: tuple[re.Pattern[str], ...]
    _custom: list[re.Pattern[str]]
    _rules: tuple[Rule, ...]
    _shape_hints: tuple[str, ...]
    _gated_shape_hints: Gated
    _gated_lower_shape_hints: Gated
    _cards: bool
    _assign: bool
    _min_len: int
