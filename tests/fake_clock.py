"""A clock for tests that wait on a timeout: time moves only when the code under test sleeps.

Install it in place of the ``time`` module a product module imported (``monkeypatch.setattr(module, "time",
FakeClock())``): ``monotonic()`` / ``time()`` / ``time_ns()`` read it, ``sleep(s)`` records ``s`` and moves it
on at once. A test then asserts how long the code *would* have waited, exactly, without waiting and without
depending on how busy the machine is.
"""

from __future__ import annotations


class FakeClock:
    """``monotonic``, ``time``, ``time_ns``, ``perf_counter`` and ``sleep`` over one number that only sleeps move."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    time = perf_counter = monotonic

    def time_ns(self) -> int:
        return round(self.now * 1e9)

    def monotonic_ns(self) -> int:
        return round(self.now * 1e9)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(seconds, 0.0)

    def advance(self, seconds: float) -> None:
        """Move the clock on without a sleep (work that took ``seconds``)."""
        self.now += seconds
