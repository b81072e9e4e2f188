"""The pre-check of whole JSON trees and the memory of clean strings: ``suspects``, ``clean_strings``,
``is_clean``, ``is_clean_json``, ``jsonable_if_clean`` (encoding and pre-check of a tree of plain JSON and
pydantic models in one walk), and the bounded memory of strings (and dict keys) already found clean, so a
run's repeated messages, names and keys are checked once.

It must never call a tree clean that holds a secret key, a marker or a secret shape, never grow without
bound, never return a tree other than the one ``to_jsonable`` makes, and never raise (an error says "not
clean", leaving the decision to the walk).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import enum
import math
import uuid
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any, Final

from pydantic import BaseModel

from ..snapshots import PLAIN_MAX_DEPTH, TRUNCATED_TAG, TYPE_TAG, qualname_of
from .rules import REDACTED_KEY, Suspicious
from .scanning import Scanner


def is_binary(value: dict[Any, Any]) -> bool:
    """Whether ``value`` is bytes as :func:`~otel_replay.snapshots.to_jsonable` encodes binary:
    ``{"$type": "bytes", "base64": "..."}``."""
    return len(value) == 2 and value.get(TYPE_TAG) == "bytes" and type(value.get("base64")) is str


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
_NOT_A_MODEL: Final = (
    Mapping, list, tuple, set, frozenset, enum.Enum, int, float, str, bytes, bytearray, memoryview,
    _dt.datetime, _dt.date, _dt.time, _dt.timedelta, decimal.Decimal, uuid.UUID, PurePath, complex,
)  # fmt: skip
"""Types :func:`~otel_replay.snapshots.to_jsonable` encodes before it looks for a pydantic model: a model that
is also one of them is not encoded as a model, so :meth:`CleanMemory.jsonable_if_clean` leaves it alone."""


class CleanMemory(Scanner):
    """The pre-check and clean-memory part of :class:`~otel_replay.redaction.Redactor`."""

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
            self._gather(tree, strings, 0, False)
        except Exception:  # noqa: BLE001 - Suspicious, or anything unexpected: let redact() decide
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
            self._gather(value, strings, 0, True)
        except Exception:  # noqa: BLE001 - Suspicious (not plain, or not clean), or anything unexpected
            return False
        return self.clean_strings(strings)

    def jsonable_if_clean(self, value: Any) -> tuple[bool, Any]:
        """``(True, to_jsonable(value))`` when ``value`` is plain JSON apart from pydantic models (exact
        ``dict``/``list`` containers, the leaves :meth:`is_clean_json` passes, and models whose ``model_dump``
        is plain JSON) *and* nothing in the encoded tree needs redaction; else ``(False, None)``: encode the
        value and ask :meth:`is_clean`. One walk builds the tree and collects its strings, where encoding and
        :meth:`is_clean` walk it twice (a LangGraph run's output is a dict of message models). The tree is
        the one ``to_jsonable`` returns (models tagged ``$type: pydantic`` with their class and fields; the
        fields are the model's fresh dump, the containers new). Never raises."""
        try:
            strings: list[str] = []
            tree = self._gather_models(value, strings, 0)
        except Exception:  # noqa: BLE001 - Suspicious (not that shape, or not clean), or anything unexpected
            return False, None
        return (True, tree) if self.clean_strings(strings) else (False, None)

    def _gather_models(self, value: Any, strings: list[str], depth: int) -> Any:
        """:meth:`_gather` (``plain``) that also encodes pydantic models as ``to_jsonable`` does (at the same depths),
        returning the encoded tree; raises :class:`Suspicious` at anything else."""
        kind = type(value)
        if kind is str or value is None or kind is bool or kind is int or kind is float:
            self._gather(value, strings, depth, True)
            return value
        if depth >= PLAIN_MAX_DEPTH:
            raise Suspicious
        if kind is dict:
            if REDACTED_KEY in value or TYPE_TAG in value or TRUNCATED_TAG in value:
                raise Suspicious
            out = {}
            quiet = self._quiet_keys
            for k, v in value.items():
                if k not in quiet:
                    self._gather_key(k, strings)
                out[k] = self._gather_models(v, strings, depth + 1)
            return out
        if kind is list:
            return [self._gather_models(v, strings, depth + 1) for v in value]
        if not isinstance(value, BaseModel) or isinstance(value, _NOT_A_MODEL):
            raise Suspicious
        try:
            dumped = value.model_dump(mode="python")
        except Exception:  # noqa: BLE001 - to_jsonable encodes such a model otherwise
            raise Suspicious from None
        if type(dumped) is not dict:
            raise Suspicious
        self._gather(dumped, strings, depth + 1, True)
        name = qualname_of(kind)
        self._gather(name, strings, depth + 1, True)
        return {TYPE_TAG: "pydantic", "class": name, "fields": dumped}

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

    def _gather(self, value: Any, strings: list[str], depth: int, plain: bool) -> None:
        """The strings and keys of a JSON tree not yet known clean, added to ``strings``; raises
        :class:`Suspicious` at anything the pre-check cannot vouch for (see :meth:`is_clean`).

        The one walk of both checks: with ``plain`` it judges a value not yet encoded (:meth:`is_clean_json`)
        and also raises at anything :func:`~otel_replay.snapshots.to_jsonable` would not return unchanged (a
        tag key, a container other than an exact ``dict`` or ``list``, a depth past its limit); without it, it
        judges an encoded tree (:meth:`is_clean`), where bytes are judged by their readable runs and a dict in
        pair form is left to the full walk. Numbers are judged the same way in both (see
        :meth:`_gather_number`)."""
        kind = type(value)
        if kind is str:
            if value not in self._clean:
                strings.append(value)
            return
        if value is None or kind is bool:
            return
        if kind is int or kind is float:
            self._gather_number(value)
            return
        if depth >= (PLAIN_MAX_DEPTH if plain else _MAX_GATHER_DEPTH + 1):
            raise Suspicious
        if kind is dict:
            # a marker passed on takes the scope of where it is now
            if REDACTED_KEY in value:
                raise Suspicious
            if plain:
                if TYPE_TAG in value or TRUNCATED_TAG in value:
                    raise Suspicious
            else:
                # a dict in pair form (non-string keys) has its key names among its values, where only the full
                # walk applies the key-name rule
                if value.get(TYPE_TAG) == "dict":
                    raise Suspicious
                if is_binary(value):  # bytes are judged by their readable runs, before they stay base64
                    if self._base64_secret(value["base64"]) is not None:
                        raise Suspicious
                    return
            quiet = self._quiet_keys
            clean = self._clean
            for k, v in value.items():
                if k not in quiet:
                    self._gather_key(k, strings)
                kv = type(v)
                if kv is str:
                    if v not in clean:
                        strings.append(v)
                elif (
                    v is None
                    or kv is bool
                    or (kv is int and v < 1_000_000_000_000)
                    or (kv is float and -1e308 < v < 1_000_000_000_000)  # not NaN nor infinite: a finite float
                ):
                    continue  # the common leaves inline: one call per container, not per value
                else:
                    self._gather(v, strings, depth + 1, plain)
            return
        if kind is list:
            clean = self._clean
            for v in value:
                kv = type(v)
                if kv is str:
                    if v not in clean:
                        strings.append(v)
                elif not (
                    v is None
                    or kv is bool
                    or (kv is int and v < 1_000_000_000_000)
                    or (kv is float and -1e308 < v < 1_000_000_000_000)
                ):
                    self._gather(v, strings, depth + 1, plain)
            return
        raise Suspicious

    def _gather_number(self, value: int | float) -> None:
        """:meth:`_gather` for an ``int`` or ``float``: raises :class:`Suspicious` for a number that could be a
        card number (from 10^12 up, when cards are redacted: the full walk tries the checksum), whether it is an
        ``int`` or a ``float`` (a card number in a float is written with its digits), and for a float that is not
        finite (``to_jsonable`` tags it, so it is neither plain JSON nor what the encoding makes)."""
        if type(value) is float and not math.isfinite(value):
            raise Suspicious
        if value >= 1_000_000_000_000 and self._cards:
            raise Suspicious

    def _gather_key(self, key: Any, strings: list[str]) -> None:
        """:meth:`_gather` for a dict key seen for the first time: raises :class:`Suspicious` for a secret
        key (or one that is not a string), adds a key the pre-check has not passed yet to ``strings``, and
        remembers a key that is neither as quiet (keys recur in every payload: one lookup from then on)."""
        if type(key) is not str:
            raise Suspicious
        secret = self._key_cache.get(key)
        if secret is None:
            secret = self.is_secret_key(key)
        if secret:
            raise Suspicious
        if len(key) >= self._min_len and key not in self._clean:
            known = self._key_scrub_cache.get(key)
            if known is None or known[1]:
                strings.append(key)
                return
        if len(self._quiet_keys) >= _QUIET_KEYS_MAX:
            self._quiet_keys = {}
        self._quiet_keys[key] = None
