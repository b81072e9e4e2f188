"""Which rows a run listing reads: the filters of ``Store.run_rows`` as SQL with bound values
(:class:`RunFilter`, judged by :func:`run_filter`), and the newest rows matching them read through widening time windows
(:func:`newest_first`).

It must never put a value into SQL text (values travel only as bound parameters; a tag's key and value are
parameters too), open a store, or return a span stored more than once more than once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypedDict

from .. import semconv
from ..dialects import FOREIGN_ROOT_KEYS
from ..exporting.rows import SELECT_COLUMNS

ROOT_PREFIX: Final = semconv.SPAN_AGENT + " "
ERROR_CODES: Final = ("Error", "STATUS_CODE_ERROR")
MAX_LIMIT: Final = 2**32 - 1  # bound as UInt32
ONE_ROW_PER_SPAN: Final = "LIMIT 1 BY TraceId, SpanId"
"""Every read of the traces table keeps one row per (TraceId, SpanId): delivery is at least once."""

_LIST_COLUMNS: Final = SELECT_COLUMNS.replace(
    "arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp), Events.Name, Events.Attributes",
    "CAST([] AS Array(Int64)), CAST([] AS Array(String)), CAST([] AS Array(Map(String, String)))",
)
"""A run listing reads root spans without their events."""
_LIST_FIRST_WINDOW_NS: Final = 86_400 * 10**9  # the newest day of the store (the table has one partition a day)
_LIST_WINDOW_GROWTH: Final = 8  # each next window is 8 times wider: 1, 8, 64 and 512 days
_LIST_MAX_WINDOWS: Final = 4  # then the rest of the store in one last query


class RunFilter(TypedDict, total=False):
    """The filters of a run listing, each left out (or None) for no filter: the keywords of ``Store.run_rows``
    and ``Store.runs``, judged by :func:`run_filter` alone.

    ``agent`` matches ``gen_ai.agent.name``, the span name's agent part, the whole span name or
    ``traceloop.workflow.name``; ``status`` is ``ok`` or ``error`` (both status spellings); ``kind`` is
    ``original`` (also runs without the attribute), ``replay`` (dry ones included), ``dry`` or ``all``, and
    left out lists every run but dry replays; ``session`` matches ``otel_replay.session.id``;
    ``lab`` matches ``otel_replay.replay.lab_id`` (a lab's replays); ``tags`` are root-span attributes that must
    hold exactly these values; ``since_ns`` / ``until_ns`` bound the run's start (nanoseconds since the epoch,
    ``until_ns`` excluded); ``limit`` counts runs (:data:`DEFAULT_LIMIT` when left out).
    """

    agent: str | None
    status: str | None
    kind: str | None
    session: str | None
    limit: int
    lab: str | None
    tags: Mapping[str, str] | None
    since_ns: int | None
    until_ns: int | None


KINDS: Final = (None, "original", "replay", "dry", "all")
"""The ``kind`` filters: None (every run but dry replays), ``original``, ``replay`` (every replay, dry ones
included: what the audit reads), ``dry`` (the dry replays: audited, with no step), ``all``."""

DEFAULT_LIMIT: Final = 50
"""The runs a listing returns when its filter gives no ``limit``."""


def run_filter(criteria: RunFilter) -> tuple[list[str], dict[str, Any], int]:
    """The WHERE terms, bound parameters and limit of a run listing (see :class:`RunFilter`); ``ValueError`` for
    a bad limit, status or kind, ``TypeError`` for a filter that does not exist."""
    unknown = sorted(set(criteria) - set(RunFilter.__annotations__))
    if unknown:
        raise TypeError(f"no run filter named {unknown[0]!r}; the filters are {', '.join(RunFilter.__annotations__)}")
    agent, status, kind = criteria.get("agent"), criteria.get("status"), criteria.get("kind")
    session, lab, tags = criteria.get("session"), criteria.get("lab"), criteria.get("tags")
    since_ns, until_ns = criteria.get("since_ns"), criteria.get("until_ns")
    limit = criteria.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be a whole number from 1 to {MAX_LIMIT}, got {limit!r}")
    where = [
        "ParentSpanId = ''",
        "(startsWith(SpanName, {prefix:String}) OR hasAny(mapKeys(SpanAttributes), {foreign_keys:Array(String)}))",
    ]
    params: dict[str, Any] = {"prefix": ROOT_PREFIX, "limit": limit, "foreign_keys": list(FOREIGN_ROOT_KEYS)}
    if agent is not None:
        where.append(
            "(SpanAttributes[{agent_key:String}] = {agent:String} OR SpanName = {agent_span:String}"
            " OR SpanName = {agent:String} OR SpanAttributes[{workflow_key:String}] = {agent:String})"
        )
        params.update(
            agent_key=semconv.GEN_AI_AGENT_NAME,
            agent=agent,
            agent_span=ROOT_PREFIX + agent,
            workflow_key="traceloop.workflow.name",
        )
    if status is not None:
        if status not in ("ok", "error"):
            raise ValueError(f"status must be 'ok' or 'error', got {status!r}")
        where.append(("" if status == "error" else "NOT ") + "(StatusCode IN {error_codes:Array(String)})")
        params["error_codes"] = list(ERROR_CODES)
    if session is not None:
        where.append("SpanAttributes[{session_key:String}] = {session:String}")
        params.update(session_key=semconv.SESSION_ID, session=session)
    if lab is not None:
        where.append("SpanAttributes[{lab_key:String}] = {lab:String}")
        params.update(lab_key=semconv.REPLAY_LAB_ID, lab=lab)
    for number, (key, value) in enumerate(sorted((tags or {}).items())):
        where.append(f"SpanAttributes[{{tag_key_{number}:String}}] = {{tag_value_{number}:String}}")
        params.update({f"tag_key_{number}": str(key), f"tag_value_{number}": str(value)})
    if since_ns is not None:
        where.append("Timestamp >= fromUnixTimestamp64Nano({since_ns:Int64})")
        params["since_ns"] = int(since_ns)
    if until_ns is not None:
        where.append("Timestamp < fromUnixTimestamp64Nano({until_ns:Int64})")
        params["until_ns"] = int(until_ns)
    if kind not in KINDS:
        raise ValueError(f"kind must be 'original', 'replay', 'dry' or 'all', got {kind!r}")
    kind_of = "if(SpanAttributes[{kind_key:String}] = '', 'original', SpanAttributes[{kind_key:String}])"
    dry = "(SpanAttributes[{kind_key:String}] = 'replay' AND SpanAttributes[{mode_key:String}] = 'dry')"
    if kind in ("original", "replay"):
        where.append(f"{kind_of} = {{kind:String}}")
        params.update(kind_key=semconv.RUN_KIND, kind=kind)
    elif kind != "all":  # None: every run but dry replays; "dry": those only
        where.append(dry if kind == "dry" else f"NOT {dry}")
        params.update(kind_key=semconv.RUN_KIND, mode_key=semconv.REPLAY_MODE)
    return where, params, limit


def newest_first(
    query: Callable[[str, dict[str, Any]], Sequence[Sequence[Any]]],
    table: str,
    where: list[str],
    params: dict[str, Any],
    limit: int,
) -> list[Sequence[Any]]:
    """The newest ``limit`` rows of the traces table matching ``where``, read through widening time windows.

    The table is sorted by ``(ServiceName, SpanName, time)`` and partitioned by day, so ``ORDER BY Timestamp
    DESC LIMIT n`` alone reads the filter columns of every span in the store. Reading the newest day first,
    then each next older window 8 times wider (the last one unbounded), lets partition pruning skip
    everything older as soon as ``limit`` rows are found. Every row of a window is newer than every row of
    the windows after it, so the concatenation is exactly the single query's answer. The store's newest and
    oldest span times come from the parts' min/max index (ClickHouse answers them without reading rows).
    """
    count, newest, oldest = query(
        f"SELECT count(), toUnixTimestamp64Nano(max(Timestamp)), toUnixTimestamp64Nano(min(Timestamp)) FROM {table}",
        {},
    )[0]
    if not count:
        return []
    newest, oldest = int(newest), int(oldest)
    rows: list[Sequence[Any]] = []
    upper: int | None = None  # exclusive upper bound of the next window (None: no bound)
    width = _LIST_FIRST_WINDOW_NS
    for window in range(_LIST_MAX_WINDOWS + 1):
        lower: int | None
        lower = newest - width
        if window == _LIST_MAX_WINDOWS or lower <= oldest:
            lower = None  # this window reaches the oldest span: the last query
        bounds, window_params = [], {**params, "limit": limit - len(rows)}
        if lower is not None:
            bounds.append("Timestamp >= fromUnixTimestamp64Nano({lower:Int64})")
            window_params["lower"] = lower
        if upper is not None:
            bounds.append("Timestamp < fromUnixTimestamp64Nano({upper:Int64})")
            window_params["upper"] = upper
        sql = (
            f"SELECT {_LIST_COLUMNS} FROM {table} WHERE {' AND '.join(where + bounds)} "
            f"ORDER BY Timestamp DESC, TraceId, SpanId {ONE_ROW_PER_SPAN} LIMIT {{limit:UInt32}}"
        )
        found = query(sql, window_params)
        rows.extend(found)
        if len(rows) >= limit or lower is None:
            break
        upper = lower
        width *= _LIST_WINDOW_GROWTH
    return rows
