"""The lab's worker function: replay one chunk of cohort runs and score each pair, in whatever process runs it
(the lab process itself, a local worker process, a Ray task).

A chunk travels as one JSON text and its pairs come back as one JSON text: the originals as their span records
as the one span encoder's insert rows (:mod:`otel_replay.exporting.rows`: strings, numbers, lists, string maps;
rebuilt here with :func:`otel_replay.runs.build_run`), the
policy as its fields, the pairs as :meth:`PairResult.to_dict <otel_replay.lab.model.PairResult.to_dict>`. No
object a recorded value could name is ever pickled or constructed.

Per process, once (:func:`_ready`): the recording is configured for the lab's home and exporter (the spool by
default: the lab process ingests it when the lab ends) and the user's scorer modules are imported; entrypoint
modules are imported by the first replay that needs them and stay imported. A worker never opens the store.

Process-wide state: ``_READY`` remembers the setup this process was given (one lab per worker process; the
in-process path keeps the lab process's own configuration).

It must never open a store, import chDB, pickle or unpickle a value from a recording, or let one run's failure
stop the chunk (it becomes an ``error`` pair); KeyboardInterrupt is never swallowed.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from ..errorlines import error_line
from ..errors import OtelReplayError
from ..exporting.rows import INSERT_COLUMNS, record_from_row, row_from_record
from ..exporting.setup import configure
from ..exporting.spool import OTEL_REPLAY_SPOOL_FSYNC
from ..records import SpanRecord
from ..replay.engine import replay_run
from ..replay.matching.policy import ReplayPolicy, ToolFault
from ..runs import Run, build_run
from . import scoring
from .model import PairResult

_READY: dict[str, Any] | None = None


# ------------------------------------------------------------------------------------------ plain rows


def _record_of(row: Sequence[Any]) -> SpanRecord:
    """The span record of a row a chunk carries (the one encoder's insert row, read back as JSON)."""
    if not isinstance(row, (list, tuple)) or len(row) != len(INSERT_COLUMNS):
        raise ValueError("not a span row")
    return record_from_row(row)


def original_item(trace_id: str, records: Iterable[SpanRecord], *, entrypoint: str | None = None) -> dict[str, Any]:
    """One cohort run as a chunk carries it: its trace id, its spans as rows, and (case files) the entrypoint
    the case names, which is recorded data like the run's own."""
    return {"trace_id": trace_id, "entrypoint": entrypoint, "rows": [row_from_record(r) for r in records]}


def original_run(item: Mapping[str, Any]) -> Run:
    """The run of a chunk item, rebuilt with :func:`~otel_replay.runs.build_run`."""
    run = build_run([_record_of(row) for row in item["rows"]], trace_id=str(item["trace_id"]))
    entrypoint = item.get("entrypoint")
    return replace(run, entrypoint=str(entrypoint)) if entrypoint else run


# --------------------------------------------------------------------------------------------- policy


def policy_dict(policy: ReplayPolicy) -> dict[str, Any]:
    """A policy as JSON-ready fields."""
    data: dict[str, Any] = {}
    for f in fields(policy):
        value = getattr(policy, f.name)
        if f.name == "faults":
            value = [{g.name: getattr(fault, g.name) for g in fields(ToolFault)} for fault in value]
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        data[f.name] = value
    return data


def policy_of(data: Mapping[str, Any]) -> ReplayPolicy:
    """The policy of :func:`policy_dict` (fields this version does not know are ignored)."""
    known = {f.name: f for f in fields(ReplayPolicy)}
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        if name not in known:
            continue
        if name == "faults":
            fault_fields = {g.name for g in fields(ToolFault)}
            value = tuple(ToolFault(**{k: v for k, v in f.items() if k in fault_fields}) for f in value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    return ReplayPolicy(**kwargs)


# ------------------------------------------------------------------------------------------- the chunk


def ignore_interrupts() -> None:
    """Initializer of local worker processes: Ctrl-C is the lab process's to handle (it stops handing out
    chunks and keeps what finished); a worker finishes the replay it is in."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _ready(setup: Mapping[str, Any] | None) -> None:
    """Configure this process for the lab once (a worker process; the lab process passes None)."""
    global _READY
    if setup is None or setup == _READY:
        return
    os.environ.setdefault("OTEL_REPLAY_HOME", str(setup["home"]))
    if setup.get("spool_fsync"):
        os.environ[OTEL_REPLAY_SPOOL_FSYNC] = str(setup["spool_fsync"])
    configure(home=setup["home"], exporter=setup.get("exporter") or "spool", store=setup.get("store_url"))
    import_scorers(setup.get("scorers") or ())
    _READY = dict(setup)


def import_scorers(modules: Sequence[str]) -> None:
    """Import the user's scorer modules (named on the command line) through the report's registry."""
    if not modules:
        return
    scoring.import_scorers(list(modules))


def run_chunk(task_text: str) -> str:
    """Replay every item of one chunk (a JSON text: see :func:`chunk_text`) and return, as JSON text,
    ``{"interrupted": bool, "pairs": [...]}``: the pairs (:meth:`PairResult.to_dict` objects) in the chunk's
    order, and whether a ``KeyboardInterrupt`` raised while replaying (by the replayed code, or Ctrl-C in the lab
    process) stopped the chunk before its end (the pairs that finished are kept)."""
    task = json.loads(task_text)
    _ready(task.get("setup"))
    done: list[str] = []
    interrupted = False
    try:
        for pair in replay_items(task):
            done.append(pair_json(pair))
    except KeyboardInterrupt:
        interrupted = True
    return '{"interrupted": ' + ("true" if interrupted else "false") + ', "pairs": [' + ",".join(done) + "]}"


def pair_json(pair: PairResult) -> str:
    """The JSON text of :meth:`PairResult.to_dict` (its fields hold JSON-ready values already: no deep copy)."""
    return json.dumps({f.name: getattr(pair, f.name) for f in fields(pair)}, default=str)


def replay_items(task: Mapping[str, Any]) -> Iterator[PairResult]:
    """The pairs of a decoded chunk task, one replay at a time. Each item stays JSON text until its turn (text
    is not tracked by the garbage collector, so the replay engine's collector work does not grow with the
    chunk)."""
    policy = policy_of(task["policy"])
    for text in task["items"]:
        item = json.loads(text)
        yield replay_one(
            item,
            mode=task["mode"],
            policy=policy,
            lane=task["lane"],
            repeat=int(item.get("repeat", 0)),
            entrypoint=task.get("app"),
            reason=task.get("reason"),
            actor=task.get("actor"),
            approvals=task.get("approvals") or (),
            allow_paths=task.get("allow_paths") or (),
            allow_addresses=task.get("allow_addresses") or (),
        )


def chunk_text(task: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> str:
    """The JSON text of one chunk: ``task`` (mode, policy as :func:`policy_dict`, lane, app, reason, actor,
    approvals, allowed paths and addresses, the worker setup) with ``items`` (:func:`original_item` plus
    ``repeat``), each as JSON text."""
    return json.dumps({**task, "items": [json.dumps(item, default=str) for item in items]}, default=str)


def replay_one(
    item: Mapping[str, Any],
    *,
    mode: str,
    policy: ReplayPolicy,
    lane: str,
    repeat: int,
    entrypoint: str | None,
    reason: str | None,
    actor: str | None,
    approvals: Sequence[str],
    allow_paths: Sequence[str] = (),
    allow_addresses: Sequence[str] = (),
) -> PairResult:
    """One cohort run replayed and paired with its original; a run that cannot be replayed is an ``error`` pair."""
    try:
        original = original_run(item)
    except (OtelReplayError, ValueError, TypeError, KeyError, IndexError) as exc:
        return _unreadable(item, f"the run cannot be rebuilt: {error_line(exc)}", lane=lane, repeat=repeat)
    try:
        result = replay_run(
            original,
            mode=mode,
            policy=policy,
            entrypoint=entrypoint,
            reason=reason,
            actor=actor,
            approvals=list(approvals),
            allow_paths=allow_paths,
            allow_addresses=allow_addresses,
        )
        return scoring.pair_result(original, result, lane=lane, repeat=repeat)  # type: ignore[arg-type]
    except OtelReplayError as exc:
        return scoring.error_pair(original, error_line(exc), lane=lane, repeat=repeat)  # type: ignore[arg-type]
    except Exception as exc:
        if os.environ.get("OTEL_REPLAY_DEBUG"):
            raise
        return scoring.error_pair(original, error_line(exc), lane=lane, repeat=repeat)  # type: ignore[arg-type]


def lost_pairs(task_text: str, message: str) -> list[PairResult]:
    """The ``error`` pairs of a chunk whose worker never returned it (its process died): one per run of the
    chunk, each saying why, so the lab reports every run it was asked to replay."""
    task = json.loads(task_text)
    pairs: list[PairResult] = []
    for text in task["items"]:
        item = json.loads(text)
        pairs.append(_unreadable(item, message, lane=task["lane"], repeat=int(item.get("repeat", 0))))
    return pairs


def _unreadable(item: Mapping[str, Any], message: str, *, lane: str, repeat: int) -> PairResult:
    return PairResult(
        original_trace_id=str(item.get("trace_id")),
        original_run_id=None,
        agent=None,
        original_status=None,
        lane=lane,  # type: ignore[arg-type]
        repeat=repeat,
        outcome="error",
        error=message,
    )
