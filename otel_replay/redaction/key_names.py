"""Secret key names: whether values under a key (``api_key``, ``X-Api-Key``, ``refresh_token``...) are
secrets, judged by the key's words in any style, with safe keys and token counts left alone; decisions cached.

It must never look at the value under a key, or raise (an error judges the key secret).
"""

from __future__ import annotations

from .hashing import KeyedHashing
from .rules import KEY_CACHE_MAX, USAGE_FILLER_WORDS, key_words


class KeyNames(KeyedHashing):
    """The key-name part of :class:`~otel_replay.redaction.Redactor`."""

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
        if len(self._key_cache) >= KEY_CACHE_MAX:
            self._key_cache.clear()
        self._key_cache[key] = result
        return result

    def _judge_key(self, key: str) -> bool:
        words = key_words(key)
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
        return all(w in usage or w in USAGE_FILLER_WORDS or w.isdigit() for w in words)

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
