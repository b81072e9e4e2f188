"""User scorers in a lab's worker processes: a scorer registered in the lab process is run by its workers too
(its module is imported there), and ``--scorers MODULE`` imports one for the command line's lab.

Skipped where the scorer registry (``otel_replay.lab.scoring.scorer``) is not part of this build.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fork_server
import pytest

import otel_replay as orp
from otel_replay.demo import agent as demo

TESTS_DIR = Path(__file__).resolve().parent
NAME = "lab_test_answer_has_order"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("lab-scorers") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(name, raising=False)
        orp.configure(home=home, exporter="spool")
        for question, customer in demo.QUESTIONS[:2]:
            demo.support_agent(question, customer=customer)
        orp.flush()
        yield {"home": home}


def test_a_scorer_registered_in_the_lab_process_scores_in_its_workers(world: dict[str, Any]) -> None:
    import lab_scorers  # noqa: F401 - registers the scorer in this process

    result = orp.lab(agent="support-agent", workers=2)

    assert len(result.pairs) == 2
    assert all(pair.scores.get(NAME) is True for pair in result.pairs), [p.scores for p in result.pairs]


def test_scorers_flag_imports_the_module_in_the_workers(world: dict[str, Any]) -> None:
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(world["home"]),
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
    }
    env.pop("OTEL_REPLAY_STORE", None)
    args = ["lab", "--agent", "support-agent", "--workers", "2", "--scorers", "lab_scorers", "--json"]
    out = fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=world["home"].parent,
    )

    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)["runs"]
    assert [r["scores"].get(NAME) for r in runs] == [True, True]
