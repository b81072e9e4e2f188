"""Replay of recorded runs and comparison of runs.

The package is also the function: ``otel_replay.replay(trace_id, mode=...)`` calls
:func:`otel_replay.replay.engine.replay` (named ``otel_replay.replay.replay`` too), and
``import otel_replay.replay`` gives this package. Its parts, from the top (``lint-imports`` holds them to it):

- ``scopes/``: the replays narrower and wider than a whole run (one tool call, one conversation);
- ``engine``: a whole run replayed (``dry`` for the dry mode, ``storing`` for where its spans go, ``session``
  for one replay in progress, answering each call with ``answers``, ``values`` and ``reviving``, the agent
  loaded by ``entrypoint``);
- ``safety/``: what a replay may import, run and touch; ``diff/``: two runs compared;
- ``matching/``: how a call is compared with its recorded step;
- ``volatile`` (ids put aside when values are compared) and ``raised`` (what the agent raised), used by all.

Every other name is imported from the submodules; the package exports none itself.
"""

from typing import Any

from ..callable_package import attribute, make_callable

_TARGET = "otel_replay.replay.engine:replay"


def __getattr__(name: str) -> Any:
    return attribute(__name__, _TARGET, name)


make_callable(__name__, _TARGET)
