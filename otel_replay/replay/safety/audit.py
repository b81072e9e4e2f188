"""The replay audit trail: every replay is a run in the store; its root span says who, why, how and with what.

The store is the audit of record: the audit is a query over replay root spans, so it covers replays made from
any machine that writes to the same ClickHouse. A replay that can cause real effects also writes the local
audit journal (:mod:`otel_replay.replay.safety.journal`) before its first real call, so a replay whose trace never
reached the store (killed after its side effect, exporter ``none``, a Collector that was down) is listed too,
with the status ``started`` or ``interrupted``. Every row's keyed MAC is checked; a row written straight into
the store or edited afterwards is marked (``mac_valid`` false).

Statuses: ``recorded`` (the replay's root span is in the store), ``started`` (only the journal's ``started``
record: the process that wrote it is still running), ``interrupted`` (the store has no trace of the replay
and its process is gone: it was killed, or it finished but its spans never reached the store; ``outcome`` is
``unknown`` when it never finished).

This module never writes the store or the journal, and never raises on a damaged journal line.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ... import semconv
from ...records import SpanRecord
from . import journal as _journal

AUDIT_ALL: Final = 2**32 - 1
"""``limit`` that reads every replay (what ``otel-replay audit --verify`` checks)."""

STATUS_RECORDED: Final = "recorded"
"""The replay's root span is in the store."""
STATUS_STARTED: Final = "started"
"""Only the journal's ``started`` record exists, and the process that wrote it is still running."""
STATUS_INTERRUPTED: Final = "interrupted"
"""The store has no trace of a journaled replay and its process is gone (killed, or its spans were lost)."""


def _json_object(raw: str | None) -> dict[str, int]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


@dataclass(frozen=True, kw_only=True)
class AuditEntry:
    """One replay as the audit lists it."""

    at: _dt.datetime
    actor: str
    reason: str | None
    mode: str
    from_step: int | None
    approvals: tuple[str, ...]
    original_trace_id: str
    replay_trace_id: str
    outcome: str
    diverged: bool
    os_user: str = ""
    """The operating-system user that ran the replay (``--actor`` is recorded beside it, never instead)."""
    status: str = STATUS_RECORDED
    """``recorded``, ``started`` or ``interrupted`` (see the module docstring)."""
    mac_valid: bool = False
    """True when the row's keyed MAC verifies with this installation's key; False when missing or wrong."""
    executions: dict[str, int] = field(default_factory=dict)
    """Real executions per approved tool."""
    run_id: str = ""
    """The replay's run id."""

    @classmethod
    def from_root(cls, root: SpanRecord, *, redactor: Any = None) -> AuditEntry:
        """The entry of a replay's root span."""
        attrs = root.span_attributes
        raw_approvals = attrs.get(semconv.REPLAY_APPROVALS, "")
        try:
            approvals = tuple(str(a) for a in json.loads(raw_approvals)) if raw_approvals else ()
        except (ValueError, TypeError):
            approvals = (raw_approvals,)
        from_step = attrs.get(semconv.REPLAY_FROM_STEP)
        try:
            valid = _journal.mac_valid(
                _journal.root_fields_of(attrs, root.trace_id), attrs.get(semconv.REPLAY_AUDIT_MAC), redactor=redactor
            )
        except Exception:  # noqa: BLE001 - a row that cannot be checked is a row that does not verify
            valid = False
        return cls(
            at=_dt.datetime.fromtimestamp(root.timestamp_ns / 1e9, tz=_dt.timezone.utc),
            actor=attrs.get(semconv.REPLAY_ACTOR, ""),
            reason=attrs.get(semconv.REPLAY_REASON) or None,
            mode=attrs.get(semconv.REPLAY_MODE, ""),
            from_step=int(from_step) if from_step and from_step.isdigit() else None,
            approvals=approvals,
            original_trace_id=attrs.get(semconv.REPLAY_OF_TRACE_ID, ""),
            replay_trace_id=root.trace_id,
            outcome=attrs.get(semconv.REPLAY_OUTCOME, "unknown"),
            diverged=attrs.get(semconv.REPLAY_DIVERGED) == "true",
            os_user=attrs.get(semconv.REPLAY_OS_USER, ""),
            status=STATUS_RECORDED,
            mac_valid=valid,
            executions=_json_object(attrs.get(semconv.REPLAY_EXECUTIONS)),
            run_id=attrs.get(semconv.RUN_ID, ""),
        )

    @classmethod
    def from_journal(
        cls, start: Mapping[str, Any], end: Mapping[str, Any] | None, *, alive: bool, redactor: Any = None
    ) -> AuditEntry:
        """The entry of a replay known only from the journal (its ``started`` and, if any, ``finished`` record)."""
        try:
            at = _dt.datetime.fromisoformat(str(start.get("at")))
        except ValueError:
            at = _dt.datetime.fromtimestamp(0, tz=_dt.timezone.utc)
        if at.tzinfo is None:
            at = at.replace(tzinfo=_dt.timezone.utc)
        from_step = start.get("from_step")
        approvals = start.get("approvals")
        outcome = str(end.get("outcome") or "unknown") if end is not None else "unknown"
        executions = end.get("executions") if end is not None else None
        valid = _journal.record_valid(start, redactor=redactor) and (
            end is None or _journal.record_valid(end, redactor=redactor)
        )
        return cls(
            at=at,
            actor=str(start.get("actor") or ""),
            reason=str(start["reason"]) if start.get("reason") else None,
            mode=str(start.get("mode") or ""),
            from_step=from_step if isinstance(from_step, int) and not isinstance(from_step, bool) else None,
            approvals=tuple(str(a) for a in approvals) if isinstance(approvals, list) else (),
            original_trace_id=str(start.get("original_trace_id") or ""),
            replay_trace_id=str((end or {}).get("replay_trace_id") or ""),
            outcome=outcome,
            diverged=outcome == "diverged",
            os_user=str(start.get("os_user") or ""),
            status=STATUS_STARTED if end is None and alive else STATUS_INTERRUPTED,
            mac_valid=valid,
            executions=_json_object(json.dumps(executions)) if isinstance(executions, dict) else {},
            run_id=str(start.get("run_id") or ""),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (items of ``otel-replay audit --json``)."""
        return {
            "at": self.at.isoformat(timespec="microseconds"),
            "actor": self.actor,
            "reason": self.reason,
            "mode": self.mode,
            "from_step": self.from_step,
            "approvals": list(self.approvals),
            "original_trace_id": self.original_trace_id,
            "replay_trace_id": self.replay_trace_id,
            "outcome": self.outcome,
            "diverged": self.diverged,
            "os_user": self.os_user,
            "status": self.status,
            "mac_valid": self.mac_valid,
            "executions": dict(self.executions),
            "run_id": self.run_id,
        }


def audit(*, store: Any = None, limit: int = 1000, home: str | Path | None = None) -> list[AuditEntry]:
    """Every replay, newest first: the store's replay root spans, and the journal's replays whose trace never
    reached the store (status ``started`` / ``interrupted``). ``home`` is the otel-replay home whose journal is
    read (default: the configured one)."""
    from ...exporting import setup
    from ...storage.store import open_given

    redactor = setup.runtime().redactor
    opened, close_store = open_given(store)
    try:
        entries = [
            AuditEntry.from_root(root, redactor=redactor)
            for root in opened.run_rows(kind=semconv.RunKind.REPLAY.value, limit=limit)
        ]
        # Only a verified store row stands for a journaled replay: a forged or edited one cannot hide it.
        entries += _journal_only(opened, {e.run_id for e in entries if e.run_id and e.mac_valid}, home, redactor)
    finally:
        if close_store:
            opened.close()
    entries.sort(key=lambda e: e.at, reverse=True)
    return entries[:limit]


def _journal_only(store: Any, listed: set[str], home: str | Path | None, redactor: Any) -> list[AuditEntry]:
    """Entries of journaled replays the store does not hold."""
    starts: dict[str, Mapping[str, Any]] = {}
    ends: dict[str, Mapping[str, Any]] = {}
    for record in _journal.read(home):
        kind = record.get("record")
        if kind == "started":
            starts.setdefault(record["run_id"], record)
        elif kind == "finished":
            ends.setdefault(record["run_id"], record)
    pending = {run_id: start for run_id, start in starts.items() if run_id not in listed}
    entries: list[AuditEntry] = []
    for run_id, start in pending.items():
        end = ends.get(run_id)
        # A finished replay whose verified root is in the store, older than the rows read above, is not
        # journal-only; any other span of its trace (a lone child, a root with another run id) does not count.
        if (
            end is not None
            and end.get("replay_trace_id")
            and _stored_root_verifies(store, str(end["replay_trace_id"]), run_id, redactor)
        ):
            continue
        entries.append(
            AuditEntry.from_journal(start, end, alive=end is None and _journal.process_alive(start), redactor=redactor)
        )
    return entries


def _stored_root_verifies(store: Any, trace_id: str, run_id: str, redactor: Any) -> bool:
    """True when the store holds the root span of replay ``run_id`` in ``trace_id`` and its MAC verifies."""
    try:
        spans = store.load_spans(trace_id)
    except Exception:  # noqa: BLE001 - unreadable: the journal's entry is listed
        return False
    return any(
        not span.parent_span_id
        and span.span_attributes.get(semconv.RUN_ID) == run_id
        and AuditEntry.from_root(span, redactor=redactor).mac_valid
        for span in spans
    )
