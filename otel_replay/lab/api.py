"""``otel_replay.lab(...)``: a change backtested against a cohort of recorded runs, returning a
:class:`~otel_replay.lab.model.LabResult`.

The order of a lab: check the spec (every refusal before anything opens), select the cohort (the store read
once for the filters, then once per chunk for the runs' spans), journal it when it makes real calls, replay
each lane (the baseline first, then the candidate, each ``repeats`` times) on the chosen executor, ingest the
spool the workers wrote, summarize, check the gates, and record the lab span, also when Ctrl-C stopped it.

It must never run a replay the spec refuses, open the store from a worker, or lose the pairs that finished
when the lab is interrupted.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import ReplayRefused
from ..exporting import setup
from ..exporting.spool import OTEL_REPLAY_SPOOL_FSYNC, SpoolExporter
from ..replay.matching.policy import ToolFault
from ..replay.safety import sandbox
from ..replay.safety.approvals import Approvals
from ..replay.session import os_user as _os_user
from . import audit, gates, scoring, summary
from .cohort import Cohort, called_tools, load_items, select
from .executors import check_ray_address, run_in_process, run_local_pool, run_ray
from .model import LabResult, PairResult
from .spec import (
    CohortSpec,
    LabSpec,
    as_faults,
    check_faults,
    check_params,
    check_roles,
    check_spec,
    new_lab_id,
    parse_when,
    read_prompt_file,
)
from .worker import chunk_text, import_scorers, policy_dict

Progress = Callable[[int, int], None]
"""``progress(done, total)``: replays finished so far, replays in the lab."""

_MAX_CHUNK = 25
"""At most this many replays per chunk (one store read and one task each)."""


def lab(
    *,
    agent: str | None = None,
    status: str | None = None,
    since: str | _dt.datetime | None = None,
    until: str | _dt.datetime | None = None,
    trace_ids: Sequence[str] = (),
    tags: Mapping[str, str] | None = None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    cases: Sequence[str | os.PathLike[str]] = (),
    app: str | None = None,
    mode: str = "deterministic",
    model: str | None = None,
    params: Mapping[str, Any] | None = None,
    prompts: Mapping[str, str] | None = None,
    prompt_files: Mapping[str, str] | None = None,
    tool_live: Sequence[str] = (),
    tool_match: str = "strict",
    inject: Sequence[str | ToolFault] = (),
    baseline: bool = False,
    repeats: int = 1,
    workers: int | None = None,
    executor: str = "local",
    reason: str | None = None,
    actor: str | None = None,
    approvals: Sequence[str] = (),
    allow_paths: Sequence[str] = (),
    allow_addresses: Sequence[str] = (),
    scorers: Sequence[str] = (),
    fail_if: Sequence[str] = (),
    store: Any = None,
    progress: Progress | None = None,
    lab_id: str | None = None,
    bisect_id: str | None = None,
    bisect_revision: str | None = None,
) -> LabResult:
    """Replay a cohort of recorded runs with a candidate change and score every replay against its original.

    Cohort: stored original runs filtered by ``agent``, ``status`` (``ok``/``error``), ``since``/``until``
    (ISO dates or times, or datetimes), ``trace_ids``, ``tags`` (root-span attributes), at most ``limit``
    newest, then ``sample`` of them drawn with ``seed``; or the runs of case files/folders (``cases``).

    Candidate: each run's trusted entrypoint or ``app`` (``module:function``), with ``model``, ``params`` and
    ``prompts`` (role → text; or ``prompt_files``, role → path, read once here) applied to every model call;
    tools answered from the recording per ``tool_match`` (``strict``/``sequence``) except those in
    ``tool_live`` (which need ``approvals`` for write/high tools, as live replays do); ``inject`` tool faults
    (``TOOL:error=KIND[:p=P]`` texts or :class:`~otel_replay.replay.matching.policy.ToolFault`), drawn from ``seed``.

    ``allow_paths`` / ``allow_addresses``: what every replay's code may change or connect to, as for
    :func:`~otel_replay.replay` (checked here, recorded in each replay's audit).

    ``mode``: ``deterministic`` (default), ``whatif`` (models called for real; needs ``reason``) or ``mock``.
    ``baseline`` replays the cohort with the unchanged candidate first; ``repeats`` repeats each lane.
    ``workers`` (default: the CPU count) worker processes, or Ray tasks with ``executor="ray"``; 1 runs in this
    process. ``fail_if``: gate expressions (``diverged > 0``); ``progress(done, total)`` is called as replays
    finish. ``bisect_id`` / ``bisect_revision``: the bisect step this lab is (written on every replay).

    Raises :class:`~otel_replay.errors.ReplayRefused` (an empty cohort, a missing reason, a journal that cannot
    be written) or ``ValueError`` (a bad value), each with one line, before any replay runs. Ctrl-C stops the
    lab and returns what finished (``interrupted`` true).
    """
    prompt_texts = dict(prompts or {})
    shown_files: dict[str, str] = {}
    check_roles([*prompt_texts, *(prompt_files or {})])  # prompts= and prompt_files= together
    check_params(params or {})
    for role, path in (prompt_files or {}).items():
        role, path, text = read_prompt_file(f"{role}={path}")
        prompt_texts[role], shown_files[role] = text, path
    parsed_gates = [gates.parse_gate(text) for text in fail_if]
    Approvals.of(approvals)  # a bad approval spec is refused before anything opens
    rt = setup.runtime()
    scrub = rt.redactor.scrub_text
    cohort_spec = CohortSpec(
        agent=agent,
        status=status,
        since=parse_when(since) if since is not None else None,
        until=parse_when(until, end=True) if until is not None else None,
        trace_ids=tuple(trace_ids),
        tags=tuple(sorted((str(k), str(v)) for k, v in (tags or {}).items())),
        limit=limit,
        sample=sample,
        seed=seed,
        cases=tuple(str(c) for c in cases),
    )
    spec = LabSpec(
        lab_id=lab_id or new_lab_id(),
        mode=mode,  # type: ignore[arg-type]
        cohort=cohort_spec,
        app=app,
        model=model,
        params=dict(params or {}),
        shown_params=rt.redactor.redact(dict(params or {}), "replay")[0],
        prompts=prompt_texts,
        prompt_files=shown_files or dict.fromkeys(prompt_texts, "(given)"),
        tool_match=tool_match,
        tools_live=tuple(tool_live),
        faults=as_faults(inject),
        seed=seed,
        baseline=baseline,
        repeats=repeats,
        workers=workers if workers is not None else (os.cpu_count() or 1),
        executor=executor,  # type: ignore[arg-type]
        reason=scrub(reason, "replay")[0] if reason else None,
        actor=scrub(actor, "replay")[0] if actor else None,
        approvals=tuple(approvals),
        allow_paths=tuple(sandbox.check_paths(allow_paths)),
        allow_addresses=tuple(sandbox.check_addresses(allow_addresses)),
        scorers=tuple(scorers),
        bisect_id=bisect_id,
        bisect_revision=bisect_revision,
    )
    if cohort_spec.status is not None and cohort_spec.status not in ("ok", "error"):
        raise ValueError(f"status must be ok or error, got {cohort_spec.status!r}")
    check_spec(spec)
    if spec.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise ReplayRefused("--executor ray needs Ray, which is not installed: pip install 'otel-replay[ray]'")
    if spec.executor == "ray":
        check_ray_address()  # nothing answering at RAY_ADDRESS: refused now, not after minutes in Ray's retries
    import_scorers(spec.scorers)
    return _run(spec, parsed_gates, store=store, progress=progress)


def _run(spec: LabSpec, parsed_gates: Sequence[gates.Gate], *, store: Any, progress: Progress | None) -> LabResult:
    started_ns = time.time_ns()
    user = _os_user()
    from ..storage.store import open_given  # the store (and the rows encoder) load only when a store is used

    # A case cohort needs no store: its replays and the lab span wait in the spool for the store's next open.
    opened, close = open_given(store) if not spec.cohort.cases or store is not None else (None, False)
    try:
        cohort = select(spec.cohort, opened)
        if spec.faults:  # a fault for a tool no run calls injects nothing: refused before anything replays
            check_faults(spec.faults, called_tools(cohort, opened, chunk=_MAX_CHUNK))
        if spec.live:
            audit.journal_lab(spec, cohort.trace_ids, os_user=user)
        pairs, interrupted = _replay_lanes(spec, cohort, opened, progress)
        order = {trace_id: n for n, trace_id in enumerate(cohort.trace_ids)}
        pairs.sort(key=lambda p: (p.lane != "baseline", p.repeat, order.get(p.original_trace_id, len(order))))
        lab_summary = summary.summarize(pairs)
        result = LabResult(
            lab_id=spec.lab_id,
            mode=spec.mode,
            spec=spec.to_dict(),
            cohort=list(cohort.trace_ids),
            pairs=pairs,
            summary=lab_summary,
            gates=gates.evaluate(parsed_gates, lab_summary),
            interrupted=interrupted,
        )
        audit.write_lab_span(result, spec, os_user=user, started_ns=started_ns)
        if opened is not None:
            try:
                opened.ingest()  # the replays the workers (and this process) spooled, and the lab span
            except Exception:  # noqa: BLE001 - the next open of the store ingests them
                pass
    finally:
        if close and opened is not None:
            opened.close()
    return result


def _chunk_size(total: int, workers: int) -> int:
    return max(1, min(_MAX_CHUNK, math.ceil(total / max(1, workers * 4))))


def _replay_lanes(
    spec: LabSpec, cohort: Cohort, store: Any, progress: Progress | None
) -> tuple[list[PairResult], bool]:
    lanes = (["baseline"] if spec.baseline else []) + ["candidate"]
    ids = list(cohort.trace_ids)
    total = len(ids) * spec.repeats * len(lanes)
    in_process = spec.executor == "local" and spec.workers == 1
    size = _chunk_size(total, spec.workers)
    worker_setup = None if in_process else _worker_setup(spec)

    def chunks() -> Iterator[str]:
        # the baseline lane first, then the candidate, each repeat in turn; the store read once per chunk
        for lane in lanes:
            task = _task(spec, lane, worker_setup)
            for repeat in range(spec.repeats):
                for start in range(0, len(ids), size):
                    items = load_items(cohort, store, ids[start : start + size])
                    yield chunk_text(task, [{**item, "repeat": repeat} for item in items])

    pairs: list[PairResult] = []

    def on_pairs(finished: list[PairResult]) -> None:
        pairs.extend(finished)
        if progress is not None:
            progress(len(pairs), total)

    if progress is not None:
        progress(0, total)
    if in_process:
        with _in_process_spool(spec):
            interrupted = run_in_process(chunks(), on_pairs)
    else:
        run = run_ray if spec.executor == "ray" else run_local_pool
        interrupted = run(chunks(), workers=spec.workers, on_pairs=on_pairs)
    return pairs, interrupted


def _task(spec: LabSpec, lane: str, worker_setup: Any) -> dict[str, Any]:
    return {
        "mode": spec.mode,
        "policy": policy_dict(spec.policy(lane)),
        "lane": lane,
        "app": spec.app,
        "reason": spec.reason or f"lab {spec.lab_id}",
        "actor": spec.actor,
        "approvals": list(spec.approvals),
        "allow_paths": list(spec.allow_paths),
        "allow_addresses": list(spec.allow_addresses),
        "setup": worker_setup,
    }


def _unsynced_spool(spec: LabSpec) -> bool:
    """Whether the lab's replays are spooled without fsync.

    A lab that makes no real call may lose its replays' spool to a power cut, never to a crash: the lab process
    ingests the spool before it returns, and the replays can be made again. Otherwise every replay's seal costs
    two fsyncs, a third of a replay's time on a slow disk. The user's own ``OTEL_REPLAY_SPOOL_FSYNC`` wins."""
    return not spec.live and not os.environ.get(OTEL_REPLAY_SPOOL_FSYNC)


def _in_process_spool(spec: LabSpec) -> contextlib.AbstractContextManager[None]:
    """In the lab process, the replays' spans go to the home's spool as the worker processes write it: without
    fsync when :func:`_unsynced_spool` says so (a runtime of the lab's own for the block; the application's
    runtime is left as it is)."""
    rt = setup.runtime()
    if not _unsynced_spool(spec) or rt.exporter_name != "spool":
        return contextlib.nullcontext()
    return setup.exporting_to(SpoolExporter(rt.home / "spool", fsync="never"))


def _worker_setup(spec: LabSpec) -> dict[str, Any]:
    """What a worker process configures once: the lab process's home and exporter, the scorer modules, the spool's
    fsync policy."""
    rt = setup.runtime()
    exporter = rt.exporter_name if rt.exporter_name in ("spool", "otlp", "clickhouse", "none") else "spool"
    if exporter == "clickhouse" and str(rt.store_url or os.environ.get("OTEL_REPLAY_STORE", "")).startswith("chdb"):
        exporter = "spool"  # a worker never opens the embedded store: the spool feeds it
    fsync = "never" if _unsynced_spool(spec) else None
    return {
        "home": str(rt.home),
        "exporter": exporter,
        "store_url": rt.store_url,
        "scorers": _scorer_modules(spec),
        "spool_fsync": fsync,
    }


def _scorer_modules(spec: LabSpec) -> list[str]:
    """The modules a worker imports for its scorers: those named with ``--scorers``, then the modules of the
    user scorers registered in this process (code this process imported, never a name from a recording), so
    a worker scores with the scorers the lab process would use. A scorer defined in the main script is
    registered again when the spawned worker imports the script as ``__mp_main__``."""
    modules = list(spec.scorers)
    for found in scoring.registered():
        if found.builtin:
            continue
        module = getattr(found.func, "__module__", None)
        if isinstance(module, str) and module in sys.modules and module not in ("__main__", "__mp_main__"):
            modules.append(module)
    return list(dict.fromkeys(modules))
