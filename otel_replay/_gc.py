"""The one pause of Python's cyclic garbage collector, shared by every bulk path of otel-replay.

Why it exists: the spool ingest and the replay engine map, insert and rebuild spans as hundreds of thousands of
small containers in no reference cycle; enough of them survive long enough to set off full collections of the
whole heap that free nothing (measured on the ingest of 60,000 spans: four full collections, about 0.8 s of a
6 s ingest on a loaded 2-core machine). :func:`gc_paused` switches the collector off for such a block.

Process-wide state, on purpose and documented: ``gc.disable()`` acts on every thread of the host program, so
this module keeps one counted pause (``_pauses``, ``_resume`` under ``_lock``). Nested and concurrent blocks (an
ingest in one thread, a replay in another) share it; the collector is enabled again when the last block ends,
and only if it was enabled when the first one began.

:func:`gc_frozen` is the other half, for the block where the agent's code runs during a replay (never paused):
the run the replay just loaded (tens of thousands of long-lived objects) would be scanned again by every full
collection the recording's allocations set off. ``gc.freeze()`` moves the objects that exist when the block
starts out of the collector's sight; collections of what the block allocates go on as usual, and the objects
are handed back (``gc.unfreeze()``) when the last such block ends. Counted like the pause (``_freezes``).
Whether the host program froze objects itself meanwhile is told by a marker object made right after the freeze
(``_marker``): a freeze moves it out of the collector's generations 0–2 into the permanent one. Looking for it
in those generations costs what the block allocated and still holds (about 14,000 objects after a replay of
1,000 steps), where counting the frozen objects (``gc.get_freeze_count()``) walks the whole heap (about 9 ms
per 100,000 objects, twice per block, which was most of a small replay's fixed cost).

What it must never do: enable a collector the host program had disabled, leave the collector off after the last
block ends (an exception included), run the agent's own code inside a pause, unfreeze objects the host program
froze itself (when it has frozen any, :func:`gc_frozen` does nothing), or import anything of otel_replay.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["gc_frozen", "gc_paused"]

_lock = threading.Lock()
_pauses = 0
_resume = False
_freezes = 0
_froze = False
_marker: list[None] | None = None  # made right after our freeze; see _frozen_since


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


@contextlib.contextmanager
def gc_frozen() -> Iterator[None]:
    """Keep the objects that exist now out of the collector's sight for the block (``gc.freeze()``); what the
    block allocates is collected as usual. Nested and concurrent blocks share one freeze; nothing is frozen
    when the host program has frozen objects itself, and a freeze it makes during the block is kept."""
    global _freezes, _froze, _marker
    with _lock:
        if _freezes == 0:
            _froze = gc.get_freeze_count() == 0  # walks only what the host program froze: nothing, usually
            if _froze:
                gc.freeze()
                _marker = [None]  # a tracked container allocated after the freeze, in generation 0
        _freezes += 1
    try:
        yield
    finally:
        with _lock:
            _freezes -= 1
            if _freezes == 0 and _froze:
                # a freeze the host program made meanwhile froze the marker too: then its objects (and ours)
                # stay frozen
                if _marker is not None and not _frozen_since(_marker):
                    gc.unfreeze()
                _froze = False
                _marker = None


def _frozen_since(marker: object) -> bool:
    """True when ``marker`` (alive, tracked, made after our freeze) is no longer in generations 0-2: only a
    freeze moves an object to the permanent generation. Costs the size of those generations, not the heap's."""
    for generation in range(3):
        for obj in gc.get_objects(generation=generation):
            if obj is marker:
                return False
    return True
