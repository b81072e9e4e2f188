"""Keyed hashing: fingerprints of secrets, content hashes (HMAC-SHA256 with the installation key), keys
derived for other purposes, and the marker object that replaces a secret.

It must never hash without the key, return or log the key, or store what it hashes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from .rules import CONTENT_HASH_PREFIX, DIGEST, FINGERPRINT_HEX, FINGERPRINT_PREFIX, REDACTED_KEY
from .state import RedactorState

_canonical = json.JSONEncoder(
    ensure_ascii=False, allow_nan=True, sort_keys=True, separators=(",", ":"), default=repr
).encode


class KeyedHashing(RedactorState):
    """The keyed hashing part of :class:`~otel_replay.redaction.Redactor`."""

    # ---------------------------------------------------------------------------------------- fingerprint

    def fingerprint(self, secret: str | bytes) -> str:
        """``"hmac-sha256:"`` + the first 16 hex characters of HMAC-SHA256(installation key, secret).

        Equal secrets give equal fingerprints on this installation; nothing about the secret can be read
        back from it. Strings are hashed as UTF-8.
        """
        data = secret if isinstance(secret, bytes) else str(secret).encode("utf-8", "surrogatepass")
        return FINGERPRINT_PREFIX + hmac.new(self._key, data, hashlib.sha256).hexdigest()[:FINGERPRINT_HEX]

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
        return (len(value) == 64 or len(value) == 76) and DIGEST.fullmatch(value) is not None

    def marker(self, secret: Any, scope: str) -> dict[str, str]:
        """The object that replaces a secret: ``{"$redacted": <fingerprint>, "scope": <scope>}``.

        Non-string secrets are fingerprinted by their canonical JSON text.
        """
        if isinstance(secret, (str, bytes)):
            fp = self.fingerprint(secret)
        else:
            fp = self.fingerprint(_canonical(secret))
        return {REDACTED_KEY: fp, "scope": scope}
