"""Secrets wrapped in percent-encoding or base64: the cheap test for such runs, the runs of a text, and their
decoding, within a bounded budget (hostile input costs bounded work).

It must never decode without a bound or import anything of the package; binary is read only through its
readable runs.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from typing import Final

MIN_ENCODED: Final = 6
"""Shortest text that can hold an encoded secret worth decoding."""
MAX_ENCODED_RUNS: Final = 32
"""At most this many encoded runs of one text are decoded (bounded work on hostile input)."""
MAX_ENCODED_CHARS: Final = 256 * 1024
"""At most this many characters of one text are decoded; runs beyond it are left as they are."""
_MIN_BASE64: Final = 16
_PERCENT: Final = re.compile(r"%[0-9A-Fa-f]{2}")
_RUN_BREAK: Final = re.compile(r"[\s\"'<>\\]")
_BASE64_RUN: Final = re.compile(r"[A-Za-z0-9+/_\-]{16,}={0,2}")
_BASE64_TABLE: Final = bytes(
    97 if chr(i).isascii() and (chr(i).isalnum() or chr(i) in "+/") else 46 for i in range(256)
)
_BASE64_GATE: Final = b"a" * _MIN_BASE64  # 16 base64 characters in a row (after translating with the table)
_URLSAFE: Final = str.maketrans("-_", "+/")
_READABLE_RUN: Final = re.compile(rb"[\x09\x0a\x0d\x20-\x7e]{6,}")


def _mixed_case(run: str) -> bool:
    """Base64 of text has upper- and lower-case letters; identifiers, hex digests and words mostly do not."""
    return run.lower() != run and run.upper() != run and not run.isalpha()


def encoded_candidate(text: str) -> bool:
    """Cheap test: whether ``text`` holds a percent escape or a base64-looking run (mixed case, 16+ chars)."""
    if "%" in text and _PERCENT.search(text):
        return True
    if _BASE64_GATE not in text.encode("utf-8", "surrogatepass").translate(_BASE64_TABLE):
        return False
    for m in _BASE64_RUN.finditer(text):
        if _mixed_case(m.group(0)):
            return True
    return False


def encoded_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, kind)`` of each percent-encoded run (the non-blank text around ``%XX`` escapes) and each
    base64-looking run of ``text``, in order of kind then position."""
    if "%" in text:
        end = 0
        for m in _PERCENT.finditer(text):
            if m.start() < end:
                continue
            start = m.start()
            while start > 0 and start > m.start() - 4096 and not _RUN_BREAK.match(text, start - 1):
                start -= 1
            brk = _RUN_BREAK.search(text, m.end())
            end = brk.start() if brk is not None else len(text)
            yield start, end, "percent"
    if _BASE64_GATE not in text.encode("utf-8", "surrogatepass").translate(_BASE64_TABLE):
        return
    for m in _BASE64_RUN.finditer(text):
        if _mixed_case(m.group(0)):
            yield m.start(), m.end(), "base64"


def percent_decode(run: str) -> tuple[str, list[int] | None] | None:
    """``run`` with its ``%XX`` escapes decoded (UTF-8), and for ASCII results the offset in ``run`` of each
    decoded character (None when characters and bytes do not line up). None when nothing decodes."""
    data = bytearray()
    offsets: list[int] = []
    i = 0
    n = len(run)
    while i < n:
        ch = run[i]
        if ch == "%" and _PERCENT.match(run, i):
            data.append(int(run[i + 1 : i + 3], 16))
            offsets.append(i)
            i += 3
            continue
        encoded = ch.encode("utf-8", "surrogatepass")
        data += encoded
        offsets.extend([i] * len(encoded))
        i += 1
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    if text == run:
        return None
    return text, (offsets if len(text) == len(offsets) else None)


def readable_text(data: bytes) -> str:
    """The readable runs of binary ``data``, one a line: runs of 6 or more printable ASCII characters (tab and
    line breaks included) in the bytes as they are, and in every other byte from the first and from the second
    (UTF-16 text as Office files and Windows APIs store it). A secret after non-UTF-8 bytes (``b"\\xff\\xfe" +
    b"sk-..."``) is one of them."""
    runs = [m.group(0) for m in _READABLE_RUN.finditer(data)]
    runs += [m.group(0) for m in _READABLE_RUN.finditer(data[::2])]
    runs += [m.group(0) for m in _READABLE_RUN.finditer(data[1::2])]
    return b"\n".join(runs).decode("ascii")


def _base64_bytes(run: str) -> bytes | None:
    """The bytes a base64 (or base64url) run decodes to; None when it is not base64."""
    core = run.rstrip("=").translate(_URLSAFE)
    if len(core) < _MIN_BASE64 or len(core) % 4 == 1:
        return None
    try:
        return base64.b64decode(core + "=" * (-len(core) % 4), validate=True)
    except ValueError:
        return None


def base64_text(run: str) -> str | None:
    """The text a base64 (or base64url) run decodes to: the text itself when it is printable UTF-8 text, else
    the readable runs of the bytes (:func:`readable_text`); None when it is not base64 or nothing in it reads."""
    data = _base64_bytes(run)
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    visible = text.replace("\n", "").replace("\r", "").replace("\t", "")
    if visible and visible.isprintable():
        return text
    return readable_text(data) or None
