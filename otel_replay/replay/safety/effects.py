"""The side effects the replay guard knows, and one guarded replay's state: the check of each audit event (what the
operation does, as one line, or None when it is exempt or changes nothing), :class:`SideEffectBlocked`, and
``Guard`` (what one guarded replay exempts, the effects it already reported, the block that records and raises).

:mod:`otel_replay.replay.safety.guard` owns the audit hook and the process-wide state and re-exports the public names
defined here. The one value kept for the process is whether this SQLite library reads every ``file:`` name as
a URI (``_sqlite_uri_default``, asked once).

This module must never block or allow anything by itself (only the guard's hook, in a guarded
replay's context, asks these checks), never let through an operation it could not check, and never record an
effect before it is redacted.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import sys
import threading
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from ...exporting import setup
from ...semconv import ReplayMode
from ..matching.divergence import Divergence
from ..raised import agent_frame
from .exempt import (
    endpoint_of,
    exempt_endpoints,
    exempt_roots,
    folder_of_fd,
    is_bytecode,
    normal_host,
    resolved_endpoints,
)

BLOCKED_MESSAGE: Final = "otel-replay blocked an unrecorded side effect during replay"
"""Start of the message of every :class:`SideEffectBlocked`."""

DIVERGENCE_KIND: Final = "side_effect"
"""``Divergence.kind`` of a blocked side effect."""

_TEXT_MAX: Final = 300
"""Longest description of an effect in a divergence (after redaction, so no secret is cut in half and missed);
longer ones are shortened."""


class SideEffectBlocked(PermissionError):
    """An operation the side-effect guard refused during a replay: a process spawn, a file change or a
    network connection the recording does not hold. Raised in place of the operation; nothing happened."""

    # The name a replay reports for it (``module.Name``) stays where the class was first defined:
    # otel_replay.replay.safety.guard re-exports it.
    __module__ = "otel_replay.replay.safety.guard"


# ------------------------------------------------------------------------------------------------ guard


class Guard:
    """One guarded replay: what is exempt, and the effects already reported."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.active = True
        self.prefix_only = getattr(session, "mode", None) is ReplayMode.LIVE
        """A live replay from step N: only the recorded steps before N are replayed offline, so only they are
        guarded (from the replayed run's start until its first live call)."""
        allowed_paths = tuple(getattr(session, "allow_paths", ()) or ())
        self.roots = (*exempt_roots(), *allowed_paths)
        allowed = (endpoint_of(address) for address in getattr(session, "allow_addresses", ()) or ())
        self.endpoints = (*exempt_endpoints(), *(a for a in allowed if a is not None))
        self._addresses: set[tuple[str, int]] | None = None
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def in_force(self) -> bool:
        """For a live replay from step N: the replayed run has started (its import is live code's, not the
        prefix's) and is still before the live part (see ``ReplaySession.past_recorded_prefix``)."""
        return self.session.run_id is not None and not self.session.past_recorded_prefix

    def exempt_path(self, raw: Any, dir_fd: Any = None) -> tuple[bool, str]:
        """(exempt, the absolute path as shown) for a path an event names."""
        path = os.fsdecode(raw)
        if not os.path.isabs(path):
            base = folder_of_fd(dir_fd) if isinstance(dir_fd, int) and dir_fd >= 0 else os.getcwd()
            if base is None:
                return False, path
            path = os.path.join(base, path)
        path = os.path.normpath(path)
        if is_bytecode(path):
            return True, path
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root + os.sep) for root in self.roots), path

    def exempt_address(self, host: str, port: int) -> bool:
        """True when ``host:port`` is one of the endpoints otel-replay exports to."""
        if self._addresses is None:
            self._addresses = resolved_endpoints(self.endpoints)
        return (normal_host(host), port) in self._addresses

    def block(self, what: str) -> None:
        """Record ``what`` on the replay (once) and raise :class:`SideEffectBlocked`."""
        text = self.record(what)
        raise SideEffectBlocked(
            f"{BLOCKED_MESSAGE}: {text} (replay with --allow-path, --allow-address or --allow-side-effects "
            "to let it happen)"
        )

    def record(self, what: str) -> str:
        """Record ``what`` on the replay (once per effect), with the agent's frame that did it; return the
        effect as shown."""
        text = _scrub(what)
        if len(text) > _TEXT_MAX:
            text = text[: _TEXT_MAX - 1] + "…"
        where = agent_frame(sys._getframe(1))
        with self._lock:
            new = text not in self._seen
            self._seen.add(text)
        if new:
            self.session.divergences.append(
                Divergence(
                    step_index=_step_reached(self.session),
                    kind=DIVERGENCE_KIND,
                    reason=f"unrecorded side effect: {text}" + (f" (in {_scrub(where)})" if where else ""),
                )
            )
        return text


def _spawn(event: str) -> Callable[[Guard, tuple[Any, ...]], str | None]:
    def check(state: Guard, args: tuple[Any, ...]) -> str | None:
        if event == "subprocess.Popen":
            executable, argv = args[0], args[1]
            shown = _command(argv) if argv is not None else _short(os.fsdecode(executable))
        elif event == "os.system":
            shown = _short(os.fsdecode(args[0]))
        elif event in ("os.exec", "os.posix_spawn", "os.spawn"):
            path, argv = (args[1], args[2]) if event == "os.spawn" else (args[0], args[1])
            shown = _command(argv) if argv else _short(os.fsdecode(path))
        else:
            return f"process spawn ({event})"
        return f"process spawn ({event}): {shown}"

    return check


def _open(state: Guard, args: tuple[Any, ...]) -> str | None:
    path, mode, flags = (*args, None, None, None)[:3]
    if isinstance(path, int) or path is None or not _writes(mode, flags):
        return None
    if _is_devnull(path):
        return None  # output thrown away (code that silences a library) changes nothing
    exempt, shown = state.exempt_path(path)
    return None if exempt else f"file write (open for writing): {_short(shown)}"


def _is_devnull(path: Any) -> bool:
    name = os.fsdecode(path)
    return name == os.devnull or os.path.realpath(name) == os.path.realpath(os.devnull)


def _sqlite(state: Guard, args: tuple[Any, ...]) -> str | None:
    """``sqlite3.connect``: SQLite opens its files in C, past the ``open`` event, so the database is checked
    here. In-memory and private temporary databases are allowed, and so is a read-only ``file:`` URI. Under the
    kernel sandbox an existing database is allowed too: the kernel lets SQLite open it only read-only."""
    name = os.fsdecode(args[0])
    if name in ("", ":memory:"):
        return None
    paths: list[str] = []
    if name.startswith("file:"):
        path = _sqlite_uri_path(name)
        if path is not None:
            paths.append(path)
        if not _sqlite_uri_default():  # without uri=True such a build opens the name itself as a file
            paths.append(name)
    else:
        paths.append(name)
    confined = str(getattr(state.session, "sandbox", "")).startswith("landlock")
    for path in paths:
        exempt, shown = state.exempt_path(path)
        if exempt:
            continue
        if confined and os.path.isfile(shown):
            # The kernel sandbox refuses SQLite's read-write open of an existing database and SQLite opens it
            # read-only instead: reading works, any write fails in SQLite ("readonly database").
            continue
        return f"file write (sqlite3.connect): {_short(shown)}"
    return None


def _sqlite_uri_path(uri: str) -> str | None:
    """The file a SQLite ``file:`` URI opens for writing, or None when it writes no file (in memory, a
    private temporary database, or read-only)."""
    parts = urlsplit(uri)
    query = parse_qs(parts.query)
    mode = query.get("mode", [""])[-1]
    path = unquote(parts.path)
    if path in ("", ":memory:") or mode in ("memory", "ro") or query.get("immutable", ["0"])[-1] == "1":
        return None
    return path


_NATIVE_EFFECTS: Final = frozenset(
    {
        *("system", "popen", "fork", "vfork", "clone", "clone3", "daemon", "posix_spawn", "posix_spawnp"),
        *("execl", "execlp", "execle", "execv", "execvp", "execvpe", "execve", "fexecve", "execveat"),
        *("open", "open64", "openat", "openat64", "creat", "creat64", "fopen", "fopen64", "freopen"),
        *("write", "pwrite", "pwrite64", "writev", "pwritev", "fwrite", "fputs", "fprintf", "dprintf"),
        *("unlink", "unlinkat", "remove", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir"),
        *("link", "linkat", "symlink", "symlinkat", "truncate", "truncate64", "ftruncate", "ftruncate64"),
        *("chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "mknod", "mkfifo"),
        *("socket", "connect", "bind", "sendto", "sendmsg", "send", "syscall"),
    }
)
"""libc functions that change the world, looked up through ``ctypes`` (``ctypes.CDLL(None).system``): Python
raises no audit event when they run, only when ``ctypes`` looks them up, so the lookup is what the guard
blocks."""


def _native(state: Guard, args: tuple[Any, ...]) -> str | None:
    name = args[-1] if args else None
    if isinstance(name, bytes):
        name = name.decode("ascii", "replace")
    if not isinstance(name, str) or name not in _NATIVE_EFFECTS:
        return None
    return f"native call (ctypes): {name}()"


@functools.cache
def _sqlite_uri_default() -> bool:
    """True when this SQLite library reads every ``file:`` name as a URI (built with ``SQLITE_USE_URI``), so
    ``uri=False`` (not visible in the audit event) changes nothing."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        return any(row[0] == "USE_URI" for row in conn.execute("PRAGMA compile_options"))


def _file_change(label: str, *, dir_fd_at: int | None = None) -> Callable[[Guard, tuple[Any, ...]], str | None]:
    def check(state: Guard, args: tuple[Any, ...]) -> str | None:
        path = args[0]
        if isinstance(path, int):  # an open descriptor: opening it for writing was checked already
            return None
        dir_fd = args[dir_fd_at] if dir_fd_at is not None and len(args) > dir_fd_at else None
        exempt, shown = state.exempt_path(path, dir_fd)
        return None if exempt else f"{label}: {_short(shown)}"

    return check


def _two_paths(label: str) -> Callable[[Guard, tuple[Any, ...]], str | None]:
    def check(state: Guard, args: tuple[Any, ...]) -> str | None:
        src_fd = args[2] if len(args) > 2 else None
        dst_fd = args[3] if len(args) > 3 else None
        src_exempt, src = state.exempt_path(args[0], src_fd)
        dst_exempt, dst = state.exempt_path(args[1], dst_fd)
        return None if src_exempt and dst_exempt else f"{label}: {_short(src)} -> {_short(dst)}"

    return check


def _link(label: str) -> Callable[[Guard, tuple[Any, ...]], str | None]:
    def check(state: Guard, args: tuple[Any, ...]) -> str | None:
        exempt, shown = state.exempt_path(args[1])  # the new name is what changes
        return None if exempt else f"{label}: {_short(shown)}"

    return check


def _mkdir(state: Guard, args: tuple[Any, ...]) -> str | None:
    path = args[0]
    if isinstance(path, int):
        return None
    if os.path.basename(os.path.normpath(os.fsdecode(path))) == "__pycache__":
        return None  # Python's bytecode cache
    exempt, shown = state.exempt_path(path, args[2] if len(args) > 2 else None)
    return None if exempt else f"folder create (os.mkdir): {_short(shown)}"


def _connect(event: str) -> Callable[[Guard, tuple[Any, ...]], str | None]:
    def check(state: Guard, args: tuple[Any, ...]) -> str | None:
        address = args[-1]
        if (
            isinstance(address, tuple)
            and len(address) >= 2
            and isinstance(address[0], str)
            and isinstance(address[1], int)
        ):
            if state.exempt_address(address[0], address[1]):
                return None
            host = address[0]
            shown = f"[{host}]:{address[1]}" if ":" in host else f"{host}:{address[1]}"
        elif isinstance(address, (str, bytes)):
            shown = f"unix socket {os.fsdecode(address)}"
        else:
            shown = repr(address)
        return f"network connection ({event}): {_short(shown)}"

    return check


CHECKS: Final[dict[str, Callable[[Guard, tuple[Any, ...]], str | None]]] = {
    **{
        event: _spawn(event)
        for event in (
            "subprocess.Popen",
            "os.system",
            "os.exec",
            "os.posix_spawn",
            "os.spawn",
            "os.fork",
            "os.forkpty",
            "os.startfile",
        )
    },
    "open": _open,
    "os.remove": _file_change("file delete (os.remove)", dir_fd_at=1),
    "os.rmdir": _file_change("folder delete (os.rmdir)", dir_fd_at=1),
    "shutil.rmtree": _file_change("folder delete (shutil.rmtree)", dir_fd_at=1),
    "os.truncate": _file_change("file truncate (os.truncate)"),
    "os.chmod": _file_change("file mode change (os.chmod)", dir_fd_at=2),
    "os.chown": _file_change("file owner change (os.chown)", dir_fd_at=3),
    "os.utime": _file_change("file times change (os.utime)"),
    "os.setxattr": _file_change("file attribute change (os.setxattr)"),
    "os.removexattr": _file_change("file attribute change (os.removexattr)"),
    "os.mkdir": _mkdir,
    "os.rename": _two_paths("file rename (os.rename)"),
    "os.link": _two_paths("file link (os.link)"),
    "os.symlink": _link("file link (os.symlink)"),
    "sqlite3.connect": _sqlite,
    "ctypes.dlsym": _native,
    "ctypes.dlsym/handle": _native,
    "socket.connect": _connect("socket.connect"),
    "socket.sendto": _connect("socket.sendto"),
    "socket.sendmsg": _connect("socket.sendmsg"),
}
"""Audit event → check returning what the operation does (to block it) or None (allowed)."""

_WRITE_FLAGS: Final = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _writes(mode: Any, flags: Any) -> bool:
    if isinstance(flags, int) and flags & _WRITE_FLAGS:
        return True
    return isinstance(mode, str) and any(c in mode for c in "wax+")


def _short(value: str) -> str:
    """A value on one line (shortened only after redaction, in :meth:`Guard.block`)."""
    return " ".join(str(value).split())


def _command(argv: Any) -> str:
    if isinstance(argv, (str, bytes)):
        return _short(os.fsdecode(argv))
    try:
        return _short(shlex.join(os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in argv))
    except TypeError:
        return _short(repr(argv))


def _scrub(text: str) -> str:
    """``text`` with any secret in it redacted, as every value the replay records."""
    try:
        return setup.runtime().redactor.scrub_text(text, "replay")[0]
    except Exception:  # noqa: BLE001 - the redactor never raises; should it, show nothing it could not check
        return text.split(":", 1)[0]


def _step_reached(session: Any) -> int | None:
    """The last recorded step the replay has reached (the first one before any call), or None."""
    recorded = getattr(session, "recorded", None) or []
    if not recorded:
        return None
    cursor = int(getattr(session, "cursor", 0) or 0)
    index: int | None = recorded[min(max(cursor - 1, 0), len(recorded) - 1)].index
    return index
