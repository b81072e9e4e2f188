"""The recording API: runs, steps and snapshots as OpenTelemetry spans and events.

A run is one trace whose root span is ``invoke_agent {name}``; each model, tool, retrieval or nested agent
call inside it is a step span; what the run saw and did is carried by ``otel_replay.snapshot.<kind>`` events
(see ``docs/semconv.md``). Run and step state live in context variables, so nested agents, threads and
concurrent asyncio tasks each build their own, separate tree.

Two rules shape every function here:

* Recording never raises into the agent. Every piece of bookkeeping runs behind a guard that logs and
  carries on; only the agent's own exceptions propagate, unchanged.
* No value becomes an attribute before redaction. Every payload goes through :func:`to_jsonable`, then the
  redactor, then canonical JSON; hashes are taken of the redacted form, so equal secrets hash equal (the
  redactor's keyed fingerprint) and no secret is ever recoverable from a hash or payload. Every hash of
  content is the redactor's keyed :meth:`~otel_replay.redaction.Redactor.content_hash` (HMAC with the
  installation key), never a plain sha256 that would confirm a guessed PIN or password without the key.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import functools
import inspect
import itertools
import json
import logging
import mimetypes
import os
import random as _random
import re
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, ParamSpec, TypeVar, cast, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from . import semconv
from .markers import marker_paths
from .risk import _DEFAULT_RISK, effective_risk
from .runtime import Runtime
from .runtime import get as runtime
from .semconv import SnapshotKind, StepKind
from .snapshots import (
    RawJSON,
    canonical_json,
    compose_json,
    ordered_json,
    payload_events,
    qualname_of,
    to_jsonable,
)

_log = logging.getLogger("otel_replay")

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_INPUT_PARAM_NAMES: Final = ("input", "query", "question", "message", "prompt", "task", "request", "text")
_RISKS: Final = frozenset(r.value for r in semconv.Risk)


# ------------------------------------------------------------------------------------------- run state


@dataclass(eq=False)
class _Run:
    """Bookkeeping of one run (one trace), shared by every step of it across threads and tasks."""

    run_id: str
    agent: str
    entrypoint: str
    span: trace.Span
    rt: Runtime
    start_ns: int
    config: dict[str, Any] | None = None
    input_payload: dict[str, Any] = field(default_factory=dict)
    input_redactions: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)
    safety: list[Any] = field(default_factory=list)
    pending_approvals: dict[str, tuple[str, str]] = field(default_factory=dict)
    last_child: dict[int, tuple[str, str, bool, int]] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    input_seq: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    step_counter: Iterator[int] = field(default_factory=itertools.count)
    snapshot_seq: Iterator[int] = field(default_factory=itertools.count)


@dataclass(eq=False)
class _Step:
    """A step in progress: which span it is and what kind."""

    run: _Run
    span: trace.Span
    kind: StepKind
    name: str
    index: int
    attempt: int
    attrs: dict[str, Any] = field(default_factory=dict)
    """The attributes the step started with (readable even when its span is not recording)."""


_current_run: ContextVar[_Run | None] = ContextVar("otel_replay_run", default=None)
_current_step: ContextVar[_Step | None] = ContextVar("otel_replay_step", default=None)
_identity: ContextVar[Mapping[str, str]] = ContextVar("otel_replay_identity", default=MappingProxyType({}))


# ----------------------------------------------------------------------------------------------- guards


def _log_failure(what: str) -> None:
    _log.warning("otel-replay: recording %s failed; the run continues unrecorded there", what, exc_info=True)


@contextlib.contextmanager
def _guard(what: str) -> Iterator[None]:
    """Log and swallow any failure of recording bookkeeping: the agent must never see it.

    (Hot paths spell the same try/except out: a generator-based context manager costs microseconds.)
    """
    try:
        yield
    except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
        _log_failure(what)


_OK = Status(StatusCode.OK)
_EVENT_NAMES: Final = {kind: semconv.snapshot_event_name(kind) for kind in SnapshotKind}


def _encode(rt: Runtime, value: Any, scope: str, *, ordered: bool = False) -> tuple[Any, str, int]:
    """Encode and redact one value: the only way a value reaches a payload or hash.

    Returns the redacted tree, its JSON text (canonical, or in the value's own key order with ``ordered``,
    for values a replay hands back) and the number of redactions. The tree may share structure with
    ``value`` when it is plain JSON without secrets: use the text for anything kept.
    """
    dump = ordered_json if ordered else canonical_json
    if rt.redactor.is_clean_json(value):  # plain JSON and clean, in one walk: the common case
        return value, dump(value), 0
    tree = to_jsonable(value)
    if rt.redactor.is_clean(tree):
        return tree, dump(tree), 0
    tree, n = rt.redactor.redact(tree, scope)
    return tree, dump(tree), n


def _redacted(rt: Runtime, value: Any, scope: str) -> tuple[Any, int]:
    """:func:`_encode` without the JSON text, for callers that only keep the redacted tree (to encode it as part
    of a larger value): the same encoding and redaction, one dump less."""
    if rt.redactor.is_clean_json(value):
        return value, 0
    tree = to_jsonable(value)
    if rt.redactor.is_clean(tree):
        return tree, 0
    tree, n = rt.redactor.redact(tree, scope)
    return tree, n


def _emit_snapshot(
    run: _Run,
    span: trace.Span,
    kind: SnapshotKind,
    payload: dict[str, Any] | RawJSON,
    redactions: int,
    *,
    timestamp: int | None = None,
    seq: int | None = None,
) -> str:
    """Add one snapshot (one event, or one per chunk) to ``span``; returns the payload's sha256.

    ``payload`` is an object whose values are plain JSON or :class:`RawJSON`, or a whole payload as RawJSON.
    """
    if not isinstance(payload, RawJSON):
        payload, n = _scrubbed_fields(run.rt, payload, kind.value)
        redactions += n
    text = payload.text if isinstance(payload, RawJSON) else compose_json(payload)
    if seq is None:
        seq = next(run.snapshot_seq)
    name = _EVENT_NAMES[kind]
    events = payload_events(
        text, limits=run.rt.limits, redactions=redactions, content_hash=run.rt.redactor.content_hash
    )
    for attrs in events:
        attrs[semconv.SNAPSHOT_SEQ] = seq
        span.add_event(name, attrs, timestamp=timestamp)
    sha256: str = events[0][semconv.SNAPSHOT_SHA256]
    return sha256


def _scrubbed_fields(rt: Runtime, fields: dict[str, Any], scope: str) -> tuple[dict[str, Any], int]:
    """The fields of a composed payload that were not encoded through :func:`_encode` (names, identity,
    statuses, error and usage objects) redacted: strings inline (they stay strings), containers as trees.
    Returns ``fields`` itself when nothing changed."""
    rest = {}
    for key, value in fields.items():
        kind = type(value)
        if kind is RawJSON or value is None or kind is int or kind is float or kind is bool:
            continue
        if kind is str and rt.redactor.is_digest(value):
            continue
        rest[key] = value
    if rt.redactor.is_clean(rest):
        return fields, 0  # one pre-check over the strings and keys not known clean yet
    out: dict[str, Any] | None = None
    total = 0
    for key, value in fields.items():
        kind = type(value)
        if kind is RawJSON or value is None or kind is int or kind is float or kind is bool:
            continue
        if kind is str:
            new, n = rt.redactor.scrub_text(value, f"{scope}.{key}")
        else:
            new, n = rt.redactor.redact(value, f"{scope}.{key}")
        if n:
            if out is None:
                out = dict(fields)
            out[key] = new
            total += n
    return (out if out is not None else fields), total


def _scrub(rt: Runtime, text: str, scope: str) -> str:
    return rt.redactor.scrub_text(text, scope)[0]


def _identity_of(rt: Runtime) -> dict[str, str]:
    """The identity in force (tenant, role, session), redacted: it becomes span attributes and input fields."""
    ident = _identity.get()
    if not ident:
        return {}
    return {k: _scrub(rt, v, f"identity.{k}") for k, v in ident.items()}


def _record_exception(rt: Runtime, span: trace.Span, exc: BaseException, scope: str) -> dict[str, str]:
    """Exception event with a redacted message and stack trace; error status on the span."""
    message = _scrub(rt, _safe_str(exc), f"{scope}.message")
    stack = _scrub(rt, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), f"{scope}.stacktrace")
    type_name = qualname_of(type(exc)).replace(":", ".").removeprefix("builtins.")
    span.add_event(
        semconv.EXCEPTION_EVENT,
        {
            semconv.EXCEPTION_TYPE: type_name,
            semconv.EXCEPTION_MESSAGE: message,
            semconv.EXCEPTION_STACKTRACE: stack,
        },
    )
    span.set_attribute(semconv.ERROR_TYPE, type_name)
    span.set_status(Status(StatusCode.ERROR, f"{type_name}: {message}"[:500]))
    return {"type": type_name, "message": message}


def _scalar_text(value: Any) -> str | None:
    """A scalar as attribute text; None for anything else (dicts, lists) so no Python repr is stored."""
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def _safe_str(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001
        return f"<unprintable {type(value).__qualname__}>"


# --------------------------------------------------------------------------------------------- helpers


def _signature(func: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


class _ArgNames:
    """Names a call's arguments by parameter; precomputed per decorated function (this is on the hot path)."""

    __slots__ = ("names", "sig", "simple")

    def __init__(self, func: Callable[..., Any]) -> None:
        self.sig = _signature(func)
        params = list(self.sig.parameters.values()) if self.sig is not None else []
        self.simple = self.sig is not None and all(
            p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) for p in params
        )
        self.names = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.simple and len(args) <= len(self.names):
            named = dict(zip(self.names, args, strict=False))
            if kwargs:
                named.update(kwargs)
            if self.names and self.names[0] in ("self", "cls"):
                named.pop(self.names[0], None)
            return named
        return _named_arguments(self.sig, args, kwargs)


def _named_arguments(sig: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Parameter name → value for a call (``args[i]`` / ``kwargs`` spill-over when binding fails)."""
    if sig is not None:
        try:
            bound = sig.bind_partial(*args, **kwargs)
        except TypeError:
            pass
        else:
            named: dict[str, Any] = {}
            for name, value in bound.arguments.items():
                param = sig.parameters[name]
                if param.kind is inspect.Parameter.VAR_POSITIONAL:
                    for i, item in enumerate(value):
                        named[f"{name}[{i}]"] = item
                elif param.kind is inspect.Parameter.VAR_KEYWORD:
                    named.update(value)
                else:
                    named[name] = value
            named.pop("self", None)
            named.pop("cls", None)
            return named
    named = {f"args[{i}]": a for i, a in enumerate(args)}
    named.update(kwargs)
    return named


def _positional_names(sig: inspect.Signature | None, count: int) -> list[str]:
    names: list[str] = []
    if sig is not None:
        for param in sig.parameters.values():
            if param.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
                names.append(param.name)
            elif param.kind is inspect.Parameter.VAR_POSITIONAL:
                names.extend(f"{param.name}[{i}]" for i in range(count - len(names)))
                break
    names.extend(f"args[{i}]" for i in range(len(names), count))
    return names[:count]


def _get(obj: Any, *names: str) -> Any:
    """First present attribute or key among ``names`` (dicts and objects alike), else None."""
    for name in names:
        if isinstance(obj, dict):
            if name in obj and obj[name] is not None:
                return obj[name]
        else:
            value = getattr(obj, name, None)
            if value is not None and not callable(value):
                return value
    return None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _entrypoint_of(func: Callable[..., Any]) -> tuple[str, str | None]:
    """``module:qualname`` of a function, plus the script path when it was defined in ``__main__``."""
    module = getattr(func, "__module__", None) or "?"
    script = None
    if module == "__main__":
        main = sys.modules.get("__main__")
        script = getattr(main, "__file__", None)
        if script:
            script = os.path.abspath(script)
    return f"{module}:{getattr(func, '__qualname__', getattr(func, '__name__', '?'))}", script


def _set_attrs(span: trace.Span, attrs: dict[str, Any]) -> None:
    span.set_attributes({k: v for k, v in attrs.items() if v is not None})


# ------------------------------------------------------------------------------------------------ runs


@dataclass(frozen=True)
class _AgentMeta:
    name: str
    config: Any
    sig: inspect.Signature | None
    entrypoint: str
    script: str | None


def _start_run(
    meta: _AgentMeta, args: tuple[Any, ...], kwargs: dict[str, Any], given: Runtime | None = None
) -> tuple[Any, ...] | None:
    """Open the root span of a run (or a nested agent step); None if recording is unavailable. ``given``:
    the runtime of an instrumentor given ``tracer_provider=`` (see :func:`_start_step`)."""
    parent_run = _current_run.get()
    if parent_run is not None:
        step = _start_step(
            StepKind.AGENT,
            meta.name,
            f"{semconv.SPAN_AGENT} {meta.name}",
            SpanKind.INTERNAL,
            {
                semconv.GEN_AI_OPERATION_NAME: semconv.SPAN_AGENT,
                semconv.GEN_AI_AGENT_NAME: meta.name,
            },
            given,
        )
        if step is None:
            return None
        with _guard("nested agent input"):
            fields, n = _input_fields(step.run.rt, meta, args, kwargs, _identity_of(step.run.rt))
            _emit_snapshot(step.run, step.span, SnapshotKind.INPUT, fields, n)
        return ("step", step, _current_step.set(step), otel_context.attach(trace.set_span_in_context(step.span)))

    rt = runtime() if given is None or _replay_session.get() is not None else given
    ident = _identity_of(rt)
    ambient = trace.get_current_span().get_span_context()
    links = [Link(ambient)] if ambient.is_valid else []
    session = _replay_session.get()
    if session is not None:
        links.extend(session.root_links())
    start_ns = time.time_ns()
    # A replay draws its root's run id before it starts, so its audit journal record names this run.
    run_id = (session.take_run_id() if session is not None else None) or str(uuid.uuid4())
    # A run is one trace: start from an empty context so an ambient span (a web request, say) does not
    # swallow it; the ambient span is linked instead.
    attrs = {
        semconv.RUN_ID: run_id,
        semconv.SCHEMA_VERSION_ATTR: semconv.SCHEMA_VERSION,
        semconv.RUN_KIND: semconv.RunKind.ORIGINAL.value,
        semconv.RUN_ENTRYPOINT: meta.entrypoint,
        semconv.GEN_AI_OPERATION_NAME: semconv.SPAN_AGENT,
        semconv.GEN_AI_AGENT_NAME: meta.name,
        semconv.TENANT_ID: ident.get("tenant"),
        semconv.USER_ROLE: ident.get("role"),
        semconv.SESSION_ID: ident.get("session"),
        semconv.GEN_AI_CONVERSATION_ID: ident.get("session"),
    }
    span = rt.tracer.start_span(
        f"{semconv.SPAN_AGENT} {meta.name}",
        context=otel_context.Context(),
        kind=SpanKind.INTERNAL,
        attributes={k: v for k, v in attrs.items() if v is not None},  # set at start: one attribute call less
        links=links or None,
        start_time=start_ns,
    )
    run = _Run(run_id=run_id, agent=meta.name, entrypoint=meta.entrypoint, span=span, rt=rt, start_ns=start_ns)
    run.input_seq = next(run.snapshot_seq)  # the input snapshot is written last but ordered first
    with _guard("run start"):
        if session is not None:
            _set_attrs(span, session.root_attributes())
            session.run_started(run_id=run_id, span=span)
        _record_config(run, meta.config)
        # Encoded now (the agent may mutate its arguments); written when the run ends, so files attached
        # during the run are part of it.
        run.input_payload, run.input_redactions = _input_fields(rt, meta, args, kwargs, ident)
    run_token = _current_run.set(run)
    step_token = _current_step.set(None)
    ctx_token = otel_context.attach(trace.set_span_in_context(span))
    return ("run", run, run_token, step_token, ctx_token)


def _pick_input(named_tree: Any) -> Any:
    if not isinstance(named_tree, dict) or not named_tree:
        return None
    if len(named_tree) == 1:
        return next(iter(named_tree.values()))
    for name in _INPUT_PARAM_NAMES:
        if name in named_tree:
            return named_tree[name]
    return None


def _record_config(run: _Run, config: Any) -> None:
    if config is None:
        return
    value = config() if callable(config) and not isinstance(config, type) else config
    tree, _, n = _encode(run.rt, value, "config")
    payload = tree if isinstance(tree, dict) and "$type" not in tree else {"value": tree}
    if isinstance(tree, dict) and tree.get("$type") in ("pydantic", "dataclass"):
        payload = dict(tree["fields"]) if isinstance(tree.get("fields"), dict) else payload
    run.config = payload
    digest = _emit_snapshot(run, run.span, SnapshotKind.CONFIG, payload, n)
    model = payload.get("model")
    prompt_version = payload.get("prompt_version")
    _set_attrs(
        run.span,
        {
            semconv.CONFIG_HASH: digest,
            semconv.CONFIG_PROMPT_VERSION: _scalar_text(prompt_version),
            semconv.GEN_AI_REQUEST_MODEL: model if isinstance(model, str) else None,
        },
    )


def _input_fields(
    rt: Runtime, meta: _AgentMeta, args: tuple[Any, ...], kwargs: dict[str, Any], ident: dict[str, str]
) -> tuple[dict[str, Any], int]:
    """Input snapshot fields of a call, serialised now, and the number of redactions."""
    redactions = 0
    positional: list[Any] = []
    for name, value in zip(_positional_names(meta.sig, len(args)), args, strict=False):
        tree, n = _redacted(rt, {name: value}, "input.args")
        positional.append(tree.get(name) if isinstance(tree, dict) else tree)
        redactions += n
    _, keyword, n = _encode(rt, kwargs, "input.kwargs", ordered=True)
    redactions += n
    named, _ = _redacted(rt, _named_arguments(meta.sig, args, kwargs), "input")
    return {
        "entrypoint": meta.entrypoint,
        "script": meta.script,
        "args": RawJSON(ordered_json(positional)),
        "kwargs": RawJSON(keyword),
        "input": RawJSON(canonical_json(_pick_input(named))),
        "session": ident.get("session"),
        "tenant": ident.get("tenant"),
        "role": ident.get("role"),
    }, redactions


def _output_payload(
    run: _Run | None, result: Any, error: dict[str, str] | None, rt: Runtime
) -> tuple[dict[str, Any], int]:
    tree, text, n = _encode(rt, result, "output")
    answer = structured = citations = None
    if isinstance(tree, str):
        answer = tree
    elif isinstance(tree, dict) and "$type" not in tree:
        structured = RawJSON(text)  # encoded and redacted once: spliced in, not scrubbed and dumped again
        answer = next(
            (tree[k] for k in ("answer", "output", "final_answer", "text", "content", "response") if k in tree), None
        )
        citations = tree.get("citations")
    elif tree is not None:
        structured = RawJSON(text)
    safety = None
    if run is not None and run.safety:
        safety = run.safety[-1] if len(run.safety) == 1 else {"verdicts": run.safety, "last": run.safety[-1]}
    return {"answer": answer, "structured": structured, "citations": citations, "safety": safety, "error": error}, n


def _end_run(handle: tuple[Any, ...] | None, *, result: Any = None, exc: BaseException | None = None) -> None:
    if handle is None:
        return
    if handle[0] == "step":
        _, step, step_token, ctx_token = handle
        with _guard("nested agent end"):
            error = _record_exception(step.run.rt, step.span, exc, "agent.exception") if exc is not None else None
            payload, n = _output_payload(None, result, error, step.run.rt)
            _emit_snapshot(step.run, step.span, SnapshotKind.OUTPUT, payload, n)
        _finish_step(step, failed=exc is not None, step_token=step_token, ctx_token=ctx_token)
        return
    _, run, run_token, step_token, ctx_token = handle
    rt = run.rt
    with _guard("run end"):
        error = _record_exception(rt, run.span, exc, "run.exception") if exc is not None else None
        payload = dict(run.input_payload)
        payload["files"] = list(run.files)
        _emit_snapshot(
            run, run.span, SnapshotKind.INPUT, payload, run.input_redactions, timestamp=run.start_ns, seq=run.input_seq
        )
        out, n = _output_payload(run, result, error, rt)
        _emit_snapshot(run, run.span, SnapshotKind.OUTPUT, out, n)
        session = _replay_session.get()
        if session is not None and session.run_id == run.run_id:
            session.close_root(span=run.span, exc=exc, output_text=compose_json(out))
        with run.lock:
            steps = next(run.step_counter)
            _set_attrs(
                run.span,
                {
                    semconv.RUN_STEP_COUNT: steps,
                    semconv.RUN_INPUT_TOKENS: run.input_tokens,
                    semconv.RUN_OUTPUT_TOKENS: run.output_tokens,
                    semconv.RUN_COST_USD: run.cost_usd,
                },
            )
        if exc is None:
            run.span.set_status(_OK)
    _detach(ctx_token)
    _reset(_current_step, step_token)
    _reset(_current_run, run_token)
    with _guard("run span end"):
        run.span.end()


def begin_run(
    name: str,
    *,
    entrypoint: str | None = None,
    arguments: Mapping[str, Any] | None = None,
    config: Any = None,
    script: str | None = None,
    runtime: Runtime | None = None,
) -> Any:
    """Begin a run (or a nested ``agent`` step inside a run) for code that drives an agent it does not own,
    e.g. an instrumentor starting a run at a framework's top-level invocation. ``arguments`` are recorded as
    the input (keyword arguments of ``entrypoint``, ``module:qualname``, when the run can be called again);
    ``script`` as the input's script (the file of the ``__main__`` module, which a replay of a tool defined
    there loads). ``runtime`` records it with that runtime instead of the current one (an instrumentor given
    ``tracer_provider=``; ignored during a replay). Returns a handle for :func:`end_run`, or None when recording
    is unavailable. Never raises."""
    try:
        meta = _AgentMeta(name=name, config=config, sig=None, entrypoint=entrypoint or "", script=script)
        return _start_run(meta, (), dict(arguments or {}), runtime)
    except Exception:  # noqa: BLE001
        _log_failure("run start")
        return None


def end_run(handle: Any, *, result: Any = None, exc: BaseException | None = None) -> None:
    """End a run begun with :func:`begin_run`, recording its output or exception. Never raises."""
    try:
        _end_run(handle, result=result, exc=exc)
    except Exception:  # noqa: BLE001
        _log_failure("run end")


def in_run() -> bool:
    """True inside a run (an instrumentor then records steps; outside, it may begin a run of its own)."""
    return _current_run.get() is not None


def _detach(token: Any) -> None:
    try:
        otel_context.detach(token)
    except Exception:  # noqa: BLE001
        _log_failure("context detach")


def _reset(var: ContextVar[Any], token: Any) -> None:
    try:
        var.reset(token)
    except ValueError:  # reset from another context (a generator finalised elsewhere): fall back to clearing
        var.set(None)


# ----------------------------------------------------------------------------------------------- steps


def _start_step(
    kind: StepKind, name: str, span_name: str, span_kind: SpanKind, attrs: dict[str, Any], given: Runtime | None = None
) -> _Step | None:
    """Open a step's span in the current run (None outside one). Its tracer is the run's, or ``given``'s (an
    instrumentor given ``tracer_provider=``: its spans go to that provider) except during a replay, whose
    steps always go where the replay reads them."""
    run = _current_run.get()
    if run is None:
        return None
    parent = _current_step.get()
    parent_span = parent.span if parent is not None else run.span
    parent_key = parent_span.get_span_context().span_id
    with run.lock:
        index = next(run.step_counter)
        previous = run.last_child.get(parent_key)
        attempt = previous[3] + 1 if previous and previous[:2] == (kind.value, name) and previous[2] else 1
    attrs = {k: v for k, v in attrs.items() if v is not None}
    attrs[semconv.STEP_INDEX] = index
    attrs[semconv.STEP_KIND] = kind.value
    attrs[semconv.STEP_NAME] = name
    attrs[semconv.STEP_ATTEMPT] = attempt
    tracer = run.rt.tracer if given is None or _replay_session.get() is not None else given.tracer
    span = tracer.start_span(
        span_name, context=trace.set_span_in_context(parent_span), kind=span_kind, attributes=attrs
    )
    return _Step(run=run, span=span, kind=kind, name=name, index=index, attempt=attempt, attrs=attrs)


def _finish_step(step: _Step, *, failed: bool, step_token: Any = None, ctx_token: Any = None) -> None:
    run = step.run
    try:
        parent = getattr(step.span, "parent", None)  # a non-recording span (sampled out) has none
        with run.lock:
            run.last_child[parent.span_id if parent is not None else 0] = (
                step.kind.value,
                step.name,
                failed,
                step.attempt,
            )
        if not failed:
            step.span.set_status(_OK)
    except Exception:  # noqa: BLE001 - never into the agent
        _log_failure("step end")
    if ctx_token is not None:
        _detach(ctx_token)
    if step_token is not None:
        _reset(_current_step, step_token)
    try:
        step.span.end()
    except Exception:  # noqa: BLE001
        _log_failure("step span end")


def _enter_step(step: _Step) -> tuple[Any, Any]:
    return _current_step.set(step), otel_context.attach(trace.set_span_in_context(step.span))


@dataclass(frozen=True, slots=True)
class Served:
    """A step answered without running its function (during a replay): a value, or an exception to raise."""

    how: str
    """``recording`` (answered from the recorded run) or ``mock`` (answered by a given mock)."""
    value: Any = None
    error: BaseException | None = None


@dataclass(eq=False, slots=True)
class _Call:
    """A step call in progress: its span, what was encoded before the call, and how it is answered."""

    step: _Step
    state: dict[str, Any]
    tokens: tuple[Any, Any]
    served: Served | None = None


class ReplayInterrupt(BaseException):
    """Stops a replayed agent at a call (approval missing, unanswerable divergence).

    A BaseException, so the agent's own ``except Exception`` blocks do not swallow it; the replay engine
    catches it and turns it into its result.
    """


class DivergenceStop(ReplayInterrupt):
    """The replay cannot go on without guessing (deterministic mismatch, or a call nothing can answer).

    Defined here, beside :class:`ReplayInterrupt`, so instrumentors raise it without importing the replay
    package; :mod:`otel_replay.replay.session` re-exports it."""


_replay_session: ContextVar[Any] = ContextVar("otel_replay_replay_session", default=None)
"""The replay answering the calls of this context: the only replay state there is (no process-wide registry).
Threads and executor work started during a replay get it with the replay's context (``replay.guard``)."""


@contextlib.contextmanager
def replaying(session: Any) -> Iterator[None]:
    """Make ``session`` answer the calls made in this context (used by the replay engine)."""
    token = _replay_session.set(session)
    try:
        yield
    finally:
        _replay_session.reset(token)


def _begin_call(step: _Step, state: dict[str, Any], key: str | None) -> _Call:
    """Enter the step and, during a replay, ask the session how the call is answered."""
    call = _Call(step=step, state=state, tokens=_enter_step(step))
    session = _replay_session.get()
    if session is not None:
        try:
            arguments = state.get("arguments")
            arguments = arguments.text if isinstance(arguments, RawJSON) else arguments
            # What the call sends, as recorded: a model's request, else its arguments (for a readable diff).
            sent = state.get("request") if step.kind is StepKind.MODEL else arguments
            markers = state.get("markers")
            call.served = session.intercept(
                step=step,
                key=key,
                arguments=arguments,
                sent=sent if isinstance(sent, str) else None,
                **({"markers": markers} if markers else {}),
            )
        except BaseException as exc:  # noqa: BLE001 - any failure to answer stops the replay
            stop = (
                exc
                if isinstance(exc, ReplayInterrupt)
                else ReplayInterrupt(
                    f"replay stopped at {step.kind.value} {step.name!r}: answering it failed "
                    f"({type(exc).__name__}: {exc}); nothing was executed"
                )
            )
            _record_exception(step.run.rt, step.span, stop, f"{step.kind.value}.replay")
            step.span.set_attribute(semconv.REPLAY_SERVED, "refused")
            _finish_step(step, failed=True, step_token=call.tokens[0], ctx_token=call.tokens[1])
            raise stop from (None if stop is exc else exc)
        step.span.set_attribute(semconv.REPLAY_SERVED, call.served.how if call.served else "executed")
    return call


def _answer_of(served: Served) -> Any:
    """The value a served call returns, or the exception it raises."""
    if served.error is not None:
        raise served.error
    return served.value


def _wrap(
    func: Callable[P, R], before: Callable[[tuple[Any, ...], dict[str, Any]], Any], after: Callable[..., None]
) -> Callable[P, R]:
    """Wrap sync or async ``func`` so ``before(args, kwargs)`` runs first and ``after(handle, result=, exc=)``
    runs last; the function's own result and exceptions pass through unchanged."""

    def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return before(args, kwargs)
        except ReplayInterrupt:
            raise
        except Exception as exc:
            if _replay_session.get() is not None:
                # During a replay a call that cannot be recorded cannot be answered either: fail closed,
                # never run the real function unchecked.
                raise ReplayInterrupt(
                    f"replay stopped at {qualname_of(func)}: recording the call failed "
                    f"({type(exc).__name__}: {exc}); nothing was executed"
                ) from exc
            _log.warning("otel-replay: could not start recording %s", qualname_of(func), exc_info=True)
            return None

    def finish(handle: Any, result: Any = None, exc: BaseException | None = None) -> None:
        try:
            after(handle, result=result, exc=exc)
        except Exception:  # noqa: BLE001
            _log.warning("otel-replay: could not finish recording %s", qualname_of(func), exc_info=True)

    if inspect.iscoroutinefunction(func):
        async_func = cast("Callable[P, Awaitable[Any]]", func)

        @functools.wraps(func)
        async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            handle = start(args, kwargs)
            served = handle.served if type(handle) is _Call else None
            try:
                result = await async_func(*args, **kwargs) if served is None else _answer_of(served)
            except BaseException as exc:
                finish(handle, exc=exc)
                raise
            finish(handle, result=result)
            return result

        # an async function wrapped by an async function with the same parameters: R is its coroutine type
        return cast("Callable[P, R]", async_wrapper)

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        handle = start(args, kwargs)
        served = handle.served if type(handle) is _Call else None
        try:
            result = func(*args, **kwargs) if served is None else _answer_of(served)
        except BaseException as exc:
            finish(handle, exc=exc)
            raise
        finish(handle, result=result)
        return result

    return wrapper


def _name_of(func: Callable[..., Any]) -> str:
    name: str = getattr(func, "__name__", "anonymous")
    return name


_MARKER: Final = "__otel_replay__"
"""The attribute a decorated function carries: what it was marked as (kind, name, and the decorator's options)."""


def _mark(wrapped: Callable[P, R], marker: dict[str, Any]) -> Callable[P, R]:
    setattr(wrapped, _MARKER, marker)
    return wrapped


def _decorator(
    name_or_func: str | Callable[..., Any] | None, build: Callable[[Callable[..., Any], str], Callable[..., Any]]
) -> Any:
    """Support ``@deco``, ``@deco()`` and ``@deco("name")``."""
    if callable(name_or_func) and not isinstance(name_or_func, str):
        func = name_or_func
        return build(func, _name_of(func))
    if name_or_func is not None and not isinstance(name_or_func, str):
        raise TypeError("the name must be a string")
    step_name: str | None = name_or_func

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        return build(func, step_name or _name_of(func))

    return decorate


# --------------------------------------------------------------------------------------- public decorators


_NO_INPUT: Final = object()


class AgentBlock:
    """What ``orp.agent("name")`` returns: a decorator, and a context manager for code with no single function
    to decorate (``with orp.agent("sql-agent", input=question) as run: ...``).

    As a ``with`` (or ``async with``) block, the block is one run (a nested ``agent`` step inside another run):
    ``input`` is recorded as the run's one positional argument, ``run.output = value`` sets the output it
    records, and an exception leaving the block ends the run with status error and propagates unchanged. A
    run recorded this way names no entrypoint: replay it with ``--app module:function``, a function that runs
    the same block and returns its output (it is called with the recorded ``input``). Never raises from its
    own bookkeeping. Make one per block (``orp.agent(...)`` in the ``with`` statement): ``output``, ``run_id``
    and ``trace_id`` belong to the object, so one object shared by concurrent blocks would mix them.
    """

    def __init__(self, name: str | None, *, config: Any = None, input: Any = _NO_INPUT) -> None:  # noqa: A002
        self.name = name
        self.config = config
        self._input = input
        self._handles: list[Any] = []
        self.output: Any = None
        """The output the block's run records (set it inside the block)."""
        self.run_id: str | None = None
        """Run id of the block's run while it is open (None outside a run, or when recording is unavailable)."""
        self.trace_id: str | None = None
        """Trace id (32 hex digits) of the block's run while it is open."""

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Decorate ``func`` (as ``@orp.agent("name")``)."""
        if self._input is not _NO_INPUT:
            raise TypeError("input= is for the with-form of orp.agent; a decorated function records its arguments")
        return _build_agent(func, self.name or _name_of(func), self.config)

    def __enter__(self) -> AgentBlock:
        handle = None
        try:
            meta = _AgentMeta(name=self.name or "agent", config=self.config, sig=None, entrypoint="", script=None)
            args = () if self._input is _NO_INPUT else (self._input,)
            handle = _start_run(meta, args, {})
        except ReplayInterrupt:
            raise
        except Exception:  # noqa: BLE001 - never into the agent
            _log_failure("run start")
        self._handles.append(handle)
        if handle is not None:
            run = handle[1].run if handle[0] == "step" else handle[1]
            self.run_id = run.run_id
            self.trace_id = f"{run.span.get_span_context().trace_id:032x}"
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        handle = self._handles.pop() if self._handles else None
        try:
            _end_run(handle, result=self.output if exc is None else None, exc=exc)
        except Exception:  # noqa: BLE001
            _log_failure("run end")
        return False

    async def __aenter__(self) -> AgentBlock:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        return self.__exit__(exc_type, exc, tb)


def _build_agent(func: Callable[P, R], agent_name: str, config: Any) -> Callable[P, R]:
    entrypoint, script = _entrypoint_of(func)
    meta = _AgentMeta(name=agent_name, config=config, sig=_signature(func), entrypoint=entrypoint, script=script)
    wrapped = _wrap(func, lambda a, k: _start_run(meta, a, k), _end_run)
    return _mark(wrapped, {"kind": "agent", "name": agent_name, "entrypoint": entrypoint})


@overload
def agent(name: Callable[P, R], /, *, config: Any = None) -> Callable[P, R]: ...
@overload
def agent(name: str | None = None, *, config: Any = None, input: Any = _NO_INPUT) -> AgentBlock: ...
def agent(
    name: str | Callable[..., Any] | None = None,
    *,
    config: Any = None,
    input: Any = _NO_INPUT,  # noqa: A002
) -> Callable[..., Any] | AgentBlock:
    """Mark a function (sync or async) as an agent entrypoint: each call outside a run records one run.

    The call becomes the root span ``invoke_agent {name}`` of a new trace, with input, config and output
    snapshots; a call inside another run becomes a nested ``agent`` step of that run. ``config`` (a dict,
    a pydantic model, a dataclass, or a callable returning one) is recorded as the config snapshot.
    An exception ends the run with status error and a redacted exception event, then propagates unchanged.

    ``orp.agent("name", input=...)`` (without a function) is also a context manager, for code with no single
    function to decorate: ``with orp.agent("sql-agent", input=question) as run: ...; run.output = answer``
    records the block as one run (see :class:`AgentBlock`; replays of such a run need ``--app``).
    """
    if callable(name) and not isinstance(name, str):
        if input is not _NO_INPUT:
            raise TypeError("input= is for the with-form of orp.agent; a decorated function records its arguments")
        return _build_agent(name, _name_of(name), config)
    if name is not None and not isinstance(name, str):
        raise TypeError("the name must be a string")
    return AgentBlock(name, config=config, input=input)


@dataclass(frozen=True, slots=True)
class _ToolMeta:
    name: str
    risk: str
    schema_version: str | None
    function: str | None


def _tool_begin(
    meta: _ToolMeta, named: dict[str, Any], instrumentation: str | None = None, given: Runtime | None = None
) -> _Call | None:
    run = _current_run.get()
    if run is None:
        if meta.risk in ("write", "high") and _replay_session.get() is not None:
            raise ReplayInterrupt(
                f"tool {meta.name!r} (risk {meta.risk}) was called during a replay outside the replayed run: "
                "refused, not executed"
            )
        return None
    _, arguments, n = _encode(run.rt, named, "tool.args")
    args_hash = run.rt.redactor.content_hash(arguments)
    approval = None
    if run.pending_approvals:  # read without the lock first: most runs record no approvals
        with run.lock:
            approval = run.pending_approvals.pop(meta.name, None)
    step = _start_step(
        StepKind.TOOL,
        meta.name,
        f"{semconv.SPAN_TOOL} {meta.name}",
        SpanKind.INTERNAL,
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.SPAN_TOOL,
            semconv.GEN_AI_TOOL_NAME: meta.name,
            semconv.GEN_AI_TOOL_TYPE: "function",
            semconv.TOOL_RISK: meta.risk,
            semconv.TOOL_SCHEMA_VERSION: meta.schema_version,
            semconv.TOOL_FUNCTION: meta.function,
            semconv.TOOL_ARGS_HASH: args_hash,
            semconv.APPROVAL_ID: approval[0] if approval else None,
            semconv.APPROVAL_STATUS: approval[1] if approval else None,
            semconv.STEP_INSTRUMENTATION: instrumentation,
        },
        given,
    )
    if step is None:
        return None
    state = {
        "end": _tool_end,
        "meta": meta,
        "arguments": arguments,
        "args_hash": args_hash,
        "redactions": n,
        "approval": approval,
        "call_id": f"call_{step.span.get_span_context().span_id:016x}",
    }
    return _begin_call(step, state, args_hash)


def _tool_end(call: _Call, *, result: Any = None, exc: BaseException | None = None) -> None:
    step, state, (step_token, ctx_token) = call.step, call.state, call.tokens
    meta: _ToolMeta = state["meta"]
    rt = step.run.rt
    try:
        error = _record_exception(rt, step.span, exc, "tool.exception") if exc is not None else None
        result_text, n, result_hash = "null", 0, None
        if exc is None:
            result_tree, result_text, n = _encode(rt, result, "tool.result", ordered=True)
            result_hash = rt.redactor.content_hash(canonical_json(result_tree))
        approval = state["approval"] or _approval_of(step)
        if result_hash is not None:
            step.span.set_attribute(semconv.TOOL_RESULT_HASH, result_hash)
        _emit_snapshot(
            step.run,
            step.span,
            SnapshotKind.TOOL,
            {
                "tool": meta.name,
                # made here from the span id ("call_" + 16 hex digits): spliced in, not pre-checked as a new string
                "call_id": RawJSON(f'"{state["call_id"]}"'),
                "schema_version": meta.schema_version,
                "risk": meta.risk,
                "arguments": RawJSON(state["arguments"]),
                "args_hash": state["args_hash"],
                "approval_id": approval[0] if approval else None,
                "approval_status": approval[1] if approval else None,
                "result": RawJSON(result_text),
                "result_hash": result_hash,
                "error": error,
            },
            state["redactions"] + n,
        )
    except Exception:  # noqa: BLE001 - never into the agent
        _log_failure("tool snapshot")
    _finish_step(step, failed=exc is not None, step_token=step_token, ctx_token=ctx_token)


def end_call(call: _Call | None, *, result: Any = None, exc: BaseException | None = None) -> None:
    """Finish a step call begun with one of the ``begin_*_call`` functions (or by a decorator): record its
    result or exception and end its span. Does nothing for None (no run was active). Never raises."""
    if call is None:
        return
    try:
        call.state["end"](call, result=result, exc=exc)
    except Exception:  # noqa: BLE001
        _log_failure("step end")


def begin_tool_call(
    name: str,
    arguments: Mapping[str, Any],
    *,
    risk: str | None = None,
    schema_version: str | None = None,
    function: str | None = None,
    instrumentation: str | None = None,
    runtime: Runtime | None = None,
) -> _Call | None:
    """Begin a tool step for code that wraps a tool it does not own (instrumentors of agent frameworks).

    Returns None outside a run. During a replay, ``call.served`` holds the answer to use instead of calling
    the tool (raise ``served.error`` or return ``served.value``); raises :class:`ReplayInterrupt` when the
    replay forbids the call. Always finish with :func:`end_call`. ``instrumentation`` names the instrumentor
    (``otel_replay.step.instrumentation``), so a replay instruments that SDK again. ``runtime``: the step's
    span goes to that runtime's tracer instead of the run's (an instrumentor given ``tracer_provider=``;
    ignored during a replay).
    """
    meta = _ToolMeta(name=name, risk=effective_risk(name, risk), schema_version=schema_version, function=function)
    return _tool_begin(meta, dict(arguments), instrumentation, runtime)


@overload
def tool(
    name: Callable[P, R], /, *, risk: str = _DEFAULT_RISK, schema_version: str | None = None
) -> Callable[P, R]: ...
@overload
def tool(
    name: str | None = None, *, risk: str = _DEFAULT_RISK, schema_version: str | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def tool(
    name: str | Callable[..., Any] | None = None, *, risk: str = _DEFAULT_RISK, schema_version: str | None = None
) -> Any:
    """Mark a function (sync or async) as a tool: each call inside a run records an ``execute_tool`` step.

    ``risk`` is ``read``, ``write`` or ``high``; replay never executes a write or high tool without a fresh
    approval. A tool declared without a risk whose name says it sends messages, deletes, writes, pays or
    transfers, or runs commands is treated (and recorded) as ``high``. The tool snapshot holds the arguments, the
    result, their hashes and the approval in force.
    """
    if risk not in _RISKS:
        raise ValueError(f"risk must be one of {sorted(_RISKS)}, got {risk!r}")

    def build(func: Callable[..., Any], tool_name: str) -> Callable[..., Any]:
        name_args = _ArgNames(func)
        meta = _ToolMeta(
            name=tool_name,
            risk=effective_risk(tool_name, declared_risk),
            schema_version=schema_version,
            function=qualname_of(func),
        )
        wrapped = _wrap(func, lambda args, kwargs: _tool_begin(meta, name_args(args, kwargs)), end_call)
        marker = {"kind": "tool", "name": tool_name, "risk": meta.risk, "function": meta.function}
        return _mark(wrapped, {**marker, "schema_version": schema_version})

    declared_risk = risk
    return _decorator(name, build)


def _approval_of(step: _Step) -> tuple[str, str] | None:
    """An approval recorded while the tool itself was running (recorded on the step's span attributes)."""
    attrs = getattr(step.span, "attributes", None) or {}
    approval_id = attrs.get(semconv.APPROVAL_ID)
    if approval_id:
        return str(approval_id), str(attrs.get(semconv.APPROVAL_STATUS, ""))
    return None


@overload
def retriever(name: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def retriever(name: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def retriever(name: str | Callable[..., Any] | None = None) -> Any:
    """Mark a function (sync or async) as a retriever: each call inside a run records a ``retrieval`` step.

    The query is the argument named ``query``/``q``/``question``/``text`` (or the first one); arguments named
    ``rewritten_query``, ``filters``/``filter``/``where`` and ``top_k``/``k``/``limit`` are recorded as such.
    Returned documents may be dicts or objects with ``id``, ``content``/``text``/``page_content``, ``score``,
    ``rerank_score`` and ``citation``/``source``/``url``/``metadata.source``.
    """

    def build(func: Callable[..., Any], retriever_name: str) -> Callable[..., Any]:
        name_args = _ArgNames(func)
        wrapped = _wrap(func, lambda args, kwargs: _retrieval_begin(retriever_name, name_args(args, kwargs)), end_call)
        return _mark(wrapped, {"kind": "retrieval", "name": retriever_name})

    return _decorator(name, build)


def _retrieval_begin(
    retriever_name: str, named: dict[str, Any], instrumentation: str | None = None, given: Runtime | None = None
) -> _Call | None:
    top_k = _as_int(_get(named, "top_k", "k", "limit"))
    step = _start_step(
        StepKind.RETRIEVAL,
        retriever_name,
        f"{semconv.SPAN_RETRIEVAL} {retriever_name}",
        SpanKind.CLIENT,
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.SPAN_RETRIEVAL,
            semconv.GEN_AI_DATA_SOURCE_ID: retriever_name,
            semconv.GEN_AI_REQUEST_TOP_K: top_k,
            semconv.STEP_INSTRUMENTATION: instrumentation,
        },
        given,
    )
    if step is None:
        return None
    arguments, text, n = _encode(step.run.rt, named, "retrieval.args")
    query = _get(arguments, "query", "q", "question", "text")
    if query is None and isinstance(arguments, dict) and arguments:
        query = next(iter(arguments.values()))
    query_text = canonical_json(query)
    state = {
        "end": _retrieval_end,
        "name": retriever_name,
        "arguments": RawJSON(text),
        "query": RawJSON(query_text),
        "redactions": n,
        "rewritten_query": RawJSON(canonical_json(_get(arguments, "rewritten_query"))),
        "filters": RawJSON(canonical_json(_get(arguments, "filters", "filter", "where"))),
        "top_k": RawJSON(canonical_json(_get(arguments, "top_k", "k", "limit"))),
    }
    content_hash = step.run.rt.redactor.content_hash
    args_hash = content_hash(text)
    _set_attrs(
        step.span, {semconv.RETRIEVAL_QUERY_HASH: content_hash(query_text), semconv.RETRIEVAL_ARGS_HASH: args_hash}
    )
    return _begin_call(step, state, args_hash)


def _retrieval_end(call: _Call, *, result: Any = None, exc: BaseException | None = None) -> None:
    step, state, (step_token, ctx_token) = call.step, call.state, call.tokens
    retriever_name = state["name"]
    rt = step.run.rt
    with _guard("retrieval snapshot"):
        error = _record_exception(rt, step.span, exc, "retrieval.exception") if exc is not None else None
        results: list[dict[str, Any]] = []
        returned, n = "null", 0
        if exc is None:
            returned_tree, returned, n = _encode(rt, result, "retrieval.results", ordered=True)
            docs = result if isinstance(result, (list, tuple)) else []
            for i, doc in enumerate(docs):
                results.append(_document(rt, doc, i))
            _set_attrs(
                step.span,
                {
                    semconv.RETRIEVAL_RESULT_COUNT: len(results),
                    semconv.RETRIEVAL_RESULTS_HASH: rt.redactor.content_hash(canonical_json(returned_tree)),
                },
            )
        _emit_snapshot(
            step.run,
            step.span,
            SnapshotKind.RETRIEVAL,
            {
                "retriever": retriever_name,
                "query": state["query"],
                "rewritten_query": state["rewritten_query"],
                "filters": state["filters"],
                "top_k": state["top_k"],
                "arguments": state["arguments"],
                "results": results,
                "returned": RawJSON(returned),
                "error": error,
            },
            state["redactions"] + n,
        )
    _finish_step(step, failed=exc is not None, step_token=step_token, ctx_token=ctx_token)


def begin_retrieval_call(
    name: str, arguments: Mapping[str, Any], *, instrumentation: str | None = None, runtime: Runtime | None = None
) -> _Call | None:
    """Begin a retrieval step for instrumentors (see :func:`begin_tool_call`); finish with :func:`end_call`."""
    return _retrieval_begin(name, dict(arguments), instrumentation, runtime)


def _document(rt: Runtime, doc: Any, position: int) -> dict[str, Any]:
    content = _get(doc, "content", "text", "page_content")
    metadata = _get(doc, "metadata")
    citation = _get(doc, "citation", "source", "url", "uri")
    if citation is None and metadata is not None:
        citation = _get(metadata, "citation", "source", "url")
    doc_id = _get(doc, "id", "doc_id", "document_id")
    if doc_id is None and metadata is not None:
        doc_id = _get(metadata, "id", "doc_id")
    fields, _, _ = _encode(
        rt,
        {"id": doc_id, "score": _get(doc, "score"), "rerank_score": _get(doc, "rerank_score"), "citation": citation},
        f"retrieval.results.{position}",
    )
    fields = dict(fields) if isinstance(fields, dict) else {"value": fields}
    fields["content_hash"] = rt.redactor.content_hash(_safe_str(content)) if content is not None else None
    detached: dict[str, Any] = json.loads(canonical_json(fields))  # detached from the agent's documents
    return detached


@overload
def model(name: Callable[P, R], /, *, provider: str | None = None, model: str | None = None) -> Callable[P, R]: ...
@overload
def model(
    name: str | None = None, *, provider: str | None = None, model: str | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def model(
    name: str | Callable[..., Any] | None = None, *, provider: str | None = None, model: str | None = None
) -> Any:
    """Mark a function (sync or async) that performs one model call: each call inside a run records a
    ``chat {model}`` step with the request, response, usage tokens and request hash (deterministic replay
    matches on the hash). Usage is read from ``usage.input_tokens``/``prompt_tokens`` and
    ``output_tokens``/``completion_tokens`` of a dict or object response; ``cost_usd`` when reported.
    """
    model_name = model

    def build(func: Callable[..., Any], step_name: str) -> Callable[..., Any]:
        name_args = _ArgNames(func)
        wrapped = _wrap(
            func, lambda args, kwargs: _model_begin(step_name, provider, model_name, name_args(args, kwargs)), end_call
        )
        return _mark(wrapped, {"kind": "model", "name": step_name, "provider": provider, "model": model_name})

    return _decorator(name, build)


def _model_begin(
    step_name: str,
    provider: str | None,
    model_name: str | None,
    named: dict[str, Any],
    instrumentation: str | None = None,
    given: Runtime | None = None,
) -> _Call | None:
    requested = model_name or _get(named, "model")
    if requested is None:
        run = _current_run.get()
        requested = run.config.get("model") if run is not None and run.config else None
    requested = requested if isinstance(requested, str) else None
    run = _current_run.get()
    if run is None:
        return None
    # encoded before the span starts, so its hash is one of the span's starting attributes
    _, request, n = _encode(run.rt, named, "model.request")
    request_hash = run.rt.redactor.content_hash(request)
    prompt_version = (run.config or {}).get("prompt_version")
    step = _start_step(
        StepKind.MODEL,
        step_name,
        f"{semconv.SPAN_MODEL} {requested or step_name}",
        SpanKind.CLIENT,
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.SPAN_MODEL,
            semconv.GEN_AI_PROVIDER_NAME: provider,
            semconv.GEN_AI_REQUEST_MODEL: requested,
            semconv.STEP_INSTRUMENTATION: instrumentation,
            semconv.MODEL_REQUEST_HASH: request_hash,
            semconv.MODEL_PROMPT_VERSION: _scalar_text(prompt_version),
        },
        given,
    )
    if step is None:
        return None
    state = {
        "end": _model_end,
        "provider": provider,
        "request": request,
        "request_hash": request_hash,
        "redactions": n,
        "model": requested,
        "prompt_version": prompt_version,
        "arguments": request,
    }
    session = _replay_session.get()
    if session is not None and getattr(getattr(session, "mode", None), "value", None) == "live":
        # What the call would really send, before redaction: a marker here came from the recording.
        state["markers"] = marker_paths(to_jsonable(named))
    return _begin_call(step, state, request_hash)


def _model_end(call: _Call, *, result: Any = None, exc: BaseException | None = None) -> None:
    step, state, (step_token, ctx_token) = call.step, call.state, call.tokens
    provider = state["provider"]
    run = step.run
    rt = run.rt
    try:
        error = _record_exception(rt, step.span, exc, "model.exception") if exc is not None else None
        response, n, response_hash = "null", 0, None
        if exc is None:
            response_tree, response, n = _encode(rt, result, "model.response", ordered=True)
            response_hash = rt.redactor.content_hash(canonical_json(response_tree))
        usage = _usage(result) if exc is None else {}
        response_model = _get(result, "model") if exc is None else None
        finish = _finish_reasons(result) if exc is None else None
        _set_attrs(
            step.span,
            {
                semconv.MODEL_RESPONSE_HASH: response_hash,
                semconv.GEN_AI_RESPONSE_MODEL: response_model if isinstance(response_model, str) else None,
                semconv.GEN_AI_RESPONSE_FINISH_REASONS: finish,
                semconv.GEN_AI_USAGE_INPUT_TOKENS: usage.get("input_tokens"),
                semconv.GEN_AI_USAGE_OUTPUT_TOKENS: usage.get("output_tokens"),
                semconv.MODEL_COST_USD: usage.get("cost_usd"),
            },
        )
        with run.lock:
            run.input_tokens += usage.get("input_tokens") or 0
            run.output_tokens += usage.get("output_tokens") or 0
            if usage.get("cost_usd") is not None:
                run.cost_usd = (run.cost_usd or 0.0) + usage["cost_usd"]
        _emit_snapshot(
            run,
            step.span,
            SnapshotKind.MODEL,
            {
                "name": step.name,
                "provider": provider,
                "model": state["model"],
                "request": RawJSON(state["request"]),
                "request_hash": state["request_hash"],
                "response": RawJSON(response),
                "response_hash": response_hash,
                "usage": usage,
                "prompt_version": state["prompt_version"],
                "error": error,
            },
            state["redactions"] + n,
        )
    except Exception:  # noqa: BLE001 - never into the agent
        _log_failure("model snapshot")
    _finish_step(step, failed=exc is not None, step_token=step_token, ctx_token=ctx_token)


def begin_model_call(
    name: str,
    request: Mapping[str, Any],
    *,
    provider: str | None = None,
    model: str | None = None,
    instrumentation: str | None = None,
    runtime: Runtime | None = None,
) -> _Call | None:
    """Begin a model step for instrumentors of model SDKs (see :func:`begin_tool_call`); ``request`` is
    what the SDK was asked (its hash is what deterministic replay matches on). Finish with :func:`end_call`,
    passing the response as plain data (e.g. the SDK object's ``model_dump()``).

    Inside another model step (a LangChain chat model calling the OpenAI SDK, both instrumented) the inner
    call is not a step of its own: the outer one records (and during a replay answers) it. Returns None."""
    current = _current_step.get()
    if current is not None and current.kind is StepKind.MODEL:
        return None
    return _model_begin(name, provider, model, dict(request), instrumentation, runtime)


def _usage(response: Any) -> dict[str, Any]:
    usage = _get(response, "usage")
    source = usage if usage is not None else response
    out: dict[str, Any] = {}
    input_tokens = _as_int(_get(source, "input_tokens", "prompt_tokens"))
    output_tokens = _as_int(_get(source, "output_tokens", "completion_tokens"))
    if input_tokens is not None:
        out["input_tokens"] = input_tokens
    if output_tokens is not None:
        out["output_tokens"] = output_tokens
    cost = _as_float(_get(source, "cost_usd")) if usage is not None else None
    if cost is None:
        cost = _as_float(_get(response, "cost_usd"))
    if cost is not None:
        out["cost_usd"] = cost
    return out


def _finish_reasons(response: Any) -> list[str] | None:
    reasons: list[str] = []
    choices = _get(response, "choices")
    if isinstance(choices, (list, tuple)):
        reasons = [str(r) for r in (_get(c, "finish_reason") for c in choices) if r is not None]
    single = _get(response, "finish_reason", "stop_reason")
    if single is not None:
        reasons.append(str(single))
    return reasons or None


# ------------------------------------------------------------------------------------ free functions


def _target_span() -> tuple[_Run, trace.Span] | None:
    run = _current_run.get()
    if run is None:
        return None
    step = _current_step.get()
    return run, (step.span if step is not None else run.span)


def _snapshot_here(kind: SnapshotKind, fields: dict[str, Any]) -> None:
    """A snapshot of ``fields`` on the current step, or on the run outside steps; nothing outside a run."""
    with _guard(f"{kind.value} snapshot"):
        target = _target_span()
        if target is None:
            return
        run, span = target
        _, text, n = _encode(run.rt, fields, kind.value)
        _emit_snapshot(run, span, kind, RawJSON(text), n)


def record_state(
    task_state: Any, *, step_state: Any = None, transition: Any = None, retry_count: int | None = None, **extra: Any
) -> None:
    """Record the agent's state (a state snapshot on the current step, or on the run outside steps).

    Outside a run this does nothing. Never raises.
    """
    _snapshot_here(
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

    Outside a run this does nothing. Never raises.
    """
    _snapshot_here(
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
    call of ``tool`` in this run. An approval recorded in a run never authorises a replay of it.
    """
    with _guard("approval"):
        target = _target_span()
        if target is None:
            return
        run, span = target
        status_value = str(status)
        approval_id = _scrub(run.rt, str(approval_id), "approval.id")
        step = _current_step.get()
        attrs = {
            semconv.APPROVAL_ID: approval_id,
            semconv.APPROVAL_STATUS: status_value,
            semconv.APPROVAL_APPROVER: _scrub(run.rt, str(approver), "approval.approver") if approver else None,
            semconv.GEN_AI_TOOL_NAME: tool or (step.name if step is not None and step.kind is StepKind.TOOL else None),
        }
        span.add_event(semconv.EVENT_APPROVAL, {k: v for k, v in attrs.items() if v is not None})
        if step is not None and step.kind is StepKind.TOOL and (tool is None or tool == step.name):
            _set_attrs(step.span, {semconv.APPROVAL_ID: approval_id, semconv.APPROVAL_STATUS: status_value})
        elif tool:
            with run.lock:
                run.pending_approvals[tool] = (approval_id, status_value)


def record_safety(result: Any) -> None:
    """Record a guardrail / safety verdict: an ``otel_replay.safety`` event; the last one also lands in the
    run's output snapshot. ``result`` may be a bool, a string verdict, or a dict/object with ``verdict``."""
    with _guard("safety"):
        target = _target_span()
        if target is None:
            return
        run, span = target
        tree, text, _ = _encode(run.rt, result, "safety")
        tree = json.loads(text)  # detached from the caller's object
        verdict = _get(tree, "verdict", "decision", "status") if isinstance(tree, dict) else tree
        if isinstance(verdict, bool):
            verdict = "pass" if verdict else "block"
        elif verdict is None:
            verdict = "unknown"
        attrs: dict[str, Any] = {semconv.SAFETY_VERDICT: _safe_str(verdict), semconv.SAFETY_PAYLOAD: text}
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
    reduced to hash, size and media type). Outside a run this does nothing. Never raises.
    """
    with _guard("attachment"):
        run = _current_run.get()
        if run is None:
            _log.warning("otel-replay: attach_file called outside a run; ignored")
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
            "name": _scrub(rt, name, "input.files.name") if name else None,
            "media_type": _scrub(rt, str(media_type), "input.files.media_type") if media_type else None,
            "size": len(data),
            "sha256": rt.redactor.content_hash(data),
            "content_text": None,
            "content_base64": None,
        }
        if len(data) <= cap:
            text = _attachment_text(data)
            if text is not None:
                ref["content_text"] = _scrub(rt, text, "input.files.content")
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
    secret to the redactor."""
    runs = [m.group(0).decode("ascii") for m in _READABLE_RUN.finditer(data)]
    runs += [m.group(0).decode("ascii") for m in _READABLE_RUN.finditer(data[::2])]
    runs += [m.group(0).decode("ascii") for m in _READABLE_RUN.finditer(data[1::2])]
    return any(rt.redactor.scrub_text(r, "input.files.content")[1] for r in runs)


@contextlib.contextmanager
def identity(*, tenant: str | None = None, role: str | None = None, session: str | None = None) -> Iterator[None]:
    """Tenant, role and session for the runs started inside this block (nested blocks override per key)."""
    merged = dict(_identity.get())
    merged.update({k: str(v) for k, v in (("tenant", tenant), ("role", role), ("session", session)) if v is not None})
    token = _identity.set(merged)
    try:
        yield
    finally:
        _identity.reset(token)


# ------------------------------------------------------------------------------------- non-determinism


def _drawn(kind: str, fresh: Callable[[], T]) -> T:
    """A non-deterministic value: from the recording during a replay that can answer it, else fresh and
    recorded as an ``otel_replay.value`` event on the current span."""
    session = _replay_session.get()
    if session is not None:
        recorded = session.next_value(kind)
        if recorded is not None:
            replayed: T = recorded[0]  # the session revives the recorded value as the kind it was drawn as
            return replayed
    value = fresh()
    try:
        target = _target_span()
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
        _log_failure("value")
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
