"""Helpers for "this value is nowhere in that output" assertions whose output also holds random values.

A recorded run is full of values drawn at random: keyed hashes (``hmac-sha256:`` + hex, keyed with a random
installation key), trace and span ids, uuids. A short needle made of hex digits or decimal digits ("ada",
"123456", a four-digit PIN) turns up inside such a value by chance now and then, and a leak check that searches
the raw text fails at random. These helpers mask the random parts first, so a check fails only when the needle
stands in the output as a value of its own.
"""

from __future__ import annotations

import re

KEYED_HASH = re.compile(r"hmac-sha256:[0-9a-f]+")
"""A keyed fingerprint or content hash as the redactor writes it (marker values, inline tokens, hash attributes)."""

_KEYED_HASH_BYTES = re.compile(rb"hmac-sha256:[0-9a-f]+")
_SIZE_FIELDS_BYTES = re.compile(rb"\"original_size\\?\"\s*:\s*\d+")


def without_keyed_hashes(text: str) -> str:
    """``text`` with the hex of every keyed hash replaced by ``#`` (the prefix stays, so markers still show)."""
    return KEYED_HASH.sub("hmac-sha256:#", text)


def masked_bytes(blob: bytes) -> bytes:
    """``blob`` with keyed hashes and the truncation markers' recorded sizes masked: what is left is what the run
    holds as values of their own (a size like ``"original_size":3407`` is no PIN)."""
    return _SIZE_FIELDS_BYTES.sub(b'"original_size":#', _KEYED_HASH_BYTES.sub(b"hmac-sha256:#", blob))
