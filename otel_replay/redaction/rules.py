"""What counts as a secret: the marker and fingerprint constants, the default secret, neutral, usage and safe
key words, the value-shape patterns (:data:`DEFAULT_PATTERNS`, completed with the assignment rule by
:mod:`.redactor`) with their cheap hints and shortest lengths, how a key splits into words, the card checks,
and the rule and hit records the scanner works with.

It must never hold state that changes, run a pattern over a value, or import anything of the package.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

log = logging.getLogger("otel_replay")

REDACTED_KEY: Final = "$redacted"
"""Key of the marker object that replaces a secret: ``{"$redacted": "<fingerprint>", "scope": "<where>"}``."""

FINGERPRINT_PREFIX: Final = "hmac-sha256:"
"""Prefix of every fingerprint; 16 lowercase hex characters of HMAC-SHA256 follow it."""

CONTENT_HASH_PREFIX: Final = "hmac-sha256:"
"""Prefix of every content hash (:meth:`Redactor.content_hash`); all 64 hex characters of the HMAC follow it."""

DIGEST: Final = re.compile(r"(?:hmac-sha256:)?[0-9a-f]{64}")

KEY_FILE_NAME: Final = "redaction.key"
"""Name of the per-installation HMAC key file inside the otel-replay home (mode 0600)."""

FINGERPRINT_HEX: Final = 16
KEY_BYTES: Final = 32
MIN_KEY_BYTES: Final = 16
ERROR_FINGERPRINT: Final = "error"
KEY_CACHE_MAX: Final = 8192

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

USAGE_FILLER_WORDS: Final = frozenset({"details", "detail", "token", "tokens"})

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

PATTERN_SOURCES: Final[dict[str, str]] = {
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
    # the password runs to the last "@" of the URL (within 256 characters: bounded work on hostile text), so one
    # holding an unencoded "/", "?", "#" or "@" is masked whole
    "url_credentials": r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@\"'<>]*:(?P<secret>[^\s\"'<>]{1,256})@",
    "secret_assignment": "",  # built from the configured key words at the end of this module
    "card_number": (
        r"(?<![\w.+/\-])(?:[2-6]\d{12,18}"
        r"|[2-6]\d{3}(?:[ \-]\d{4}){2}[ \-]\d{1,4}(?:[ \-]?\d{3})?"
        r"|3[47]\d{2}[ \-]\d{6}[ \-]\d{5})(?!\w)(?!\.\d)"
    ),
}
DEFAULT_PATTERNS: Mapping[str, str] = MappingProxyType(PATTERN_SOURCES)  # completed at the end of the module
"""Default value-shape rules, by name. Each is a regular expression searched in every string; when it has a
group named ``secret`` only that part is replaced (``Bearer <secret>``). ``card_number`` additionally needs
the Luhn check and a 2-6 leading digit; ``bearer`` needs a digit in the credential or 20+ characters;
``secret_assignment`` (``password=...``, ``"api_key": "..."`` in free text) is generated from the configured
key words and needs the assigned name to pass :meth:`Redactor.is_secret_key`. Names are what
``RedactionConfig.disabled_patterns`` accepts and what inline tokens carry."""

# Cheap substring hints: a rule runs on a string only if one of its hints occurs in it. ``None`` = always.
# Hints marked lower are tested against the lower-cased string.
HINTS: Final[Mapping[str, tuple[tuple[str, ...], bool]]] = {
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
    "card_number": ((), False),  # see card_hint
    "secret_assignment": ((), True),  # key-word hints and a '=' or ':'
    "url_credentials": (("://",), False),
}
MIN_LENGTH: Final[Mapping[str, int]] = {
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

REDACTED_TOKEN: Final = re.compile(r"\[REDACTED:[A-Za-z0-9_.\-]+:(?:hmac-sha256:[0-9a-f]+|error)\]")
NOT_A_VALUE: Final = frozenset({"none", "null", "true", "false", "nil", "undefined", "***", "<redacted>"})
AUTH_SCHEMES: Final = frozenset({"bearer", "basic", "token", "digest", "negotiate", "apikey", "ntlm"})
_WORD: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
ANCHORS: Final = ("^", "\\A")
END_ANCHORS: Final = ("$", "\\Z", "\\z")


def key_words(key: str) -> tuple[str, ...]:
    """Lower-case words of a key in any style: ``X-Api-Key``, ``apiKey``, ``API_KEY`` -> ``("x"?, "api", "key")``."""
    return tuple(w.lower() for w in _WORD.findall(key))


def normal_key(key: str) -> str:
    """A key in one canonical spelling (``maxTokens`` -> ``max_tokens``)."""
    return "_".join(key_words(key))


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


def is_card_digits(digits: str) -> bool:
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn(digits)


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    hints: tuple[str, ...] | None
    lower: bool
    group: str | int
    validate: Callable[[re.Match[str], str], bool] | None


@dataclass(frozen=True, slots=True)
class Hit:
    start: int  # span of the secret (what is replaced)
    end: int
    mstart: int  # span of the whole match (e.g. "Bearer <secret>")
    mend: int
    rule: str
    secret: str


class Suspicious(Exception):
    """Raised inside the fast-path scan when a value needs the full walk."""


_MARKER_VALUE: Final = re.compile(r"hmac-sha256:[0-9a-f]{16}|error")


def is_marker(value: dict[Any, Any]) -> bool:
    """True for a marker this module made (so re-redacting a tree keeps it as it is)."""
    if len(value) != 2 or not isinstance(value.get("scope"), str):
        return False
    fp = value.get(REDACTED_KEY)
    return isinstance(fp, str) and _MARKER_VALUE.fullmatch(fp) is not None


_PASSED_ON_TOKEN: Final = re.compile(r"\s*\[REDACTED:(?:[A-Za-z0-9_.\-]+:)?(hmac-sha256:[0-9a-f]{16})\]\s*")


def passed_on_text(text: str) -> str | None:
    """The fingerprint of a string that is wholly one redaction token (surrounding whitespace ignored): the inline
    ``[REDACTED:<rule>:<fingerprint>]`` of a recorded text, or ``[REDACTED:<fingerprint>]``, the text a replayed
    redacted value reads as. Under a secret key such a string is a redacted value passed on (a recorded model
    answer's argument handed to a tool in a replay), not a new secret: its marker keeps the fingerprint it
    carries, as a marker passed on does. None for any other string (``[REDACTED:error]`` included: it stands for
    no value)."""
    if "[REDACTED:" not in text:
        return None
    m = _PASSED_ON_TOKEN.fullmatch(text)
    return m.group(1) if m is not None else None


def valid_card(m: re.Match[str], text: str) -> bool:
    digits = "".join(ch for ch in m.group(0) if ch.isdigit())
    return is_card_digits(digits)


def valid_bearer(m: re.Match[str], text: str) -> bool:
    token = m.group("secret")
    return len(token) >= 20 or any(ch.isdigit() for ch in token)
