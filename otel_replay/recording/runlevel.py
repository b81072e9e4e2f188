"""Run-level functions of the recording API: what an agent records besides its calls.

``record_state`` / ``record_context`` (snapshots on the current step or run), ``record_approval``,
``record_safety``, ``attach_file`` (input files, text redacted, binaries kept only without a readable secret),
``identity`` (tenant, role, session for the runs of a block) and the drawn values ``now`` / ``new_uuid`` /
``random`` (recorded, and handed back by a replay). A recording call made outside a run records nothing and
says so once per process and call (:class:`OutsideRunWarning`).

It must never raise into the agent (not even through a warning filter set to ``error``), record anything outside
a run, or keep a file's bytes that show a secret.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import json
import mimetypes
import os
import random as _random
import re
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, TypeVar

from opentelemetry import trace

from .. import semconv
from ..runtime import Runtime
from ..semconv import SnapshotKind, StepKind
from ..snapshots import RawJSON, canonical_json, to_jsonable
from .arguments import first_attr
from .encoding import emit_snapshot, encode_value, safe_str, scrub, set_attrs
from .state import Run, current_replay, current_step, guard, identity_var, log, log_failure, run_now

T = TypeVar("T")


class OutsideRunWarning(RuntimeWarning):
    """A recording call (``record_state``, ``record_context``, ``record_approval``, ``record_safety``,
    ``attach_file``) was made outside a run, so it recorded nothing. Shown once per process and call."""


_warned_outside: set[str] = set()
_warned_lock = threading.Lock()


def _warn_outside_run(call: str, stacklevel: int) -> None:
    """Warn, the first time in this process only, that ``otel_replay.<call>()`` recorded nothing because no run
    is current; ``stacklevel`` points the warning at the caller's line. Never raises: a host that turns
    warnings into errors gets none from here."""
    if call in _warned_outside:
        return
    with _warned_lock:
        if call in _warned_outside:
            return
        _warned_outside.add(call)
    try:
        warnings.warn(
            f"otel_replay.{call}() was called outside a run and recorded nothing; call it inside a function "
            f'decorated with @otel_replay.agent or a `with otel_replay.agent("name"):` block '
            "(this warning is shown once)",
            OutsideRunWarning,
            stacklevel=stacklevel + 1,
        )
    except Exception:  # noqa: BLE001 - a warning filter set to "error": the telemetry path never raises
        log.warning("otel-replay: %s called outside a run; nothing recorded", call)


def target_span() -> tuple[Run, trace.Span] | None:
    run = run_now()
    if run is None:
        return None
    step = current_step.get()
    return run, (step.span if step is not None else run.span)


def _snapshot_here(call: str, kind: SnapshotKind, fields: dict[str, Any]) -> None:
    """A snapshot of ``fields`` on the current step, or on the run outside steps; outside a run nothing, and
    ``call`` (the public function) warned about once."""
    with guard(f"{kind.value} snapshot"):
        target = target_span()
        if target is None:
            _warn_outside_run(call, stacklevel=3)
            return
        run, span = target
        _, text, n = encode_value(run.rt, fields, kind.value)
        emit_snapshot(run, span, kind, RawJSON(text), n)


def record_state(
    task_state: Any, *, step_state: Any = None, transition: Any = None, retry_count: int | None = None, **extra: Any
) -> None:
    """Record the agent's state (a state snapshot on the current step, or on the run outside steps).

    Outside a run this records nothing (an :class:`OutsideRunWarning` says so, once). Never raises.
    """
    _snapshot_here(
        "record_state",
        SnapshotKind.STATE,
        {
            "task_state": task_state,
            "step_state": step_state,
            "transition": transition,
            "retry_count": retry_count,
            "extra": extra,
        },
    )


def record_context(
    *,
    system_rules: Any = None,
    rag_context: Any = None,
    memory: Any = None,
    history: Any = None,
    tool_results: Any = None,
) -> None:
    """Record what the model is shown besides the request (a context snapshot on the current step or run).

    Outside a run this records nothing (an :class:`OutsideRunWarning` says so, once). Never raises.
    """
    _snapshot_here(
        "record_context",
        SnapshotKind.CONTEXT,
        {
            "system_rules": system_rules,
            "rag_context": rag_context,
            "memory": memory,
            "history": history,
            "tool_results": tool_results,
        },
    )


def record_approval(approval_id: str, *, status: str, approver: str | None = None, tool: str | None = None) -> None:
    """Record a human-in-the-loop decision: an ``otel_replay.approval`` event on the current span.

    Called inside a tool step, it applies to that call; called before a tool runs, it applies to the next
    call of ``tool`` in this run. An approval recorded in a run never authorises a replay of it. Outside a run
    this records nothing (an :class:`OutsideRunWarning` says so, once).
    """
    with guard("approval"):
        target = target_span()
        if target is None:
            _warn_outside_run("record_approval", stacklevel=2)
            return
        run, span = target
        status_value = str(status)
        approval_id = scrub(run.rt, str(approval_id), "approval.id")
        step = current_step.get()
        attrs = {
            semconv.APPROVAL_ID: approval_id,
            semconv.APPROVAL_STATUS: status_value,
            semconv.APPROVAL_APPROVER: scrub(run.rt, str(approver), "approval.approver") if approver else None,
            semconv.GEN_AI_TOOL_NAME: tool or (step.name if step is not None and step.kind is StepKind.TOOL else None),
        }
        span.add_event(semconv.EVENT_APPROVAL, {k: v for k, v in attrs.items() if v is not None})
        if step is not None and step.kind is StepKind.TOOL and (tool is None or tool == step.name):
            set_attrs(step.span, {semconv.APPROVAL_ID: approval_id, semconv.APPROVAL_STATUS: status_value})
        elif tool:
            with run.lock:
                run.pending_approvals[tool] = (approval_id, status_value)


def record_safety(result: Any) -> None:
    """Record a guardrail / safety verdict: an ``otel_replay.safety`` event; the last one also lands in the
    run's output snapshot. ``result`` may be a bool, a string verdict, or a dict/object with ``verdict``."""
    with guard("safety"):
        target = target_span()
        if target is None:
            _warn_outside_run("record_safety", stacklevel=2)
            return
        run, span = target
        tree, text, _ = encode_value(run.rt, result, "safety")
        tree = json.loads(text)  # detached from the caller's object
        verdict = first_attr(tree, "verdict", "decision", "status") if isinstance(tree, dict) else tree
        if isinstance(verdict, bool):
            verdict = "pass" if verdict else "block"
        elif verdict is None:
            verdict = "unknown"
        attrs: dict[str, Any] = {semconv.SAFETY_VERDICT: safe_str(verdict), semconv.SAFETY_PAYLOAD: text}
        span.add_event(semconv.EVENT_SAFETY, attrs)
        with run.lock:
            run.safety.append(tree)


def attach_file(
    path_or_bytes: str | os.PathLike[str] | bytes,
    *,
    name: str | None = None,
    media_type: str | None = None,
    store_binary: bool = False,
) -> None:
    """Add a file the run was given as input to the run's input snapshot: name, media type, size and keyed
    hash (``sha256``: the redactor's HMAC of the bytes), and the content itself when it is at most
    ``OTEL_REPLAY_ATTACHMENT_MAX_BYTES``.

    Content that decodes as text (UTF-8, or UTF-16 with a byte-order mark) is kept as ``content_text``,
    redacted like any other text. Binary content is not kept unless ``store_binary=True``; then it is kept as
    ``content_base64`` only when no secret shows in its readable runs (a binary file holding a secret is
    reduced to hash, size and media type). Outside a run this records nothing (an :class:`OutsideRunWarning` says
    so, once). Never raises.
    """
    with guard("attachment"):
        run = run_now()
        if run is None:
            _warn_outside_run("attach_file", stacklevel=2)
            return
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
        else:
            path = Path(path_or_bytes)
            data = path.read_bytes()
            name = name or path.name
        if media_type is None and name:
            media_type = mimetypes.guess_type(name)[0]
        rt = run.rt
        cap = rt.limits.attachment_max_bytes
        ref: dict[str, Any] = {
            "name": scrub(rt, name, "input.files.name") if name else None,
            "media_type": scrub(rt, str(media_type), "input.files.media_type") if media_type else None,
            "size": len(data),
            "sha256": rt.redactor.content_hash(data),
            "content_text": None,
            "content_base64": None,
        }
        if len(data) <= cap:
            text = _attachment_text(data)
            if text is not None and data.startswith((b"\xff\xfe", b"\xfe\xff")) and _raw_runs_hold_secret(rt, data):
                text = None  # ASCII behind a byte-order mark is not UTF-16 text: a secret there is kept in neither form
            if text is not None:
                ref["content_text"] = scrub(rt, text, "input.files.content")
            elif store_binary and not _binary_holds_secret(rt, data):
                ref["content_base64"] = base64.b64encode(data).decode("ascii")
        with run.lock:
            run.files.append(ref)


_READABLE_RUN: Final = re.compile(rb"[\x09\x0a\x0d\x20-\x7e]{6,}")


def _attachment_text(data: bytes) -> str | None:
    """The text of an attachment that is text (UTF-8 without NUL, or UTF-16 with a byte-order mark), else None."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _binary_holds_secret(rt: Runtime, data: bytes) -> bool:
    """Whether the readable runs of binary ``data`` (ASCII, and UTF-16LE text as Office files store it) show a
    secret to the redactor (the rule every non-UTF-8 bytes value of a payload is judged by)."""
    return rt.redactor.binary_secret(data) is not None


def _raw_runs_hold_secret(rt: Runtime, data: bytes) -> bool:
    """Whether the ASCII runs of ``data`` as it is (not UTF-16 text) show a secret to the redactor."""
    runs = [m.group(0).decode("ascii") for m in _READABLE_RUN.finditer(data)]
    return any(rt.redactor.scrub_text(r, "input.files.content")[1] for r in runs)


@contextlib.contextmanager
def identity(*, tenant: str | None = None, role: str | None = None, session: str | None = None) -> Iterator[None]:
    """Tenant, role and session for the runs started inside this block (nested blocks override per key)."""
    merged = dict(identity_var.get())
    merged.update({k: str(v) for k, v in (("tenant", tenant), ("role", role), ("session", session)) if v is not None})
    token = identity_var.set(merged)
    try:
        yield
    finally:
        identity_var.reset(token)


def _drawn(kind: str, fresh: Callable[[], T]) -> T:
    """A non-deterministic value: from the recording during a replay that can answer it, else fresh and
    recorded as an ``otel_replay.value`` event on the current span."""
    session = current_replay.get()
    if session is not None:
        recorded = session.next_value(kind)
        if recorded is not None:
            replayed: T = recorded[0]  # the session revives the recorded value as the kind it was drawn as
            return replayed
    value = fresh()
    try:
        target = target_span()
        if target is not None:
            run, span = target
            span.add_event(
                semconv.EVENT_VALUE,
                {
                    semconv.VALUE_KIND: kind,
                    semconv.VALUE_PAYLOAD: canonical_json(to_jsonable(value)),
                    semconv.SNAPSHOT_SEQ: next(run.snapshot_seq),
                },
            )
    except Exception:  # noqa: BLE001
        log_failure("value")
    return value


def now() -> _dt.datetime:
    """The current time (UTC, timezone-aware); a replay hands back the time the original run saw."""
    return _drawn("time", lambda: _dt.datetime.now(_dt.timezone.utc))


def new_uuid() -> uuid.UUID:
    """A random UUID4; a replay hands back the one the original run drew."""
    return _drawn("uuid", uuid.uuid4)


def random() -> float:
    """A random float in [0, 1); a replay hands back the one the original run drew."""
    return _drawn("random", _random.random)
