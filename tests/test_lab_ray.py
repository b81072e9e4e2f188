"""``otel-replay lab --executor ray``: the same worker function as Ray tasks, the same report as local workers.

Skipped when Ray is not installed (it is the optional extra ``ray``, not part of the ``test`` extra: see
docs/lab.md, "Ray in the tests").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lab_agents
import pytest

import otel_replay as orp

ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'otel-replay[ray]')")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("lab-ray") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "RAY_ADDRESS", "OTEL_EXPORTER_OTLP_ENDPOINT"):
            mp.delenv(name, raising=False)
        mp.delenv(lab_agents.INTERRUPT_ENV, raising=False)
        orp.configure(home=home, exporter="spool")
        for n in range(4):
            lab_agents.counter_agent(n)
        orp.flush()
        yield {"home": home}


def _compared(result: orp.LabResult) -> dict[str, tuple[Any, ...]]:
    return {p.original_trace_id: (p.outcome, p.output_hash, p.scores.get("output_equal")) for p in result.pairs}


def test_a_ray_lab_reports_what_local_workers_report(world: dict[str, Any]) -> None:
    local = orp.lab(agent="counter-agent", workers=2)
    on_ray = orp.lab(agent="counter-agent", workers=2, executor="ray")

    assert on_ray.cohort == local.cohort
    assert _compared(on_ray) == _compared(local)
    assert on_ray.summary["totals"] == local.summary["totals"]
    with orp.Store.open() as store:  # the Ray tasks' replays went through the spool into the store
        listed = store.runs(lab=on_ray.lab_id, limit=100)
    assert sorted(r.trace_id for r in listed) == sorted(p.replay_trace_id for p in on_ray.pairs)
