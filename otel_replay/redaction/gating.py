"""The pre-check's cheap gates: the card-number digit test, the fewest hint substrings that cover a set of
words, and hints grouped under their rarest character so that most are never searched for.

It must never decide that a text holds a secret (a gate only says "maybe"), or import anything of the package.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

_CARD_TABLE: Final = bytes(48 if 48 <= i <= 57 else 120 if i in (32, 45) else 46 for i in range(256))


def card_hint(text: str) -> bool:
    """Cheap test for a run of 13+ digits, or digit groups 4-4-4 / 4-6-5 split by spaces or dashes."""
    mapped = text.encode("utf-8", "surrogatepass").translate(_CARD_TABLE)
    return b"0000x0000x0000" in mapped or b"0000000000000" in mapped or b"0000x000000x00000" in mapped


def reduce_hints(words: Iterable[str]) -> tuple[str, ...]:
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


Gated = tuple[tuple[str, tuple[str, ...], tuple[Callable[[str], Any], ...]], ...]
LONG_TEXT: Final = 256  # from this length on, compiled searches beat ``in`` (their call costs more, once)


def gated_hints(hints: Iterable[str]) -> Gated:
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


def hinted(text: str, groups: Gated, long: bool) -> bool:
    """Whether ``text`` holds a hint of ``groups`` (see :func:`gated_hints`)."""
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
