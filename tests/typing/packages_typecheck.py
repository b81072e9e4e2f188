"""Checked by mypy (``mypy`` runs on ``tests/typing``), never run: ``otel_replay.replay`` and ``otel_replay.lab``
are typed as the functions when called through the package (``orp.replay(...)``) and as the packages when imported
as modules, and ``orp.scorer`` keeps the scorer's signature. A name typed ``Any`` again fails the ``assert_type``
lines below."""

from __future__ import annotations

from collections.abc import Callable

from typing_extensions import assert_type

import otel_replay as orp
import otel_replay.lab as lab_package
import otel_replay.lab.api
import otel_replay.replay as replay_package
import otel_replay.replay.engine
from otel_replay.lab.model import LabResult
from otel_replay.lab.scoring import ScorerFunction
from otel_replay.replay.engine import ReplayResult


def replayed(trace_id: str) -> None:
    assert_type(orp.replay(trace_id, mode="mock"), ReplayResult)
    assert_type(replay_package.engine.replay(trace_id, mode="mock"), ReplayResult)
    assert_type(replay_package.engine.ReplayResult, type[ReplayResult])
    orp.replay(trace_id, mode="mock", nonsense=1)  # type: ignore[call-arg]


def labbed() -> None:
    assert_type(orp.lab(agent="support", app="agent:main"), LabResult)
    assert_type(lab_package.api.lab(agent="support", app="agent:main"), LabResult)


def scored(score: ScorerFunction) -> None:
    assert_type(orp.scorer(score), ScorerFunction)
    assert_type(orp.scorer(name="tone", tolerance=0.1), Callable[[ScorerFunction], ScorerFunction])
    orp.scorer(name=3)  # type: ignore[call-overload]
