"""What a run's output is when its code returns a framework's result object.

A framework's run method returns a result object whose answer is one attribute of it (Pydantic AI's
``AgentRunResult.output``): the rest is bookkeeping that changes with every run (message history, timestamps,
ids). The framework's instrumentor registers a reducer for that class (:func:`register_result`), and a run
whose code returns such an object records what the reducer gives as its output: an implicit run the
instrumentor began around ``agent.run_sync(...)``, and the run a replay begins around the same call given as
``--app module:agent.run_sync``, record the same output, so unchanged code matches.

Process-wide state, kept because the classes are the framework's: the registered reducers (by exact class),
set when an instrumentor is turned on and kept after (a reducer only reads).

It must never call anything but the reducer registered for the value's exact class, and never raise: a reducer
that fails leaves the value as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_reducers: dict[type, Callable[[Any], Any]] = {}


def register_result(cls: type, reduce: Callable[[Any], Any]) -> None:
    """Record ``reduce(value)`` instead of a ``cls`` instance (that exact class) as a run's output."""
    _reducers[cls] = reduce


def run_output(value: Any) -> Any:
    """``value`` as a run's output: reduced when its class was registered, else as it is."""
    reduce = _reducers.get(type(value))
    if reduce is None:
        return value
    try:
        return reduce(value)
    except Exception:  # noqa: BLE001 - a reducer's failure: the value is recorded as it is
        return value
