"""A lab's audit, once per lab: the lab span (``otel_replay.lab``, a trace of its own, written when the lab ends,
interrupted or not: who, why, the mode, the cohort, the totals and each scorer's pass rate), and, for a lab that
makes real calls (whatif models, ``--tool-live`` tools), one ``lab`` record in the audit journal before its
first replay.

Each replay of the lab is also a normal replay run with its own audit (the replay root's actor, reason and MAC,
plus the lab id and lane).

It must never let a lab that makes real calls start without its journal record, write a secret (actor and
reason are scrubbed like every value), or raise after the lab ran (the span is telemetry).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context

from .. import semconv
from ..errors import ReplayRefused
from ..exporting import setup
from ..files import process_start
from ..replay.safety import journal
from .model import LabResult
from .spec import LabSpec

_log = logging.getLogger("otel_replay.lab")


def journal_lab(spec: LabSpec, cohort: Sequence[str], *, os_user: str) -> None:
    """Write the lab's ``lab`` record to the audit journal before its first replay (a lab that makes real
    calls); :class:`ReplayRefused` when it cannot be made durable (then nothing ran)."""
    record = {
        "v": 1,
        "record": "lab",
        "run_id": spec.lab_id,
        "lab_id": spec.lab_id,
        "at": _dt.datetime.now(tz=_dt.timezone.utc).isoformat(timespec="microseconds"),
        "actor": spec.actor,
        "os_user": os_user,
        "reason": spec.reason,
        "mode": spec.mode,
        "model": spec.model,
        "tools_live": list(spec.tools_live),
        "approvals": list(spec.approvals),
        "cohort": list(cohort),
        "pid": os.getpid(),
        "pid_start": process_start(os.getpid()),
        "host": socket.gethostname(),
    }
    try:
        journal.append(record)
    except (OSError, ValueError) as exc:
        where = journal.journal_path()
        raise ReplayRefused(
            f"the audit record of this lab cannot be written to {where} ({type(exc).__name__}: {exc}); "
            f"nothing ran: make {where.parent} a folder you can write (mode 700) and try again"
        ) from None


def pass_rates(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """Scorer name → pass rate (0..1) over the candidate lane, as the summary gives them (None for a scorer that
    applied to no pair)."""
    rates: dict[str, float | None] = {}
    scorers = summary.get("scorers")
    if isinstance(scorers, Mapping):
        for name, info in scorers.items():
            if not isinstance(info, Mapping) or "pass_rate" not in info:
                continue
            rate = info["pass_rate"]
            number = isinstance(rate, (int, float)) and not isinstance(rate, bool)
            rates[str(name)] = float(rate) if number else None
    return rates


def write_lab_span(result: LabResult, spec: LabSpec, *, os_user: str, started_ns: int) -> None:
    """Record the lab span (a new trace) and flush it toward the store. Never raises."""
    try:
        totals = result.summary.get("totals", {}) if isinstance(result.summary, Mapping) else {}
        attributes: dict[str, Any] = {
            semconv.LAB_ID: result.lab_id,
            semconv.LAB_MODE: result.mode,
            semconv.LAB_COHORT: list(result.cohort),
            semconv.LAB_RUNS: int(totals.get("replays", 0)),
            semconv.LAB_MATCHED: int(totals.get("matched", 0)),
            semconv.LAB_DIVERGED: int(totals.get("diverged", 0)),
            semconv.LAB_FAILED: bool(result.failed),
            semconv.LAB_SCORES: json.dumps(pass_rates(result.summary), sort_keys=True),
            semconv.LAB_INTERRUPTED: bool(result.interrupted),
            semconv.REPLAY_ACTOR: spec.actor or os_user,
            semconv.REPLAY_OS_USER: os_user,
        }
        if spec.reason:
            attributes[semconv.REPLAY_REASON] = spec.reason
        rt = setup.runtime()
        span = rt.tracer.start_span(
            semconv.LAB_SPAN_NAME,
            context=otel_context.Context(),  # a trace of its own
            attributes=attributes,
            start_time=started_ns,
        )
        span.end()
        setup.flush(rt=rt)
    except Exception:  # noqa: BLE001 - the lab already ran; its span is telemetry
        _log.warning("otel-replay: the lab span of lab %s could not be recorded", result.lab_id, exc_info=True)
