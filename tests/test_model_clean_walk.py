"""The recorder's one walk over values holding pydantic models (``Redactor.jsonable_if_clean``): a LangGraph
run's output (a dict of message models) is encoded and pre-checked in one walk instead of ``to_jsonable``
followed by ``is_clean``.

What must hold: whenever the walk says yes, its tree is exactly what ``to_jsonable`` returns (same canonical
JSON), ``is_clean`` passes that tree and redaction would change nothing; a model or container holding a secret,
a model whose dump is not plain JSON, or a model that is also a container is never passed; and a run whose output
holds models with a secret stores no secret.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples
from pydantic import BaseModel, RootModel

import otel_replay as orp
from otel_replay.redaction import Redactor
from otel_replay.snapshots import canonical_json, to_jsonable

SECRET = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0" * 2


class Message(BaseModel):
    role: str
    content: Any = None
    meta: dict[str, Any] = {}


class Pair(BaseModel):
    left: Any = None
    right: Any = None


class Listed(RootModel[list[Any]]):
    """A model whose dump is a list, not a dict: ``to_jsonable`` does not tag it as a model."""


class _Text(str):
    """A str subclass (not plain JSON)."""


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from([SECRET, f"key={SECRET}", "4111 1111 1111 1111", "sunny", "Lyon"]),
    st.builds(_Text, st.sampled_from(["plain", SECRET])),
)
_KEYS = st.one_of(
    st.sampled_from(["city", "api_key", "password", "$type", "$redacted", "input_tokens", "content"]),
    st.text(max_size=10),
)
_PLAINISH = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(_KEYS, children, max_size=3),
        st.tuples(children, children),
        st.dictionaries(st.integers(0, 3), children, max_size=2),
    ),
    max_leaves=6,
)
_MODELS = st.one_of(
    st.builds(
        Message,
        role=st.sampled_from(["user", "ai", SECRET]),
        content=_PLAINISH,
        meta=st.dictionaries(_KEYS, _LEAVES, max_size=2),
    ),
    st.builds(Pair, left=_PLAINISH, right=st.builds(Message, role=st.just("tool"), content=_PLAINISH)),
    st.builds(Listed, st.lists(_LEAVES, max_size=3)),
)
_TREES = st.recursive(
    st.one_of(_LEAVES, _MODELS),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_KEYS, children, max_size=3),
        st.tuples(children, children),
    ),
    max_leaves=10,
)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TREES)
def test_the_walk_passes_only_what_encoding_and_the_pre_check_pass(value: object) -> None:
    one = Redactor(key=b"k" * 32)
    two = Redactor(key=b"k" * 32)
    clean, tree = one.jsonable_if_clean(value)
    if not clean:
        return
    expected = to_jsonable(value)
    assert tree == expected
    assert canonical_json(tree) == canonical_json(expected)
    assert two.is_clean(expected)
    assert two.redact(expected, "x") == (expected, 0)
    assert SECRET not in json.dumps(tree)


def test_models_with_secrets_or_another_shape_are_never_passed() -> None:
    redactor = Redactor(key=b"k" * 32)
    for value in (
        {"messages": [Message(role="user", content=f"my key is {SECRET}")]},
        [Message(role="user", meta={"api_key": "abc"})],
        {"messages": [Message(role="user", content=(1, 2))]},
        {"messages": [Message(role="user", content=_Text("plain"))]},
        {"x": Listed([1, 2])},
        {"$type": "pydantic", "m": Message(role="user")},
        ({"m": Message(role="user")},),
    ):
        assert redactor.jsonable_if_clean(value) == (False, None), value
    assert redactor.jsonable_if_clean({"messages": [Message(role="user", content="sunny")]})[0]


def test_a_secret_in_a_model_after_the_same_tree_was_passed_is_found() -> None:
    redactor = Redactor(key=b"k" * 32)
    tree = {"messages": [Message(role="user", content="weather in Lyon"), Message(role="ai", content="sunny")]}
    for _ in range(3):
        assert redactor.jsonable_if_clean(tree)[0]
    tree["messages"].append(Message(role="ai", content=f"here: {SECRET}"))
    assert not redactor.jsonable_if_clean(tree)[0]


def test_a_run_whose_output_holds_models_with_a_secret_stores_no_secret(home: Path) -> None:
    @orp.agent("model-walk")
    def agent(question: str) -> dict[str, Any]:
        return {
            "messages": [
                Message(role="user", content=question),
                Message(role="ai", content=f"use {SECRET}", meta={"password": "hunter2-SECRETVALUE"}),
            ]
        }

    agent("weather in Lyon?")
    agent("weather in Lyon?")
    orp.flush()
    stored = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert b"weather in Lyon?" in stored
    assert SECRET.encode() not in stored and b"hunter2-SECRETVALUE" not in stored
