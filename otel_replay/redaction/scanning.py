"""Free text: the pre-check of one text by substring hints, the full search of every value-shape rule (in
clear and inside encoded runs), and the inline replacement of what it finds (``scrub_text``,
``scrub_pieces``, ``classify``), plus the strings of span attributes that need it.

It must never let a found secret through (an error masks the whole text), never raise into the recording
path, and never keep a secret.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from .encoded import (
    MAX_ENCODED_CHARS,
    MAX_ENCODED_RUNS,
    MIN_ENCODED,
    base64_text,
    encoded_candidate,
    encoded_runs,
    percent_decode,
    readable_text,
)
from .gating import LONG_TEXT, card_hint, hinted
from .key_names import KeyNames
from .rules import DIGEST, REDACTED_TOKEN, Hit, Rule, log


class Scanner(KeyNames):
    """The free-text part of :class:`~otel_replay.redaction.Redactor`."""

    def _suspect_text(self, text: str) -> bool:
        return self._suspect_plain(text) or (len(text) >= MIN_ENCODED and encoded_candidate(text))

    def _suspect_plain(self, text: str) -> bool:
        """The substring pre-check of the shape and key-word rules (encoded runs not considered)."""
        lower = text.lower()
        long = len(text) >= LONG_TEXT
        if hinted(lower, self._gated_key_hints, long) and self._key_hint_beyond_safe_keys(lower):
            return True
        if hinted(text, self._gated_shape_hints, long) or hinted(lower, self._gated_lower_shape_hints, long):
            return True
        if self._cards and len(text) >= 13 and card_hint(text):
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

    def _may_match(self, rule: Rule, text: str, lower: str | None) -> bool:
        """Whether ``rule`` can match ``text`` at all, by substring hints (``lower`` is ``text.lower()``)."""
        name = rule.name
        if name == "card_number":
            return len(text) >= 13 and card_hint(text)
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

    def _hits(self, text: str) -> list[Hit]:
        """Secret spans in ``text``, left to right; overlapping spans are merged (nothing is left half-shown).

        Spans that fall inside an existing ``[REDACTED:...]`` token are dropped, so scrubbing is idempotent.
        """
        if len(text) < self._min_len:
            return []
        plain = self._suspect_plain(text)
        encoded = len(text) >= MIN_ENCODED and encoded_candidate(text)
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
        within :data:`MAX_ENCODED_RUNS` runs and :data:`MAX_ENCODED_CHARS` characters per text, and scanned
        with the shape rules. A percent-encoded secret is replaced where it stands (the encoded characters);
        a base64 run holding a secret is replaced whole. The fingerprint is that of the decoded secret, so an
        encoded secret and the same secret in clear compare equal."""
        found: list[tuple[int, int, int, int, str, str | None]] = []
        budget = MAX_ENCODED_CHARS
        runs = 0
        for start, end, kind in encoded_runs(text):
            runs += 1
            if runs > MAX_ENCODED_RUNS:
                break
            if end - start > budget:
                continue
            budget -= end - start
            run = text[start:end]
            if kind == "percent":
                decoded = percent_decode(run)
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
                b64_plain = base64_text(run)
                if b64_plain is None or not self._suspect_plain(b64_plain):
                    continue
                inner = self._found(b64_plain)
                if inner:
                    secret = b64_plain[inner[0][0] : inner[0][1]] if len(inner) == 1 else b64_plain
                    found.append((start, end, start, end, f"{inner[0][4]}.base64", secret))
        return found

    def _merged(self, text: str, found: list[tuple[int, int, int, int, str, str | None]]) -> list[Hit]:
        """Matches sorted and merged into hits (overlaps joined; matches inside existing tokens dropped)."""
        if not found:
            return []
        found.sort(key=lambda f: (f[0], -f[1]))
        tokens: list[tuple[int, int]] = []
        if "[REDACTED:" in text:
            tokens = [m.span() for m in REDACTED_TOKEN.finditer(text)]
        hits: list[Hit] = []
        for start, end, mstart, mend, name, decoded in found:
            if any(t0 <= start and end <= t1 for t0, t1 in tokens):
                continue
            if hits and start < hits[-1].end:
                last = hits[-1]
                if end <= last.end:  # wholly inside the previous hit
                    continue
                hits[-1] = Hit(
                    last.start, end, min(mstart, last.mstart), max(mend, last.mend), last.rule, text[last.start : end]
                )
                continue
            hits.append(Hit(start, end, mstart, mend, name, decoded if decoded is not None else text[start:end]))
        return hits

    def _secret_span(self, rule: Rule, m: re.Match[str]) -> tuple[int, int] | None:
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
            log.warning("redaction failed at %s; masked the whole text", scope, exc_info=True)
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
            log.warning("redaction failed at %s; masked the whole stream", scope, exc_info=True)
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
        digest = DIGEST.fullmatch
        # keys, then each value by key: an SDK attribute mapping (a read-only view of ``BoundedAttributes``)
        # walks its items view in Python, one generator step and one lookup per item; this is the lookup only
        for key in attributes:
            if key in skip_keys:
                continue
            if key not in known_keys and self.is_secret_key(key):
                return True
            value = attributes[key]
            kind = type(value)
            if kind is int or kind is float or kind is bool:
                continue
            if kind is str:
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

    def _replace(self, text: str, hits: list[Hit]) -> str:
        parts: list[str] = []
        pos = 0
        for hit in hits:
            parts.append(text[pos : hit.start])
            parts.append(f"[REDACTED:{hit.rule}:{self._hit_fingerprint(hit)}]")
            pos = hit.end
        parts.append(text[pos:])
        return "".join(parts)

    def binary_secret(self, data: bytes) -> str | None:
        """The fingerprint to mask binary ``data`` with when a secret shows in its readable runs (ASCII runs of 6+
        characters, and UTF-16 text: see :func:`~otel_replay.redaction.encoded.readable_text`), else None: that
        of the secret when there is one, else that of the whole bytes. Used for bytes that are not UTF-8 text,
        before they are encoded (base64) for storage."""
        hits = self._hits(readable_text(data))
        if not hits:
            return None
        return self._hit_fingerprint(hits[0]) if len(hits) == 1 else self.fingerprint(data)

    def _base64_secret(self, encoded: str) -> str | None:
        """:meth:`binary_secret` of the bytes ``encoded`` holds in standard base64 (a ``$type: bytes`` value, as
        :func:`~otel_replay.snapshots.to_jsonable` writes it); None when it is not base64 (the string is then
        scanned as text)."""
        try:
            data = base64.b64decode(encoded, validate=True)
        except ValueError:
            return None
        return self.binary_secret(data)

    def _hit_fingerprint(self, hit: Hit) -> str:
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
    def _whole(text: str, hits: list[Hit]) -> Hit | None:
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
