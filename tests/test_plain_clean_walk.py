"""The recorder's one-walk check (``Redactor.is_clean_json``): a value is recorded as it is only when it is
plain JSON that ``to_jsonable`` would leave unchanged *and* nothing in it needs redaction.

What must hold: whenever the one walk says yes, the two walks it replaces say yes too (``to_jsonable`` returns
the value itself and ``is_clean`` passes it), and redaction would change nothing; values that are not plain JSON
(tuples, str subclasses, non-string keys, reserved tag keys, NaN) or that hold a secret are never passed; and a
run recorded with such values stores no secret.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

import otel_replay as orp
from otel_replay.redaction import Redactor
from otel_replay.snapshots import to_jsonable

SECRET = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0" * 2


class _Text(str):
    """A str subclass (json and redaction see its text; it is not plain JSON)."""


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from([SECRET, f"key={SECRET}", "4111 1111 1111 1111", "Bearer abcdefghijklmnop1234", "sunny"]),
    st.builds(_Text, st.sampled_from(["plain", SECRET])),
)
_KEYS = st.one_of(
    st.sampled_from(["city", "query", "api_key", "password", "$type", "$truncated", "$redacted", "input_tokens"]),
    st.text(max_size=12),
)
_TREES = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_KEYS, children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.integers(0, 3), children, max_size=2),  # non-string keys
    ),
    max_leaves=12,
)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TREES)
def test_one_walk_passes_only_what_both_walks_pass(value: object) -> None:
    one = Redactor(key=b"k" * 32)
    two = Redactor(key=b"k" * 32)
    if not one.is_clean_json(value):
        return
    assert to_jsonable(value) is value
    assert two.is_clean(value)
    assert two.redact(value, "x") == (value, 0)
    assert SECRET not in json.dumps(value)


def test_values_that_are_not_plain_json_are_never_passed() -> None:
    redactor = Redactor(key=b"k" * 32)
    for value in (
        {"a": (1, 2)},
        {"a": _Text("plain")},
        {1: "a"},
        {"$type": "tuple", "items": []},
        {"$truncated": True},
        {"$redacted": "hmac-sha256:00", "scope": "x"},
        {"x": math.nan},
        [math.inf],
        {"a": {"b": {"c": b"bytes"}}},
    ):
        assert not redactor.is_clean_json(value), value


def test_a_secret_after_the_same_plain_tree_was_passed_is_found() -> None:
    redactor = Redactor(key=b"k" * 32)
    tree = {"messages": [{"role": "user", "content": "sunny in Lyon"}], "params": {"model": "gpt-4o-mini"}}
    for _ in range(3):
        assert redactor.is_clean_json(tree)
    assert not redactor.is_clean_json({**tree, "api_key": "x"})
    assert not redactor.is_clean_json({"messages": [{"role": "user", "content": f"my key {SECRET}"}]})
    assert not redactor.is_clean_json({"card": 4111111111111111})


def test_a_recorded_run_with_mixed_values_stores_no_secret(home: Path) -> None:
    @orp.tool("lookup", risk="read")
    def lookup(request: object) -> object:
        return request

    @orp.agent("plain-walk")
    def agent() -> None:
        lookup({"city": "Lyon", "nested": {"ok": [1, 2.5, None, True]}})
        lookup({"city": "Lyon", "nested": {"note": f"key {SECRET}"}})
        lookup({"city": "Lyon", "pair": {1: "a", "password": "hunter2-SECRETVALUE"}})
        lookup({"city": "Lyon", "tuple": ("x", _Text(SECRET))})

    agent()
    orp.flush()
    stored = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert b"Lyon" in stored
    assert SECRET.encode() not in stored and b"hunter2-SECRETVALUE" not in stored


def test_floats_are_judged_alike_by_both_walks() -> None:
    """A card number held in a float, and a float that is not finite, inside the same structures: the one walk
    (a value not yet encoded) and the check of an encoded tree refuse them alike, and redaction masks the card
    number whichever way the value came; finite floats pass both."""
    card = 4111111111111111.0
    for value in ({"payment": {"amount": 12.5, "card": card}}, {"rows": [[1.5, card]]}, [card]):
        one, two = Redactor(key=b"k" * 32), Redactor(key=b"k" * 32)
        assert not one.is_clean_json(value), value
        assert not two.is_clean(to_jsonable(value)), value
        tree, n = two.redact(to_jsonable(value), "x")
        assert n == 1 and "4111111111111111" not in json.dumps(tree)
    for value in ({"x": math.nan, "note": "sunny"}, [2.0, -math.inf]):
        one, two = Redactor(key=b"k" * 32), Redactor(key=b"k" * 32)
        assert not one.is_clean_json(value), value  # not plain JSON: to_jsonable tags it
        assert not two.is_clean(value), value  # not what to_jsonable makes: left to the full walk
        assert two.is_clean(to_jsonable(value)), value  # the tagged form is clean
    plain = {"amount": 12.5, "rate": -0.25, "rows": [[0.5, -1e20]]}
    assert Redactor(key=b"k" * 32).is_clean_json(plain)
    assert Redactor(key=b"k" * 32).is_clean(plain)
    large = {"ms": 1733000000000.0, "big": 1e300, "card_like": 4111111111111112.0}  # no card: the checksum fails
    assert Redactor(key=b"k" * 32).redact(large, "x") == (large, 0)


def test_a_recorded_run_with_a_card_number_in_a_float_stores_no_card_number(home: Path) -> None:
    @orp.tool("charge", risk="write")
    def charge(request: object) -> object:
        return {"charged": request}

    @orp.agent("float-card")
    def agent() -> None:
        charge({"amount": 12.5, "card": 4111111111111111.0})

    agent()
    orp.flush()
    stored = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert b"12.5" in stored
    assert b"4111111111111111" not in stored
