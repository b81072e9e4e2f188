"""Where otel-replay keeps its files and which store it talks to.

Every knob is resolved in one order: explicit argument, environment variable (named by a constant here),
then the ``_DEFAULT_*`` constant. Bad values raise :class:`ValueError` at setup, never later on a hot path.

This module must never depend on the redactor (it sits below it), and never put a value that could be a
secret into an error message: a bad value is quoted only when it is short and number-like, else described by
its length (and the CLI scrubs every error line it prints).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, TypeVar

N = TypeVar("N", int, float)

OTEL_REPLAY_HOME: Final = "OTEL_REPLAY_HOME"
"""Environment variable: folder for the spool, the embedded store, the redaction key (default ``~/.otel-replay``)."""

OTEL_REPLAY_STORE: Final = "OTEL_REPLAY_STORE"
"""Environment variable: store URL, ``chdb:///abs/path`` or ``http(s)://user:pass@host:8123/db``."""

OTEL_REPLAY_EXPORTER: Final = "OTEL_REPLAY_EXPORTER"
"""Environment variable: ``spool`` (default), ``otlp`` or ``none``."""

OTEL_REPLAY_LOCK_TIMEOUT: Final = "OTEL_REPLAY_LOCK_TIMEOUT"
"""Environment variable: seconds a process waits for a busy embedded store before giving up."""

OTEL_REPLAY_TRUSTED_MODULES: Final = "OTEL_REPLAY_TRUSTED_MODULES"
"""Environment variable: comma-separated module name prefixes (``myco.agents,billing``) whose recorded
entrypoints and tool functions a replay may import and run although they are not under the working directory
(an installed package, a folder elsewhere on ``PYTHONPATH``). A prefix matches the module itself and its
submodules; the standard library is never trusted. Unset: only modules under the working directory."""

OTEL_REPLAY_SANDBOX: Final = "OTEL_REPLAY_SANDBOX"
"""Environment variable: the kernel sandbox of offline replays. ``auto`` (default): Linux Landlock where the
kernel offers it, else the audit-hook guard alone; ``require``: refuse an offline replay the kernel cannot
confine (for CI); ``off``: the audit-hook guard alone."""

SANDBOX_SETTINGS: Final = ("off", "auto", "require")
"""The values of ``OTEL_REPLAY_SANDBOX``."""

_DEFAULT_HOME: Final = "~/.otel-replay"
_DEFAULT_SANDBOX: Final = "auto"
_DEFAULT_LOCK_TIMEOUT_S: Final = 10.0


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The otel-replay home folder (not created)."""
    raw = home if home is not None else os.environ.get(OTEL_REPLAY_HOME) or _DEFAULT_HOME
    return Path(raw).expanduser().resolve()


def default_store_url(home: Path) -> str:
    """URL of the embedded store that lives in ``home``."""
    return f"chdb://{home / 'store'}"


def resolve_store_url(url: str | None, home: Path) -> str:
    """The store URL: argument, then ``OTEL_REPLAY_STORE``, then the embedded store in ``home``."""
    return url or os.environ.get(OTEL_REPLAY_STORE) or default_store_url(home)


def _quoted(raw: str) -> str:
    """A bad value for an error message: quoted when it is short and looks like an attempt at a number, else
    only its length, so a secret pasted into the wrong variable never reaches an exception text."""
    if len(raw) <= 24 and all(ch in "0123456789+-.eE_ infINFaAnN" for ch in raw):
        return repr(raw)
    return f"a value of {len(raw)} characters that is not a number"


def env_number(name: str, default: N, *, minimum: float, unit: str) -> N:
    """A number from environment variable ``name`` (of the type of ``default``), or ``default`` when unset.

    Raises ValueError naming the variable when the value is not a number of that type or is below ``minimum``.
    """
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = type(default)(raw.strip())
    except ValueError:
        kind = "whole number" if isinstance(default, int) else "number"
        raise ValueError(f"{name} must be a {kind} of {unit}, got {_quoted(raw)}") from None
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum:g} {unit}, got {raw!r}")
    return value


def resolve_sandbox(value: str | None = None) -> str:
    """``off``, ``auto`` or ``require``: argument, then ``OTEL_REPLAY_SANDBOX``, then ``auto``. Raises ValueError
    naming the variable for any other value."""
    raw = value if value is not None else os.environ.get(OTEL_REPLAY_SANDBOX) or _DEFAULT_SANDBOX
    chosen = raw.strip().lower()
    if chosen not in SANDBOX_SETTINGS:
        shown = repr(raw) if len(raw) <= 24 and raw.isprintable() else f"a value of {len(raw)} characters"
        raise ValueError(f"{OTEL_REPLAY_SANDBOX} must be off, auto or require, got {shown}")
    return chosen


def resolve_lock_timeout(timeout: float | None = None) -> float:
    """Seconds to wait for a busy store lock."""
    if timeout is not None:
        return float(timeout)
    return env_number(OTEL_REPLAY_LOCK_TIMEOUT, _DEFAULT_LOCK_TIMEOUT_S, minimum=0, unit="seconds")


_AUTHORITY_ENDS: Final = "/?#"
"""Characters that end a URL's authority: a password holding one unencoded cannot be told apart from the path."""


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """``(scheme + "://", userinfo, rest after the last "@")`` of ``url``; None when it has no ``@`` after
    ``://``. The userinfo runs to the *last* ``@``, so a password holding ``@`` stays whole."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    userinfo, at, host = rest.rpartition("@")
    if not at:
        return None
    return scheme + sep, userinfo, host


def malformed_userinfo(url: str) -> bool:
    """Whether the text between ``://`` and the last ``@`` of ``url`` holds ``/``, ``?`` or ``#``: a password
    with one of them unencoded, which no URL parser reads as a password (``http://u:Slash/Pw@host/db``)."""
    parts = _userinfo(url)
    return parts is not None and any(ch in parts[1] for ch in _AUTHORITY_ENDS)


def masked_url(url: str) -> str:
    """``url`` as a message, a log line or a file may show it: the one way otel-replay shows a store URL.

    ``http://user:pass@host:8123/db`` becomes ``http://user:***@host:8123/db``. When the userinfo cannot be
    parsed (a password holding an unencoded ``/``, ``?`` or ``#``: ``http://user:Slash/Pw@host``), everything
    between ``://`` and the last ``@`` is masked (``http://***@host``); without ``://``, everything before the
    last ``@``. A URL without ``@`` has no credential and is returned as it is. Never raises."""
    text = str(url)
    parts = _userinfo(text)
    if parts is None:
        return "***@" + text.rpartition("@")[2] if "@" in text and "://" not in text else text
    prefix, userinfo, host = parts
    if any(ch in userinfo for ch in _AUTHORITY_ENDS):
        return f"{prefix}***@{host}"
    user, colon, _ = userinfo.partition(":")
    return f"{prefix}{user}:***@{host}" if colon else text


def url_secrets(url: str) -> list[str]:
    """The texts of ``url`` that an error from a driver or a parser may quote and that must not be shown: the
    URL itself, the password (as written and percent-decoded) and, when the userinfo cannot be parsed (or the
    URL has no ``://``), the whole userinfo and each piece of its password between ``/``, ``?``, ``#``, ``@``
    and ``:`` (three characters or more). Longest first."""
    from urllib.parse import unquote

    text = str(url)
    parts = _userinfo(text)
    if parts is None:
        if "@" not in text or "://" in text:
            return []
        parts = ("", text.rpartition("@")[0], "")  # no scheme: all before the last "@" is masked when shown
        unreadable = True
    else:
        unreadable = any(ch in parts[1] for ch in _AUTHORITY_ENDS)
    _, userinfo, _ = parts
    found = {text}
    user, colon, password = userinfo.partition(":")
    secret = password if colon else user
    if unreadable:
        found.update((userinfo, secret))
    elif colon:
        found.add(password)
    if any(ch in secret for ch in "/?#@") and secret in found:
        found.update(piece for piece in _split_any(secret, "/?#@:") if len(piece) >= 3)
    found.update([unquote(s) for s in found])
    return sorted((s for s in found if s), key=len, reverse=True)


def _split_any(text: str, separators: str) -> list[str]:
    for sep in separators[1:]:
        text = text.replace(sep, separators[0])
    return text.split(separators[0])


def scrub_url(text: str, url: str) -> str:
    """``text`` (an error or log message) with ``url`` masked as :func:`masked_url` shows it and every piece of
    its credential (:func:`url_secrets`) replaced by ``***``."""
    out = str(text)
    if url and url in out:
        out = out.replace(url, masked_url(url))
    for secret in url_secrets(url) if url else ():
        if secret != url:
            out = out.replace(secret, "***")
    return out
