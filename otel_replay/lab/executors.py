"""Where a lab's chunks run: in the lab process (``--workers 1``), in local worker processes (a spawn-context
process pool, the default), or as Ray tasks (``--executor ray``). Every executor runs the same worker function
(:func:`otel_replay.lab.worker.run_chunk`) on the same JSON chunks and hands the pairs back as they finish; the
lab puts them in cohort order, so the report does not depend on the executor.

Ctrl-C: no new chunk is handed out, the chunks already running finish (local workers ignore SIGINT; a second
Ctrl-C ends them at once; Ray tasks not finished yet are cancelled), what finished is kept and the executor says
it was interrupted.

It must never fork a process (the lab process may have chDB loaded: worker processes are spawned), pickle
anything but the chunks' JSON text, or import Ray unless the Ray executor was asked for.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import os
import socket
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Final

from .. import settings
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


RAY_ADDRESS_ENV: Final = "RAY_ADDRESS"
"""The environment variable naming the Ray cluster of ``--executor ray`` (Ray's own)."""

RAY_CONNECT_TIMEOUT: Final = 5.0
"""Seconds a TCP connect to the ``RAY_ADDRESS`` host may take before the lab is refused."""

_RAY_CLIENT_PORT: Final = 10001
"""The Ray Client server's default port (``ray://host`` without a port)."""


def _ray_temp_dir() -> str:
    """Ray's default temp folder as Ray finds it: ``RAY_TMPDIR``, else ``TMPDIR`` on Linux, else ``/tmp``; then
    ``ray``."""
    base = os.environ.get("RAY_TMPDIR") or (os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None)
    return os.path.join(base or ("/tmp" if os.name == "posix" else tempfile.gettempdir()), "ray")


def _host_port(text: str, default_port: int | None) -> tuple[str, int] | None:
    text = text.rpartition("@")[2]  # user:password@ is not part of the host
    host, sep, port = text.strip().rpartition(":")
    if not sep:
        host, port = text.strip(), ""
    host = host.strip("[]")
    if not port:
        return (host, default_port) if host and default_port is not None else None
    if not port.isdigit() or not host or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def _shown(address: str) -> str:
    """``address`` as an error line may show it: any ``user:password@`` part masked (:func:`settings.masked_url`)."""
    return settings.masked_url(address)


def ray_endpoint(address: str) -> tuple[str, int] | None:
    """The ``(host, port)`` a Ray address connects to first: ``host:port`` (the cluster's GCS), ``ray://host[:port]``
    (the Ray Client server, port 10001 by default), ``auto`` (the cluster the last ``ray start`` on this machine
    wrote to ``<Ray temp folder>/ray_current_cluster``). None for ``local`` (a new local Ray), for ``auto`` with
    no such file (Ray then looks for a running local cluster itself and says so when there is none), and for
    other ``scheme://`` addresses (handed to Ray as they are). ``ValueError`` for an address Ray cannot read."""
    text = address.strip()
    if text == "local":
        return None
    if text == "auto":
        try:
            with open(os.path.join(_ray_temp_dir(), "ray_current_cluster"), encoding="utf-8") as fh:
                found = fh.read().strip()
        except OSError:
            return None
        return _host_port(found, None) if found else None
    scheme, sep, rest = text.partition("://")
    if sep:
        if scheme != "ray":
            return None
        endpoint = _host_port(rest.split("/", 1)[0], _RAY_CLIENT_PORT)
    else:
        endpoint = _host_port(text, None)
    if endpoint is None:
        raise ValueError("not an address Ray reads")
    return endpoint


def check_ray_address(environ: Mapping[str, str] | None = None, *, timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """Refuse a ``RAY_ADDRESS`` nothing answers at, before Ray's own connect loop (which retries for minutes):
    a TCP connect to its host and port (:func:`ray_endpoint`) within ``timeout`` seconds, else
    :class:`~otel_replay.errors.ReplayRefused` with one line naming the address and the variable."""
    address = (os.environ if environ is None else environ).get(RAY_ADDRESS_ENV, "").strip()
    if not address:
        return
    shown = _shown(address)
    loaded = sys.modules.get("ray")
    if loaded is not None and getattr(loaded, "is_initialized", lambda: False)():
        return  # this process is connected to a Ray already: the lab uses it and never reads RAY_ADDRESS
    try:
        endpoint = ray_endpoint(address)
    except ValueError:
        raise ReplayRefused(
            f"{RAY_ADDRESS_ENV}={shown} is not a Ray address: write host:port (the cluster's GCS, "
            "e.g. 10.0.0.5:6379), ray://host:port (Ray Client), auto or local; or unset it for a local Ray"
        ) from None
    if endpoint is None:
        return
    host, port = endpoint
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        if address == "auto":
            shown = f"{address} ({host}:{port})"
        raise ReplayRefused(
            f"no Ray cluster answers at {RAY_ADDRESS_ENV}={shown}: connecting to {host}:{port} failed ({why}); "
            f"start the cluster (ray start --head), fix {RAY_ADDRESS_ENV}, or unset it for a local Ray"
        ) from None


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
    environment = dict(os.environ)
    if not ray.is_initialized():
        address = os.environ.get(RAY_ADDRESS_ENV, "").strip()
        if address:
            check_ray_address()
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except (ConnectionError, ValueError) as exc:  # Ray's own refusals: no cluster found, a bad address
                raise ReplayRefused(
                    f"Ray cannot connect to {RAY_ADDRESS_ENV}={_shown(address)} ({' '.join(str(exc).split())}); "
                    f"fix {RAY_ADDRESS_ENV} or unset it for a local Ray"
                ) from None
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
    set_by_ray = _changes(environment, dict(os.environ))
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
        _keep_finished(ray, pending, texts, on_pairs)
    finally:
        if started:
            ray.shutdown()
            _put_back(set_by_ray)
    return interrupted


def _changes(before: dict[str, str], after: dict[str, str]) -> dict[str, tuple[str | None, str | None]]:
    """The environment variables whose value differs from ``before`` to ``after``: name -> (before, after),
    None for absent."""
    return {
        name: (before.get(name), after.get(name))
        for name in before.keys() | after.keys()
        if before.get(name) != after.get(name)
    }


def _put_back(changes: dict[str, tuple[str | None, str | None]]) -> None:
    """Undo what starting Ray changed in this process's environment, which ``ray.shutdown()`` leaves behind
    (``ray.init()`` sets ``PYTHONBREAKPOINT`` to its debugger hook: the program's later ``breakpoint()`` calls and
    every process it starts would get Ray's hook). A variable changed again since is left as it is now."""
    for name, (before, set_to) in changes.items():
        if os.environ.get(name) != set_to:
            continue
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _keep_finished(ray: Any, pending: list[Any], texts: dict[Any, str], on_pairs: OnPairs) -> None:
    """After Ctrl-C on Ray: hand over the chunks whose tasks had already finished, cancel the others (queued or
    running: Ray's cancel raises ``KeyboardInterrupt`` in a running task; its chunk is not waited for)."""
    try:
        ready, waiting = ray.wait(pending, num_returns=len(pending), timeout=0) if pending else ([], [])
        for ref in waiting:
            ray.cancel(ref)
        for ref in ready:
            try:
                finished = ray.get(ref)
            except ray.exceptions.RayError:  # a failed task: nothing of it to keep
                continue
            with contextlib.suppress(KeyboardInterrupt):  # stopping already
                _decoded(finished, on_pairs)
    except KeyboardInterrupt:  # a second Ctrl-C: stop keeping, Ray is shut down next
        pass
