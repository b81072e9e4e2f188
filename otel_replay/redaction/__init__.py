"""Secret detection and replacement, applied to every value before it becomes a span attribute.

Why this package exists: a recorded run holds user input, tool arguments, HTTP headers, model messages and
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

Process-wide state (all in :mod:`.logs`): importing this package puts a :class:`ScrubbingLogFilter` on
otel-replay's loggers (:data:`LOGGER_NAMES`), so what the library logs is scrubbed like what it records; and one
message-redactor source (:func:`set_message_redactor_source`, set by ``exporting.setup``: the current runtime's
redactor). This package never imports anything above it (recording, exporting, the runtime).

What it must never do:

* never leak: if anything goes wrong inside the redactor, the value is masked whole rather than passed on;
* never raise into the recording path (:meth:`Redactor.redact` and :meth:`Redactor.scrub_text` catch
  everything); only setup -- a bad :class:`RedactionConfig` or an unusable key file -- raises ``ValueError``;
* never mutate its input, never store a secret (only an HMAC), never restore one: a replay takes
  secrets from its own environment, not from a snapshot;
* never be switched off wholesale: there is deliberately no null redactor. Rules can be turned off one by
  one through :class:`RedactionConfig`.

The package is on the hot path of every snapshot, so rule decisions are precompiled, key decisions cached,
and payloads with nothing suspicious are recognised by cheap substring tests before any full pattern runs.
Only the standard library is used.

Its modules, from the bottom up: :mod:`.rules` (what counts as a secret: key words, value shapes, markers),
:mod:`.gating` and :mod:`.encoded` (the cheap substring gates; percent and base64 runs), :mod:`.config`
(:class:`RedactionConfig`), :mod:`.keyfile` (the installation key), then the parts of :class:`Redactor`, one
class each, joined by single inheritance in :mod:`.redactor`: :mod:`.state` (its attributes), :mod:`.hashing`
(fingerprints, content hashes, markers), :mod:`.key_names`, :mod:`.scanning` (free text), :mod:`.memory` (the
pre-check of whole trees and the memory of clean strings) and :mod:`.walker` (``redact``,
``scrub_attributes``); :mod:`.logs` scrubs log records and messages. Every public name is imported from here.
"""

from __future__ import annotations

from .config import RedactionConfig
from .logs import (
    LOGGER_NAMES,
    ScrubbingLogFilter,
    install_log_scrubbing,
    scrub_message,
)
from .logs import (
    set_message_redactor_source as set_message_redactor_source,
)
from .redactor import Redactor
from .rules import (
    CONTENT_HASH_PREFIX,
    DEFAULT_NEUTRAL_KEY_WORDS,
    DEFAULT_PATTERNS,
    DEFAULT_SAFE_KEYS,
    DEFAULT_SECRET_KEY_WORDS,
    DEFAULT_USAGE_KEY_WORDS,
    FINGERPRINT_PREFIX,
    KEY_FILE_NAME,
    REDACTED_KEY,
)

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
