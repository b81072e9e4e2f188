"""A small stand-in for what Grafana and its ClickHouse data source do to a SQL panel target before it runs.

Used by tests/test_dashboards.py to run every dashboard query on chDB. It implements, in the plugin's order:

1. ``$__conditionalAll(condition, $var)`` (frontend): the condition, or ``1=1`` when the variable's current
   value is All (``$__all``) or empty. Like the plugin it needs exactly two top-level arguments.
2. Template variables: ``$var``, ``${var}`` and ``${var:format}`` with the formats ``singlequote``,
   ``doublequote``, ``sqlstring``, ``csv``, ``raw`` (Grafana's own interpolation; a multi-value variable
   without a format is joined with commas). All expands to every option value.
3. Backend macros for a concrete time range: ``$__timeFilter(col)``, ``$__timeFilter_ms(col)``,
   ``$__fromTime``, ``$__toTime``, ``$__fromTime_ms``, ``$__toTime_ms``, ``$__interval_s``,
   ``$__timeInterval(col)`` and ``$__timeInterval_ms(col)``, rendered as the plugin renders them.

Anything left that starts with ``$`` is an error, so a typo in a dashboard fails the test instead of
reaching ClickHouse as text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

ALL = "$__all"

_VAR = re.compile(
    r"\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::(?P<fmt>[A-Za-z]+))?\}"
    r"|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)"
)


class ExpansionError(ValueError):
    """A query uses a macro or variable the expander cannot resolve."""


@dataclass
class Variable:
    """A dashboard variable's current value (a string or a list, ``$__all`` for All) and its options."""

    value: str | list[str]
    options: list[str] = field(default_factory=list)

    def values(self) -> list[str]:
        """The concrete values: All becomes every option."""
        raw = self.value if isinstance(self.value, list) else [self.value]
        if ALL in raw:
            return list(self.options)
        return list(raw)

    def is_all(self) -> bool:
        raw = self.value if isinstance(self.value, list) else [self.value]
        return raw == [] or ALL in raw or raw == [""]


def macro_args(sql: str, open_paren: int) -> tuple[list[str], int]:
    """Top-level comma-separated arguments of the call whose ``(`` is at ``open_paren``, and the index just
    after its ``)``. Like the plugin, only parentheses are counted (quotes are not special), so a condition that
    would split wrongly in Grafana splits wrongly here too."""
    if sql[open_paren] != "(":
        raise ExpansionError(f"expected '(' at {open_paren}")
    depth, args, start = 0, [], open_paren + 1
    for i in range(open_paren, len(sql)):
        ch = sql[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append(sql[start:i])
                return args, i + 1
        elif ch == "," and depth == 1:
            args.append(sql[start:i])
            start = i + 1
    raise ExpansionError("unbalanced parentheses in macro call")


def _conditional_all(sql: str, variables: Mapping[str, Variable]) -> str:
    macro = "$__conditionalAll("
    while (at := sql.rfind(macro)) != -1:
        args, end = macro_args(sql, at + len(macro) - 1)
        if len(args) != 2:
            raise ExpansionError(f"$__conditionalAll takes 2 arguments, got {len(args)}: {sql[at:end]!r}")
        condition, var_ref = args[0], args[1].strip()
        match = _VAR.fullmatch(var_ref)
        if match is None or match.group("fmt"):  # the plugin only recognises $var and ${var} here
            raise ExpansionError(f"$__conditionalAll's second argument must be $var or ${{var}}, got {var_ref!r}")
        name = match.group("braced") or match.group("plain")
        if name not in variables:
            raise ExpansionError(f"unknown variable {name!r} in $__conditionalAll")
        phrase = "1=1" if variables[name].is_all() else condition
        sql = sql[:at] + phrase + sql[end:]
    return sql


def _format(values: Sequence[str], fmt: str | None, name: str) -> str:
    if fmt == "singlequote":
        return ",".join("'" + v.replace("'", "\\'") + "'" for v in values)
    if fmt == "doublequote":
        return ",".join('"' + v.replace('"', '\\"') + '"' for v in values)
    if fmt == "sqlstring":
        return ",".join("'" + v.replace("'", "''") + "'" for v in values)
    if fmt in (None, "csv", "raw", "text"):
        return ",".join(values)
    raise ExpansionError(f"unsupported format {fmt!r} for variable {name!r}")


def _variables(sql: str, variables: Mapping[str, Variable]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("plain")
        if name.startswith("__"):
            return match.group(0)  # a macro, handled later
        if name not in variables:
            raise ExpansionError(f"unknown variable {name!r}")
        return _format(variables[name].values(), match.group("fmt"), name)

    return _VAR.sub(replace, sql)


def _time_macros(sql: str, start: datetime, end: datetime, interval_s: int) -> str:
    from_s, to_s = int(start.timestamp()), int(end.timestamp())
    from_ms, to_ms = int(start.timestamp() * 1000), int(end.timestamp() * 1000)
    interval_s = max(1, int(interval_s))
    with_column = {
        "$__timeFilter_ms": lambda c: (
            f"{c} >= fromUnixTimestamp64Milli({from_ms}) AND {c} <= fromUnixTimestamp64Milli({to_ms})"
        ),
        "$__timeFilter": lambda c: f"{c} >= toDateTime({from_s}) AND {c} <= toDateTime({to_s})",
        "$__timeInterval_ms": lambda c: (
            f"toStartOfInterval(toDateTime64({c}, 3), INTERVAL {interval_s * 1000} millisecond)"
        ),
        "$__timeInterval": lambda c: f"toStartOfInterval(toDateTime({c}), INTERVAL {interval_s} second)",
    }
    for macro, render in with_column.items():
        while (at := sql.find(macro + "(")) != -1:
            args, end_at = macro_args(sql, at + len(macro))
            if len(args) != 1 or not args[0].strip():
                raise ExpansionError(f"{macro} takes one column, got {sql[at:end_at]!r}")
            sql = sql[:at] + render(args[0].strip()) + sql[end_at:]
    plain = {
        "$__fromTime_ms": f"fromUnixTimestamp64Milli({from_ms})",
        "$__toTime_ms": f"fromUnixTimestamp64Milli({to_ms})",
        "$__fromTime": f"toDateTime({from_s})",
        "$__toTime": f"toDateTime({to_s})",
        "$__interval_s": str(interval_s),
    }
    for macro, text in plain.items():  # the _ms forms first: "$__fromTime" is a prefix of "$__fromTime_ms"
        sql = re.sub(re.escape(macro) + r"(?![A-Za-z0-9_])", text, sql)
    return sql


def expand(
    sql: str, *, start: datetime, end: datetime, interval_s: int = 60, variables: Mapping[str, Variable] | None = None
) -> str:
    """``sql`` as the ClickHouse data source would send it for this time range and these variable values."""
    variables = dict(variables or {})
    sql = _conditional_all(sql, variables)
    sql = _variables(sql, variables)
    sql = _time_macros(sql, start, end, interval_s)
    leftover = re.search(r"\$\{?[A-Za-z_][A-Za-z0-9_]*", sql)
    if leftover:
        raise ExpansionError(f"unexpanded {leftover.group(0)!r} in query")
    return sql
