"""What carrying a run's context into threads costs (``otel_replay.recording.threads``).

While a run is recorded (or a replay runs) anywhere in the process, ``threading.Thread.start`` and
``ThreadPoolExecutor.submit`` are wrapped. Three settings are timed for each of the two calls, in rounds that
alternate their order; the figure is the median per call over the rounds:

* ``original``: no run anywhere, the originals in place (what the host program pays with no run open);
* ``outside``: the wrappers in place (a run is open) but the caller is outside any run: three context
  variable lookups, nothing carried;
* ``inside``: the caller is inside a run: one ``contextvars.copy_context()`` more.

``Thread.start`` is timed with its ``join`` (a thread that does nothing), ``submit`` as the submission of a
no-op to a warm pool of one worker followed, after the batch, by waiting for all of them. Those include the
thread switches, which vary more than the wrappers cost; so the wrappers alone are timed too (each calling a
no-op in place of the original), as is what a root run pays to install and remove them (when it is the only run).

    python benchmarks/thread_carrying.py [--calls 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait

from _table import print_rows, row

from otel_replay.recording import threads
from otel_replay.recording.state import current_run


def _noop() -> None:
    return None


@contextlib.contextmanager
def _setting(name: str) -> Iterator[None]:
    if name == "original":
        yield
        return
    with threads.carrying():
        token = current_run.set(object()) if name == "inside" else None  # type: ignore[arg-type]
        try:
            yield
        finally:
            if token is not None:
                current_run.reset(token)


def _starts(calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        thread = threading.Thread(target=_noop)
        thread.start()
        thread.join()
    return time.perf_counter() - t0


def _submits(pool: ThreadPoolExecutor, calls: int) -> float:
    t0 = time.perf_counter()
    futures = [pool.submit(_noop) for _ in range(calls)]
    wait(futures)
    return time.perf_counter() - t0


def _enter_leave(calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        threads.carry_begin()
        threads.carry_end()
    return time.perf_counter() - t0


def _wrapper_alone(calls: int, inside: bool) -> tuple[float, float]:
    """Per call, in microseconds: the start wrapper and the submit wrapper, each calling a no-op original."""
    with threads.carrying():
        saved = dict(threads.originals)
        threads.originals.update(start=lambda self: None, submit=lambda self, fn, *a, **k: None)
        token = current_run.set(object()) if inside else None  # type: ignore[arg-type]
        try:
            fresh = [threading.Thread(target=_noop) for _ in range(calls)]
            t0 = time.perf_counter()
            for thread in fresh:
                threads.thread_start(thread)
            start = time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(calls):
                threads.pool_submit(None, _noop)
            submit = time.perf_counter() - t0
        finally:
            if token is not None:
                current_run.reset(token)
            threads.originals.update(saved)
    return start / calls * 1e6, submit / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    settings = ["original", "outside", "inside"]
    pool = ThreadPoolExecutor(max_workers=1)
    pool.submit(_noop).result()
    measures: dict[str, Callable[[], float]] = {
        "Thread.start+join": lambda: _starts(args.calls),
        "submit (+ wait)": lambda: _submits(pool, args.calls),
    }
    results: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        order = settings if r % 2 == 0 else settings[::-1]
        for what, measure in measures.items():
            for name in order:
                with _setting(name):
                    seconds = measure()
                results.setdefault((what, name), []).append(seconds / args.calls * 1e6)
    pool.shutdown()
    table = []
    for what in measures:
        base = statistics.median(results[(what, "original")])
        line = ", ".join(
            f"{name} {statistics.median(results[(what, name)]):.2f} us"
            + (f" (+{statistics.median(results[(what, name)]) - base:.2f})" if name != "original" else "")
            for name in settings
        )
        print(f"{what}: {line}")
        inside = statistics.median(results[(what, "inside")])
        table.append(
            row(
                f"threads: `{what}` from inside a run / with no run anywhere",
                f"{inside / base:.2f}x ({inside - base:+.2f} us)",
                "none (within the noise of the call)",
            )
        )
    for inside in (False, True):
        alone = [_wrapper_alone(args.calls, inside) for _ in range(args.rounds)]
        start = statistics.median(a[0] for a in alone)
        submit = statistics.median(a[1] for a in alone)
        where = "inside" if inside else "outside"
        print(f"the wrappers alone, caller {where} a run: start {start:.2f} us, submit {submit:.2f} us")
    pair = statistics.median(_enter_leave(args.calls * 10) / (args.calls * 10) * 1e6 for _ in range(args.rounds))
    print(f"a root run installing and removing the wrappers (the only run): {pair:.2f} us")
    print_rows(table)


if __name__ == "__main__":
    main()
