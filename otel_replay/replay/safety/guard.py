"""The side-effect guard of a replay, and the threads and tasks that carry a replay's context.

A replay in ``dry``, ``mock`` or ``deterministic`` mode (and one from step N on top of those), and every
regression case, runs the current code against recorded answers: nothing it does may reach the world. The
firewall in :mod:`otel_replay.replay.session` answers the calls otel-replay knows (decorated steps, the
instrumented SDKs); this module stops the ones it does not know: agent code that calls an undecorated
function, a tool run in a thread pool, an SDK no instrumentor covers. While the guard is on, these raise
:class:`SideEffectBlocked` (a :class:`PermissionError`, so code that tolerates ``OSError`` behaves as on a
read-only system) and are recorded once each on the replay as a divergence of kind ``side_effect``:

* process spawns: ``subprocess.Popen``, ``os.system``, ``os.exec*``, ``os.posix_spawn*``, ``os.spawn*``,
  ``os.fork``, ``os.forkpty``; a process started with no audit event (``_posixsubprocess.fork_exec`` called
  directly, native code) cannot be stopped here: when the replayed run ends, a child process started or waited
  for meanwhile is recorded as one ``side_effect`` (:func:`check_children`);
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

* **``sqlite3.connect`` wrapped** while at least one guard is on (counted): SQLite writes files from C with no
  audit event once a connection is open, so each connection opened in a guarded context gets the authorizer
  and trace callback of :func:`~otel_replay.replay.safety.effects.watch_sqlite`.

* **One audit hook** (PEP 578, :func:`sys.addaudithook`), installed the first time a guard is entered and
  never removed (Python cannot remove an audit hook). Its first statement reads a context variable and
  returns when the current context holds no active guard, so outside guarded replays it costs one lookup per
  audit event, and it only ever acts in the context (thread, task) of a guarded replay.
* **Context carried into threads**, for as long as at least one replay (or recorded run) runs
  (reference-counted, :mod:`otel_replay.recording.threads`, shared with the recorder):
  ``threading.Thread.start`` and ``concurrent.futures.ThreadPoolExecutor.submit`` are wrapped, as
  ``opentelemetry-instrumentation-threading`` does for the OpenTelemetry context, so a thread started, or a
  work item submitted, from a replay's context runs in a copy of that context (the replay session, the run and
  step, the guard). This covers ``loop.run_in_executor`` (it submits to an executor) and pools created before
  the replay. asyncio tasks copy the context themselves. The wrappers are removed when the last replay and run
  end (left in place, inert, if other code wrapped the same methods on top of them meanwhile). A thread pool's
  worker threads are not given a context of their own: each work item carries its submitter's.

The check of each audit event and the state of one guarded replay are in :mod:`otel_replay.replay.safety.effects`
(this module re-exports :class:`SideEffectBlocked`, :data:`BLOCKED_MESSAGE` and :data:`DIVERGENCE_KIND`).

This module must never block anything outside the context of a guarded replay, never block otel-replay's own
files and exports, and never let a blocked operation happen: when a check itself fails, the operation is
blocked.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from ...recording import current_step, unguarded_call
from ...recording.threads import carry_also, carrying
from ...semconv import ReplayMode

# re-exported: otel_replay.replay.safety.guard.BLOCKED_MESSAGE, .DIVERGENCE_KIND and .SideEffectBlocked
from .effects import BLOCKED_MESSAGE as BLOCKED_MESSAGE
from .effects import CHECKS, Guard, watch_sqlite
from .effects import DIVERGENCE_KIND as DIVERGENCE_KIND
from .effects import SideEffectBlocked as SideEffectBlocked


def guards(session: Any) -> bool:
    """True when a replay run by ``session`` runs under the side-effect guard: every mode but ``live`` (real
    calls are intended there), and a live replay from step N while it is still in the recorded steps before N
    (see :func:`Guard.in_force <otel_replay.replay.safety.effects.Guard.in_force>`), unless side effects were
    allowed."""
    if getattr(session, "allow_side_effects", False):
        return False
    return session.mode is not ReplayMode.LIVE or session.from_step is not None


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


_guard: ContextVar[Guard | None] = ContextVar("otel_replay_side_effect_guard", default=None)
_hook_lock = threading.Lock()
_hook_installed = False
_busy = threading.local()


@contextlib.contextmanager
def guarded(session: Any) -> Iterator[None]:
    """Block unrecorded side effects made in this context (and the threads and tasks that carry it) and
    record them on ``session``; the guard ends with the block, also for threads still running."""
    global _hook_installed
    state = Guard(session)  # before the hook sees it: gettempdir() may probe the temp folder by writing
    with _hook_lock:
        if not _hook_installed:
            sys.addaudithook(_audit)
            _hook_installed = True
    token = _guard.set(state)
    try:
        with _sqlite_watched():
            yield
    finally:
        state.active = False
        _guard.reset(token)


_sqlite_lock = threading.Lock()
_sqlite_count = 0
_sqlite_original: Any = None


@contextlib.contextmanager
def _sqlite_watched() -> Iterator[None]:
    """While at least one guard is on, ``sqlite3.connect`` gives each connection opened in a guarded context
    the authorizer of :func:`~otel_replay.replay.safety.effects.watch_sqlite` (SQLite raises no audit event once a
    connection is open, and a connection cannot be given one from the ``sqlite3.connect`` events). Restored when
    the last guard ends, unless other code replaced it meanwhile; a reference kept by the agent passes
    straight through outside a guard."""
    global _sqlite_count, _sqlite_original
    import sqlite3
    import sqlite3.dbapi2

    with _sqlite_lock:
        if _sqlite_count == 0 and (_sqlite_original is None or sqlite3.connect is _sqlite_original):
            # (otherwise other code wrapped ours while it was in place: it still calls ours)
            _sqlite_original = sqlite3.connect
            sqlite3.connect = sqlite3.dbapi2.connect = _connect
        _sqlite_count += 1
    try:
        yield
    finally:
        with _sqlite_lock:
            _sqlite_count -= 1
            if _sqlite_count == 0 and sqlite3.connect is _connect:
                sqlite3.connect = sqlite3.dbapi2.connect = _sqlite_original


def _connect(*args: Any, **kwargs: Any) -> Any:
    conn = _sqlite_original(*args, **kwargs)
    watch_sqlite(_guard_in_force, conn, args[0] if args else kwargs.get("database", ""))
    return conn


def _guard_in_force() -> Guard | None:
    """The guard of the current context, when it is on (the check :func:`_audit` makes first)."""
    state = _guard.get()
    if state is None or not state.active or (state.prefix_only and not state.in_force()):
        return None
    return state


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """The process's one audit hook: returns at once unless the current context is a guarded replay."""
    state = _guard_in_force()
    if state is None:
        return
    check = CHECKS.get(event)
    if check is None or getattr(_busy, "on", False):
        return
    live = unguarded_call.get()
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
    current = current_step.get()
    through = current is None or current is call.step or current.kind.value not in ("tool", "retrieval")
    if through and call.live == "all":
        state = _guard.get()
        if state is not None:
            state.spawns_permitted = True
    return through


def check_children() -> None:
    """At the end of a guarded replay's run (in its context): a process started below the audit hooks during
    the replay is recorded as a side effect (see :meth:`Guard.check_children
    <otel_replay.replay.safety.effects.Guard.check_children>`)."""
    state = _guard_in_force()
    if state is not None:
        state.check_children()


def record_refused(session: Any, what: str) -> None:
    """A call the kernel refused below Python during ``session``'s recorded steps (named by the seccomp supervisor
    of a live replay from step N, with the agent's frame when the replaying process could tell it), recorded as a
    side effect like one the guard blocked."""
    state = _guard.get()
    if state is None or state.session is not session:
        state = Guard(session)
    state.record(what, frame=False)


# ------------------------------------------------------------------------------------- context in threads


carry_also(_guard)  # a guarded context is carried too (it always holds the replay session as well)


@contextlib.contextmanager
def carrying_context() -> Iterator[None]:
    """While at least one of these blocks runs (in any thread), threads started and work items submitted to a
    ``ThreadPoolExecutor`` from a replay's context run in a copy of that context (see
    :mod:`otel_replay.recording.threads`, which a recorded run uses the same way)."""
    with carrying():
        yield
