"""The :class:`Redactor` itself: built from a key and a :class:`~otel_replay.redaction.RedactionConfig`
(``for_home`` reads the installation's key), its rules compiled once, its parts (keyed hashing, key names,
scanning, the clean memory, the walker) joined in one class; and the default assignment rule completing
:data:`~otel_replay.redaction.DEFAULT_PATTERNS`.

It must never be built with a short key or an unusable config, and never offer a way to switch redaction off.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

from .config import RedactionConfig, compile_user_pattern
from .gating import gated_hints, reduce_hints
from .keyfile import load_or_create_key
from .rules import (
    AUTH_SCHEMES,
    DEFAULT_NEUTRAL_KEY_WORDS,
    DEFAULT_PATTERNS,
    DEFAULT_SAFE_KEYS,
    DEFAULT_SECRET_KEY_WORDS,
    DEFAULT_USAGE_KEY_WORDS,
    HINTS,
    MIN_KEY_BYTES,
    MIN_LENGTH,
    NOT_A_VALUE,
    PATTERN_SOURCES,
    Rule,
    key_words,
    normal_key,
    valid_bearer,
    valid_card,
)
from .walker import Walker


class Redactor(Walker):
    """Replaces secrets by keyed fingerprints. Build one per installation with :meth:`for_home`.

    Thread-safe; every method that the recording path calls (:meth:`redact`, :meth:`scrub_text`,
    :meth:`suspects`) never raises.
    """

    def __init__(self, *, key: bytes, config: RedactionConfig | None = None) -> None:
        """A redactor using HMAC ``key`` (16+ bytes) and ``config`` (defaults when None).

        Raises ``ValueError`` for a short key or an unusable config.
        """
        if not isinstance(key, (bytes, bytearray)) or len(key) < MIN_KEY_BYTES:
            raise ValueError(f"the redaction key must be at least {MIN_KEY_BYTES} bytes")
        if config is None:
            config = RedactionConfig()
        elif not isinstance(config, RedactionConfig):
            raise ValueError(f"config must be a RedactionConfig, got {type(config).__name__}")
        self._key = bytes(key)
        block = (hashlib.sha256(self._key).digest() if len(self._key) > 64 else self._key).ljust(64, b"\0")
        # HMAC's inner and outer states, keyed once: a content hash copies them instead of keying again.
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))
        self.config: RedactionConfig = config
        """The rules in force (read-only)."""

        disabled = {normal_key(w) for w in config.disabled_key_words}
        words = [w for w in DEFAULT_SECRET_KEY_WORDS if normal_key(w) not in disabled]
        words += list(config.extra_key_words)
        singles: set[str] = set()
        phrases: set[tuple[str, ...]] = set()
        for w in words:
            parts = key_words(w)
            if len(parts) == 1:
                singles.add(parts[0])
            elif parts:
                phrases.add(parts)
        self._singles = frozenset(singles)
        self._suffixes = tuple(sorted(w for w in singles if len(w) >= 5))
        self._phrases = tuple(sorted(phrases))
        self._neutral = frozenset(DEFAULT_NEUTRAL_KEY_WORDS)
        self._usage = frozenset(DEFAULT_USAGE_KEY_WORDS)
        # The user's own key words win over the usage rule (never over the safe keys, which the user chose).
        extra = [key_words(w) for w in config.extra_key_words]
        self._extra_singles = frozenset(p[0] for p in extra if len(p) == 1)
        self._extra_suffixes = tuple(sorted(w for w in self._extra_singles if len(w) >= 5))
        self._extra_phrases = tuple(sorted({p for p in extra if len(p) > 1}))
        self._safe = frozenset(normal_key(k) for k in (*DEFAULT_SAFE_KEYS, *config.safe_keys))
        # Safe keys as they stand in canonical JSON (and their ``*_details`` objects), for the pre-check.
        self._safe_json_keys = tuple(
            f'"{k.lower()}{suffix}":' for k in (*DEFAULT_SAFE_KEYS, *config.safe_keys) for suffix in ("", "_details")
        )
        self._key_cache: dict[str, bool] = {}
        self._key_scrub_cache: dict[str, tuple[str, int]] = {}
        # Strings the pre-check passed (message texts, names, keys that recur in every step of a run): they
        # are not checked again. Bounded (see _CLEAN_MAX_CHARS); a dict, so a lookup costs one hash.
        self._clean: dict[str, None] = {}
        self._clean_chars = 0
        self._quiet_keys: dict[str, None] = {}  # keys neither secret nor in need of the pre-check

        # Hints for the key-word part of the pre-check: substrings of the lower-cased text that every secret
        # key (and every "name=value" assignment) must contain.
        key_hints: set[str] = set(singles)
        candidates = {w for p in phrases for w in p}
        coverage = {c: sum(any(c in w for w in p) for p in phrases) for c in candidates}
        for phrase in sorted(phrases):
            if any(h in w for w in phrase for h in key_hints):
                continue
            usable = [c for c in candidates if any(c in w for w in phrase)]
            key_hints.add(max(usable, key=lambda c: (coverage[c], len(c), c)))
        self._key_hints = reduce_hints(key_hints)
        self._gated_key_hints = gated_hints(self._key_hints)

        self._allowed = frozenset(v.strip() for v in config.allowed_values)
        self._allowed_res = tuple(re.compile(p) for p in config.allowed_value_patterns)

        rules: list[Rule] = []
        for name, source in DEFAULT_PATTERNS.items():
            if name in config.disabled_patterns:
                continue
            if name == "secret_assignment":  # follows the configured key words, not the default source
                rules.append(
                    Rule(name, self._assignment_pattern(singles, phrases), None, True, "secret", self._valid_assignment)
                )
                continue
            flags = re.DOTALL if name == "private_key" else 0
            pattern = re.compile(source, flags)
            hints, lower = HINTS.get(name, (None, False))
            group: str | int = "secret" if "secret" in pattern.groupindex else 0
            validate = valid_card if name == "card_number" else valid_bearer if name == "bearer" else None
            rules.append(Rule(name, pattern, hints, lower, group, validate))
        self._custom: list[re.Pattern[str]] = []
        for name, user_source in config.extra_patterns.items():
            pattern = compile_user_pattern(name, user_source)
            self._custom.append(pattern)
            group = "secret" if "secret" in pattern.groupindex else 0
            rules.append(Rule(name, pattern, None, False, group, None))
        self._rules = tuple(rules)
        self._shape_hints = reduce_hints(h for r in rules if r.hints and not r.lower for h in r.hints)
        self._gated_shape_hints = gated_hints(self._shape_hints)
        self._gated_lower_shape_hints = gated_hints(
            h
            for h in reduce_hints(h for r in rules if r.hints and r.lower for h in r.hints)
            if not any(k in h for k in self._key_hints)
        )
        self._cards = "card_number" not in config.disabled_patterns
        self._assign = "secret_assignment" not in config.disabled_patterns
        self._min_len = 0 if self._custom else min((MIN_LENGTH.get(r.name, 0) for r in rules), default=1 << 30)

    # -------------------------------------------------------------------------------------- construction

    @classmethod
    def for_home(cls, home: Path | str | os.PathLike[str], config: RedactionConfig | None = None) -> Redactor:
        """The redactor of the installation in ``home``, creating ``<home>/redaction.key`` on first use.

        The key file is created atomically with mode 0600 (if another process creates it at the same time,
        its key is used); an existing key file readable by group or others is tightened to 0600, or refused
        with ``ValueError`` if that fails. A malformed key file raises ``ValueError``.
        """
        return cls(key=load_or_create_key(Path(home).expanduser()), config=config)

    # ---------------------------------------------------------------------------------- assignment rule

    @staticmethod
    def _assignment_pattern(singles: Iterable[str], phrases: Iterable[tuple[str, ...]]) -> re.Pattern[str]:
        """``name = value`` / ``"name": "value"`` where name contains a secret key word (checked later)."""
        alternatives = sorted(
            {re.escape(w) for w in singles} | {r"[_.\s\-]?".join(map(re.escape, p)) for p in phrases},
            key=len,
            reverse=True,
        )
        words = "|".join(alternatives)
        return re.compile(
            r"(?i)(?<![A-Za-z0-9])(?P<q>[\"']?)(?P<key>[A-Za-z0-9_.\-]*?(?:" + words + r")[A-Za-z0-9_.\-]*?)(?P=q)"
            # no length cap: a cap would leave the tail of a long secret, or all of a long quoted one, in clear;
            # an opening quote without its closing one still has its first word replaced
            r"\s*(?:=|:)\s*(?:(?P<vq>[\"'])(?P<qsecret>[^\"'\r\n]+)(?P=vq)|[\"']?(?P<secret>[^\s\"'&,;}\]\)]+))"
        )

    def _valid_assignment(self, m: re.Match[str], text: str) -> bool:
        value = m.group("qsecret") if m.group("qsecret") is not None else m.group("secret")
        if value is None or value.strip().lower() in NOT_A_VALUE or value.startswith(("[REDACTED:", "{", "[")):
            return False
        if m.group("qsecret") is None and value.lower() in AUTH_SCHEMES:
            return False  # "Authorization: Bearer <token>": the token is the secret, see authorization_header
        key = m.group("key")
        return bool(key) and self.is_secret_key(key)

    def __repr__(self) -> str:
        return f"Redactor(rules={[r.name for r in self._rules]!r}, key=<hidden>)"


def _default_assignment_source() -> str:
    singles = {w for w in DEFAULT_SECRET_KEY_WORDS if len(key_words(w)) == 1}
    phrases = {key_words(w) for w in DEFAULT_SECRET_KEY_WORDS if len(key_words(w)) > 1}
    return Redactor._assignment_pattern(singles, phrases).pattern


PATTERN_SOURCES["secret_assignment"] = _default_assignment_source()
