"""Where a lab's chunks run: in the lab process (``--workers 1``), in local worker processes (a spawn-context
process pool, the default), or as Ray tasks (``--executor ray``). Every executor runs the same worker function
(:func:`otel_replay.lab.worker.run_chunk`) on the same JSON chunks and hands the pairs back as they finish; the
lab puts them in cohort order, so the report does not depend on the executor.

Ctrl-C: no new chunk is handed out, the chunks already running finish (local workers ignore SIGINT; a second
Ctrl-C ends them at once), what finished is kept and the executor says it was interrupted.

It must never fork a process (the lab process may have chDB loaded: worker processes are spawned), pickle
anything but the chunks' JSON text, or import Ray unless the Ray executor was asked for.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..errors import ReplayRefused
from .model import PairResult
from .worker import ignore_interrupts, lost_pairs, replay_items, run_chunk

OnPairs = Callable[[list[PairResult]], None]
"""Called with the pairs that finished (a whole chunk, or one replay in the lab process)."""

_LOST = "the worker process replaying this run's chunk ended before it reported ({}); the lab went on without it"
"""The ``error`` of each run of a chunk whose worker process died (or whose Ray task failed)."""

_AHEAD = 2
"""Chunks handed to each worker ahead of the one it runs (chunks are read from the store as they are handed
out, so the lab process never holds the whole cohort)."""


def run_in_process(tasks: Iterable[str], on_pairs: OnPairs) -> bool:
    """Run chunk texts one replay at a time in this process; True when Ctrl-C stopped it (the replay it was in
    is lost, every one before it kept)."""
    try:
        for text in tasks:
            for pair in replay_items(json.loads(text)):
                on_pairs([pair])
    except KeyboardInterrupt:
        return True
    return False


def _decoded(text: str, on_pairs: OnPairs) -> None:
    """Hand a chunk's pairs over; raise ``KeyboardInterrupt`` when the chunk was interrupted."""
    data = json.loads(text)
    on_pairs([PairResult.from_dict(d) for d in data["pairs"]])
    if data["interrupted"]:
        raise KeyboardInterrupt


def run_local_pool(tasks: Iterable[str], *, workers: int, on_pairs: OnPairs) -> bool:
    """Run chunk texts on ``workers`` spawned worker processes; True when Ctrl-C stopped the lab.

    A worker process that dies (killed, ``os._exit`` in the replayed code, out of memory) breaks the pool: the
    chunks that were running in it become ``error`` pairs saying so (which of them killed it cannot be told),
    the pairs that finished are kept, and the remaining chunks go to a fresh pool."""
    context = multiprocessing.get_context("spawn")

    def new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=ignore_interrupts)

    pool = new_pool()
    unreported: list[Future[str]] = []  # submitted, in submission order, pairs not handed over yet
    texts: dict[Future[str], str] = {}
    interrupted = False

    def submit(text: str) -> None:
        nonlocal pool
        try:
            future = pool.submit(run_chunk, text)
        except BrokenProcessPool:
            pool.shutdown(wait=False, cancel_futures=True)
            pool = new_pool()
            future = pool.submit(run_chunk, text)
        texts[future] = text
        unreported.append(future)

    try:
        source = iter(tasks)
        for text in itertools.islice(source, workers * (_AHEAD + 1)):
            submit(text)
        while unreported:
            wait(unreported, return_when=FIRST_COMPLETED)
            for future in [f for f in unreported if f.done()]:
                unreported.remove(future)
                text = texts.pop(future)
                try:
                    finished = future.result()
                except BrokenProcessPool as exc:
                    on_pairs(lost_pairs(text, _LOST.format(str(exc) or type(exc).__name__)))
                else:
                    _decoded(finished, on_pairs)
                for more in itertools.islice(source, 1):
                    submit(more)
    except KeyboardInterrupt:
        interrupted = True
        for future in unreported:
            future.cancel()
        try:  # the chunks already running finish (the workers ignore SIGINT) and are kept
            for future in unreported:
                if future.cancelled():
                    continue
                try:
                    text = future.result()
                except Exception:  # noqa: BLE001 - a chunk that failed while the lab stopped is not kept
                    continue
                with contextlib.suppress(KeyboardInterrupt):  # stopping already
                    _decoded(text, on_pairs)
        except KeyboardInterrupt:  # a second Ctrl-C: end the workers now
            _terminate(pool)
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=True)
    return interrupted


def _terminate(pool: ProcessPoolExecutor) -> None:
    processes = getattr(pool, "_processes", None) or {}  # the pool has no public way to end its workers
    for process in list(processes.values()):
        try:
            process.terminate()
        except Exception:  # noqa: BLE001 - already gone
            pass


def run_ray(tasks: Iterable[str], *, workers: int, on_pairs: OnPairs) -> bool:
    """Run chunk texts as Ray tasks (``RAY_ADDRESS`` picks a cluster, else a local Ray on loopback with
    ``workers`` CPUs); True when Ctrl-C stopped the lab."""
    try:
        import ray
    except ImportError:
        raise ReplayRefused(
            "--executor ray needs Ray, which is not installed: pip install 'otel-replay[ray]'"
        ) from None
    started = False
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(
                num_cpus=workers,
                include_dashboard=False,
                log_to_driver=False,
                _node_ip_address="127.0.0.1",
                # the local Ray's workers import what the lab process can import (its path, its working folder)
                runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}},
            )
        started = True
    remote = ray.remote(run_chunk)
    pending: list[Any] = []
    texts: dict[Any, str] = {}
    interrupted = False

    def launch(text: str) -> None:
        ref = remote.remote(text)
        texts[ref] = text
        pending.append(ref)

    try:
        source = iter(tasks)
        for text in itertools.islice(source, workers * (_AHEAD + 1)):
            launch(text)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                text = texts.pop(ref)
                try:
                    finished = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the task's worker died, or Ray lost the task
                    on_pairs(lost_pairs(text, _LOST.format(type(exc).__name__)))
                else:
                    _decoded(finished, on_pairs)
                for more in itertools.islice(source, 1):
                    launch(more)
    except KeyboardInterrupt:
        interrupted = True
        for ref in pending:
            ray.cancel(ref)
    finally:
        if started:
            ray.shutdown()
    return interrupted
