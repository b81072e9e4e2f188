"""Printing stored data to a terminal without letting it drive the terminal.

Everything the CLI prints can come from a recording someone else wrote: agent and tool names, reasons,
error messages, payload previews. A terminal obeys control characters (ESC starts CSI and OSC sequences that
clear the screen, set the window title, write the clipboard with OSC 52, or hide a link behind OSC 8 text;
BEL rings; a carriage return overwrites what was printed), and Rich interprets ``[style]`` markup in plain
strings (a stored ``[/oops]`` would raise instead of printing).

:func:`clean` is the one escaping function: it maps every control character to a visible stand-in of the
same length (so column widths and styled spans stay right). :class:`SafeConsole` is the only console the CLI
prints with: markup off by default, and every text segment passes through :func:`clean` as it is rendered,
whatever renderable (table, tree, diff, error line) holds it. Rich's own styling never goes through a text
segment, so colours still work. JSON output goes through :func:`escape_json_text`.

This module must never print anything itself, and never drop a character silently: an escaped character
stays visible as what it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

_BIDI_AND_SEPARATORS: Final = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
_UNSAFE: Final = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}]")
"""Control characters a terminal acts on (C0 but tab and newline, DEL, C1), bidirectional overrides that
reorder what is shown, and line separators."""

_JSON_UNSAFE: Final = re.compile(f"[\x7f-\x9f{_BIDI_AND_SEPARATORS}]")
"""What ``json.dumps(ensure_ascii=False)`` leaves raw although a terminal acts on it (it escapes C0 itself)."""


def _stand_in(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures glyph of the character: ␛ for ESC, ␇ for BEL
    if code == 0x7F:
        return "\u2421"  # ␡
    return "\ufffd"


def clean(value: Any) -> str:
    """``value`` as text that is safe to write to a terminal: each control character (all but tab and newline),
    bidirectional override and line separator is replaced by one visible character."""
    text = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_stand_in, text) if _UNSAFE.search(text) else text


def escape_json_text(document: str) -> str:
    """JSON text with the characters a terminal acts on written as ``\\uXXXX`` escapes (same JSON value).

    ``json.dumps`` escapes C0 control characters itself; with ``ensure_ascii=False`` it leaves DEL, C1 controls
    and bidirectional overrides raw. They can only occur inside strings, where the escape means the same."""
    if not _JSON_UNSAFE.search(document):
        return document
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


class SafeConsole(Console):
    """A Rich console for output that holds stored data: no markup by default, every text segment cleaned."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("highlight", False)
        super().__init__(**kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """Render as Rich does, with the text of every segment (not Rich's own control segments) cleaned."""
        for segment in super().render(renderable, options):
            if segment.control or not _UNSAFE.search(segment.text):
                yield segment
            else:
                yield Segment(clean(segment.text), segment.style, segment.control)
