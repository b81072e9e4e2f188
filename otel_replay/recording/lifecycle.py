"""Run and step span lifecycle of the recording API: open, enter, finish and end them.

A run is one trace whose root span is ``invoke_agent {name}`` (``start_run`` / ``finish_run``, and
``begin_run`` / ``end_run`` for instrumentors); a call inside a run is a step span (``start_step`` /
``finish_step``) numbered, retried-attempt counted and parented in the run's context. The run's input,
config and output snapshots are written here.

It must never raise into the agent (bookkeeping runs behind guards; only the agent's own exceptions pass),
nor leave a context variable or OTel context set after its run or step ends.
"""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, SpanKind

from .. import semconv
from ..runtime import Runtime, chosen_trace_id
from ..runtime import get as runtime
from ..semconv import SnapshotKind, StepKind
from ..snapshots import RawJSON, canonical_json, compose_json, ordered_json
from .arguments import named_arguments, positional_names
from .encoding import (
    STATUS_OK,
    emit_snapshot,
    encode_value,
    identity_of,
    record_exception,
    redacted,
    scalar_text,
    set_attrs,
)
from .results import run_output
from .state import Run, Step, current_replay, current_run, current_step, guard, log_failure, run_now
from .threads import carry_begin, carry_end

_INPUT_PARAM_NAMES: Final = ("input", "query", "question", "message", "prompt", "task", "request", "text")


@dataclass(frozen=True)
class AgentMeta:
    name: str
    config: Any
    sig: inspect.Signature | None
    entrypoint: str
    script: str | None
    join: SpanContext | None = None
    """A remote span whose trace the run joins (its root takes that trace id, parentless, and links to it)."""


def start_run(
    meta: AgentMeta, args: tuple[Any, ...], kwargs: dict[str, Any], given: Runtime | None = None
) -> tuple[Any, ...] | None:
    """Open the root span of a run (or a nested agent step); None if recording is unavailable. ``given``:
    the runtime of an instrumentor given ``tracer_provider=`` (see :func:`start_step`)."""
    parent_run = run_now()
    if parent_run is not None:
        step = start_step(
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
        with guard("nested agent input"):
            fields, n = _input_fields(step.run.rt, meta, args, kwargs, identity_of(step.run.rt))
            emit_snapshot(step.run, step.span, SnapshotKind.INPUT, fields, n)
        return ("step", step, current_step.set(step), otel_context.attach(trace.set_span_in_context(step.span)))

    rt = runtime() if given is None or current_replay.get() is not None else given
    ident = identity_of(rt)
    ambient = trace.get_current_span().get_span_context()
    links = [Link(ambient)] if ambient.is_valid else []
    if meta.join is not None and meta.join.is_valid:
        links.append(Link(meta.join))
    session = current_replay.get()
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
    joined = chosen_trace_id.set(meta.join.trace_id) if meta.join is not None and meta.join.is_valid else None
    try:
        span = rt.tracer.start_span(
            f"{semconv.SPAN_AGENT} {meta.name}",
            context=otel_context.Context(),
            kind=SpanKind.INTERNAL,
            attributes={k: v for k, v in attrs.items() if v is not None},  # set at start: one attribute call less
            links=links or None,
            start_time=start_ns,
        )
    finally:
        if joined is not None:
            chosen_trace_id.reset(joined)
    run = Run(run_id=run_id, agent=meta.name, entrypoint=meta.entrypoint, span=span, rt=rt, start_ns=start_ns)
    run.input_seq = next(run.snapshot_seq)  # the input snapshot is written last but ordered first
    try:  # guard("run start") spelled out: a generator-based context manager costs microseconds per run
        if session is not None:
            set_attrs(span, session.root_attributes())
            session.run_started(run_id=run_id, span=span)
        _record_config(run, meta.config)
        # Encoded now (the agent may mutate its arguments); written when the run ends, so files attached
        # during the run are part of it.
        run.input_payload, run.input_redactions = _input_fields(rt, meta, args, kwargs, ident)
    except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
        log_failure("run start")
    try:
        carry_begin()  # threads and pool work started in the run carry it (recording.threads)
        run.carried = True
    except Exception:  # noqa: BLE001
        log_failure("run context in threads")
    run_token = current_run.set(run)
    step_token = current_step.set(None)
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


def _record_config(run: Run, config: Any) -> None:
    if config is None:
        return
    value = config() if callable(config) and not isinstance(config, type) else config
    tree, _, n = encode_value(run.rt, value, "config")
    payload = tree if isinstance(tree, dict) and "$type" not in tree else {"value": tree}
    if isinstance(tree, dict) and tree.get("$type") in ("pydantic", "dataclass"):
        payload = dict(tree["fields"]) if isinstance(tree.get("fields"), dict) else payload
    run.config = payload
    digest = emit_snapshot(run, run.span, SnapshotKind.CONFIG, payload, n)
    model = payload.get("model")
    prompt_version = payload.get("prompt_version")
    set_attrs(
        run.span,
        {
            semconv.CONFIG_HASH: digest,
            semconv.CONFIG_PROMPT_VERSION: scalar_text(prompt_version),
            semconv.GEN_AI_REQUEST_MODEL: model if isinstance(model, str) else None,
        },
    )


def _input_fields(
    rt: Runtime, meta: AgentMeta, args: tuple[Any, ...], kwargs: dict[str, Any], ident: dict[str, str]
) -> tuple[dict[str, Any], int]:
    """Input snapshot fields of a call, serialised now, and the number of redactions."""
    redactions = 0
    positional: list[Any] = []
    for name, value in zip(positional_names(meta.sig, len(args)), args, strict=False):
        tree, n = redacted(rt, {name: value}, "input.args")
        positional.append(tree.get(name) if isinstance(tree, dict) else tree)
        redactions += n
    keyword_tree, keyword, n = encode_value(rt, kwargs, "input.kwargs", ordered=True)
    redactions += n
    if meta.sig is None and not args and not n and type(keyword_tree) is dict:
        named = keyword_tree  # the named arguments are the keyword ones (begin_run): encoded, nothing redacted
    else:
        named, _ = redacted(rt, named_arguments(meta.sig, args, kwargs), "input")
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
    run: Run | None, result: Any, error: dict[str, str] | None, rt: Runtime
) -> tuple[dict[str, Any], int]:
    tree, text, n = encode_value(rt, run_output(result), "output")
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


def finish_run(handle: tuple[Any, ...] | None, *, result: Any = None, exc: BaseException | None = None) -> None:
    if handle is None:
        return
    if handle[0] == "step":
        _, step, step_token, ctx_token = handle
        with guard("nested agent end"):
            error = record_exception(step.run.rt, step.span, exc, "agent.exception") if exc is not None else None
            payload, n = _output_payload(None, result, error, step.run.rt)
            emit_snapshot(step.run, step.span, SnapshotKind.OUTPUT, payload, n)
        finish_step(step, failed=exc is not None, step_token=step_token, ctx_token=ctx_token)
        return
    _, run, run_token, step_token, ctx_token = handle
    rt = run.rt
    run.ended = True  # from now on, a thread the run started records nothing into it
    try:  # guard("run end") spelled out (see start_run)
        error = record_exception(rt, run.span, exc, "run.exception") if exc is not None else None
        payload = dict(run.input_payload)
        payload["files"] = list(run.files)
        emit_snapshot(
            run, run.span, SnapshotKind.INPUT, payload, run.input_redactions, timestamp=run.start_ns, seq=run.input_seq
        )
        out, n = _output_payload(run, result, error, rt)
        emit_snapshot(run, run.span, SnapshotKind.OUTPUT, out, n)
        session = current_replay.get()
        if session is not None and session.run_id == run.run_id:
            session.close_root(span=run.span, exc=exc, output_text=compose_json(out))
        with run.lock:
            steps = next(run.step_counter)
            set_attrs(
                run.span,
                {
                    semconv.RUN_STEP_COUNT: steps,
                    semconv.RUN_INPUT_TOKENS: run.input_tokens,
                    semconv.RUN_OUTPUT_TOKENS: run.output_tokens,
                    semconv.RUN_COST_USD: run.cost_usd,
                },
            )
        if exc is None:
            run.span.set_status(STATUS_OK)
    except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
        log_failure("run end")
    _detach(ctx_token)
    _reset(current_step, step_token)
    _reset(current_run, run_token)
    if run.carried:
        run.carried = False
        carry_end()
    try:
        run.span.end()
    except Exception:  # noqa: BLE001
        log_failure("run span end")


def begin_run(
    name: str,
    *,
    entrypoint: str | None = None,
    arguments: Mapping[str, Any] | None = None,
    config: Any = None,
    script: str | None = None,
    runtime: Runtime | None = None,
    join: SpanContext | None = None,
) -> Any:
    """Begin a run (or a nested ``agent`` step inside a run) for code that drives an agent it does not own,
    e.g. an instrumentor starting a run at a framework's top-level invocation. ``arguments`` are recorded as
    the input (keyword arguments of ``entrypoint``, ``module:qualname``, when the run can be called again);
    ``script`` as the input's script (the file of the ``__main__`` module, which a replay of a tool defined
    there loads). ``runtime`` records it with that runtime instead of the current one (an instrumentor given
    ``tracer_provider=``; ignored during a replay). ``join``: a remote span (a request's ``traceparent``) whose
    trace the run joins: its root takes that trace id (parentless, as every run root, where the tracer provider
    is otel-replay's own: see :data:`otel_replay.runtime.chosen_trace_id`) and links to that span. Returns a
    handle for :func:`end_run`, or None when recording is unavailable. Never raises."""
    try:
        meta = AgentMeta(name=name, config=config, sig=None, entrypoint=entrypoint or "", script=script, join=join)
        return start_run(meta, (), dict(arguments or {}), runtime)
    except Exception:  # noqa: BLE001
        log_failure("run start")
        return None


def end_run(handle: Any, *, result: Any = None, exc: BaseException | None = None) -> None:
    """End a run begun with :func:`begin_run`, recording its output or exception. Never raises."""
    try:
        finish_run(handle, result=result, exc=exc)
    except Exception:  # noqa: BLE001
        log_failure("run end")


def in_run() -> bool:
    """True inside a run (an instrumentor then records steps; outside, it may begin a run of its own)."""
    return run_now() is not None


def in_model_step() -> bool:
    """True inside a model step: a model SDK call made there (a LangChain chat model calling the OpenAI SDK) is
    recorded by that step, not as a step of its own (see :func:`~otel_replay.recording.begin_model_call`)."""
    current = current_step.get()
    return current is not None and current.kind is StepKind.MODEL


def _detach(token: Any) -> None:
    try:
        otel_context.detach(token)
    except Exception:  # noqa: BLE001
        log_failure("context detach")


def _reset(var: ContextVar[Any], token: Any) -> None:
    try:
        var.reset(token)
    except ValueError:  # reset from another context (a generator finalised elsewhere): fall back to clearing
        var.set(None)


def start_step(
    kind: StepKind, name: str, span_name: str, span_kind: SpanKind, attrs: dict[str, Any], given: Runtime | None = None
) -> Step | None:
    """Open a step's span in the current run (None outside one). Its tracer is the run's, or ``given``'s (an
    instrumentor given ``tracer_provider=``: its spans go to that provider) except during a replay, whose
    steps always go where the replay reads them."""
    run = run_now()
    if run is None:
        return None
    parent = current_step.get()
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
    tracer = run.rt.tracer if given is None or current_replay.get() is not None else given.tracer
    span = tracer.start_span(
        span_name, context=trace.set_span_in_context(parent_span), kind=span_kind, attributes=attrs
    )
    return Step(run=run, span=span, kind=kind, name=name, index=index, attempt=attempt, attrs=attrs)


def finish_step(step: Step, *, failed: bool, step_token: Any = None, ctx_token: Any = None) -> None:
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
            step.span.set_status(STATUS_OK)
    except Exception:  # noqa: BLE001 - never into the agent
        log_failure("step end")
    if ctx_token is not None:
        _detach(ctx_token)
    if step_token is not None:
        _reset(current_step, step_token)
    try:
        step.span.end()
    except Exception:  # noqa: BLE001
        log_failure("step span end")


def enter_step(step: Step) -> tuple[Any, Any]:
    return current_step.set(step), otel_context.attach(trace.set_span_in_context(step.span))
