"""One error line for people, from any exception a command met.

The CLI prints one ``error:`` line per failure. What a library underneath raised is not written for the
person at the terminal: a pydantic ``ValidationError`` spans many lines and links to pydantic's site, a
ClickHouse error starts with ``Code: 60. DB::Exception:`` and ends with the engine's error name, version and
stack trace, and a Python error names an exception class. :func:`error_line` keeps what happened (the
message otel-replay wrote, the validation problem and where it is, the file an OS error concerns) and drops
the rest; an error otel-replay did not expect becomes a line saying so and how to see the traceback.

This module must never import the libraries whose errors it words (it recognises them by their class's
module), and never print anything itself.
"""

from __future__ import annotations

import os
import re
from typing import Any, Final

from .errors import OtelReplayError
from .wording import plural

__all__ = ["error_line", "usage_line", "without_engine_noise"]

_PACKAGE_DIR: Final = os.path.dirname(os.path.abspath(__file__))

_ENGINE_NOISE: Final = (
    re.compile(r"\s*Stack trace[^:]*:.*", re.DOTALL),
    re.compile(r"HTTPDriver for \S+ (?:returned response code \d+\)?|received ClickHouse error code \d+)\s*"),
    re.compile(r"Received ClickHouse exception, code: \d+, server response:\s*"),
    re.compile(r"\s*\(for url [^)\s]*\)"),
    re.compile(r"\bCode: \d+\.\s*"),
    re.compile(r"\bDB::Exception:\s*"),
    re.compile(r"\s*\(version [^()]*(?:\([^()]*\)[^()]*)*\)"),
    re.compile(r"\s*\([A-Z][A-Z0-9_]{2,}\)"),
)
"""The parts of a ClickHouse / chDB / clickhouse-connect error text that are the engine's, not the message."""
_ENGINE_TEXT: Final = re.compile(r"DB::Exception|ClickHouse (?:exception|error code)|HTTPDriver for |\bCode: \d+\.")
"""What says a text quotes a ClickHouse error."""

_UNEXPECTED: Final = (
    "otel-replay stopped on an internal error it did not expect; run the command again with "
    "OTEL_REPLAY_DEBUG=1 to see the traceback, and report it"
)


def without_engine_noise(text: str) -> str:
    """``text`` without ClickHouse's error code, exception prefix, error name, version and stack trace (text
    that quotes no ClickHouse error is returned as it is, on one line)."""
    if not _ENGINE_TEXT.search(text):
        return " ".join(text.split())
    for pattern in _ENGINE_NOISE:
        text = pattern.sub(" ", text)
    text = re.sub(r"\(\s*\)", "", _balanced(" ".join(text.split())))  # brackets only engine text filled
    text = re.sub(r"\(\s+", "(", re.sub(r"\s+([.,;:)])", r"\1", text))
    return " ".join(text.split()).rstrip(" .:;,")


def _balanced(text: str) -> str:
    """``text`` without the closing brackets that close nothing (left over from a driver's own message)."""
    depth, kept = 0, []
    for ch in text:
        if ch == ")":
            if depth == 0:
                continue
            depth -= 1
        elif ch == "(":
            depth += 1
        kept.append(ch)
    return "".join(kept)


def _is_pydantic_validation(exc: BaseException) -> bool:
    return any(cls.__name__ == "ValidationError" and cls.__module__.startswith("pydantic") for cls in type(exc).__mro__)


def _validation_line(exc: Any) -> str:
    try:
        problems = exc.errors()
    except Exception:  # noqa: BLE001 - an unexpected shape still gets a line
        problems = []
    if not problems:
        return "a recorded value does not have the shape otel-replay expects"
    first = problems[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the value"
    more = len(problems) - 1
    rest = f" (and {plural(more, 'more problem')})" if more else ""
    return (
        f"a recorded value does not have the shape otel-replay expects: {where}: {first.get('msg', 'invalid')}"
        f"{rest}; the recording may come from another tool or a newer otel-replay"
    )


def _os_error_line(exc: OSError) -> str:
    what = (exc.strerror or "input/output error").lower()
    name = exc.filename if exc.filename is not None else None
    target = f": {os.fsdecode(name)}" if name is not None else ""
    other = f" → {os.fsdecode(exc.filename2)}" if exc.filename2 is not None else ""
    return f"{what}{target}{other} (check the path and its permissions)"


def _raised_here(exc: BaseException) -> bool:
    """True when the innermost frame that raised ``exc`` is otel-replay's own code (so its message is ours)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE_DIR + os.sep)


def error_line(exc: BaseException) -> str:
    """What went wrong, in one line for people, without library or Python internals.

    otel-replay's own errors keep their message (less any ClickHouse engine text quoted in it); a pydantic
    validation error names the first field and problem; an OS error says what happened to which file; a
    ``ValueError`` raised by otel-replay's own code keeps its message; anything else is an internal error."""
    if _is_pydantic_validation(exc):
        return _validation_line(exc)
    if isinstance(exc, OtelReplayError):
        return without_engine_noise(str(exc)) or _UNEXPECTED
    if isinstance(exc, OSError):
        return _os_error_line(exc)
    if isinstance(exc, ValueError) and _raised_here(exc):
        return without_engine_noise(str(exc)) or _UNEXPECTED
    return _UNEXPECTED


_VALIDATION_WORDING: Final = (
    (re.compile(r"\bValue error, "), ""),
    (re.compile(r", unable to parse string as an? \w+"), ""),
    (re.compile(r"\bInput should be a valid integer"), "expected a whole number"),
    (re.compile(r"\bInput should be a valid number"), "expected a number"),
    (re.compile(r"\bInput should be greater than or equal to "), "expected at least "),
    (re.compile(r"\bInput should be less than or equal to "), "expected at most "),
    (re.compile(r"\bInput should be "), "expected "),
)
"""pydantic's wording of a rejected value (the CLI parser validates options with it), in the CLI's words."""


def usage_line(message: str) -> str:
    """A usage error of the command line (a bad option value, a missing argument) in one line, without the
    wording of the validation library underneath."""
    for pattern, replacement in _VALIDATION_WORDING:
        message = pattern.sub(replacement, message)
    return " ".join(message.split()).rstrip(" .")
