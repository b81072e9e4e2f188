"""The one pause of Python's cyclic garbage collector, shared by every bulk path of otel-replay.

Why it exists: the spool ingest and the replay engine map, insert and rebuild spans as hundreds of thousands of
small containers in no reference cycle; enough of them survive long enough to set off full collections of the
whole heap that free nothing (measured on the ingest of 60,000 spans: four full collections, about 0.8 s of a
6 s ingest on a loaded 2-core machine). :func:`gc_paused` switches the collector off for such a block.

Process-wide state, on purpose and documented: ``gc.disable()`` acts on every thread of the host program, so
this module keeps one counted pause (``_pauses``, ``_resume`` under ``_lock``). Nested and concurrent blocks (an
ingest in one thread, a replay in another) share it; the collector is enabled again when the last block ends,
and only if it was enabled when the first one began.

What it must never do: enable a collector the host program had disabled, leave the collector off after the last
block ends (an exception included), run the agent's own code inside a pause, or import anything of otel_replay.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["gc_paused"]

_lock = threading.Lock()
_pauses = 0
_resume = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block; nested and concurrent blocks share one pause."""
    global _pauses, _resume
    with _lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()
