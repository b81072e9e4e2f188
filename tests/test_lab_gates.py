"""``--fail-if`` gates: the grammar accepts the documented forms, refuses everything else with one line that
lists what is accepted (never evaluating the text), and each metric measures what ``docs/lab.md`` says.

The summaries here are written by hand to pin each metric's arithmetic; ``test_lab_report.py`` checks gates on
summaries of real replays.
"""

from __future__ import annotations

from typing import Any

import pytest

from otel_replay.lab.gates import ACCEPTED, evaluate, parse_gate

SUMMARY: dict[str, Any] = {
    "totals": {
        "runs": 40,
        "replays": 50,
        "matched": 45,
        "diverged": 4,
        "refused": 0,
        "errors": 1,
        "agent_errors": 2,
        "scorer_errors": 0,
        "baseline_replays": 50,
    },
    "scorers": {
        "output_equal": {"improved": 1, "regressed": 2, "same": 47, "pass_rate": 0.96},
        "cost_delta": {"improved": 0, "regressed": 0, "same": 50, "pass_rate": None},
    },
    "cost": {"p50": 12.5, "p95": 30.0},
    "latency": {"p50": -3.0, "p95": None},
    "stability": {"baseline": True, "counts": {"flaky": 2, "stable-changed": 6, "stable-same": 32}},
}


def held(expression: str, summary: dict[str, Any] = SUMMARY) -> tuple[bool, float | None]:
    (result,) = evaluate([parse_gate(expression)], summary)
    return result.held, result.value


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("diverged > 0", (True, 4.0)),
        ("diverged>0", (True, 4.0)),
        ("  errors >= 1 ", (True, 1.0)),
        ("refused != 0", (False, 0.0)),
        ("matched < 100%", (True, 90.0)),
        ("matched == 45", (True, 45.0)),
        ("diverged > 10%", (False, 8.0)),
        ("regressed(output_equal) > 2%", (True, 4.0)),
        ("regressed( output_equal ) > 2", (False, 2.0)),
        ("improved(output_equal) >= 1", (True, 1.0)),
        ("same(cost_delta) < 100%", (False, 100.0)),
        ("pass_rate(output_equal) < 97%", (True, 96.0)),
        ("pass_rate(output_equal) < 95", (False, 96.0)),
        ("cost_p50 > +10%", (True, 12.5)),
        ("cost_p95 > 30", (False, 30.0)),
        ("latency_p50 < -2.5%", (True, -3.0)),
        ("flaky > 0", (True, 2.0)),
        ("stable_changed > 10%", (True, 15.0)),
        ("stable_same <= 80%", (True, 80.0)),
        ("runs < 50%", (False, 100.0)),
        ("agent_errors > .5", (True, 2.0)),
    ],
)
def test_accepted_gates_measure_the_summary(expression: str, expected: tuple[bool, float | None]) -> None:
    assert held(expression) == expected


def test_a_gate_with_nothing_to_measure_does_not_hold_but_an_unknown_scorer_does() -> None:
    (no_data,) = evaluate([parse_gate("latency_p95 > +20%")], SUMMARY)
    assert (no_data.held, no_data.value, no_data.note) == (False, None, "no replay measured a latency change")
    (no_rate,) = evaluate([parse_gate("pass_rate(cost_delta) < 50%")], SUMMARY)
    assert not no_rate.held and no_rate.note == "cost_delta applied to no replay"
    (typo,) = evaluate([parse_gate("regressed(output_eqaul) > 0")], SUMMARY)
    assert typo.held and typo.value is None and "no scorer named 'output_eqaul'" in (typo.note or "")
    without_baseline = {**SUMMARY, "stability": {"baseline": False, "counts": {}}}
    assert held("flaky > 0", without_baseline) == (False, None)
    empty = {"totals": {"replays": 0}, "scorers": {}}
    assert held("matched < 100%", empty) == (False, None)


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "   ",
        "diverged",
        "diverged >",
        "> 0",
        "diverged > zero",
        "diverged = 0",
        "diverged => 0",
        "nonsense > 0",
        "regressed > 0",
        "regressed() > 0",
        "regressed(output_equal > 0",
        "regressed(1) > 0",
        "diverged > 0 %%",
        "diverged > 0 or 1",
        "__import__('os').system('id') > 0",
        "diverged > 0; rm -rf /",
        "diverged > 1e3",
        "x" * 201,
    ],
)
def test_bad_gates_are_refused_with_one_line_listing_what_is_accepted(expression: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_gate(expression)
    message = str(raised.value)
    assert "\n" not in message and ACCEPTED in message


def test_named_scorers_are_checked_when_given() -> None:
    assert parse_gate("regressed(mine) > 0", scorers={"mine", "output_equal"}).scorer == "mine"
    with pytest.raises(ValueError, match=r"no scorer named 'other'.*scorers: mine, output_equal"):
        parse_gate("regressed(other) > 0", scorers={"mine", "output_equal"})


def test_parsed_gate_fields() -> None:
    gate = parse_gate("regressed(output_equal) > 2%")
    assert (gate.metric, gate.scorer, gate.op, gate.threshold, gate.percent) == (
        "regressed",
        "output_equal",
        ">",
        2.0,
        True,
    )
    assert parse_gate("cost_p50 > +10%").threshold == 10.0
    assert parse_gate("latency_p95 >= -5").threshold == -5.0
