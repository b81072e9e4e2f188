"""The lab's small grammars as a user writes them: ``--inject`` (any tool name, every fault kind, any JSON value,
any probability) reads back to the fault it describes, and ``--set-param`` / ``--tag`` values reach the lab's
spec as typed values (JSON when it parses, else text)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_replay.lab.spec import fault_text, parse_inject, parse_param, parse_tag
from otel_replay.replay.matching.policy import ToolFault

TOOL = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters=":"), min_size=1)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)


@given(
    tool=TOOL.filter(lambda t: t.strip() == t),
    kind=st.sampled_from(["timeout", "exception", "empty", "value"]),
    value=JSON,
    p=st.sampled_from([1.0, 0.5, 0.3, 0.0, 0.125]),
)
def test_every_fault_reads_back_from_its_inject_text(tool: str, kind: str, value: Any, p: float) -> None:
    fault = ToolFault(tool=tool, kind=kind, value=value if kind == "value" else None, p=p)  # type: ignore[arg-type]

    assert parse_inject(fault_text(fault)) == fault


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("temperature=0", ("temperature", 0)),
        ("top_p=0.2", ("top_p", 0.2)),
        ("stream=false", ("stream", False)),
        ('stop=["END"]', ("stop", ["END"])),
        ("user=ana", ("user", "ana")),
        ("suffix=", ("suffix", "")),
        ("note=a=b", ("note", "a=b")),
    ],
)
def test_set_param_values_are_json_when_they_parse_else_text(text: str, expected: tuple[str, Any]) -> None:
    assert parse_param(text) == expected


def test_a_tag_keeps_its_value_as_written() -> None:
    assert parse_tag("otel_replay.tenant.id= acme =x") == ("otel_replay.tenant.id", " acme =x")
    with pytest.raises(ValueError, match="--tag"):
        parse_tag("=acme")
