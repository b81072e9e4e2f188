"""The replay lab: a change (code, prompt, model) backtested against a cohort of recorded runs with their tools
held fixed, scored against the originals and a baseline, gated for CI (see ``docs/lab.md``).

The package is also the function: ``otel_replay.lab(...)`` calls :func:`otel_replay.lab.api.lab` (named
``otel_replay.lab.lab`` too), and ``import otel_replay.lab`` gives this package.
"""

from typing import Any

from ..callable_package import attribute, make_callable

_TARGET = "otel_replay.lab.api:lab"


def __getattr__(name: str) -> Any:
    return attribute(__name__, _TARGET, name)


make_callable(__name__, _TARGET)
