"""``canonical_json`` and ``ordered_json`` dump without the JSON encoder's cycle check: the texts they give (and
what they raise) are still exactly those of the checking encoder with the full encoder's tags as the fallback,
for plain trees, trees with values JSON cannot hold (NaN, ints past the digit limit, tuples, str subclasses) and
trees holding a cycle; and a recorded value with a cycle is still stored, tagged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otel_replay as orp
from otel_replay import Store
from otel_replay.snapshots import _encode, canonical_json, ordered_json


def _reference(tree: Any, *, sort_keys: bool) -> str:
    """What the two functions returned with the cycle-checking encoder alone."""
    encoder = json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        return encoder.encode(tree)
    except ValueError:
        return encoder.encode(_encode(tree, 0, set()))


class _Text(str):
    pass


_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.builds(_Text, st.text(max_size=6))
)
_trees = st.recursive(
    _leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=6), children, max_size=4)
        | st.lists(children, max_size=3).map(tuple)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(tree=_trees, cycle=st.booleans())
def test_texts_are_those_of_the_checking_encoder(tree: Any, cycle: bool) -> None:
    if cycle:  # the tree inside a list and a dict that hold themselves
        holder: dict[str, Any] = {"tree": tree}
        loop: list[Any] = [holder, tree]
        holder["loop"] = loop
        tree = loop
    assert canonical_json(tree) == _reference(tree, sort_keys=True)
    assert ordered_json(tree) == _reference(tree, sort_keys=False)


def test_an_int_past_the_digit_limit_and_a_deep_tree_behave_as_before() -> None:
    big = {"n": 10**5000}
    assert canonical_json(big) == _reference(big, sort_keys=True)
    assert ordered_json(big) == _reference(big, sort_keys=False)
    deep: list[Any] = []
    node = deep
    for _ in range(5000):  # deeper than the interpreter's recursion limit: both encoders refuse it
        node.append([])
        node = node[0]
    with pytest.raises(RecursionError):
        canonical_json(deep)
    with pytest.raises(RecursionError):
        _reference(deep, sort_keys=True)


def test_a_tool_result_holding_a_cycle_is_stored_tagged(home: Path) -> None:
    @orp.tool("loopy", risk="read")
    def loopy() -> dict[str, Any]:
        result: dict[str, Any] = {"name": "loop"}
        result["self"] = result
        return result

    @orp.agent("cycle-agent")
    def agent() -> str:
        loopy()
        return "done"

    assert agent() == "done"
    orp.flush()
    with Store.open(home=home) as store:
        (summary,) = store.runs(agent="cycle-agent", kind="original")
        (step,) = [s for s in store.load_run(summary.trace_id).steps if s.kind == "tool"]
    result = step.snapshots["tool"]["result"]
    assert result["name"] == "loop" and result["self"] == {"$type": "cycle", "class": "dict"}
