"""Runs follow threads: the context of a run (or a replay) carried into the threads and pool work it starts.

While at least one run is being recorded, or one replay runs, in the process (reference-counted: see
:func:`carrying` and :func:`carry_begin` / :func:`carry_end`), ``threading.Thread.start`` and
``concurrent.futures.ThreadPoolExecutor.submit`` are wrapped, as ``opentelemetry-instrumentation-threading``
does for the OpenTelemetry context, so a thread started, or a work item submitted, from a context that holds a
run or a replay runs in a copy of that context: its model and tool calls are steps of that run (parented under
the step current where it was started), answered by that replay. This covers ``loop.run_in_executor`` (it
submits to an executor), ``asyncio.to_thread`` (which copies the context itself) and pools created before the
run. A thread pool's worker threads get no context of their own: each work item carries its submitter's.
Threads and work started from a context without a run or replay are left alone (they start with an empty
context, as Python gives them); so are threads started by ``_thread.start_new_thread`` or native code.

The wrappers are put back when the last run and replay end, left in place (inert) if other code wrapped the
same methods on top of them meanwhile, and never stacked twice. While they are in place they cost, per thread
start or submit, a look at three context variables and, inside a run, one :func:`contextvars.copy_context`.

Process-wide state (the methods wrapped are the process's): the count of runs and replays holding the wrappers,
the originals they wrap, the context variables that mark a context worth carrying, and one fork handler that
gives a forked child a fresh lock.

It must never give a context to a thread started outside a run or replay, nor stay installed once none runs
(unless another wrapper sits on top of it).
"""

from __future__ import annotations

import concurrent.futures.thread as _cf_thread
import contextlib
import contextvars
import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from .state import current_replay, current_run

lock = threading.Lock()
_count = 0
originals: dict[str, Any] = {}
_markers: list[ContextVar[Any]] = [current_run, current_replay]
"""A context holding a value in any of these is carried (the replay guard adds its own)."""


def _new_lock_in_child() -> None:
    """A child forked while another thread held the lock (a root run starting or ending) would wait for it
    forever at its first run: it gets a fresh one. The count is kept: runs of threads that do not exist in the
    child never end there, so the wrappers stay in place in it (they carry only contexts that hold a run)."""
    global lock
    lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def carry_also(var: ContextVar[Any]) -> None:
    """Carry contexts in which ``var`` is set too (a layer above adds its context variable, once, at import)."""
    with lock:
        if var not in _markers:
            _markers.append(var)


def _worth_carrying() -> bool:
    for var in _markers:
        if var.get() is not None:
            return True
    return False


def thread_start(self: threading.Thread) -> None:
    if _count and _worth_carrying() and getattr(self, "_target", None) is not _cf_thread._worker:
        # The thread's run() (its own or a subclass's) runs inside a copy of the starter's context.
        self.run = functools.partial(contextvars.copy_context().run, self.run)  # type: ignore[method-assign]
    originals["start"](self)


def pool_submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    if _count and _worth_carrying():
        return originals["submit"](self, contextvars.copy_context().run, fn, *args, **kwargs)
    return originals["submit"](self, fn, *args, **kwargs)


def carry_begin() -> None:
    """One more run or replay needs its context carried: the wrappers are installed by the first."""
    global _count
    with lock:
        if _count == 0:
            _wrap()
        _count += 1


def carry_end() -> None:
    """That run or replay ended: the wrappers are put back when the last one ends."""
    global _count
    with lock:
        if _count == 0:
            return
        _count -= 1
        if _count == 0:
            _unwrap()


@contextlib.contextmanager
def carrying() -> Iterator[None]:
    """While at least one of these blocks (or a run begun with :func:`carry_begin`) runs, in any thread, threads
    started and work items submitted to a ``ThreadPoolExecutor`` from a run's or replay's context run in a copy
    of that context."""
    carry_begin()
    try:
        yield
    finally:
        carry_end()


def carried() -> int:
    """How many runs and replays hold the wrappers in place now (0: the originals are back, unless wrapped over)."""
    return _count


def _wrap() -> None:
    # A wrapper of ours left in place (inert) under someone else's is still in the chain: never wrap twice.
    pool = _cf_thread.ThreadPoolExecutor
    if "start" not in originals:
        originals["start"] = threading.Thread.start
        threading.Thread.start = thread_start  # type: ignore[method-assign]
    if "submit" not in originals:
        originals["submit"] = pool.submit
        pool.submit = pool_submit  # type: ignore[method-assign]


def _unwrap() -> None:
    # Put the originals back only where ours is still the outermost wrapper; otherwise ours stays, inert.
    if threading.Thread.start is thread_start:
        threading.Thread.start = originals.pop("start")  # type: ignore[method-assign]
    pool = _cf_thread.ThreadPoolExecutor
    if pool.submit is pool_submit:
        pool.submit = originals.pop("submit")  # type: ignore[method-assign]
