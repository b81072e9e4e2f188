"""The non-deterministic values a recorded run drew (``orp.now`` / ``orp.random`` / ``orp.new_uuid``), handed
back in the order they were drawn during a replay.

Each value is kept with the step it was drawn in, so the values of a step answered from the recording (its
code does not run again, it will not ask for them) are skipped. It must never invent a value the recording
does not hold (it says None: the caller draws a fresh one) or restore a redacted one.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from typing import Any

from .. import semconv
from ..runs import Run
from .reviving import revive

_Drawn = tuple[int, str, str | None, int | None]
"""(seq, kind, payload, index of the step it was drawn in)."""


class RecordedValues:
    """One queue per kind of value, in the order the original run drew them."""

    def __init__(self, original: Run) -> None:
        step_of_span = {s.span_id: s.index for s in original.steps}
        drawn: list[_Drawn] = []
        for span in original.spans:
            for event in span.events:
                if event.name == semconv.EVENT_VALUE:
                    a = event.attributes
                    seq = int(a.get(semconv.SNAPSHOT_SEQ) or 0)
                    kind = a.get(semconv.VALUE_KIND, "")
                    drawn.append((seq, kind, a.get(semconv.VALUE_PAYLOAD), step_of_span.get(span.span_id)))
        # One queue per kind, in seq order; values of steps answered from the recording are skipped lazily.
        self._values: dict[str, deque[_Drawn]] = {}
        for value in sorted(drawn, key=lambda v: v[0]):
            self._values.setdefault(value[1], deque()).append(value)
        self.valued_steps = {v[3] for v in drawn if v[3] is not None}
        """Steps of the original that drew a value."""
        self._answered: set[int] = set()
        self._lock = threading.Lock()

    def answered(self, index: int) -> None:
        """Step ``index`` was answered from the recording: the values it drew will not be asked for."""
        if index in self.valued_steps:
            with self._lock:
                self._answered.add(index)

    def next(self, kind: str) -> tuple[Any] | None:
        """The next recorded value of ``kind`` (in a 1-tuple, so None can be a value), or None when none is left."""
        with self._lock:
            queue = self._values.get(kind)
            while queue and queue[0][3] in self._answered:
                queue.popleft()
            if not queue:
                return None
            raw = queue.popleft()[2]
        if raw is None:
            return None
        try:
            return (revive(json.loads(raw)),)
        except (TypeError, ValueError):
            return None
