"""What a recorded step sent against what the replay's call sends: whether they agree once volatile ids are put
aside (:mod:`otel_replay.replay.volatile`), and the unified diff a ``request`` or ``arguments`` divergence
carries (indented JSON, volatile ids as their placeholders, cut at a bounded length), with each long or
multi-line text that changed (a system prompt, a message's content, a tool description) taken out of the JSON
and diffed line by line on its own (:class:`~otel_replay.replay.matching.divergence.TextDiff`), so a 9 KB prompt with
one changed sentence shows that sentence and a few lines around it.

It must never call two values equal that it cannot compare (a value not at hand is never a match), or
change a recorded value.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Final

from ...dialects import as_rebuilt
from ...runs import Step
from .. import volatile
from .divergence import TextDiff
from .hashing import MISSING, stored_value

_DIFF_MAX_LINES: Final = 200
"""Longest request diff kept on a divergence, and longest diff of one text; a longer one is cut with a line
saying how many lines are left."""

_LONG_TEXT: Final = 160
"""A string with a newline, or longer than this, is a text of its own: when it changed it is diffed by lines
(:class:`TextDiff`) and the JSON shows a placeholder; unchanged, the JSON shows its start and length. A line
of a text longer than this is shown split at its sentence ends, and a sentence longer than this is wrapped at
:data:`_WRAP` characters at a space."""

_WRAP: Final = 100

_TEXT_DIFFS_MAX: Final = 20
"""Most texts diffed on their own per divergence; the strings past it stay in the JSON as they are."""

_CONTEXT: Final = 3
"""Unchanged lines shown around each change of a text."""

_ABSENT: Final = object()


def _split_long(line: str) -> list[str]:
    """``line`` as pieces of at most about :data:`_LONG_TEXT` characters: cut after a sentence end (``.``,
    ``!``, ``?`` followed by a space), and a longer sentence at the last space before :data:`_WRAP` characters
    (or at :data:`_WRAP` when it has none). The spaces stay at the end of their piece: the pieces join to
    ``line``, nothing is dropped."""
    if len(line) <= _LONG_TEXT:
        return [line]
    pieces: list[str] = []
    start = 0
    for i in range(len(line) - 1):
        if line[i] in ".!?" and line[i + 1] == " ":
            end = i + 1
            while end < len(line) and line[end] == " ":
                end += 1
            if end < len(line):
                pieces.append(line[start:end])
                start = end
    pieces.append(line[start:])
    out: list[str] = []
    for piece in pieces:
        while len(piece) > _LONG_TEXT:
            cut = piece.rfind(" ", 0, _WRAP) + 1 or _WRAP
            out.append(piece[:cut])
            piece = piece[cut:]
        out.append(piece)
    return out


def text_lines(text: str) -> list[str]:
    """The lines a text is diffed as: split at each line feed (only there: a carriage return or another
    control character stays in its line, where the terminal shows it escaped), long lines split further by
    :func:`_split_long`."""
    return [piece for line in text.split("\n") for piece in _split_long(line)]


def _long(value: Any) -> bool:
    return isinstance(value, str) and ("\n" in value or len(value) > _LONG_TEXT)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


class _Texts:
    """One walk over a recorded and a replayed value: both with each changed long text replaced by the same
    placeholder and each unchanged long text by its start and length, and the :class:`TextDiff` of each."""

    def __init__(self) -> None:
        self.found: list[TextDiff] = []

    def pair(self, a: Any, b: Any, path: str, role: str | None) -> tuple[Any, Any]:
        if isinstance(a, dict) and isinstance(b, dict):
            role = _role(a) or _role(b) or role
            left: dict[str, Any] = {}
            right: dict[str, Any] = {}
            for key, value in a.items():
                where = f"{path}.{key}" if path else str(key)
                if key in b:
                    left[key], right[key] = self.pair(value, b[key], where, role)
                else:
                    left[key] = self.one(value, _ABSENT, where, role)
            for key, value in b.items():
                if key not in a:
                    right[key] = self.one(_ABSENT, value, f"{path}.{key}" if path else str(key), role)
            return left, right
        if isinstance(a, list) and isinstance(b, list):
            return self._lists(a, b, path, role)
        if isinstance(a, str) != isinstance(b, str) and len(self.found) < _TEXT_DIFFS_MAX:
            joined = _parts_text(b) if isinstance(a, str) else _parts_text(a)
            if joined is not None and (_long(a) or _long(b) or _long(joined)):
                return self._text_and_parts(a, b, path, role)
        if isinstance(a, str) and isinstance(b, str):
            if a == b:
                return _shortened(a), _shortened(b)
            if (_long(a) or _long(b)) and len(self.found) < _TEXT_DIFFS_MAX:
                return self._text(a, b, path, role)
            return a, b
        return self.one(a, _ABSENT, path, role), self.one(_ABSENT, b, path, role)

    def _lists(self, a: list[Any], b: list[Any], path: str, role: str | None) -> tuple[Any, Any]:
        """Elements aligned as a diff aligns them (an inserted message does not pair every later one with its
        neighbour), then paired in place within each changed block."""
        left: list[Any] = []
        right: list[Any] = []
        matcher = difflib.SequenceMatcher(None, [_canonical(x) for x in a], [_canonical(x) for x in b], autojunk=False)
        for _tag, i1, i2, j1, j2 in matcher.get_opcodes():
            for k in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + k, j1 + k
                if i < i2 and j < j2:
                    where = f"{path}[{i}]" if i == j else f"{path}[{i}→{j}]"
                    x, y = self.pair(a[i], b[j], where, role)
                    left.append(x)
                    right.append(y)
                elif i < i2:
                    left.append(self.one(a[i], _ABSENT, f"{path}[{i}]", role))
                else:
                    right.append(self.one(_ABSENT, b[j], f"{path}[{j}]", role))
        return left, right

    def one(self, a: Any, b: Any, path: str, role: str | None) -> Any:
        """A value only one side has (the other is :data:`_ABSENT`): its long texts diffed against nothing."""
        recorded = b is _ABSENT
        value = a if recorded else b

        def side(v: Any, where: str, r: str | None) -> Any:
            return self.one(v, _ABSENT, where, r) if recorded else self.one(_ABSENT, v, where, r)

        if isinstance(value, dict):
            inner = _role(value) or role
            return {k: side(v, f"{path}.{k}" if path else str(k), inner) for k, v in value.items()}
        if isinstance(value, list):
            return [side(v, f"{path}[{i}]", role) for i, v in enumerate(value)]
        if _long(value) and len(self.found) < _TEXT_DIFFS_MAX:
            return self._text(a, b, path, role)[0]
        return value

    def _text_and_parts(self, a: Any, b: Any, path: str, role: str | None) -> tuple[Any, Any]:
        """A text given as a string on one side and as a list of text parts on the other (``[{"type": "text",
        "text": ...}]``): the string is diffed against the parts' texts joined by newlines, and each part's
        text shows the placeholder."""
        recorded = a if isinstance(a, str) else "\n".join(part["text"] for part in a)
        replayed = b if isinstance(b, str) else "\n".join(part["text"] for part in b)
        placeholder, _ = self._text(recorded, replayed, path, role)

        def shown(value: Any) -> Any:
            return placeholder if isinstance(value, str) else [{**part, "text": placeholder} for part in value]

        return shown(a), shown(b)

    def _text(self, a: Any, b: Any, path: str, role: str | None) -> tuple[str, str]:
        before = text_lines(a) if isinstance(a, str) else []
        after = text_lines(b) if isinstance(b, str) else []
        hunks = list(difflib.unified_diff(before, after, lineterm="", n=_CONTEXT))[2:]
        if len(hunks) > _DIFF_MAX_LINES:
            hunks = [*hunks[:_DIFF_MAX_LINES], f"… {len(hunks) - _DIFF_MAX_LINES} more diff lines"]
        found = TextDiff(
            path=path or "value",
            role=role,
            recorded_lines=len(before) if isinstance(a, str) else None,
            replayed_lines=len(after) if isinstance(b, str) else None,
            diff="\n".join(hunks),
        )
        self.found.append(found)
        placeholder = f"<text {len(self.found)} changed: {found.title}, its line diff below>"
        return placeholder, placeholder


def _parts_text(value: Any) -> str | None:
    """The text of a list of text parts (OpenAI ``content`` parts, Anthropic ``system`` blocks), joined by
    newlines, or None when ``value`` is not a non-empty list of ``{"type": "text", "text": str, ...}``."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in value):
        return None
    return "\n".join(p["text"] for p in value)


def _role(value: dict[str, Any]) -> str | None:
    role = value.get("role")
    return role if isinstance(role, str) and role and len(role) <= 40 else None


def _shortened(text: str) -> str:
    """An unchanged long text as the JSON diff shows it (a context line): its start and its length."""
    if not _long(text):
        return text
    start = text.split("\n", 1)[0][:60]
    return f"{start}… (unchanged, {len(text):,} characters)"


def _heading(found: TextDiff) -> str:
    def size(lines: int | None) -> str:
        return "no text" if lines is None else f"{lines} line" + ("" if lines == 1 else "s")

    return f"=== {found.title}: {size(found.recorded_lines)} recorded, {size(found.replayed_lines)} in the replay"


def same_but_volatile(
    recorded: Step, attribute: str, sent: str | None, rules: tuple[volatile.VolatileRule, ...]
) -> bool:
    """Whether what step ``recorded`` sent (the stored field behind its hash ``attribute``) and what the
    replay's call sends agree once their volatile ids are put aside (:mod:`otel_replay.replay.volatile`).
    False when either is not at hand: a hash that cannot be checked is never taken as a match."""
    stored = stored_value(recorded, attribute)
    if sent is None or stored is MISSING:
        return False
    try:
        return volatile.same(*comparable(recorded, stored, json.loads(sent)), rules=rules)
    except (TypeError, ValueError, RecursionError):
        return False


def comparable(a: Step, value_a: Any, value_b: Any, b: Step | None = None) -> tuple[Any, Any]:
    """What is compared of two requests, ``value_a`` sent by step ``a`` and ``value_b`` (by step ``b``, or by the
    replay's call): both reduced to what a recording could keep when either was rebuilt by the reader of another
    dialect (``request_exact`` false, see :mod:`otel_replay.dialects.rebuilt`); else both as they are."""
    for step, value, other, flip in ((a, value_a, value_b, False), (b, value_b, value_a, True)):
        model = step.snapshots.get("model") if step is not None else None
        if isinstance(model, dict) and model.get("request_exact") is False and model.get("request") is value:
            mine, theirs = as_rebuilt(value), as_rebuilt(other, like=value)
            return (theirs, mine) if flip else (mine, theirs)
    return value_a, value_b


def sent_diff(
    recorded: Step, attribute: str, sent: str | None, rules: tuple[volatile.VolatileRule, ...] | None = None
) -> tuple[str | None, tuple[TextDiff, ...]]:
    """What step ``recorded`` sent (the stored field behind its hash ``attribute``) against what the replay's
    call sends: a unified diff and the :class:`TextDiff` of each changed long text, or ``(None, ())`` when
    either is not at hand. See :func:`request_diff`."""
    stored = stored_value(recorded, attribute)
    if sent is None or stored is MISSING:
        return None, ()
    try:
        pair = comparable(recorded, stored, json.loads(sent))
        return request_diff(*pair, f"recorded step {recorded.index}", rules=rules)
    except (TypeError, ValueError, RecursionError):
        return None, ()


def request_diff(
    recorded: Any, replayed: Any, label: str, *, rules: tuple[volatile.VolatileRule, ...] | None = None
) -> tuple[str | None, tuple[TextDiff, ...]]:
    """A unified diff of a recorded and a replayed request (or arguments), and its text diffs.

    The diff is indented JSON with sorted keys (``--- label`` / ``+++ replay``), volatile ids shown as their
    placeholders (``<id:1>``, see :mod:`otel_replay.replay.volatile`). Each string that changed and is long or
    multi-line is taken out of it: both sides show the same placeholder (``<text 1 changed: messages[0].content
    (system), its line diff below>``), and its :class:`TextDiff` follows the JSON hunks under a ``=== path
    (role): N lines recorded, M lines in the replay`` line. An unchanged long string shows as its start and
    its length. Lists are aligned as a diff aligns lines, so an inserted message is one added element. Raises
    ``TypeError``, ``ValueError`` or ``RecursionError`` for a value JSON cannot hold."""
    stored, replay = volatile.comparable(recorded, replayed, rules=rules)
    texts = _Texts()
    stored, replay = texts.pair(stored, replay, "", None)
    before = json.dumps(stored, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    after = json.dumps(replay, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    lines = list(difflib.unified_diff(before, after, label, "replay", lineterm="", n=2))
    if texts.found and not lines:
        lines = [f"--- {label}", "+++ replay"]
    for found in texts.found:
        lines.append(_heading(found))
        lines.extend(found.diff.split("\n") if found.diff else ["(the two texts are shown as the same lines)"])
    if len(lines) > _DIFF_MAX_LINES:
        lines = [*lines[:_DIFF_MAX_LINES], f"… {len(lines) - _DIFF_MAX_LINES} more diff lines"]
    return "\n".join(lines) or None, tuple(texts.found)
