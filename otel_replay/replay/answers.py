"""A call answered without running it: from its recorded step (the value, or the recorded exception revived),
or by a mock the person replaying gave.

It must never guess an answer the recording does not hold: a step recorded without its content, with a
truncated or damaged snapshot, or with no readable snapshot stops the replay (:class:`DivergenceStop`)
after reporting an ``unanswerable`` divergence. Nothing is restored from a redacted value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from .. import semconv
from ..recording import DivergenceStop, Served
from ..runs import Step
from .reviving import revive, revive_exception

_ANSWER_FIELD: Final = {"tool": "result", "model": "response", "retrieval": "returned"}
"""Snapshot kind → the field holding what the call returned."""


def captured(payload: Mapping[str, Any]) -> bool:
    """False when a snapshot says its content was not captured (runs read from other instrumentations)."""
    get = payload.get
    return (
        get("content_captured") is not False
        and get("response_captured") is not False
        and get("result_captured") is not False
    )


def recorded_answer(recorded: Step, diverge: Callable[..., None]) -> Served:
    """What step ``recorded`` returned (or raised), as the call's answer; ``diverge(index, kind, reason)``
    reports why the recording cannot answer before the replay stops."""
    snapshot_kind = semconv.STEP_SNAPSHOT.get(recorded.kind, "")
    field = _ANSWER_FIELD.get(snapshot_kind, "")
    # One pass over the step's snapshots (asked at every answered call): the payload is the last one of its kind,
    # as ``Step.snapshots`` reads it, and every damaged one of that kind is kept.
    payload: Any = None
    damaged = []
    for snapshot in recorded.snapshot_list:
        if snapshot.kind == snapshot_kind:
            payload = snapshot.payload
            if snapshot.truncated or not snapshot.intact:
                damaged.append(snapshot)
    if isinstance(payload, dict) and not captured(payload):
        reason = (
            f"step {recorded.index} was recorded by another instrumentation without its content: the "
            "recording cannot answer this call"
        )
        diverge(recorded.index, "unanswerable", reason)
        raise DivergenceStop(f"replay stopped: {reason} (pass a mock for it, or replay live)")
    if damaged:
        reason = (
            f"step {recorded.index}'s {snapshot_kind} snapshot was "
            f"{'truncated at the size cap' if damaged[0].truncated else 'damaged'}: the recording cannot "
            "answer this call"
        )
        diverge(recorded.index, "unanswerable", reason)
        raise DivergenceStop(
            f"replay stopped: {reason} (raise OTEL_REPLAY_SNAPSHOT_MAX_BYTES when recording, or pass a mock for it)"
        )
    if recorded.status == "error" or not isinstance(payload, dict):
        if recorded.status != "error":
            raise DivergenceStop(
                f"replay stopped: step {recorded.index} has no readable {snapshot_kind} snapshot to answer from"
            )
        error = recorded.error or (payload or {}).get("error")
        return Served(how="recording", error=revive_exception(error))
    return Served(how="recording", value=revive(payload.get(field)))


def mock_answer(mock: Any, arguments: str | None) -> Served:
    """A mock's answer: a callable is called with the call's arguments (its exception is the call's), any
    other value is returned as it is."""
    if callable(mock):
        args = revive(json.loads(arguments)) if arguments else {}
        try:
            return Served(how="mock", value=mock(**args) if isinstance(args, dict) else mock(args))
        except Exception as exc:  # noqa: BLE001 - the mock's exception is the call's exception
            return Served(how="mock", error=exc)
    return Served(how="mock", value=mock)


def callable_mocks(mocks: Mapping[str, Callable[..., Any] | Any] | None) -> dict[str, Any]:
    """Validate ``mocks=``: a mapping of step name to a value or a callable taking the call's arguments."""
    if mocks is None:
        return {}
    if not isinstance(mocks, Mapping):
        raise TypeError("mocks must be a mapping of step name to a value or a callable")
    return dict(mocks)
