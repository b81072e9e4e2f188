"""The side-effect guard of a replay, and the threads and tasks that carry a replay's context.

A replay in ``dry``, ``mock`` or ``deterministic`` mode (and one from step N on top of those), and every
regression case, runs the current code against recorded answers: nothing it does may reach the world. The
firewall in :mod:`otel_replay.replay.session` answers the calls otel-replay knows (decorated steps, the
instrumented SDKs); this module stops the ones it does not know: agent code that calls an undecorated
function, a tool run in a thread pool, an SDK no instrumentor covers. While the guard is on, these raise
:class:`SideEffectBlocked` (a :class:`PermissionError`, so code that tolerates ``OSError`` behaves as on a
read-only system) and are recorded once each on the replay as a divergence of kind ``side_effect``:

* process spawns: ``subprocess.Popen``, ``os.system``, ``os.exec*``, ``os.posix_spawn*``, ``os.spawn*``,
  ``os.fork``, ``os.forkpty``;
* file changes: deletes, renames, truncation, ``shutil.rmtree``, new folders and links, mode and owner
  changes, opens for writing (by mode or ``os.open`` flags; ``os.devnull`` excepted) and SQLite databases
  opened by ``sqlite3.connect`` (a file name or a ``file:`` URI; in-memory, temporary and read-only ones
  excepted); all allowed under the system temp folder (:func:`tempfile.gettempdir`), otel-replay's home (its
  spool, key and embedded store) and an embedded store configured elsewhere, and for Python's own bytecode
  cache (``__pycache__/*.pyc`` and their temp files);
* network: ``socket.connect`` / ``connect_ex`` (loopback included: a local database is a side effect too),
  ``sendto`` and ``sendmsg``, except to the endpoints otel-replay itself exports to (the OTLP endpoint of
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` or of the configured exporter,
  and an ``http(s)`` ClickHouse store URL from ``OTEL_REPLAY_STORE`` or :func:`~otel_replay.configure`).

A call the replay itself lets execute is the one exception (:func:`otel_replay.recording.unguarded`, set by
the recorder around that call only): a model call of a ``whatif`` replay may open its network connection (and
nothing else), and a tool a lab's policy runs live (``tools_live``, its approval taken) runs as in a live
replay. A tool or retrieval step nested inside such a call gets no part of that permission.

Process-wide state, kept because Python offers no narrower way:

* **One audit hook** (PEP 578, :func:`sys.addaudithook`), installed the first time a guard is entered and
  never removed (Python cannot remove an audit hook). Its first statement reads a context variable and
  returns when the current context holds no active guard, so outside guarded replays it costs one lookup per
  audit event, and it only ever acts in the context (thread, task) of a guarded replay.
* **Context carried into threads**, for as long as at least one replay runs (reference-counted):
  ``threading.Thread.start`` and ``concurrent.futures.ThreadPoolExecutor.submit`` are wrapped, as
  ``opentelemetry-instrumentation-threading`` does for the OpenTelemetry context, so a thread started, or a
  work item submitted, from a replay's context runs in a copy of that context (the replay session, the run and
  step, the guard). This covers ``loop.run_in_executor`` (it submits to an executor) and pools created before
  the replay. asyncio tasks copy the context themselves. The wrappers are removed when the last replay ends
  (left in place, inert, if other code wrapped the same methods on top of them meanwhile). A thread pool's
  worker threads are not given a context of their own: each work item carries its submitter's.

This module must never block anything outside the context of a guarded replay, never block otel-replay's own
files and exports, and never let a blocked operation happen: when a check itself fails, the operation is
blocked.
"""

from __future__ import annotations

import concurrent.futures.thread as _cf_thread
import contextlib
import contextvars
import functools
import os
import shlex
import sys
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from ..exporting import setup
from ..recording import _current_step, _replay_session, _unguarded
from ..semconv import ReplayMode
from .exempt import _exempt_endpoints, _exempt_roots, _folder_of_fd, _is_bytecode, _normal_host, _resolved
from .session import Divergence

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


def guards(session: Any) -> bool:
    """True when a replay run by ``session`` runs under the side-effect guard: every mode but ``live`` (real
    calls are intended there; a from-step replay follows its base mode), unless side effects were allowed."""
    return session.mode is not ReplayMode.LIVE and not getattr(session, "allow_side_effects", False)


@contextlib.contextmanager
def agent_call(session: Any) -> Iterator[None]:
    """Around the replayed agent's own code: threads and tasks it starts carry the replay's context, and
    when :func:`guards` says so, the side-effect guard is on. The engine's own work stays outside."""
    with carrying_context():
        if guards(session):
            if session.mode is ReplayMode.WHATIF:
                _platform_known()
            with guarded(session):
                yield
        else:
            yield


def _platform_known() -> None:
    """Have Python read the platform once, outside the guard: the model SDKs put it in their request headers,
    and the first ``platform.platform()`` of a process runs ``uname -p``, which a whatif replay's model call
    would otherwise meet as a blocked process spawn. Python keeps the answer for the process."""
    import platform

    try:
        platform.platform()
    except Exception:  # noqa: BLE001 - the SDK will meet the same problem, under the guard
        pass


# ------------------------------------------------------------------------------------------------ guard


class _Guard:
    """One guarded replay: what is exempt, and the effects already reported."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.active = True
        self.roots = _exempt_roots()
        self.endpoints = _exempt_endpoints()
        self._addresses: set[tuple[str, int]] | None = None
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def exempt_path(self, raw: Any, dir_fd: Any = None) -> tuple[bool, str]:
        """(exempt, the absolute path as shown) for a path an event names."""
        path = os.fsdecode(raw)
        if not os.path.isabs(path):
            base = _folder_of_fd(dir_fd) if isinstance(dir_fd, int) and dir_fd >= 0 else os.getcwd()
            if base is None:
                return False, path
            path = os.path.join(base, path)
        path = os.path.normpath(path)
        if _is_bytecode(path):
            return True, path
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root + os.sep) for root in self.roots), path

    def exempt_address(self, host: str, port: int) -> bool:
        """True when ``host:port`` is one of the endpoints otel-replay exports to."""
        if self._addresses is None:
            self._addresses = _resolved(self.endpoints)
        return (_normal_host(host), port) in self._addresses

    def block(self, what: str) -> None:
        """Record ``what`` on the replay (once) and raise :class:`SideEffectBlocked`."""
        text = _scrub(what)
        if len(text) > _TEXT_MAX:
            text = text[: _TEXT_MAX - 1] + "…"
        with self._lock:
            new = text not in self._seen
            self._seen.add(text)
        if new:
            self.session.divergences.append(
                Divergence(
                    step_index=_step_reached(self.session),
                    kind=DIVERGENCE_KIND,
                    reason=f"unrecorded side effect: {text}",
                )
            )
        raise SideEffectBlocked(f"{BLOCKED_MESSAGE}: {text} (replay with --allow-side-effects to let it happen)")


_guard: ContextVar[_Guard | None] = ContextVar("otel_replay_side_effect_guard", default=None)
_hook_lock = threading.Lock()
_hook_installed = False
_busy = threading.local()


@contextlib.contextmanager
def guarded(session: Any) -> Iterator[None]:
    """Block unrecorded side effects made in this context (and the threads and tasks that carry it) and
    record them on ``session``; the guard ends with the block, also for threads still running."""
    global _hook_installed
    state = _Guard(session)  # before the hook sees it: gettempdir() may probe the temp folder by writing
    with _hook_lock:
        if not _hook_installed:
            sys.addaudithook(_audit)
            _hook_installed = True
    token = _guard.set(state)
    try:
        yield
    finally:
        state.active = False
        _guard.reset(token)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """The process's one audit hook: returns at once unless the current context is a guarded replay."""
    state = _guard.get()
    if state is None or not state.active:
        return
    check = _CHECKS.get(event)
    if check is None or getattr(_busy, "on", False):
        return
    live = _unguarded.get()
    if live is not None and _lets_through(live, event):
        return
    _busy.on = True
    try:
        what = check(state, args)
    except Exception:  # noqa: BLE001 - an operation that cannot be checked is not let through
        what = f"{event} (its arguments could not be checked)"
    finally:
        _busy.on = False
    if what is not None:
        state.block(what)


def _lets_through(call: Any, event: str) -> bool:
    """Whether the real execution of ``call``, which the replay let execute (see
    :func:`otel_replay.recording.unguarded`), may do ``event``: a whatif model call (``network``) may only
    connect, a tool a policy runs live (``all``) anything, as in a live replay. Never a tool or retrieval
    step nested inside it, which has its own permission or none."""
    if call.live == "network" and not event.startswith("socket."):
        return False
    if call.live not in ("network", "all"):
        return False
    current = _current_step.get()
    return current is None or current is call.step or current.kind.value not in ("tool", "retrieval")


def _spawn(event: str) -> Callable[[_Guard, tuple[Any, ...]], str | None]:
    def check(state: _Guard, args: tuple[Any, ...]) -> str | None:
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


def _open(state: _Guard, args: tuple[Any, ...]) -> str | None:
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


def _sqlite(state: _Guard, args: tuple[Any, ...]) -> str | None:
    """``sqlite3.connect``: SQLite opens its files in C, past the ``open`` event, so the database is checked
    here. In-memory and private temporary databases are allowed, and so is a read-only ``file:`` URI."""
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
    for path in paths:
        exempt, shown = state.exempt_path(path)
        if not exempt:
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


@functools.cache
def _sqlite_uri_default() -> bool:
    """True when this SQLite library reads every ``file:`` name as a URI (built with ``SQLITE_USE_URI``), so
    ``uri=False`` (not visible in the audit event) changes nothing."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        return any(row[0] == "USE_URI" for row in conn.execute("PRAGMA compile_options"))


def _file_change(label: str, *, dir_fd_at: int | None = None) -> Callable[[_Guard, tuple[Any, ...]], str | None]:
    def check(state: _Guard, args: tuple[Any, ...]) -> str | None:
        path = args[0]
        if isinstance(path, int):  # an open descriptor: opening it for writing was checked already
            return None
        dir_fd = args[dir_fd_at] if dir_fd_at is not None and len(args) > dir_fd_at else None
        exempt, shown = state.exempt_path(path, dir_fd)
        return None if exempt else f"{label}: {_short(shown)}"

    return check


def _two_paths(label: str) -> Callable[[_Guard, tuple[Any, ...]], str | None]:
    def check(state: _Guard, args: tuple[Any, ...]) -> str | None:
        src_fd = args[2] if len(args) > 2 else None
        dst_fd = args[3] if len(args) > 3 else None
        src_exempt, src = state.exempt_path(args[0], src_fd)
        dst_exempt, dst = state.exempt_path(args[1], dst_fd)
        return None if src_exempt and dst_exempt else f"{label}: {_short(src)} -> {_short(dst)}"

    return check


def _link(label: str) -> Callable[[_Guard, tuple[Any, ...]], str | None]:
    def check(state: _Guard, args: tuple[Any, ...]) -> str | None:
        exempt, shown = state.exempt_path(args[1])  # the new name is what changes
        return None if exempt else f"{label}: {_short(shown)}"

    return check


def _mkdir(state: _Guard, args: tuple[Any, ...]) -> str | None:
    path = args[0]
    if isinstance(path, int):
        return None
    if os.path.basename(os.path.normpath(os.fsdecode(path))) == "__pycache__":
        return None  # Python's bytecode cache
    exempt, shown = state.exempt_path(path, args[2] if len(args) > 2 else None)
    return None if exempt else f"folder create (os.mkdir): {_short(shown)}"


def _connect(event: str) -> Callable[[_Guard, tuple[Any, ...]], str | None]:
    def check(state: _Guard, args: tuple[Any, ...]) -> str | None:
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


_CHECKS: Final[dict[str, Callable[[_Guard, tuple[Any, ...]], str | None]]] = {
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
    """A value on one line (shortened only after redaction, in :meth:`_Guard.block`)."""
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


# ------------------------------------------------------------------------------------- context in threads


_carry_lock = threading.Lock()
_carrying = 0
_originals: dict[str, Any] = {}


def _in_replay() -> bool:
    return _replay_session.get() is not None or _guard.get() is not None


def _thread_start(self: threading.Thread) -> None:
    if _carrying and _in_replay() and getattr(self, "_target", None) is not _cf_thread._worker:
        # The thread's run() (its own or a subclass's) runs inside a copy of the starter's context.
        self.run = functools.partial(contextvars.copy_context().run, self.run)  # type: ignore[method-assign]
    _originals["start"](self)


def _pool_submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    if _carrying and _in_replay():
        return _originals["submit"](self, contextvars.copy_context().run, fn, *args, **kwargs)
    return _originals["submit"](self, fn, *args, **kwargs)


@contextlib.contextmanager
def carrying_context() -> Iterator[None]:
    """While at least one of these blocks runs (in any thread), threads started and work items submitted to a
    ``ThreadPoolExecutor`` from a replay's context run in a copy of that context."""
    global _carrying
    with _carry_lock:
        if _carrying == 0:
            _wrap_threads()
        _carrying += 1
    try:
        yield
    finally:
        with _carry_lock:
            _carrying -= 1
            if _carrying == 0:
                _unwrap_threads()


def _wrap_threads() -> None:
    # A wrapper of ours left in place (inert) under someone else's is still in the chain: never wrap twice.
    pool = _cf_thread.ThreadPoolExecutor
    if "start" not in _originals:
        _originals["start"] = threading.Thread.start
        threading.Thread.start = _thread_start  # type: ignore[method-assign]
    if "submit" not in _originals:
        _originals["submit"] = pool.submit
        pool.submit = _pool_submit  # type: ignore[method-assign]


def _unwrap_threads() -> None:
    # Put the originals back only where ours is still the outermost wrapper; otherwise ours stays, inert.
    if threading.Thread.start is _thread_start:
        threading.Thread.start = _originals.pop("start")  # type: ignore[method-assign]
    pool = _cf_thread.ThreadPoolExecutor
    if pool.submit is _pool_submit:
        pool.submit = _originals.pop("submit")  # type: ignore[method-assign]
