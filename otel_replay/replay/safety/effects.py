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
import re
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
        self.children = children_started()
        """The child processes of this process when the replay began (see :meth:`check_children`)."""
        self.spawns_permitted = False
        """Set when a call the replay let execute with every permission ran (a lab's live tool): it may start
        processes, so the children check cannot tell its processes from the agent's."""

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

    def check_children(self) -> None:
        """Record a process started during the replay below Python's audit hooks (``_posixsubprocess`` or a
        native library called directly: no audit event, so nothing could name or stop it; under the kernel
        sandbox its program was refused, the fork itself happened). Seen as a child process that was started
        (Linux: ``/proc/self/task/*/children``) or that ended and was waited for (``RUSAGE_CHILDREN`` grew)."""
        if self.spawns_permitted or self.children is None:
            return
        now = children_started()
        if now is None:
            return
        (work, pids), (then_work, then_pids) = now, self.children
        if work > then_work or pids - then_pids:
            self.record(
                "a process started below Python's audit hooks (native code or a C extension; no audit event "
                "names its program)",
                frame=False,
            )

    def record(self, what: str, *, frame: bool = True) -> str:
        """Record ``what`` on the replay (once per effect), with the agent's frame that did it (``frame``);
        return the effect as shown."""
        text = _scrub(what)
        if len(text) > _TEXT_MAX:
            text = text[: _TEXT_MAX - 1] + "…"
        where = agent_frame(sys._getframe(1)) if frame else None
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


def children_started() -> tuple[int, frozenset[int]] | None:
    """What this process's child processes did: the page faults and context switches of the ended children it
    waited for (``RUSAGE_CHILDREN``: any program that ran adds to them) and the ids of its children now (Linux,
    empty where ``/proc`` does not list them); None where Python cannot tell (no ``resource`` module)."""
    try:
        import resource
    except ImportError:
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    work = usage.ru_minflt + usage.ru_majflt + usage.ru_nvcsw + usage.ru_nivcsw
    pids: set[int] = set()
    if _has_children():  # one system call when there is none, the usual case
        with contextlib.suppress(OSError):
            for task in os.listdir("/proc/self/task"):
                with contextlib.suppress(OSError, ValueError), open(f"/proc/self/task/{task}/children") as listed:
                    pids.update(int(pid) for pid in listed.read().split())
    return work, frozenset(pids)


def _has_children() -> bool:
    """Whether this process has a child process (running, or ended and not waited for); True when unknown."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)  # reaps nothing
    except ChildProcessError:
        return False
    except (OSError, AttributeError):
        return True
    return True


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
    kernel sandbox an existing database is allowed too: the kernel lets SQLite open it only read-only, and the
    connection's authorizer (:func:`_sqlite_handle`) reports any write to it."""
    path = _sqlite_blocked_file(state, os.fsdecode(args[0]))
    return None if path is None else f"file write (sqlite3.connect): {_short(path)}"


def _sqlite_files(state: Guard, name: str) -> list[str]:
    """The files outside the replay's folders that SQLite would open for writing under ``name`` (a file name or
    a ``file:`` URI), as shown: none for an in-memory, temporary or read-only database."""
    if name in ("", ":memory:"):
        return []
    paths: list[str] = []
    if name.startswith("file:"):
        path = _sqlite_uri_path(name)
        if path is not None:
            paths.append(path)
        if not _sqlite_uri_default():  # without uri=True such a build opens the name itself as a file
            paths.append(name)
    else:
        paths.append(name)
    shown = (state.exempt_path(path) for path in paths)
    return [path for exempt, path in shown if not exempt]


def _sqlite_blocked_file(state: Guard, name: str) -> str | None:
    """The first file of :func:`_sqlite_files` the replay must not let SQLite open, or None. Under the kernel
    sandbox an existing file is let through: the kernel lets SQLite open it read-only only."""
    confined = str(getattr(state.session, "sandbox", "")).startswith("landlock")
    return next((path for path in _sqlite_files(state, name) if not (confined and os.path.isfile(path))), None)


SQLITE_EVENT: Final = "otel_replay.sqlite.write"
"""The audit event a guarded SQLite connection's authorizer raises for a write SQLite would do in C (one
argument: what, as one line); the guard blocks it as any other effect, and SQLite refuses the statement."""

_SQLITE_ROW_WRITES: Final = {9: "DELETE", 18: "INSERT", 23: "UPDATE"}
"""SQLite's authorizer action codes of the statements that write a table's rows. On a database SQLite opened
read-only each fails, whatever rows it matches, so reporting them never reports a run that changed nothing. (A
``CREATE ... IF NOT EXISTS`` asks the authorizer even when it changes nothing, so schema statements are left to
SQLite's own error.)"""

_SQLITE_ATTACH: Final = 24
"""SQLite's authorizer action code of ``ATTACH`` (``VACUUM INTO`` asks it too, for its target file)."""


def watch_sqlite(guard: Callable[[], Guard | None], conn: Any, name: Any) -> None:
    """Give ``conn``, a connection a guarded replay just opened to ``name``, an authorizer that raises
    :data:`SQLITE_EVENT` for each write SQLite would do in C before SQLite tries it: ``ATTACH`` and
    ``VACUUM INTO`` a file the replay may not change, and under the kernel sandbox a row written to a database
    the kernel let SQLite open read-only. The guard reports it (and SQLite refuses the statement) even when the
    agent catches SQLite's error and carries on. An ``ATTACH`` whose file is a bound parameter is named only
    when it runs: a trace callback reports it then and interrupts it before SQLite opens the file. An agent
    that installs an authorizer or trace callback of its own replaces these: one of the gaps ``dry`` lists.

    Both ask ``guard()`` for the guard of the context that runs the statement (a connection opened while the
    agent's module was imported is used by its calls, under another guard of the same replay), and do nothing
    outside one. The trace callback holds the connection (to interrupt it): a reference cycle, so a connection
    the agent drops without closing is closed by the garbage collector rather than at once."""
    first = guard()
    if first is None:
        return
    main = next(iter(_sqlite_files(first, os.fsdecode(name))), None)  # let through read-only: a write is one
    attached_read_only = attached_writable = False

    def stop(what: str, running: bool) -> None:
        try:
            sys.audit(SQLITE_EVENT, what)
        except SideEffectBlocked:
            if running:
                conn.interrupt()  # the running statement stops before SQLite opens the file
            raise

    def attach(state: Guard, file: str, running: bool = False) -> None:
        nonlocal attached_read_only, attached_writable
        blocked = _sqlite_blocked_file(state, file)
        if blocked is not None:
            stop(f"file write (sqlite3 ATTACH or VACUUM INTO): {_short(blocked)}", running)
        if _sqlite_files(state, file):
            attached_read_only = True
        else:
            attached_writable = True

    def authorize(action: int, arg1: str | None, arg2: str | None, database: str | None, trigger: Any) -> int:
        state = guard()
        if state is None:
            return 0
        if action == _SQLITE_ATTACH and arg1 is not None:
            attach(state, arg1)
        elif action in _SQLITE_ROW_WRITES and database not in (None, "temp") and not _schema(arg1):
            what = _SQLITE_ROW_WRITES[action]
            if database == "main" and main is not None:
                sys.audit(SQLITE_EVENT, f"file write (sqlite3 {what}): {_short(main)}")
            elif database != "main" and attached_read_only and not attached_writable:
                sys.audit(SQLITE_EVENT, f"file write (sqlite3 {what} into the attached database {database})")
        return 0

    def trace(sql: str) -> None:
        state = guard()
        if state is None or not _ATTACH_STATEMENT.match(sql):
            return
        named = _ATTACH_LITERAL.match(sql)
        if named is None:
            stop(f"file write (sqlite3 ATTACH of a file named by an expression): {_short(sql)}", running=True)
        else:  # (a literal name was checked by the authorizer already: it is let through again)
            attach(state, named.group(1).replace("''", "'"), running=True)

    conn.set_authorizer(authorize)
    conn.set_trace_callback(trace)


_ATTACH_STATEMENT: Final = re.compile(r"\s*ATTACH\b", re.IGNORECASE)
_ATTACH_LITERAL: Final = re.compile(r"\s*ATTACH\s+(?:DATABASE\s+)?'((?:[^']|'')*)'\s+AS\b", re.IGNORECASE | re.DOTALL)


def _schema(table: str | None) -> bool:
    return (table or "").lower().startswith("sqlite_")


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
    SQLITE_EVENT: lambda state, args: str(args[0]),
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
