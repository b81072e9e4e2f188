"""What a process forked from one that records must redo in the child: the hooks otel-replay runs after ``fork``.

Why it exists: pre-fork servers (gunicorn, Celery prefork, ``multiprocessing`` with the ``fork`` start method)
configure recording in the parent and record in the children. Two things need the child's own action:

* an exporter's per-process state (the spool's open segment, the ClickHouse exporter's connection and locks)
  is reset in the child by a method of the exporter (:func:`after_fork_in_child`). ``os.register_at_fork``
  can never unregister a handler, so the handler holds the exporter weakly: an exporter shut down and dropped
  is collected, and its handler then does nothing;
* a ``multiprocessing`` child ends with ``os._exit`` after its target returns, so ``atexit`` handlers (where
  otel-replay flushes) never run there: :func:`flush_when_multiprocessing_child_ends` has the flush run by
  ``multiprocessing``'s own exit step in such a child (``multiprocessing.util.Finalize``).

Process-wide state (unavoidable: fork handlers are per process): the handlers registered with
``os.register_at_fork`` (one small closure per exporter ever created; it holds no exporter), whether the exit
flush is installed (``_exit_flush``) and the pid where its ``Finalize`` was last registered (``_finalize_pid``).

This module must never hold an exporter strongly, raise from a fork handler, import ``multiprocessing`` itself
(it only uses it when the program already did), or import anything from otel_replay (a leaf every layer may
call).
"""

from __future__ import annotations

import logging
import os
import sys
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["after_fork_in_child", "flush_when_multiprocessing_child_ends"]

_log = logging.getLogger("otel_replay")

_EXIT_PRIORITY = 0  # multiprocessing runs finalizers with a priority >= 0 first, before it joins children


def after_fork_in_child(method: Callable[[], None]) -> None:
    """Run the bound ``method`` in every child forked from now on, for as long as its object is alive.

    The fork handler holds ``method`` through a :class:`weakref.WeakMethod`: it keeps nothing alive, and once
    the object is collected the handler does nothing. A failure of ``method`` is logged, never raised (the
    child goes on). Does nothing where ``os.register_at_fork`` does not exist.
    """
    if not hasattr(os, "register_at_fork"):
        return
    ref = weakref.WeakMethod(method)

    def run_in_child() -> None:
        bound = ref()
        if bound is None:
            return
        try:
            bound()
        except Exception:  # noqa: BLE001 - a fork handler never raises into the host program
            _log.warning("otel-replay: resetting an exporter after fork failed", exc_info=True)

    os.register_at_fork(after_in_child=run_in_child)


class _Marker:
    """What ``multiprocessing.util.register_after_fork`` keys its callback on (it holds that object weakly)."""


_MARKER = _Marker()
_exit_flush: Callable[[], Any] | None = None
_finalize_pid = 0


def flush_when_multiprocessing_child_ends(flush: Callable[[], Any]) -> None:
    """Have ``flush`` run when a ``multiprocessing`` child forked from this process ends normally (its target
    returned or raised), as ``atexit`` does in a process that exits through the interpreter.

    Installed once per process (later calls only replace ``flush``). A child killed by a signal, a ``Pool``
    worker stopped by ``terminate()`` and a process that calls ``os._exit`` itself run no exit step at all.
    """
    global _exit_flush
    first = _exit_flush is None
    _exit_flush = flush
    if first and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_arm_in_child)


def _arm_in_child() -> None:
    # multiprocessing forgets every finalizer of the parent when the child starts (Process._bootstrap clears
    # the registry), then runs its after-fork callbacks: register the finalizer from one of those.
    util = sys.modules.get("multiprocessing.util")
    if util is None or _exit_flush is None:
        return
    try:
        util.register_after_fork(_MARKER, _register_finalizer)
    except Exception:  # noqa: BLE001 - a fork handler never raises into the host program
        _log.debug("otel-replay: could not arm the flush at the end of a multiprocessing child", exc_info=True)


def _register_finalizer(_: object) -> None:
    global _finalize_pid
    util = sys.modules.get("multiprocessing.util")
    pid = os.getpid()
    if util is None or _finalize_pid == pid:  # a grandchild inherits its parent's callback: one finalizer
        return
    _finalize_pid = pid
    util.Finalize(None, _run_exit_flush, exitpriority=_EXIT_PRIORITY)


def _run_exit_flush() -> None:
    flush = _exit_flush
    if flush is None:
        return
    try:
        flush()
    except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
        _log.warning("otel-replay: flushing at the end of a multiprocessing child failed", exc_info=True)
