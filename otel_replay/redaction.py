"""Secret detection and replacement, applied to every value before it becomes a span attribute.

Why this module exists: a recorded run holds user input, tool arguments, HTTP headers, model messages and
exception text, and all of it is exported, spooled and stored. Anything that looks like a credential must be
replaced *before* it leaves the recording code, by a keyed fingerprint plus the place it was found, so that
two runs using the same key can still be compared ("same secret, same fingerprint") without the key being
stored anywhere.

Two detectors work together:

* **by key name** -- the value under a key such as ``api_key``, ``Authorization`` or ``refresh_token`` is
  replaced whole, whatever its type (see :meth:`Redactor.is_secret_key`);
* **by value shape** -- strings are scanned for provider API keys, cloud and VCS tokens, JWTs, bearer
  credentials, PEM private keys, credentials in URLs, ``password=...`` assignments and card numbers that pass
  the Luhn check (see :data:`DEFAULT_PATTERNS`), in clear and inside percent-encoded and base64 runs
  (decoded once, within a bounded budget).

It also owns the keyed content hash (:meth:`Redactor.content_hash`, HMAC-SHA256 with the installation key)
that every recorded hash of content uses, so a hash never confirms a guessed secret without the key.

Process-wide state: importing this module puts a :class:`ScrubbingLogFilter` on otel-replay's loggers
(:data:`LOGGER_NAMES`), so what the library logs is scrubbed like what it records; and one message-redactor
source (:func:`set_message_redactor_source`, set by ``exporting.setup``: the current runtime's redactor). This
module never imports anything above it (recording, exporting, the runtime).

What it must never do:

* never leak: if anything goes wrong inside the redactor, the value is masked whole rather than passed on;
* never raise into the recording path (:meth:`Redactor.redact` and :meth:`Redactor.scrub_text` catch
  everything); only setup -- a bad :class:`RedactionConfig` or an unusable key file -- raises ``ValueError``;
* never mutate its input, never store a secret (only an HMAC), never restore one: a replay takes
  secrets from its own environment, not from a snapshot;
* never be switched off wholesale: there is deliberately no null redactor. Rules can be turned off one by
  one through :class:`RedactionConfig`.

The module is on the hot path of every snapshot, so rule decisions are precompiled, key decisions cached,
and payloads with nothing suspicious are recognised by cheap substring tests before any full pattern runs.
Only the standard library is used.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import logging
import math
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from .files import private_dir, private_file
from .snapshots import PLAIN_MAX_DEPTH, TRUNCATED_TAG, TYPE_TAG

__all__ = [
    "CONTENT_HASH_PREFIX",
    "DEFAULT_NEUTRAL_KEY_WORDS",
    "DEFAULT_PATTERNS",
    "DEFAULT_SAFE_KEYS",
    "DEFAULT_SECRET_KEY_WORDS",
    "DEFAULT_USAGE_KEY_WORDS",
    "FINGERPRINT_PREFIX",
    "KEY_FILE_NAME",
    "LOGGER_NAMES",
    "REDACTED_KEY",
    "RedactionConfig",
    "Redactor",
    "ScrubbingLogFilter",
    "install_log_scrubbing",
    "scrub_message",
]

_log = logging.getLogger("otel_replay")

REDACTED_KEY: Final = "$redacted"
"""Key of the marker object that replaces a secret: ``{"$redacted": "<fingerprint>", "scope": "<where>"}``."""

FINGERPRINT_PREFIX: Final = "hmac-sha256:"
"""Prefix of every fingerprint; 16 lowercase hex characters of HMAC-SHA256 follow it."""

CONTENT_HASH_PREFIX: Final = "hmac-sha256:"
"""Prefix of every content hash (:meth:`Redactor.content_hash`); all 64 hex characters of the HMAC follow it."""

_DIGEST: Final = re.compile(r"(?:hmac-sha256:)?[0-9a-f]{64}")

KEY_FILE_NAME: Final = "redaction.key"
"""Name of the per-installation HMAC key file inside the otel-replay home (mode 0600)."""

_FINGERPRINT_HEX: Final = 16
_KEY_BYTES: Final = 32
_MIN_KEY_BYTES: Final = 16
_ERROR_FINGERPRINT: Final = "error"
_KEY_CACHE_MAX: Final = 8192

# --------------------------------------------------------------------------------------------- key names

DEFAULT_SECRET_KEY_WORDS: Final[tuple[str, ...]] = (
    # single words (matched as whole words of a key; words of 5+ letters also as a word's suffix,
    # so ``pgpassword`` and ``bottoken`` match but ``tokenizer`` and ``tokens`` do not)
    "password",
    "passwords",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "secrets",
    "token",
    "authorization",
    "auth",
    "cookie",
    "cookies",
    "credential",
    "credentials",
    "apikey",
    "apikeys",
    "privatekey",
    "sessionid",
    "jwt",
    "bearer",
    # phrases (adjacent words of a key, in any separator style or camelCase)
    "api_key",
    "api_keys",
    "private_key",
    "private_keys",
    "access_key",
    "secret_key",
    "session_id",
    "session_key",
    "access_tokens",
    "refresh_tokens",
    "id_tokens",
    "auth_tokens",
    "bearer_tokens",
    "api_tokens",
    "session_tokens",
)
"""Key words whose presence makes a key secret. ``"api_key"`` means the adjacent words ``api`` ``key`` in any
style (``api_key``, ``x-api-key``, ``apiKey``, ``API_KEY``); ``token`` covers ``access_token``,
``refresh_token``, ``id_token``, ``x-auth-token``; ``authorization`` covers ``proxy-authorization``; ``cookie``
covers ``set-cookie``; ``secret`` covers ``client_secret`` and ``aws_secret_access_key``."""

DEFAULT_NEUTRAL_KEY_WORDS: Final[tuple[str, ...]] = (
    "count",
    "counts",
    "num",
    "number",
    "max",
    "min",
    "limit",
    "limits",
    "length",
    "len",
    "size",
    "total",
    "usage",
    "budget",
    "estimate",
    "estimated",
    "type",
    "types",
    "expires",
    "expiry",
    "expiration",
    "ttl",
    "url",
    "uri",
    "endpoint",
    "name",
    "names",
    "path",
    "domain",
)
"""Words that describe *about* a secret rather than hold one: a key containing any of them is not secret
(``token_count``, ``max_token``, ``token_type``, ``password_max_length``, ``secret_name``, ``token_url``)."""

DEFAULT_USAGE_KEY_WORDS: Final[tuple[str, ...]] = (
    "input",
    "output",
    "prompt",
    "completion",
    "completions",
    "total",
    "cached",
    "cache",
    "reasoning",
    "audio",
    "usage",
    "count",
    "counts",
    "accepted",
    "rejected",
    "prediction",
)
"""Words that make a ``token`` key a *count*: a key whose words are ``token``/``tokens`` with at least one of
these, and otherwise only these, ``details``/``detail`` or numbers (``input_token_details``,
``prompt_token_count``, ``cached_token``), is not secret by name. Any other word keeps the key secret
(``access_token``, ``session_token``, ``ephemeral_token``, ``write_token``, ``token_details``), and so does a key
matching a word of ``RedactionConfig.extra_key_words``."""

_USAGE_FILLER_WORDS: Final = frozenset({"details", "detail", "token", "tokens"})

DEFAULT_SAFE_KEYS: Final[tuple[str, ...]] = (
    # request limits
    "max_tokens",
    "max_output_tokens",
    "max_completion_tokens",
    "max_new_tokens",
    # counts in general
    "num_tokens",
    "token_count",
    "tokens",
    "tokenizer",
    "token_usage",
    "token_type",
    "token_limit",
    "usage",
    "usage_metadata",
    "cost",
    "cost_usd",
    "total_cost",
    "gen_ai_usage_input_tokens",
    "gen_ai_usage_output_tokens",
    # OpenAI chat completions ``usage``
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "prompt_tokens_details",
    "completion_tokens_details",
    "cached_tokens",
    "audio_tokens",
    "reasoning_tokens",
    "accepted_prediction_tokens",
    "rejected_prediction_tokens",
    "text_tokens",
    "image_tokens",
    "cache_write_tokens",
    # OpenAI Responses ``usage``
    "input_tokens",
    "output_tokens",
    "input_tokens_details",
    "output_tokens_details",
    "cache_write_tokens_details",
    "ttl_30m_tokens",
    "ttl_12h_tokens",
    # Anthropic ``usage``
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cache_creation",
    "ephemeral_5m_input_tokens",
    "ephemeral_1h_input_tokens",
    "server_tool_use",
    "web_search_requests",
    "web_fetch_requests",
    "service_tier",
    # LangChain ``AIMessage.usage_metadata``
    "input_token_details",
    "output_token_details",
    "cache_read",
    "audio",
    "reasoning",
)
"""Keys never redacted by name (compared after normalisation, so ``maxTokens`` equals ``max_tokens``): the
usage, token-count and cost fields of every supported SDK's response, and request limits. Their values are
still scanned for secret shapes."""

# ------------------------------------------------------------------------------------------ value shapes

_PATTERN_SOURCES: Final[dict[str, str]] = {
    # Provider API keys. Anthropic before OpenAI: both start with ``sk-``.
    "anthropic_api_key": r"(?<![A-Za-z0-9_\-])sk-ant-[A-Za-z0-9_\-]{20,}",
    "openai_api_key": r"(?<![A-Za-z0-9_\-])sk-[A-Za-z0-9_\-]{20,}",
    "aws_access_key_id": r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    "github_token": r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    "slack_token": r"(?<![A-Za-z0-9_\-])xox[abposr]-[A-Za-z0-9\-]{10,}",
    "google_api_key": r"(?<![A-Za-z0-9_\-])AIza[A-Za-z0-9_\-]{35}",
    "stripe_key": r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    "jwt": r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]*",
    "private_key": (
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s:,\-]|\\[nr])*)"
    ),
    "authorization_header": (
        r"(?i:\b(?:proxy-)?authorization)[\"']?\s*[:=]\s*[\"']?"
        r"(?:(?i:bearer|basic|token|digest|negotiate|apikey|ntlm)\s+)?(?P<secret>[^\s\"',;]{3,})"
    ),
    "bearer": r"(?i:\bbearer)\s+(?P<secret>[A-Za-z0-9._~+/\-]{8,}=*)",
    "url_credentials": r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@\"'<>]*:(?P<secret>[^/\s@\"'<>]+)@",
    "secret_assignment": "",  # built from the configured key words at the end of this module
    "card_number": (
        r"(?<![\w.+/\-])(?:[2-6]\d{12,18}"
        r"|[2-6]\d{3}(?:[ \-]\d{4}){2}[ \-]\d{1,4}(?:[ \-]?\d{3})?"
        r"|3[47]\d{2}[ \-]\d{6}[ \-]\d{5})(?!\w)(?!\.\d)"
    ),
}
DEFAULT_PATTERNS: Mapping[str, str] = MappingProxyType(_PATTERN_SOURCES)  # completed at the end of the module
"""Default value-shape rules, by name. Each is a regular expression searched in every string; when it has a
group named ``secret`` only that part is replaced (``Bearer <secret>``). ``card_number`` additionally needs
the Luhn check and a 2-6 leading digit; ``bearer`` needs a digit in the credential or 20+ characters;
``secret_assignment`` (``password=...``, ``"api_key": "..."`` in free text) is generated from the configured
key words and needs the assigned name to pass :meth:`Redactor.is_secret_key`. Names are what
``RedactionConfig.disabled_patterns`` accepts and what inline tokens carry."""

# Cheap substring hints: a rule runs on a string only if one of its hints occurs in it. ``None`` = always.
# Hints marked lower are tested against the lower-cased string.
_HINTS: Final[Mapping[str, tuple[tuple[str, ...], bool]]] = {
    "anthropic_api_key": (("sk-ant-",), False),
    "openai_api_key": (("sk-",), False),
    "aws_access_key_id": (("AKIA", "ASIA"), False),
    "github_token": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), False),
    "slack_token": (("xox",), False),
    "google_api_key": (("AIza",), False),
    "stripe_key": (("_live_", "_test_"), False),
    "jwt": (("eyJ",), False),
    "private_key": (("PRIVATE KEY",), False),
    "authorization_header": (("authorization",), True),
    "bearer": (("bearer",), True),
    "card_number": ((), False),  # see _card_hint
    "secret_assignment": ((), True),  # key-word hints and a '=' or ':'
    "url_credentials": (("://",), False),
}
_MIN_LENGTH: Final[Mapping[str, int]] = {
    "anthropic_api_key": 27,
    "openai_api_key": 23,
    "aws_access_key_id": 20,
    "github_token": 40,
    "slack_token": 15,
    "google_api_key": 39,
    "stripe_key": 24,
    "jwt": 18,
    "private_key": 30,
    "authorization_header": 17,
    "bearer": 15,
    "url_credentials": 8,
    "secret_assignment": 5,
    "card_number": 13,
}
_CARD_TABLE: Final = bytes(48 if 48 <= i <= 57 else 120 if i in (32, 45) else 46 for i in range(256))


def _card_hint(text: str) -> bool:
    """Cheap test for a run of 13+ digits, or digit groups 4-4-4 / 4-6-5 split by spaces or dashes."""
    mapped = text.encode("utf-8", "surrogatepass").translate(_CARD_TABLE)
    return b"0000x0000x0000" in mapped or b"0000000000000" in mapped or b"0000x000000x00000" in mapped


def _reduce_hints(words: Iterable[str]) -> tuple[str, ...]:
    """The fewest substrings such that every word contains one (shared 4+ letter prefixes are merged)."""
    hints = set(words)
    changed = True
    while changed:
        changed = False
        ordered = sorted(hints)
        for a, b in itertools.pairwise(ordered):
            n = 0
            while n < min(len(a), len(b)) and a[n] == b[n]:
                n += 1
            if n >= 4 and (a[:n] != a or b[:n] != b):
                hints -= {a, b}
                hints.add(a[:n])
                changed = True
                break
    return tuple(sorted(h for h in hints if not any(o != h and o in h for o in hints)))


# Characters from most to least frequent in typical payload JSON (English text, snake_case keys, ids).
_COMMON_FIRST: Final = ' "e:t,aoinsrhl_dcu{}m.fp-gwyb0123456789vkTSACIPMEBRDNLFHOGWUxjqzKVYJXQZ/'


_Gated = tuple[tuple[str, tuple[str, ...], tuple[Callable[[str], Any], ...]], ...]
_LONG_TEXT: Final = 256  # from this length on, compiled searches beat ``in`` (their call costs more, once)


def _gated(hints: Iterable[str]) -> _Gated:
    """``hints`` grouped under each hint's least frequent character: a text without that character (a
    memchr-fast test) cannot contain any hint of the group, so most hints of most texts are never searched
    for. Each group has its hints for ``in`` (short texts) and compiled searches for long texts: the regex
    engine finds a short literal faster than ``in`` does, and hints sharing their first two characters are
    one search (``gh(?:o_|p_|…)``)."""
    groups: dict[str, list[str]] = {}
    for hint in hints:
        gate = max(hint, key=lambda c: (_COMMON_FIRST.find(c) % (len(_COMMON_FIRST) + 1), c))
        groups.setdefault(gate, []).append(hint)
    gated = []
    for gate, group in sorted(groups.items()):
        by_prefix: dict[str, list[str]] = {}
        for hint in sorted(group):
            by_prefix.setdefault(hint[:2], []).append(hint)
        searches = []
        for prefix, members in by_prefix.items():
            if len(members) == 1:
                source = re.escape(members[0])
            else:
                source = re.escape(prefix) + "(?:" + "|".join(re.escape(m[2:]) for m in members) + ")"
            searches.append(re.compile(source).search)
        gated.append((gate, tuple(group), tuple(searches)))
    return tuple(gated)


def _hinted(text: str, groups: _Gated, long: bool) -> bool:
    """Whether ``text`` holds a hint of ``groups`` (see :func:`_gated`)."""
    for gate, hints, searches in groups:
        if gate in text:
            if long:
                for search in searches:
                    if search(text):
                        return True
            else:
                for hint in hints:
                    if hint in text:
                        return True
    return False


_REDACTED_TOKEN: Final = re.compile(r"\[REDACTED:[A-Za-z0-9_.\-]+:(?:hmac-sha256:[0-9a-f]+|error)\]")
_NOT_A_VALUE: Final = frozenset({"none", "null", "true", "false", "nil", "undefined", "***", "<redacted>"})
_AUTH_SCHEMES: Final = frozenset({"bearer", "basic", "token", "digest", "negotiate", "apikey", "ntlm"})
_WORD: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_ANCHORS: Final = ("^", "\\A")
_END_ANCHORS: Final = ("$", "\\Z", "\\z")


# ------------------------------------------------------------------------------------- encoded secrets

_CLEAN_MAX_CHARS: Final = 256 * 1024
"""The strings a redactor remembers as clean (see :meth:`Redactor.clean_strings`) hold at most this many
characters in all; past it the memory starts again empty. Small on purpose: what a run repeats (its messages,
names, keys) fits, and a long-running process recording unique texts keeps its memory flat."""
_CLEAN_MAX_STRING: Final = 8 * 1024
"""Longer strings are checked every time, never remembered (and so are strings too short to hold a secret)."""
_CLEAN_MAX_STRINGS: Final = 4096
"""The memory of clean strings holds at most this many strings (see :data:`_CLEAN_MAX_CHARS`)."""
_QUIET_KEYS_MAX: Final = 4096
"""At most this many dict keys are remembered as quiet (see :meth:`Redactor._gather_key`)."""
_MAX_GATHER_DEPTH: Final = 128
"""Deeper trees are left to :meth:`Redactor.redact` (its walk masks what it cannot descend into)."""

_MIN_ENCODED: Final = 6
"""Shortest text that can hold an encoded secret worth decoding."""
_MAX_ENCODED_RUNS: Final = 32
"""At most this many encoded runs of one text are decoded (bounded work on hostile input)."""
_MAX_ENCODED_CHARS: Final = 256 * 1024
"""At most this many characters of one text are decoded; runs beyond it are left as they are."""
_MIN_BASE64: Final = 16
_PERCENT: Final = re.compile(r"%[0-9A-Fa-f]{2}")
_RUN_BREAK: Final = re.compile(r"[\s\"'<>\\]")
_BASE64_RUN: Final = re.compile(r"[A-Za-z0-9+/_\-]{16,}={0,2}")
_BASE64_TABLE: Final = bytes(
    97 if chr(i).isascii() and (chr(i).isalnum() or chr(i) in "+/") else 46 for i in range(256)
)
_BASE64_GATE: Final = b"a" * _MIN_BASE64  # 16 base64 characters in a row (after translating with the table)
_URLSAFE: Final = str.maketrans("-_", "+/")


def _mixed_case(run: str) -> bool:
    """Base64 of text has upper- and lower-case letters; identifiers, hex digests and words mostly do not."""
    return run.lower() != run and run.upper() != run and not run.isalpha()


def _encoded_candidate(text: str) -> bool:
    """Cheap test: whether ``text`` holds a percent escape or a base64-looking run (mixed case, 16+ chars)."""
    if "%" in text and _PERCENT.search(text):
        return True
    if _BASE64_GATE not in text.encode("utf-8", "surrogatepass").translate(_BASE64_TABLE):
        return False
    for m in _BASE64_RUN.finditer(text):
        if _mixed_case(m.group(0)):
            return True
    return False


def _encoded_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, kind)`` of each percent-encoded run (the non-blank text around ``%XX`` escapes) and each
    base64-looking run of ``text``, in order of kind then position."""
    if "%" in text:
        end = 0
        for m in _PERCENT.finditer(text):
            if m.start() < end:
                continue
            start = m.start()
            while start > 0 and start > m.start() - 4096 and not _RUN_BREAK.match(text, start - 1):
                start -= 1
            brk = _RUN_BREAK.search(text, m.end())
            end = brk.start() if brk is not None else len(text)
            yield start, end, "percent"
    if _BASE64_GATE not in text.encode("utf-8", "surrogatepass").translate(_BASE64_TABLE):
        return
    for m in _BASE64_RUN.finditer(text):
        if _mixed_case(m.group(0)):
            yield m.start(), m.end(), "base64"


def _percent_decode(run: str) -> tuple[str, list[int] | None] | None:
    """``run`` with its ``%XX`` escapes decoded (UTF-8), and for ASCII results the offset in ``run`` of each
    decoded character (None when characters and bytes do not line up). None when nothing decodes."""
    data = bytearray()
    offsets: list[int] = []
    i = 0
    n = len(run)
    while i < n:
        ch = run[i]
        if ch == "%" and _PERCENT.match(run, i):
            data.append(int(run[i + 1 : i + 3], 16))
            offsets.append(i)
            i += 3
            continue
        encoded = ch.encode("utf-8", "surrogatepass")
        data += encoded
        offsets.extend([i] * len(encoded))
        i += 1
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    if text == run:
        return None
    return text, (offsets if len(text) == len(offsets) else None)


def _base64_text(run: str) -> str | None:
    """The text a base64 (or base64url) run decodes to, when it is printable UTF-8 text; else None."""
    core = run.rstrip("=").translate(_URLSAFE)
    if len(core) < _MIN_BASE64 or len(core) % 4 == 1:
        return None
    try:
        data = base64.b64decode(core + "=" * (-len(core) % 4), validate=True)
        text = data.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    visible = text.replace("\n", "").replace("\r", "").replace("\t", "")
    return text if visible and visible.isprintable() else None


def _words(key: str) -> tuple[str, ...]:
    """Lower-case words of a key in any style: ``X-Api-Key``, ``apiKey``, ``API_KEY`` -> ``("x"?, "api", "key")``."""
    return tuple(w.lower() for w in _WORD.findall(key))


def _normal_key(key: str) -> str:
    """A key in one canonical spelling (``maxTokens`` -> ``max_tokens``)."""
    return "_".join(_words(key))


def _luhn(digits: str) -> bool:
    """True if ``digits`` (only 0-9) pass the Luhn checksum."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _is_card_digits(digits: str) -> bool:
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn(digits)


# ------------------------------------------------------------------------------------------------ config


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


def _compile_user_pattern(where: str, source: Any) -> re.Pattern[str]:
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
            if not _words(word):
                raise ValueError(f"RedactionConfig.extra_key_words: {word!r} has no letters or digits")
        defaults = {_normal_key(w) for w in DEFAULT_SECRET_KEY_WORDS}
        for word in self.disabled_key_words:
            if _normal_key(word) not in defaults:
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
            pattern = _compile_user_pattern(f"extra_patterns[{name!r}]", source)
            text = pattern.pattern
            if text.startswith(_ANCHORS) or text.endswith(_END_ANCHORS):
                raise ValueError(
                    f"RedactionConfig.extra_patterns[{name!r}]: do not anchor with ^ or $; the "
                    f"pattern is searched inside strings and inside payload JSON"
                )
            if pattern.fullmatch("") is not None:
                raise ValueError(f"RedactionConfig.extra_patterns[{name!r}]: pattern matches the empty string")
            extra[name] = source
        object.__setattr__(self, "extra_patterns", MappingProxyType(extra))
        for i, source in enumerate(self.allowed_value_patterns):
            _compile_user_pattern(f"allowed_value_patterns[{i}]", source)


# ---------------------------------------------------------------------------------------------- key file


def _read_key_file(path: Path) -> bytes | None:
    """The key in ``path``, or None while the file is absent or still empty/partial (a writer is mid-way)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    text = data.strip()
    if re.fullmatch(rb"[0-9a-fA-F]{32,128}", text) and len(text) % 2 == 0:
        return bytes.fromhex(text.decode("ascii"))
    return None


def _write_key(fd: int, key: bytes) -> None:
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.hex().encode("ascii") + b"\n")
        fh.flush()
        os.fsync(fh.fileno())


def _load_or_create_key(home: Path) -> bytes:
    """Read ``<home>/redaction.key``, creating it (0600, atomically) on first use."""
    private_dir(home)
    path = home / KEY_FILE_NAME
    if not path.exists():
        key = secrets.token_bytes(_KEY_BYTES)
        tmp = home / f".{KEY_FILE_NAME}.{os.getpid()}.{secrets.token_hex(6)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            _write_key(fd, key)
            try:
                os.link(tmp, path)  # atomic and never partial: fails if another process got there first
            except FileExistsError:
                pass
            except OSError:  # filesystems without hard links: exclusive create of the final name
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                except FileExistsError:
                    pass
                else:
                    _write_key(fd, key)
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    deadline = time.monotonic() + 2.0
    while True:
        key_bytes = _read_key_file(path)
        if key_bytes is not None:
            break
        if time.monotonic() > deadline:
            raise ValueError(
                f"redaction key {path} is not a hex-encoded key; delete it to create a new one "
                f"(fingerprints recorded with the old key will no longer match)"
            )
        time.sleep(0.01)
    if len(key_bytes) < _MIN_KEY_BYTES:
        raise ValueError(f"redaction key {path} is shorter than {_MIN_KEY_BYTES} bytes; delete it to create a new one")
    was = private_file(path, label="redaction key ")
    if was is not None:
        _log.warning("redaction key %s had mode %o; tightened it to 600", path, was)
    return key_bytes


# ---------------------------------------------------------------------------------------------- redactor


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    pattern: re.Pattern[str]
    hints: tuple[str, ...] | None
    lower: bool
    group: str | int
    validate: Callable[[re.Match[str], str], bool] | None


@dataclass(frozen=True, slots=True)
class _Hit:
    start: int  # span of the secret (what is replaced)
    end: int
    mstart: int  # span of the whole match (e.g. "Bearer <secret>")
    mend: int
    rule: str
    secret: str


_canonical = json.JSONEncoder(
    ensure_ascii=False, allow_nan=True, sort_keys=True, separators=(",", ":"), default=repr
).encode


def _copy(value: Any) -> Any:
    """A fresh copy of the containers of a JSON-able tree (leaves are immutable and shared)."""
    kind = type(value)
    if kind is dict:
        return {k: (_copy(v) if type(v) in _CONTAINERS else v) for k, v in value.items()}
    if kind is list:
        return [(_copy(v) if type(v) in _CONTAINERS else v) for v in value]
    if kind is tuple:
        return tuple((_copy(v) if type(v) in _CONTAINERS else v) for v in value)
    return value


_CONTAINERS: Final = frozenset({dict, list, tuple})


class Redactor:
    """Replaces secrets by keyed fingerprints. Build one per installation with :meth:`for_home`.

    Thread-safe; every method that the recording path calls (:meth:`redact`, :meth:`scrub_text`,
    :meth:`suspects`) never raises.
    """

    def __init__(self, *, key: bytes, config: RedactionConfig | None = None) -> None:
        """A redactor using HMAC ``key`` (16+ bytes) and ``config`` (defaults when None).

        Raises ``ValueError`` for a short key or an unusable config.
        """
        if not isinstance(key, (bytes, bytearray)) or len(key) < _MIN_KEY_BYTES:
            raise ValueError(f"the redaction key must be at least {_MIN_KEY_BYTES} bytes")
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

        disabled = {_normal_key(w) for w in config.disabled_key_words}
        words = [w for w in DEFAULT_SECRET_KEY_WORDS if _normal_key(w) not in disabled]
        words += list(config.extra_key_words)
        singles: set[str] = set()
        phrases: set[tuple[str, ...]] = set()
        for w in words:
            parts = _words(w)
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
        extra = [_words(w) for w in config.extra_key_words]
        self._extra_singles = frozenset(p[0] for p in extra if len(p) == 1)
        self._extra_suffixes = tuple(sorted(w for w in self._extra_singles if len(w) >= 5))
        self._extra_phrases = tuple(sorted({p for p in extra if len(p) > 1}))
        self._safe = frozenset(_normal_key(k) for k in (*DEFAULT_SAFE_KEYS, *config.safe_keys))
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
        self._key_hints = _reduce_hints(key_hints)
        self._gated_key_hints = _gated(self._key_hints)

        self._allowed = frozenset(v.strip() for v in config.allowed_values)
        self._allowed_res = tuple(re.compile(p) for p in config.allowed_value_patterns)

        rules: list[_Rule] = []
        for name, source in DEFAULT_PATTERNS.items():
            if name in config.disabled_patterns:
                continue
            if name == "secret_assignment":  # follows the configured key words, not the default source
                rules.append(
                    _Rule(
                        name, self._assignment_pattern(singles, phrases), None, True, "secret", self._valid_assignment
                    )
                )
                continue
            flags = re.DOTALL if name == "private_key" else 0
            pattern = re.compile(source, flags)
            hints, lower = _HINTS.get(name, (None, False))
            group: str | int = "secret" if "secret" in pattern.groupindex else 0
            validate = _valid_card if name == "card_number" else _valid_bearer if name == "bearer" else None
            rules.append(_Rule(name, pattern, hints, lower, group, validate))
        self._custom: list[re.Pattern[str]] = []
        for name, user_source in config.extra_patterns.items():
            pattern = _compile_user_pattern(name, user_source)
            self._custom.append(pattern)
            group = "secret" if "secret" in pattern.groupindex else 0
            rules.append(_Rule(name, pattern, None, False, group, None))
        self._rules = tuple(rules)
        self._shape_hints = _reduce_hints(h for r in rules if r.hints and not r.lower for h in r.hints)
        self._gated_shape_hints = _gated(self._shape_hints)
        self._gated_lower_shape_hints = _gated(
            h
            for h in _reduce_hints(h for r in rules if r.hints and r.lower for h in r.hints)
            if not any(k in h for k in self._key_hints)
        )
        self._cards = "card_number" not in config.disabled_patterns
        self._assign = "secret_assignment" not in config.disabled_patterns
        self._min_len = 0 if self._custom else min((_MIN_LENGTH.get(r.name, 0) for r in rules), default=1 << 30)

    # -------------------------------------------------------------------------------------- construction

    @classmethod
    def for_home(cls, home: Path | str | os.PathLike[str], config: RedactionConfig | None = None) -> Redactor:
        """The redactor of the installation in ``home``, creating ``<home>/redaction.key`` on first use.

        The key file is created atomically with mode 0600 (if another process creates it at the same time,
        its key is used); an existing key file readable by group or others is tightened to 0600, or refused
        with ``ValueError`` if that fails. A malformed key file raises ``ValueError``.
        """
        return cls(key=_load_or_create_key(Path(home).expanduser()), config=config)

    # ------------------------------------------------------------------------------------------ key names

    def is_secret_key(self, key: str) -> bool:
        """True if values under ``key`` are secrets, judged by its words in any style and case.

        ``api_key``, ``X-Api-Key``, ``apiKey``, ``Authorization``, ``set-cookie``, ``client_secret``,
        ``refresh_token``, ``sessionId`` are secret; the safe keys (:data:`DEFAULT_SAFE_KEYS`: every supported
        SDK's usage, token-count and cost fields, plus the configured ones), token counts such as
        ``input_token_details`` (:data:`DEFAULT_USAGE_KEY_WORDS`), ``token_count`` and ``tokenizer`` are not.
        Cached.
        """
        cached = self._key_cache.get(key)
        if cached is not None:
            return cached
        try:
            result = self._judge_key(key) if isinstance(key, str) else self._judge_key(str(key))
        except Exception:  # noqa: BLE001 - err on the side of hiding the value
            result = True
        if len(self._key_cache) >= _KEY_CACHE_MAX:
            self._key_cache.clear()
        self._key_cache[key] = result
        return result

    def _judge_key(self, key: str) -> bool:
        words = _words(key)
        if not words or "_".join(words) in self._safe:
            return False
        if self._is_token_count(words):
            return bool(self._matched(words, self._extra_singles, self._extra_suffixes, self._extra_phrases))
        matched = self._matched(words, self._singles, self._suffixes, self._phrases)
        if not matched:
            return False
        # "token_count", "max_token", "secret_name": a neutral word outside the match describes the secret
        return not any(w in self._neutral for i, w in enumerate(words) if i not in matched)

    def _is_token_count(self, words: tuple[str, ...]) -> bool:
        """Whether ``words`` name a number of tokens rather than a token: ``token``/``tokens`` with at least
        one usage word and nothing but usage words, ``details`` and numbers besides
        (:data:`DEFAULT_USAGE_KEY_WORDS`)."""
        usage = self._usage
        if "token" not in words and "tokens" not in words:
            return False
        if not any(w in usage for w in words):
            return False
        return all(w in usage or w in _USAGE_FILLER_WORDS or w.isdigit() for w in words)

    @staticmethod
    def _matched(
        words: tuple[str, ...], singles: frozenset[str], suffixes: tuple[str, ...], phrases: tuple[tuple[str, ...], ...]
    ) -> set[int]:
        """Indices of ``words`` matched by the single words (and, for words of 5+ letters, suffixes) and the
        phrases (adjacent words) given."""
        matched: set[int] = set()
        for i, w in enumerate(words):
            if w in singles or (suffixes and len(w) > 5 and w.endswith(suffixes)):
                matched.add(i)
        n = len(words)
        for phrase in phrases:
            size = len(phrase)
            for i in range(n - size + 1):
                if words[i : i + size] == phrase:
                    matched.update(range(i, i + size))
        return matched

    # ---------------------------------------------------------------------------------------- fingerprint

    def fingerprint(self, secret: str | bytes) -> str:
        """``"hmac-sha256:"`` + the first 16 hex characters of HMAC-SHA256(installation key, secret).

        Equal secrets give equal fingerprints on this installation; nothing about the secret can be read
        back from it. Strings are hashed as UTF-8.
        """
        data = secret if isinstance(secret, bytes) else str(secret).encode("utf-8", "surrogatepass")
        return FINGERPRINT_PREFIX + hmac.new(self._key, data, hashlib.sha256).hexdigest()[:_FINGERPRINT_HEX]

    def derive_key(self, label: str) -> bytes:
        """A key for another purpose (the audit MAC, say) derived from the installation key:
        HMAC-SHA256(key, ``label``). Distinct labels give independent keys; the installation key never leaves."""
        return hmac.new(self._key, label.encode("utf-8"), hashlib.sha256).digest()

    def content_hash(self, content: str | bytes) -> str:
        """``"hmac-sha256:"`` + the 64 hex characters of HMAC-SHA256(installation key, content).

        The hash of every recorded content that could confirm a guess (tool arguments and results, model
        requests and responses, retrieval queries, documents and results, attachments, the full text of a
        truncated payload): without the key, hashing guesses (a PIN, a dictionary word) finds nothing. Strings
        are hashed as UTF-8. Costs about one sha256 of ``content`` (the keyed states are computed once).
        """
        if isinstance(content, (bytes, bytearray, memoryview)):
            data = bytes(content)
        else:
            data = str(content).encode("utf-8", "surrogatepass")
        inner = self._inner.copy()
        inner.update(data)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return CONTENT_HASH_PREFIX + outer.hexdigest()

    @staticmethod
    def is_digest(value: str) -> bool:
        """True for a content hash or a plain hex sha256: library-made text that holds no secret shape, left
        out of the pre-checks (its digit runs would look like card numbers to the cheap test)."""
        return (len(value) == 64 or len(value) == 76) and _DIGEST.fullmatch(value) is not None

    def marker(self, secret: Any, scope: str) -> dict[str, str]:
        """The object that replaces a secret: ``{"$redacted": <fingerprint>, "scope": <scope>}``.

        Non-string secrets are fingerprinted by their canonical JSON text.
        """
        if isinstance(secret, (str, bytes)):
            fp = self.fingerprint(secret)
        else:
            fp = self.fingerprint(_canonical(secret))
        return {REDACTED_KEY: fp, "scope": scope}

    # ---------------------------------------------------------------------------------------- free text

    def suspects(self, text: str) -> bool:
        """Cheap pre-check: False only if neither ``text`` nor any JSON tree it encodes can hold a secret.

        Made for the canonical JSON of a whole payload: keys and strings are looked at together by substring
        tests, so a False answer lets the caller skip :meth:`redact` entirely. Never raises (True on error).
        """
        try:
            return self._suspect_text(text)
        except Exception:  # noqa: BLE001
            return True

    def clean_strings(self, strings: Iterable[str]) -> bool:
        """True when none of ``strings`` can hold a secret (the pre-check of :meth:`suspects`, over them all).

        Strings already found clean are not looked at again: a run repeats its messages, names and keys in
        every step, and strings too short for any rule to match are not looked at either. When the pre-check
        over them all fails, each new string gets the full test (a UUID's digit groups pass for a card number's
        until the checksum is tried), so one id does not send a whole payload through the slow walk. Never
        raises (False on error).
        """
        try:
            clean = self._clean
            shortest = self._min_len  # a shorter string holds no secret (no rule matches it: see _hits)
            fresh = [text for text in strings if len(text) >= shortest and text not in clean]
            if not fresh:
                return True
            if self._suspect_text("\n".join(fresh)):
                for text in fresh:
                    if self._hits(text):
                        return False
            self._remember(fresh)
            return True
        except Exception:  # noqa: BLE001
            return False

    def is_clean(self, tree: Any) -> bool:
        """True when ``tree`` (JSON-able, as :func:`~otel_replay.snapshots.to_jsonable` makes) needs no
        redaction: no secret key, no marker passed on, no integer that could be a card number, and no string or
        key that fails the pre-check. When it is False, :meth:`redact` decides. Never raises (False on error).
        """
        try:
            strings: list[str] = []
            self._gather(tree, strings, 0)
        except Exception:  # noqa: BLE001 - _Suspicious, or anything unexpected: let redact() decide
            return False
        return self.clean_strings(strings)

    def is_clean_json(self, value: Any) -> bool:
        """:meth:`is_clean` for a value that has not been through :func:`~otel_replay.snapshots.to_jsonable`, in
        one walk instead of two: True only when ``value`` is plain JSON as ``to_jsonable`` returns it unchanged
        (exact ``dict``/``list``/``str``/``int``/``bool``/``None``, finite floats, string keys, no ``$type``,
        ``$truncated`` or ``$redacted`` key, shallower than its depth limit) *and* :meth:`is_clean` would say
        True of it. False says only "not both": encode the value and ask :meth:`is_clean`. Never raises."""
        try:
            strings: list[str] = []
            self._gather_plain(value, strings, 0)
        except Exception:  # noqa: BLE001 - _Suspicious (not plain, or not clean), or anything unexpected
            return False
        return self.clean_strings(strings)

    def _gather_plain(self, value: Any, strings: list[str], depth: int) -> None:
        """:meth:`_gather` that also raises :class:`_Suspicious` at anything that is not plain JSON."""
        kind = type(value)
        if kind is str:
            if value not in self._clean:
                strings.append(value)
            return
        if value is None or kind is bool:
            return
        if kind is int:
            if value >= 1_000_000_000_000 and self._cards:
                raise _Suspicious
            return
        if kind is float:
            if not math.isfinite(value):
                raise _Suspicious
            return
        if depth >= PLAIN_MAX_DEPTH:
            raise _Suspicious
        if kind is dict:
            if REDACTED_KEY in value or TYPE_TAG in value or TRUNCATED_TAG in value:
                raise _Suspicious
            quiet = self._quiet_keys
            clean = self._clean
            for k, v in value.items():
                if k not in quiet:
                    self._gather_key(k, strings)
                kv = type(v)
                if kv is str:
                    if v not in clean:
                        strings.append(v)
                elif v is None or kv is bool or (kv is int and v < 1_000_000_000_000):
                    continue  # the common leaves inline: one call per container, not per value
                else:
                    self._gather_plain(v, strings, depth + 1)
            return
        if kind is list:
            clean = self._clean
            for v in value:
                kv = type(v)
                if kv is str:
                    if v not in clean:
                        strings.append(v)
                elif not (v is None or kv is bool or (kv is int and v < 1_000_000_000_000)):
                    self._gather_plain(v, strings, depth + 1)
            return
        raise _Suspicious

    def _remember(self, fresh: list[str]) -> None:
        """Remember ``fresh`` strings as clean (the long ones excepted), within the memory's bound."""
        kept = [text for text in fresh if self._min_len <= len(text) <= _CLEAN_MAX_STRING]
        chars = sum(map(len, kept))
        total = self._clean_chars + chars
        if total > _CLEAN_MAX_CHARS or len(self._clean) + len(kept) > _CLEAN_MAX_STRINGS:
            self._clean = {}
            total = chars
        self._clean.update(dict.fromkeys(kept))
        self._clean_chars = total

    def _gather(self, value: Any, strings: list[str], depth: int) -> None:
        """The strings and keys of a JSON tree not yet known clean, added to ``strings``; raises
        :class:`_Suspicious` at anything the pre-check cannot vouch for (see :meth:`is_clean`)."""
        kind = type(value)
        if kind is str:
            if value not in self._clean:
                strings.append(value)
            return
        if value is None or kind is bool or kind is float:
            return
        if kind is int:
            if value >= 1_000_000_000_000 and self._cards:
                raise _Suspicious
            return
        if depth > _MAX_GATHER_DEPTH:
            raise _Suspicious
        if kind is dict:
            # a marker passed on takes the scope of where it is now; a dict in pair form (non-string keys) has its
            # key names among its values, where only the full walk applies the key-name rule
            if REDACTED_KEY in value or value.get("$type") == "dict":
                raise _Suspicious
            quiet = self._quiet_keys
            clean = self._clean
            for k, v in value.items():
                if k not in quiet:
                    self._gather_key(k, strings)
                kv = type(v)
                if kv is str:
                    if v not in clean:
                        strings.append(v)
                elif v is None or kv is bool or kv is float or (kv is int and v < 1_000_000_000_000):
                    continue  # the common leaves inline: one call per container, not per value
                else:
                    self._gather(v, strings, depth + 1)
            return
        if kind is list:
            clean = self._clean
            for v in value:
                kv = type(v)
                if kv is str:
                    if v not in clean:
                        strings.append(v)
                elif not (v is None or kv is bool or kv is float or (kv is int and v < 1_000_000_000_000)):
                    self._gather(v, strings, depth + 1)
            return
        raise _Suspicious

    def _gather_key(self, key: Any, strings: list[str]) -> None:
        """:meth:`_gather` for a dict key seen for the first time: raises :class:`_Suspicious` for a secret
        key (or one that is not a string), adds a key the pre-check has not passed yet to ``strings``, and
        remembers a key that is neither as quiet (keys recur in every payload: one lookup from then on)."""
        if type(key) is not str:
            raise _Suspicious
        secret = self._key_cache.get(key)
        if secret is None:
            secret = self.is_secret_key(key)
        if secret:
            raise _Suspicious
        if len(key) >= self._min_len and key not in self._clean:
            known = self._key_scrub_cache.get(key)
            if known is None or known[1]:
                strings.append(key)
                return
        if len(self._quiet_keys) >= _QUIET_KEYS_MAX:
            self._quiet_keys = {}
        self._quiet_keys[key] = None

    def _suspect_text(self, text: str) -> bool:
        return self._suspect_plain(text) or (len(text) >= _MIN_ENCODED and _encoded_candidate(text))

    def _suspect_plain(self, text: str) -> bool:
        """The substring pre-check of the shape and key-word rules (encoded runs not considered)."""
        lower = text.lower()
        long = len(text) >= _LONG_TEXT
        if _hinted(lower, self._gated_key_hints, long) and self._key_hint_beyond_safe_keys(lower):
            return True
        if _hinted(text, self._gated_shape_hints, long) or _hinted(lower, self._gated_lower_shape_hints, long):
            return True
        if self._cards and len(text) >= 13 and _card_hint(text):
            return True
        for pattern in self._custom:
            if pattern.search(text):
                return True
        return False

    def _key_hint_beyond_safe_keys(self, lower: str) -> bool:
        """Whether a key hint still occurs once the safe keys (``"prompt_tokens":`` and the like, which every
        model response carries) are taken out of the JSON text."""
        for key in self._safe_json_keys:
            if key in lower:
                lower = lower.replace(key, "")
        return any(hint in lower for hint in self._key_hints)

    def _may_match(self, rule: _Rule, text: str, lower: str | None) -> bool:
        """Whether ``rule`` can match ``text`` at all, by substring hints (``lower`` is ``text.lower()``)."""
        name = rule.name
        if name == "card_number":
            return len(text) >= 13 and _card_hint(text)
        if name == "secret_assignment":
            if "=" not in text and ":" not in text:
                return False
            haystack = lower if lower is not None else text.lower()
            for hint in self._key_hints:
                if hint in haystack:
                    return True
            return False
        hints = rule.hints
        if hints is None:
            return rule.pattern.search(text) is not None
        haystack = (lower if lower is not None else text.lower()) if rule.lower else text
        for hint in hints:
            if hint in haystack:
                return True
        return False

    def _hits(self, text: str) -> list[_Hit]:
        """Secret spans in ``text``, left to right; overlapping spans are merged (nothing is left half-shown).

        Spans that fall inside an existing ``[REDACTED:...]`` token are dropped, so scrubbing is idempotent.
        """
        if len(text) < self._min_len:
            return []
        plain = self._suspect_plain(text)
        encoded = len(text) >= _MIN_ENCODED and _encoded_candidate(text)
        if not plain and not encoded:
            return []
        found = self._found(text) if plain else []
        if encoded:
            found.extend(self._encoded_found(text))
        return self._merged(text, found)

    def _found(self, text: str) -> list[tuple[int, int, int, int, str, str | None]]:
        """Every match of every shape rule in ``text`` (not merged)."""
        lower: str | None = None
        found: list[tuple[int, int, int, int, str, str | None]] = []
        for rule in self._rules:
            if lower is None and (rule.lower or rule.name == "secret_assignment"):
                lower = text.lower()
            if not self._may_match(rule, text, lower):
                continue
            for m in rule.pattern.finditer(text):
                span = self._secret_span(rule, m)
                if span is None:
                    continue
                start, end = span
                if self._is_allowed(text[start:end]) or self._is_allowed(m.group(0)):
                    continue
                found.append((start, end, m.start(), m.end(), rule.name, None))
        return found

    def _encoded_found(self, text: str) -> list[tuple[int, int, int, int, str, str | None]]:
        """Secrets inside percent-encoded and base64 runs of ``text``: each run is decoded once (no recursion),
        within :data:`_MAX_ENCODED_RUNS` runs and :data:`_MAX_ENCODED_CHARS` characters per text, and scanned
        with the shape rules. A percent-encoded secret is replaced where it stands (the encoded characters);
        a base64 run holding a secret is replaced whole. The fingerprint is that of the decoded secret, so an
        encoded secret and the same secret in clear compare equal."""
        found: list[tuple[int, int, int, int, str, str | None]] = []
        budget = _MAX_ENCODED_CHARS
        runs = 0
        for start, end, kind in _encoded_runs(text):
            runs += 1
            if runs > _MAX_ENCODED_RUNS:
                break
            if end - start > budget:
                continue
            budget -= end - start
            run = text[start:end]
            if kind == "percent":
                decoded = _percent_decode(run)
                if decoded is None:
                    continue
                plain, offsets = decoded
                for s0, e0, _, _, rule, _ in self._found(plain) if self._suspect_plain(plain) else ():
                    if offsets is None:
                        s1, e1 = start, end
                    else:
                        s1, e1 = start + offsets[s0], start + (offsets[e0] if e0 < len(offsets) else len(run))
                    found.append((s1, e1, s1, e1, f"{rule}.percent", plain[s0:e0]))
            else:
                b64_plain = _base64_text(run)
                if b64_plain is None or not self._suspect_plain(b64_plain):
                    continue
                inner = self._found(b64_plain)
                if inner:
                    secret = b64_plain[inner[0][0] : inner[0][1]] if len(inner) == 1 else b64_plain
                    found.append((start, end, start, end, f"{inner[0][4]}.base64", secret))
        return found

    def _merged(self, text: str, found: list[tuple[int, int, int, int, str, str | None]]) -> list[_Hit]:
        """Matches sorted and merged into hits (overlaps joined; matches inside existing tokens dropped)."""
        if not found:
            return []
        found.sort(key=lambda f: (f[0], -f[1]))
        tokens: list[tuple[int, int]] = []
        if "[REDACTED:" in text:
            tokens = [m.span() for m in _REDACTED_TOKEN.finditer(text)]
        hits: list[_Hit] = []
        for start, end, mstart, mend, name, decoded in found:
            if any(t0 <= start and end <= t1 for t0, t1 in tokens):
                continue
            if hits and start < hits[-1].end:
                last = hits[-1]
                if end <= last.end:  # wholly inside the previous hit
                    continue
                hits[-1] = _Hit(
                    last.start, end, min(mstart, last.mstart), max(mend, last.mend), last.rule, text[last.start : end]
                )
                continue
            hits.append(_Hit(start, end, mstart, mend, name, decoded if decoded is not None else text[start:end]))
        return hits

    def _secret_span(self, rule: _Rule, m: re.Match[str]) -> tuple[int, int] | None:
        """The part of match ``m`` to replace, or None if the rule's validator rejects it."""
        if m.end() == m.start():
            return None
        if rule.validate is not None and not rule.validate(m, m.string):
            return None
        if rule.name == "secret_assignment":
            start, end = m.span("qsecret") if m.group("qsecret") is not None else m.span("secret")
        else:
            start, end = m.span(rule.group)
        if start < 0 or end <= start:
            return None
        return start, end

    def scrub_text(self, text: object, scope: str) -> tuple[str, int]:
        """``text`` with every shape-matching secret replaced inline by ``[REDACTED:<rule>:<fingerprint>]``.

        Returns the new text and the number of replacements. ``scope`` names where the text came from (it is
        used for the marker if the scan fails). Never raises: on an internal failure the whole text is
        replaced by ``[REDACTED:error]``.
        """
        try:
            if not isinstance(text, str):
                text = str(text)
            hits = self._hits(text)
            if not hits:
                return text, 0
            return self._replace(text, hits), len(hits)
        except Exception:  # noqa: BLE001 - never leak, never raise
            _log.warning("redaction failed at %s; masked the whole text", scope, exc_info=True)
            return "[REDACTED:error]", 1

    def scrub_pieces(self, pieces: list[str], scope: str) -> tuple[list[str], int]:
        """Pieces of one text (the deltas of a stream) redacted as the text they make up together.

        The joined text is scanned once and the pieces returned are cut from its scrubbed form, so joining
        them gives exactly ``scrub_text("".join(pieces))``: a secret split over several pieces (``"sk-pro"``,
        ``"j-abc…"``) is replaced whole, its token standing in the piece where the secret began, and the
        pieces it spanned lose their part of it. Returns the pieces and the number of replacements; the input
        list is not changed. Never raises (on failure every piece is masked).
        """
        try:
            joined = "".join(pieces)
            hits = self._hits(joined)
            if not hits:
                return list(pieces), 0
            out: list[str] = []
            pos = 0
            i = 0
            for piece in pieces:
                end = pos + len(piece)
                parts: list[str] = []
                cursor = pos
                while cursor < end:
                    while i < len(hits) and hits[i].end <= cursor:
                        i += 1
                    if i < len(hits) and hits[i].start <= cursor:  # inside a secret: its token, once
                        if hits[i].start == cursor:
                            parts.append(f"[REDACTED:{hits[i].rule}:{self._hit_fingerprint(hits[i])}]")
                        cursor = min(hits[i].end, end)
                    else:
                        stop = min(hits[i].start, end) if i < len(hits) else end
                        parts.append(joined[cursor:stop])
                        cursor = stop
                out.append("".join(parts))
                pos = end
            return out, len(hits)
        except Exception:  # noqa: BLE001 - never leak, never raise
            _log.warning("redaction failed at %s; masked the whole stream", scope, exc_info=True)
            return ["[REDACTED:error]"] + [""] * (len(pieces) - 1) if pieces else [], 1

    def collect_strings(
        self,
        attributes: Mapping[str, Any],
        strings: list[str],
        *,
        known_keys: frozenset[str] | set[str] = frozenset(),
        skip_keys: frozenset[str] | set[str] = frozenset(),
    ) -> bool:
        """Add the string values of OpenTelemetry ``attributes`` (and the strings in sequence values) to
        ``strings``, for one pre-check over all of them; digests are left out, keys in ``skip_keys`` too. Returns
        True as soon as a key not in ``known_keys`` names a secret (then ``strings`` is incomplete). Strings the
        redactor remembers as clean (see :meth:`clean_strings`) are left out as well."""
        clean = self._clean
        shortest = self._min_len
        digest = _DIGEST.fullmatch
        for key, value in attributes.items():
            if key in skip_keys:
                continue
            if key not in known_keys and self.is_secret_key(key):
                return True
            if type(value) is str:
                # too short for any rule, or known clean: left out at once (is_digest inlined)
                size = len(value)
                if size >= shortest and value not in clean and not ((size == 64 or size == 76) and digest(value)):
                    strings.append(value)
            elif isinstance(value, str):  # a str subclass is exported as its text: judged as that text
                text = str.__str__(value)
                if not self.is_digest(text):
                    strings.append(text)
            elif isinstance(value, (tuple, list)):
                strings.extend(v if type(v) is str else str.__str__(v) for v in value if isinstance(v, str))
        return False

    def scrub_attributes(
        self,
        attributes: Mapping[str, Any],
        scope: str,
        *,
        known_keys: frozenset[str] | set[str] = frozenset(),
        skip_keys: frozenset[str] | set[str] = frozenset(),
    ) -> tuple[dict[str, Any] | None, int]:
        """OpenTelemetry attributes with every secret replaced: values under a secret key name (unless the key
        is in ``known_keys``) become ``[REDACTED:secret_key:<fingerprint>]``, strings (and strings in
        sequences) are scrubbed inline. Keys in ``skip_keys`` are passed on unchanged.

        Returns ``(None, 0)`` when nothing had to change (the common case, decided by the cheap pre-check),
        else the new attributes and the number of replacements. Never raises (a failure masks every string).
        """
        try:
            strings: list[str] = []
            secret_keys = self.collect_strings(attributes, strings, known_keys=known_keys, skip_keys=skip_keys)
            if not secret_keys and self.clean_strings(strings):
                return None, 0
            out: dict[str, Any] = {}
            count = 0
            for key, value in attributes.items():
                if key in skip_keys:
                    out[key] = value
                    continue
                where = f"{scope}.{key}"
                if (
                    key not in known_keys
                    and self.is_secret_key(key)
                    and value not in ("", None)
                    and not isinstance(value, bool)
                ):
                    if isinstance(value, (tuple, list)):
                        out[key] = tuple(f"[REDACTED:secret_key:{self.fingerprint(str(v))}]" for v in value)
                        count += len(value)
                    else:
                        out[key] = f"[REDACTED:secret_key:{self.fingerprint(str(value))}]"
                        count += 1
                elif isinstance(value, str):
                    out[key], n = self.scrub_text(value, where)
                    count += n
                elif isinstance(value, (tuple, list)) and any(isinstance(v, str) for v in value):
                    items = []
                    for v in value:
                        if isinstance(v, str):
                            v, n = self.scrub_text(v, where)
                            count += n
                        items.append(v)
                    out[key] = tuple(items)
                else:
                    out[key] = value
            return (out, count) if count else (None, 0)
        except Exception:  # noqa: BLE001 - never leak, never raise
            _log.warning("redaction failed at %s; masked every string attribute", scope, exc_info=True)
            return {k: ("[REDACTED:error]" if isinstance(v, str) else v) for k, v in attributes.items()}, 1

    def _replace(self, text: str, hits: list[_Hit]) -> str:
        parts: list[str] = []
        pos = 0
        for hit in hits:
            parts.append(text[pos : hit.start])
            parts.append(f"[REDACTED:{hit.rule}:{self._hit_fingerprint(hit)}]")
            pos = hit.end
        parts.append(text[pos:])
        return "".join(parts)

    def _hit_fingerprint(self, hit: _Hit) -> str:
        if hit.rule == "card_number":  # "4111 1111 …" and 4111111… are the same card
            return self.fingerprint("".join(ch for ch in hit.secret if ch.isdigit()))
        return self.fingerprint(hit.secret)

    def classify(self, text: object) -> str | None:
        """The rule name if the whole of ``text`` (stripped) is one secret, else None.

        ``"sk-proj-…"`` -> ``"openai_api_key"``, ``"Bearer abc123…"`` -> ``"bearer"``,
        ``"4111 1111 1111 1111"`` -> ``"card_number"``; ``"my key is sk-…"`` -> None (scrub it inline).
        """
        try:
            if not isinstance(text, str):
                return None
            hits = self._hits(text)
            hit = self._whole(text, hits)
        except Exception:  # noqa: BLE001
            return None
        return hit.rule if hit is not None else None

    @staticmethod
    def _whole(text: str, hits: list[_Hit]) -> _Hit | None:
        """The one hit that covers all of ``text`` but surrounding whitespace, if there is one."""
        if len(hits) != 1:
            return None
        hit = hits[0]
        return hit if not text[: hit.mstart].strip() and not text[hit.mend :].strip() else None

    def _is_allowed(self, value: str) -> bool:
        if value in self._allowed:
            return True
        for pattern in self._allowed_res:
            if pattern.fullmatch(value):
                return True
        return False

    # ------------------------------------------------------------------------------------------ JSON trees

    def redact(self, value: Any, scope: str) -> tuple[Any, int]:
        """A new tree with every secret in ``value`` replaced, and the number of replacements.

        ``value`` is a JSON-able tree (dict / list / tuple / str / int / float / bool / None; tuples come
        back as lists). Values under secret keys become markers whatever their type (``None``, booleans and
        empty values are kept: there is nothing to hide); strings that are wholly a secret become markers;
        strings that contain secrets are scrubbed inline; integers that are card numbers become markers;
        dict keys that contain secrets are scrubbed. ``scope`` is the dotted path of ``value``; children get
        ``scope.key`` and ``scope[index]``. Existing markers are kept. The input is never mutated. Never
        raises: on an internal failure the whole value is replaced by a marker with fingerprint ``"error"``.
        """
        try:
            if self.is_clean(value):
                return _copy(value), 0
            counter = [0]
            result = self._walk(value, scope, counter, 0)
            return result, counter[0]
        except Exception:  # noqa: BLE001 - never leak, never raise
            _log.warning("redaction failed at %s; masked the whole value", scope, exc_info=True)
            return {REDACTED_KEY: _ERROR_FINGERPRINT, "scope": scope}, 1

    def _secret_value(self, value: Any, scope: str, counter: list[int]) -> Any:
        """Replacement of a value found under a secret key."""
        if value is None or isinstance(value, bool) or value == "" or value == {} or value == []:
            return _copy(value)
        if isinstance(value, dict) and _is_marker(value):
            return {REDACTED_KEY: value[REDACTED_KEY], "scope": scope}
        if isinstance(value, str):
            stripped = value.strip()
            if stripped in self._allowed or self._is_allowed(stripped):
                return value
            hit = self._whole(stripped, self._hits(stripped))
            counter[0] += 1
            if hit is not None:
                return {REDACTED_KEY: self._hit_fingerprint(hit), "scope": scope}
            return self.marker(stripped, scope)
        counter[0] += 1
        return self.marker(value, scope)

    def _pair(self, pair: Any, scope: str, counter: list[int], depth: int) -> Any:
        """One ``[key, value]`` item of a dict encoded in pair form (non-string keys): the key-name rule applies
        to string keys and to the name and value of enum keys."""
        if type(pair) is not list or len(pair) != 2:
            return self._walk(pair, scope, counter, depth + 1)
        key, value = pair
        names = (
            [key]
            if type(key) is str
            else (
                [str(key.get("name")), str(key.get("value"))]
                if type(key) is dict and key.get("$type") == "enum"
                else []
            )
        )
        label = names[0] if names else str(key)
        child = f"{scope}.{label}" if scope else label
        new_key = self._walk(key, scope, counter, depth + 1)
        if any(self.is_secret_key(n) for n in names):
            return [new_key, self._secret_value(value, child, counter)]
        return [new_key, self._walk(value, child, counter, depth + 1)]

    def _walk(self, value: Any, scope: str, counter: list[int], depth: int) -> Any:
        kind = type(value)
        if kind is str:
            return self._string(value, scope, counter)
        if kind is dict:
            if _is_marker(value):  # a redacted value passed on (a replay's input): same fingerprint, new place
                return {REDACTED_KEY: value[REDACTED_KEY], "scope": scope}
            if value.get("$type") == "dict" and type(value.get("items")) is list:
                return {"$type": "dict", "items": [self._pair(p, scope, counter, depth) for p in value["items"]]}
            out: dict[Any, Any] = {}
            for k, v in value.items():
                skey = k if type(k) is str else str(k)
                secret_key = self.is_secret_key(skey)
                if len(skey) >= self._min_len:  # a key can hold a secret too; scopes use the scrubbed key
                    cached = self._key_scrub_cache.get(skey)
                    if cached is None:
                        cached = self.scrub_text(skey, scope)
                        if len(self._key_scrub_cache) >= _KEY_CACHE_MAX:
                            self._key_scrub_cache.clear()
                        self._key_scrub_cache[skey] = cached
                    if cached[1]:
                        counter[0] += cached[1]
                        skey = k = cached[0]
                child = f"{scope}.{skey}" if scope else skey
                if secret_key:
                    new = self._secret_value(v, child, counter)
                else:
                    new = self._walk(v, child, counter, depth + 1)
                out[k] = new
            return out
        if kind is list or kind is tuple:
            items = [self._walk(v, f"{scope}[{i}]", counter, depth + 1) for i, v in enumerate(value)]
            return items if kind is list else tuple(items)
        if kind is int:
            if self._cards and value >= 1_000_000_000_000 and _is_card_digits(str(value)):
                counter[0] += 1
                return self.marker(str(value), scope)
            return value
        if value is None or kind is bool or kind is float:
            return value
        if isinstance(value, str):  # str subclasses
            return self._string(str(value), scope, counter)
        if isinstance(value, dict):
            return self._walk(dict(value), scope, counter, depth)
        if isinstance(value, (list, tuple)):
            return self._walk(list(value), scope, counter, depth)
        if isinstance(value, (bytes, bytearray)):
            return self._string(bytes(value).decode("utf-8", "replace"), scope, counter)
        if isinstance(value, int) and not isinstance(value, bool):
            return self._walk(int(value), scope, counter, depth)
        # Not JSON-able: keep it only if its text is clean.
        text = str(value)
        if self._hits(text) or self.is_secret_key(type(value).__name__):
            counter[0] += 1
            return self.marker(text, scope)
        return value

    def _string(self, value: str, scope: str, counter: list[int]) -> Any:
        hits = self._hits(value)
        if not hits:
            return value
        whole = self._whole(value, hits)
        if whole is not None:
            counter[0] += 1
            return {REDACTED_KEY: self._hit_fingerprint(whole), "scope": scope}
        counter[0] += len(hits)
        return self._replace(value, hits)

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
        if value is None or value.strip().lower() in _NOT_A_VALUE or value.startswith(("[REDACTED:", "{", "[")):
            return False
        if m.group("qsecret") is None and value.lower() in _AUTH_SCHEMES:
            return False  # "Authorization: Bearer <token>": the token is the secret, see authorization_header
        key = m.group("key")
        return bool(key) and self.is_secret_key(key)

    def __repr__(self) -> str:
        return f"Redactor(rules={[r.name for r in self._rules]!r}, key=<hidden>)"


class _Suspicious(Exception):
    """Raised inside the fast-path scan when a value needs the full walk."""


_MARKER_VALUE: Final = re.compile(r"hmac-sha256:[0-9a-f]{16}|error")


def _is_marker(value: dict[Any, Any]) -> bool:
    """True for a marker this module made (so re-redacting a tree keeps it as it is)."""
    if len(value) != 2 or not isinstance(value.get("scope"), str):
        return False
    fp = value.get(REDACTED_KEY)
    return isinstance(fp, str) and _MARKER_VALUE.fullmatch(fp) is not None


def _valid_card(m: re.Match[str], text: str) -> bool:
    digits = "".join(ch for ch in m.group(0) if ch.isdigit())
    return _is_card_digits(digits)


def _valid_bearer(m: re.Match[str], text: str) -> bool:
    token = m.group("secret")
    return len(token) >= 20 or any(ch.isdigit() for ch in token)


def _default_assignment_source() -> str:
    singles = {w for w in DEFAULT_SECRET_KEY_WORDS if len(_words(w)) == 1}
    phrases = {_words(w) for w in DEFAULT_SECRET_KEY_WORDS if len(_words(w)) > 1}
    return Redactor._assignment_pattern(singles, phrases).pattern


_PATTERN_SOURCES["secret_assignment"] = _default_assignment_source()


# -------------------------------------------------------------------------------------------------- logs

LOGGER_NAMES: Final[tuple[str, ...]] = (
    "otel_replay",
    "otel_replay.audit",
    "otel_replay.clickhouse",
    "otel_replay.ingest",
    "otel_replay.rows",
    "otel_replay.spool",
    "otel_replay.store",
)
"""The loggers otel-replay writes to; each carries a :class:`ScrubbingLogFilter` (records of a child logger do
not pass through the filters of its parent, so every one needs its own). Every ``logging.getLogger("...")``
name in the package must be listed here: a test reads the package's source and fails on a name missing."""

_fallback: list[Redactor] = []
_message_source: list[Callable[[], Redactor | None]] = []


def set_message_redactor_source(source: Callable[[], Redactor | None]) -> None:
    """Tell :func:`scrub_message` where the configured redactor is (``exporting.setup`` registers the current
    runtime's redactor when it is loaded; this module never looks upwards itself)."""
    _message_source[:] = [source]


def _message_redactor() -> Redactor:
    """The configured redactor, or (before :func:`otel_replay.configure`) one with a key of this process only,
    so that scrubbing a message never creates a key file."""
    for source in _message_source:
        try:
            current = source()
        except Exception:  # noqa: BLE001 - scrubbing a message never raises; the fallback does the job
            current = None
        if current is not None:
            return current
    if not _fallback:
        _fallback.append(Redactor(key=secrets.token_bytes(_KEY_BYTES)))
    return _fallback[0]


def scrub_message(text: Any) -> str:
    """A message for people (a log line, an error line, an exception text) with every secret shape replaced
    inline, e.g. the password of ``http://user:pass@host:8123``. Never raises.

    One difference from :meth:`Redactor.scrub_text`: a ``name: value`` assignment whose value is a short
    lower-case word (``passwd-file: no such file``) is prose in a message, not a credential, and is kept."""
    try:
        return _scrubbed_message(_message_redactor(), str(text))[0]
    except Exception:  # noqa: BLE001
        return "[REDACTED:error]"


def _scrubbed_message(redactor: Redactor, text: str) -> tuple[str, int]:
    hits = [
        h
        for h in redactor._hits(text)
        if not (
            h.rule == "secret_assignment"
            and len(h.secret) <= 3
            and h.secret.isalpha()
            and h.secret.islower()
            and ":" in text[h.mstart : h.start]
        )
    ]
    return (redactor._replace(text, hits), len(hits)) if hits else (text, 0)


class ScrubbingLogFilter(logging.Filter):
    """Scrubs every record of otel-replay's loggers before any handler formats it: the message (with its
    arguments), the formatted exception and the stack. Never drops a record, never raises."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            redactor = _message_redactor()
            clean, n = _scrubbed_message(redactor, record.getMessage())
            if n:
                record.msg, record.args = clean, ()
            if record.exc_info and not record.exc_text:
                record.exc_text = _scrubbed_message(redactor, logging.Formatter().formatException(record.exc_info))[0]
            if record.stack_info:
                record.stack_info = _scrubbed_message(redactor, record.stack_info)[0]
        except Exception:  # noqa: BLE001 - a log record is never lost to its scrubbing
            record.msg, record.args, record.exc_info, record.exc_text = "[REDACTED:error]", (), None, None
        return True


def install_log_scrubbing() -> None:
    """Put one :class:`ScrubbingLogFilter` on each of :data:`LOGGER_NAMES` (idempotent).

    Called when this module is imported: the loggers are process-wide, and so is this filter."""
    for name in LOGGER_NAMES:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ScrubbingLogFilter) for f in logger.filters):
            logger.addFilter(ScrubbingLogFilter())


install_log_scrubbing()
