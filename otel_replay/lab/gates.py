"""``--fail-if`` gates: ``diverged > 0``, ``regressed(output_equal) > 2%``, ``cost_p50 > +10%``, parsed by a small
grammar (never evaluated as code) and checked against a lab's summary.

(First cut: ``NAME OP NUMBER`` on the totals; percentages, scorer functions and deltas follow.)

It must never evaluate text as code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .model import GateResult

_GATE = re.compile(r"^\s*([a-z_]+)\s*(>=|<=|>|<|==)\s*([0-9]+(?:\.[0-9]+)?)\s*$")


@dataclass(frozen=True, kw_only=True)
class Gate:
    """One parsed ``--fail-if`` expression."""

    text: str
    metric: str
    op: str
    threshold: float


def parse_gate(text: str) -> Gate:
    """One ``--fail-if`` expression; ``ValueError`` (one line, saying what is accepted) when it does not parse."""
    match = _GATE.match(text)
    if match is None:
        raise ValueError(f"cannot read --fail-if {text!r}: write METRIC OP NUMBER, e.g. 'diverged > 0'")
    return Gate(text=text, metric=match.group(1), op=match.group(2), threshold=float(match.group(3)))


_OPS = {
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
}


def evaluate(gates: Sequence[Gate], summary: Mapping[str, Any]) -> list[GateResult]:
    """Each gate checked against ``summary`` (a gate holds when its condition is true: the lab fails)."""
    totals = summary.get("totals", {})
    results = []
    for gate in gates:
        value = totals.get(gate.metric)
        held = value is not None and _OPS[gate.op](float(value), gate.threshold)
        results.append(GateResult(expression=gate.text, held=bool(held), value=None if value is None else float(value)))
    return results
