""":class:`RedactionConfig`: which rules a :class:`~otel_replay.redaction.Redactor` applies, every field
checked when the object is built.

It must never accept a value that would fail later while recording (it raises ``ValueError`` here instead),
or turn redaction off wholesale.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .rules import ANCHORS, DEFAULT_PATTERNS, DEFAULT_SECRET_KEY_WORDS, END_ANCHORS, key_words, normal_key


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise ValueError(
            f"RedactionConfig.{name} must be a sequence of strings, not a single string: write ({value!r},)"
        )
    try:
        items = tuple(value)
    except TypeError:
        raise ValueError(f"RedactionConfig.{name} must be a sequence of strings, got {type(value).__name__}") from None
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"RedactionConfig.{name} holds {item!r}: every entry must be a non-empty string")
    return items


def compile_user_pattern(where: str, source: Any) -> re.Pattern[str]:
    if isinstance(source, re.Pattern):
        pattern = source
    elif isinstance(source, str) and source:
        try:
            pattern = re.compile(source)
        except re.error as exc:
            raise ValueError(f"RedactionConfig.{where}: invalid regular expression {source!r}: {exc}") from None
    else:
        raise ValueError(f"RedactionConfig.{where}: expected a non-empty regular expression, got {source!r}")
    if not isinstance(pattern.pattern, str):
        raise ValueError(f"RedactionConfig.{where}: patterns must be str patterns, not bytes")
    return pattern


@dataclass(frozen=True, kw_only=True)
class RedactionConfig:
    """Which rules a :class:`Redactor` applies, on top of (or instead of) the defaults.

    Every field is validated when the object is built; a bad value raises ``ValueError`` here, never later
    while recording. Sequences are stored as tuples and ``extra_patterns`` as a read-only mapping.
    """

    extra_key_words: tuple[str, ...] = ()
    """More key words or phrases that make a key secret (``"pin"``, ``"otp_code"``, ``"ssn"``)."""

    disabled_key_words: tuple[str, ...] = ()
    """Default key words to turn off, spelled as in :data:`DEFAULT_SECRET_KEY_WORDS`."""

    extra_patterns: Mapping[str, str | re.Pattern[str]] = field(default_factory=dict)
    """More value-shape rules, ``name -> regex``. A group named ``secret`` limits what is replaced. The
    pattern is searched inside strings and inside the JSON text of whole payloads (the hot-path pre-check), so
    it must not be anchored with ``^``/``$`` and must not match the empty string."""

    disabled_patterns: tuple[str, ...] = ()
    """Names of rules in :data:`DEFAULT_PATTERNS` to turn off (``"card_number"``, ``"secret_assignment"``)."""

    allowed_values: tuple[str, ...] = ()
    """Exact values that are never redacted, neither by shape nor under a secret key (compared stripped)."""

    allowed_value_patterns: tuple[str, ...] = ()
    """Regular expressions; a candidate secret they match entirely (``fullmatch``) is never redacted."""

    safe_keys: tuple[str, ...] = ()
    """More keys never redacted by name, on top of :data:`DEFAULT_SAFE_KEYS` (normalised: any style)."""

    def __post_init__(self) -> None:
        for name in (
            "extra_key_words",
            "disabled_key_words",
            "disabled_patterns",
            "allowed_values",
            "allowed_value_patterns",
            "safe_keys",
        ):
            object.__setattr__(self, name, _strings(name, getattr(self, name)))
        for word in self.extra_key_words:
            if not key_words(word):
                raise ValueError(f"RedactionConfig.extra_key_words: {word!r} has no letters or digits")
        defaults = {normal_key(w) for w in DEFAULT_SECRET_KEY_WORDS}
        for word in self.disabled_key_words:
            if normal_key(word) not in defaults:
                raise ValueError(
                    f"RedactionConfig.disabled_key_words: {word!r} is not a default key word; "
                    f"known: {', '.join(DEFAULT_SECRET_KEY_WORDS)}"
                )
        for name in self.disabled_patterns:
            if name not in DEFAULT_PATTERNS:
                raise ValueError(
                    f"RedactionConfig.disabled_patterns: unknown rule {name!r}; known: {', '.join(DEFAULT_PATTERNS)}"
                )
        if not isinstance(self.extra_patterns, Mapping):
            raise ValueError("RedactionConfig.extra_patterns must be a mapping of rule name to regex")
        extra: dict[str, str | re.Pattern[str]] = {}
        for name, source in self.extra_patterns.items():
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.\-]*", name):
                raise ValueError(
                    f"RedactionConfig.extra_patterns: rule name {name!r} must start with a letter "
                    f"and hold only letters, digits, '_', '.', '-'"
                )
            if name in DEFAULT_PATTERNS:
                raise ValueError(f"RedactionConfig.extra_patterns: {name!r} is a default rule name; pick another")
            pattern = compile_user_pattern(f"extra_patterns[{name!r}]", source)
            text = pattern.pattern
            if text.startswith(ANCHORS) or text.endswith(END_ANCHORS):
                raise ValueError(
                    f"RedactionConfig.extra_patterns[{name!r}]: do not anchor with ^ or $; the "
                    f"pattern is searched inside strings and inside payload JSON"
                )
            if pattern.fullmatch("") is not None:
                raise ValueError(f"RedactionConfig.extra_patterns[{name!r}]: pattern matches the empty string")
            extra[name] = source
        object.__setattr__(self, "extra_patterns", MappingProxyType(extra))
        for i, source in enumerate(self.allowed_value_patterns):
            compile_user_pattern(f"allowed_value_patterns[{i}]", source)
