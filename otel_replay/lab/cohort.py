"""The lab's cohort: which recorded runs it replays, and their spans read from the store once per chunk.

From the store: original runs (never replays; a replay named by trace id is refused) filtered by agent, status,
start time, root-span attributes (``--tag``), or named by trace id; newest first, at most ``--limit``, then a
deterministic ``--sample`` (the same seed and the same stored runs draw the same runs). From case files: each
case's trace, with the case's entrypoint (recorded data: the trust rule applies to it as to a stored run's).

It must never put a value into SQL text (the store binds every filter), run or import anything a run names, or
write the store.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .. import semconv
from ..cases.model import CaseError
from ..cases.reading import find_cases, load_case
from ..errors import OtelReplayError, ReplayRefused
from ..records import parse_trace_id
from ..semconv import RunKind
from .spec import CohortSpec, to_ns
from .worker import original_item, original_run

_ALL: int = 2**32 - 1
"""``limit`` that reads every matching run."""


@dataclass(frozen=True, kw_only=True)
class Cohort:
    """The selected runs: trace ids in selection order, and the case files' runs already read (None for a
    store cohort, whose spans are read per chunk by :func:`load_items`)."""

    trace_ids: tuple[str, ...]
    case_items: dict[str, dict[str, Any]] | None = None


def select(spec: CohortSpec, store: Any) -> Cohort:
    """The cohort of ``spec`` (:class:`ReplayRefused` with one line when it is empty)."""
    if spec.cases:
        return _from_cases(spec)
    if spec.trace_ids:
        wanted = list(dict.fromkeys(parse_trace_id(t) for t in spec.trace_ids))
        spans = store.load_traces(wanted) if wanted else {}
        missing = [t for t in wanted if t not in spans]
        if missing:
            raise ReplayRefused(
                f"no run with trace id {missing[0]} in the store"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                + "; list runs with `otel-replay runs`"
            )
        for trace_id in wanted:
            _refuse_a_replay(trace_id, spans[trace_id])
        ids = wanted
    else:
        roots = store.run_rows(
            agent=spec.agent,
            status=spec.status,
            kind=RunKind.ORIGINAL.value,
            limit=spec.limit or _ALL,
            tags=dict(spec.tags),
            since_ns=to_ns(spec.since),
            until_ns=to_ns(spec.until),
        )
        ids = list(dict.fromkeys(root.trace_id for root in roots))
    if spec.limit is not None:
        ids = ids[: spec.limit]
    ids = sample(ids, spec.sample, spec.seed)
    if not ids:
        raise ReplayRefused(
            "the cohort is empty: no recorded run matches these filters; list runs with `otel-replay runs`"
        )
    return Cohort(trace_ids=tuple(ids))


def _refuse_a_replay(trace_id: str, spans: Sequence[Any]) -> None:
    """A lab replays recorded runs, never a replay (a replay of a replay compares two replays)."""
    for span in spans:
        attributes = span.span_attributes
        if not span.parent_span_id and attributes.get(semconv.RUN_KIND) == RunKind.REPLAY.value:
            of = attributes.get(semconv.REPLAY_OF_TRACE_ID) or "?"
            raise ReplayRefused(
                f"trace {trace_id} is a replay (of trace {of}), not a recorded run: a lab replays recorded runs; "
                f"name the original (--trace-id {of})"
            )


def sample(ids: Sequence[str], size: int | None, seed: int) -> list[str]:
    """``size`` of ``ids`` drawn with ``seed`` (the same ids and seed draw the same runs), in their order."""
    if size is None or size >= len(ids):
        return list(ids)
    chosen = set(random.Random(seed).sample(sorted(ids), size))
    return [t for t in ids if t in chosen]


def _from_cases(spec: CohortSpec) -> Cohort:
    items: dict[str, dict[str, Any]] = {}
    try:
        paths = find_cases(spec.cases)
        if not paths:
            raise ReplayRefused(f"the cohort is empty: no case file (*.case.json) in {', '.join(spec.cases)}")
        for path in paths:
            case = load_case(path)
            items.setdefault(case.trace_id, original_item(case.trace_id, case.spans, entrypoint=case.entrypoint))
    except CaseError as exc:
        raise ReplayRefused(str(exc)) from None
    ids = list(items)[: spec.limit] if spec.limit is not None else list(items)
    ids = sample(ids, spec.sample, spec.seed)
    return Cohort(trace_ids=tuple(ids), case_items=items)


def load_items(cohort: Cohort, store: Any, trace_ids: Sequence[str]) -> Iterator[dict[str, Any]]:
    """The chunk items of ``trace_ids`` (one store read for all of them), in their order; a run the store no
    longer has is an item without rows (the worker reports it as an ``error`` pair)."""
    if cohort.case_items is not None:
        for trace_id in trace_ids:
            yield cohort.case_items[trace_id]
        return
    spans = store.load_traces(list(trace_ids))
    for trace_id in trace_ids:
        yield original_item(trace_id, spans.get(trace_id, ()))


def called_tools(cohort: Cohort, store: Any, *, chunk: int = 25) -> list[str]:
    """The names of the tools the cohort's recordings call (tool steps, as the replay's tool tape names them),
    sorted; the store read ``chunk`` runs at a time. A run that cannot be rebuilt adds nothing (the lab reports
    it as an ``error`` pair)."""
    names: set[str] = set()
    ids = list(cohort.trace_ids)
    for start in range(0, len(ids), max(1, chunk)):
        for item in load_items(cohort, store, ids[start : start + chunk]):
            try:
                run = original_run(item)
            except (OtelReplayError, ValueError, TypeError, KeyError, IndexError):  # an error pair when replayed
                continue
            names.update(step.name for step in run.steps if step.kind in semconv.TOOL_CALL_KINDS and step.name)
    return sorted(names)
