"""What the replayed agent raised, said in one place: the exception's type, its message and the agent's frame.

A replay that ends because the agent raised is a result, not a crash of the engine; the person replaying
needs to see what was raised and where in *their* code, not a traceback through otel-replay's wrappers,
the SDKs and the standard library. :func:`agent_exception` picks the innermost frame of the traceback that
is the agent's own code: not otel-replay's machinery (its bundled demo agents count as agent code), not the
standard library, not an installed package; when the traceback holds no such frame, the innermost frame
outside otel-replay's machinery, else the innermost frame.

This module must never keep the exception or its traceback (only strings and numbers leave it), never
import the agent's code, and never return a message that did not go through the caller's ``scrub``.
"""

from __future__ import annotations

import os
import sysconfig
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, Final

__all__ = ["agent_exception", "agent_frame"]

_PACKAGE_DIR: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_AGENT_CODE_IN_PACKAGE: Final = (os.path.join(_PACKAGE_DIR, "demo") + os.sep,)
_MESSAGE_MAX_CHARS: Final = 500


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {
        os.path.abspath(paths[key]) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(key)
    }
    return tuple(sorted(found))


def _frames(tb: TracebackType | None) -> list[tuple[str, int, str]]:
    frames: list[tuple[str, int, str]] = []
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append((os.path.abspath(code.co_filename), tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    return frames


def _ours(path: str) -> bool:
    return path.startswith(_PACKAGE_DIR + os.sep) and not path.startswith(_AGENT_CODE_IN_PACKAGE)


def _shown_path(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith(os.pardir + os.sep) else relative


def agent_exception(exc: BaseException, *, scrub: Callable[[str], str]) -> dict[str, Any]:
    """``{type, message, file, line, function}`` of an exception the replayed agent raised.

    ``type`` is the class's qualified name (``module.Name`` unless it is a builtin); ``message`` is
    ``str(exc)`` through ``scrub`` (the replay's redactor), cut to 500 characters; ``file`` (relative to the
    working directory when under it), ``line`` and ``function`` name the agent's frame (None when the
    exception carries no traceback)."""
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails still gets reported
        text = ""
    message = scrub(text)
    if len(message) > _MESSAGE_MAX_CHARS:
        message = message[: _MESSAGE_MAX_CHARS - 1] + "…"
    frames = _frames(exc.__traceback__)
    libraries = _library_dirs()
    agent = [f for f in frames if not _ours(f[0]) and not f[0].startswith(libraries)]
    outside = [f for f in frames if not _ours(f[0])]
    candidates = agent or outside or frames
    if not candidates:
        return {"type": name, "message": message, "file": None, "line": None, "function": None}
    path, line, function = candidates[-1]
    return {"type": name, "message": message, "file": _shown_path(path), "line": line, "function": function}


def agent_frame(frame: FrameType | None) -> str | None:
    """``function() at file:line`` of the innermost frame of the agent's own code on the stack that ends in
    ``frame`` (the same choice as :func:`agent_exception`: not otel-replay's machinery, the standard library or
    an installed package; failing that, the innermost frame outside otel-replay's machinery), or None."""
    frames: list[tuple[str, int, str]] = []
    while frame is not None:
        code = frame.f_code
        frames.append((os.path.abspath(code.co_filename), frame.f_lineno, code.co_name))
        frame = frame.f_back
    libraries = _library_dirs()
    agent = [f for f in frames if not _ours(f[0]) and not f[0].startswith(libraries) and not f[0].startswith("<")]
    candidates = agent or [f for f in frames if not _ours(f[0]) and not f[0].startswith("<")]
    if not candidates:
        return None
    path, line, function = candidates[0]
    return f"{function}() at {_shown_path(path)}:{line}"
