"""The value walker: ``redact`` (a JSON tree with every secret replaced by a marker, in a fresh copy) and
``scrub_attributes`` (a span's attribute map).

It must never mutate its input, let a secret through (an error masks the whole value), or raise into the
recording path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .memory import CleanMemory, is_binary
from .rules import (
    ERROR_FINGERPRINT,
    KEY_CACHE_MAX,
    REDACTED_KEY,
    is_card_digits,
    is_marker,
    log,
    passed_on_text,
)


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


class Walker(CleanMemory):
    """The value-walking part of :class:`~otel_replay.redaction.Redactor`."""

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
            log.warning("redaction failed at %s; masked every string attribute", scope, exc_info=True)
            return {k: ("[REDACTED:error]" if isinstance(v, str) else v) for k, v in attributes.items()}, 1

    # ------------------------------------------------------------------------------------------ JSON trees

    def redact(self, value: Any, scope: str) -> tuple[Any, int]:
        """A new tree with every secret in ``value`` replaced, and the number of replacements.

        ``value`` is a JSON-able tree (dict / list / tuple / str / int / float / bool / None; tuples come
        back as lists). Values under secret keys become markers whatever their type (``None``, booleans and
        empty values are kept: there is nothing to hide); strings that are wholly a secret become markers;
        strings that contain secrets are scrubbed inline; integers that are card numbers become markers, and
        so do floats holding one; dict keys that contain secrets are scrubbed. ``scope`` is the dotted path of
        ``value``; children get ``scope.key`` and ``scope[index]``. Existing markers are kept, and so is the
        fingerprint of a string under a secret key that is wholly one redaction token (it becomes the marker it
        stands for; elsewhere such a string is kept as it is). The input is never mutated. Never raises: on an
        internal failure the whole value is replaced by a marker with fingerprint ``"error"``. Bytes encoded as
        base64 (not UTF-8 text) become a marker when a secret shows in their readable runs.
        """
        try:
            if self.is_clean(value):
                return _copy(value), 0
            counter = [0]
            result = self._walk(value, scope, counter, 0)
            return result, counter[0]
        except Exception:  # noqa: BLE001 - never leak, never raise
            log.warning("redaction failed at %s; masked the whole value", scope, exc_info=True)
            return {REDACTED_KEY: ERROR_FINGERPRINT, "scope": scope}, 1

    def _secret_value(self, value: Any, scope: str, counter: list[int]) -> Any:
        """Replacement of a value found under a secret key."""
        if value is None or isinstance(value, bool) or value == "" or value == {} or value == []:
            return _copy(value)
        if isinstance(value, dict) and is_marker(value):
            return {REDACTED_KEY: value[REDACTED_KEY], "scope": scope}
        if isinstance(value, str):
            passed_on = passed_on_text(value)
            if passed_on is not None:  # a redacted value passed on as its token: its fingerprint, not its text's
                return {REDACTED_KEY: passed_on, "scope": scope}
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
            if is_marker(value):  # a redacted value passed on (a replay's input): same fingerprint, new place
                return {REDACTED_KEY: value[REDACTED_KEY], "scope": scope}
            if is_binary(value):  # bytes that are not UTF-8 text: a secret in their readable runs masks them whole
                fingerprint = self._base64_secret(value["base64"])
                if fingerprint is not None:
                    counter[0] += 1
                    return {REDACTED_KEY: fingerprint, "scope": scope}
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
                        if len(self._key_scrub_cache) >= KEY_CACHE_MAX:
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
            if self._cards and value >= 1_000_000_000_000 and is_card_digits(str(value)):
                counter[0] += 1
                return self.marker(str(value), scope)
            return value
        if kind is float:
            return self._float(value, scope, counter)
        if value is None or kind is bool:
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

    def _float(self, value: float, scope: str, counter: list[int]) -> Any:
        """A float as it is, or a marker when it holds a card number: such a float is written with the card's digits
        (``4111111111111111.0``), so it is judged as that integer."""
        if self._cards and value >= 1_000_000_000_000 and value.is_integer():
            digits = str(int(value))
            if is_card_digits(digits):
                counter[0] += 1
                return self.marker(digits, scope)
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
