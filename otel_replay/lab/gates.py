"""``--fail-if`` gates: ``diverged > 0``, ``regressed(output_equal) > 2%``, ``cost_p50 > +10%``, read by a small
tokenizer and grammar (never evaluated as code) and checked against a lab's summary.

The grammar (``docs/lab.md``)::

    gate     := metric OP NUMBER ['%']
    metric   := NAME | FUNC '(' SCORER ')'
    NAME     := a totals name (runs, replays, matched, diverged, refused, errors, agent_errors, scorer_errors,
                baseline_replays) | cost_p50 | cost_p95 | latency_p50 | latency_p95
                | cost_p50_vs_baseline | cost_p95_vs_baseline | latency_p50_vs_baseline | latency_p95_vs_baseline
                | flaky | stable_changed | stable_same
    FUNC     := improved | regressed | same | pass_rate
    OP       := > | >= | < | <= | == | !=
    NUMBER   := an optional + or -, digits, an optional fraction

A count (a totals name, ``improved/regressed/same(x)``) compares as a count, or with ``%`` as a percentage of
the candidate replays (``flaky`` and ``stable_*`` of the runs). ``cost_*`` / ``latency_*`` are relative changes
in percent (against the original; ``*_vs_baseline`` against the baseline lane) and ``pass_rate(x)`` a
percentage: the number is read as percent with or without ``%``. A gate
*holds* when its condition is true, and a lab fails when any gate holds. A gate with nothing to measure (no
replay had a cost) does not hold; a gate naming a scorer the lab did not run holds (it cannot be checked, so a
typo must not pass a CI run), with a note saying so.

It must never evaluate text as code.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .model import GateResult
from .summary import TOTALS, has_baseline

COUNTS: Final = TOTALS
"""Names compared as counts (or, with ``%``, as percent of the candidate replays)."""

STABILITY_NAMES: Final = {"flaky": "flaky", "stable_changed": "stable-changed", "stable_same": "stable-same"}
"""Names compared as counts of runs (or, with ``%``, percent of the runs with a baseline)."""

DELTAS: Final = {
    "cost_p50": ("cost", "p50"),
    "cost_p95": ("cost", "p95"),
    "latency_p50": ("latency", "p50"),
    "latency_p95": ("latency", "p95"),
    "cost_p50_vs_baseline": ("cost_vs_baseline", "p50"),
    "cost_p95_vs_baseline": ("cost_vs_baseline", "p95"),
    "latency_p50_vs_baseline": ("latency_vs_baseline", "p50"),
    "latency_p95_vs_baseline": ("latency_vs_baseline", "p95"),
}
"""Relative changes in percent: replay vs original, and (``*_vs_baseline``) candidate vs the baseline lane."""

FUNCTIONS: Final = ("improved", "regressed", "same", "pass_rate")
"""``FUNC(scorer)`` metrics."""

_OPS: Final[dict[str, Callable[[float, float], bool]]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}

_TOKEN: Final = re.compile(
    r"\s*(?:(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>>=|<=|==|!=|>|<)|(?P<punct>[()%]))"
)

ACCEPTED: Final = (
    "write METRIC OP NUMBER[%], e.g. 'diverged > 0', 'regressed(output_equal) > 2%', 'cost_p50 > +10%'; "
    "METRIC is a count (" + ", ".join(COUNTS) + ", flaky, stable_changed, stable_same), "
    "improved|regressed|same|pass_rate(SCORER), or " + ", ".join(DELTAS) + "; OP is > >= < <= == !="
)
"""What a ``ValueError`` of :func:`parse_gate` lists as accepted."""


@dataclass(frozen=True, kw_only=True)
class Gate:
    """One parsed ``--fail-if`` expression."""

    text: str
    metric: str
    """A totals or stability name, a delta name (``cost_p50``), or a function name (``regressed``)."""
    op: str
    threshold: float
    scorer: str | None = None
    """The scorer of a ``FUNC(scorer)`` metric."""
    percent: bool = False
    """True when the number was written with ``%``."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None or match.end() == position:
            bad = stripped[position:].lstrip()[:1]
            raise ValueError(f"cannot read --fail-if {text!r}: unexpected {bad!r}; {ACCEPTED}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        position = match.end()
    return out


def parse_gate(text: str, *, scorers: Collection[str] | None = None) -> Gate:
    """One ``--fail-if`` expression; ``ValueError`` (one line, saying what is accepted) when it does not parse.

    ``scorers``, when given, are the scorer names a ``FUNC(scorer)`` may name (others are refused here)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"--fail-if needs an expression: {ACCEPTED}")
    if len(text) > 200:
        raise ValueError(f"--fail-if expression is longer than 200 characters: {ACCEPTED}")
    tokens = _tokens(text)

    def fail(why: str) -> ValueError:
        return ValueError(f"cannot read --fail-if {text!r}: {why}; {ACCEPTED}")

    if not tokens or tokens[0][0] != "name":
        raise fail("it must start with a metric name")
    metric = tokens[0][1].lower()
    rest = tokens[1:]
    scorer: str | None = None
    if metric in FUNCTIONS:
        if len(rest) < 3 or rest[0] != ("punct", "(") or rest[1][0] != "name" or rest[2] != ("punct", ")"):
            raise fail(f"{metric} takes a scorer name in parentheses, e.g. {metric}(output_equal)")
        scorer = rest[1][1]
        if scorers is not None and scorer not in scorers:
            raise ValueError(
                f"cannot read --fail-if {text!r}: no scorer named {scorer!r} in this lab "
                f"(scorers: {', '.join(sorted(scorers)) or 'none'})"
            )
        rest = rest[3:]
    elif metric not in COUNTS and metric not in DELTAS and metric not in STABILITY_NAMES:
        raise fail(f"unknown metric {tokens[0][1]!r}")
    if not rest or rest[0][0] != "op":
        raise fail("a comparison (> >= < <= == !=) must follow the metric")
    op = rest[0][1]
    if len(rest) < 2 or rest[1][0] != "number":
        raise fail("a number must follow the comparison")
    threshold = float(rest[1][1])
    percent = False
    tail = rest[2:]
    if tail and tail[0] == ("punct", "%"):
        percent = True
        tail = tail[1:]
    if tail:
        raise fail(f"unexpected {tail[0][1]!r} after the number")
    return Gate(text=text, metric=metric, op=op, threshold=threshold, scorer=scorer, percent=percent)


def _share(count: float, whole: float) -> float | None:
    return round(count / whole * 100.0, 4) if whole else None


def measure(gate: Gate, summary: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """The gate's left-hand side in ``summary`` and, when it cannot be measured, why."""
    totals = summary.get("totals") or {}
    replays = float(totals.get("replays") or 0)
    if gate.scorer is not None:
        scored = (summary.get("scorers") or {}).get(gate.scorer)
        if scored is None:
            return None, f"no scorer named {gate.scorer!r} ran in this lab"
        if gate.metric == "pass_rate":
            rate = scored.get("pass_rate")
            if rate is None:
                return None, f"{gate.scorer} applied to no replay"
            return round(float(rate) * 100.0, 4), None
        count = float(scored.get(gate.metric) or 0)
        if gate.percent:
            share = _share(count, replays)
            return share, None if share is not None else "no candidate replay"
        return count, None
    if gate.metric in DELTAS:
        section, key = DELTAS[gate.metric]
        value = (summary.get(section) or {}).get(key)
        if value is None and section.endswith("_vs_baseline") and not has_baseline(summary):
            return None, "this lab has no baseline lane (--baseline)"
        if value is None:
            return None, f"no replay measured a {section} change"
        return float(value), None
    if gate.metric in STABILITY_NAMES:
        stable = summary.get("stability") or {}
        if not stable.get("baseline"):
            return None, "this lab has no baseline lane (--baseline)"
        counts = stable.get("counts") or {}
        count = float(counts.get(STABILITY_NAMES[gate.metric]) or 0)
        if gate.percent:
            share = _share(count, float(sum(counts.values())))
            return share, None if share is not None else "no run with a baseline"
        return count, None
    count = float(totals.get(gate.metric) or 0)
    if gate.percent:
        whole = float(totals.get("runs") or 0) if gate.metric == "runs" else replays
        share = _share(count, whole)
        return share, None if share is not None else "no candidate replay"
    return count, None


def evaluate(gates: Sequence[Gate], summary: Mapping[str, Any]) -> list[GateResult]:
    """Each gate checked against ``summary`` (a gate holds when its condition is true: the lab fails)."""
    results = []
    for gate in gates:
        value, note = measure(gate, summary)
        if value is None:
            unknown_scorer = gate.scorer is not None and (summary.get("scorers") or {}).get(gate.scorer) is None
            results.append(GateResult(expression=gate.text, held=unknown_scorer, value=None, note=note))
            continue
        held = _OPS[gate.op](value, gate.threshold)
        results.append(GateResult(expression=gate.text, held=bool(held), value=value))
    return results
