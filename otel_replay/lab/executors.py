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

import json
import multiprocessing
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from ..errors import ReplayRefused
from .model import PairResult
from .worker import ignore_interrupts, policy_of, replay_one, run_chunk

OnPairs = Callable[[int, list[PairResult]], None]
"""Called with a chunk's index and the pairs that finished (a whole chunk, or one replay in-process)."""


def run_in_process(tasks: Sequence[Mapping[str, Any]], on_pairs: OnPairs) -> bool:
    """Run decoded chunk tasks one replay at a time in this process; True when Ctrl-C stopped it (the replay
    it was in is lost, every one before it kept)."""
    try:
        for index, task in enumerate(tasks):
            policy = policy_of(task["policy"])
            for item in task["items"]:
                pair = replay_one(
                    item,
                    mode=task["mode"],
                    policy=policy,
                    lane=task["lane"],
                    repeat=int(item.get("repeat", 0)),
                    entrypoint=task.get("app"),
                    reason=task.get("reason"),
                    actor=task.get("actor"),
                    approvals=task.get("approvals") or (),
                )
                on_pairs(index, [pair])
    except KeyboardInterrupt:
        return True
    return False


def _decoded(text: str) -> list[PairResult]:
    return [PairResult.from_dict(d) for d in json.loads(text)]


def run_local_pool(tasks: Sequence[str], *, workers: int, on_pairs: OnPairs) -> bool:
    """Run chunk texts on ``workers`` spawned worker processes; True when Ctrl-C stopped the lab."""
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=ignore_interrupts)
    futures: dict[Future[str], int] = {}
    reported: set[Future[str]] = set()
    interrupted = False
    try:
        futures = {pool.submit(run_chunk, text): index for index, text in enumerate(tasks)}
        pending: set[Future[str]] = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                reported.add(future)
                on_pairs(futures[future], _decoded(future.result()))
    except KeyboardInterrupt:
        interrupted = True
        for future in futures:
            future.cancel()
        try:  # the chunks already running finish (the workers ignore SIGINT) and are kept
            for future, index in futures.items():
                if future in reported or future.cancelled():
                    continue
                try:
                    text = future.result()
                except Exception:  # noqa: BLE001 - a chunk that failed while the lab stopped is not kept
                    continue
                on_pairs(index, _decoded(text))
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


def run_ray(tasks: Sequence[str], *, workers: int, on_pairs: OnPairs) -> bool:
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
            )
        started = True
    remote = ray.remote(run_chunk)
    refs = {remote.remote(text): index for index, text in enumerate(tasks)}
    pending = list(refs)
    interrupted = False
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                on_pairs(refs[ref], _decoded(ray.get(ref)))
    except KeyboardInterrupt:
        interrupted = True
        for ref in pending:
            ray.cancel(ref)
    finally:
        if started:
            ray.shutdown()
    return interrupted
