"""Step calls of the recording API: the tool, retrieval and model steps, begun and ended.

``tool_begin`` / ``retrieval_begin`` / ``model_begin`` encode what a call is sent, open its step and (during a
replay) ask how it is answered; their ``_*_end`` counterparts record the result or exception as the step's
snapshot, hashes and usage. ``begin_tool_call`` / ``begin_retrieval_call`` / ``begin_model_call`` and
``end_call`` are the same for instrumentors that wrap calls they do not own.

It must never raise into the agent from its own bookkeeping (only a replay's ``ReplayInterrupt`` passes), nor
let a write or high-risk tool run during a replay outside the replayed run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import SpanKind

from .. import semconv
from ..markers import marker_paths
from ..risk import effective_risk
from ..runtime import Runtime
from ..semconv import SnapshotKind, StepKind
from ..snapshots import RawJSON, canonical_json, to_jsonable
from .arguments import as_float, as_int, first_attr
from .encoding import emit_snapshot, encode_value, record_exception, safe_str, scalar_text, set_attrs
from .hooks import Call, ReplayInterrupt, begin_call
from .lifecycle import finish_step, start_step
from .state import Step, current_replay, current_step, guard, log_failure, replays_running, run_now


@dataclass(frozen=True, slots=True)
class ToolMeta:
    name: str
    risk: str
    schema_version: str | None
    function: str | None
    handoff_to: str | None = None
    """Set for a handoff (a framework's routing tool): the agent it hands to; the step's kind is ``handoff``."""
    risk_declared: bool = True
    """False for a handoff whose risk nobody declared: no ``otel_replay.tool.risk`` is written (it routes)."""

    @property
    def recorded_risk(self) -> str | None:
        """The risk written on the step and its snapshot (None for an undeclared handoff)."""
        return self.risk if self.risk_declared else None


def tool_begin(
    meta: ToolMeta, named: dict[str, Any], instrumentation: str | None = None, given: Runtime | None = None
) -> Call | None:
    run = run_now()
    if run is None:
        if meta.risk in ("write", "high"):
            if current_replay.get() is not None:
                raise ReplayInterrupt(
                    f"tool {meta.name!r} (risk {meta.risk}) was called during a replay outside the replayed run: "
                    "refused, not executed"
                )
            if replays_running:
                # a thread that carries no replay (not started through threading or an executor's submit):
                # it may be the replayed agent's, so it fails closed
                raise ReplayInterrupt(
                    f"tool {meta.name!r} (risk {meta.risk}) was called outside any run while a replay runs in "
                    "this process: refused, not executed (call it inside an @otel_replay.agent run)"
                )
        return None
    _, arguments, n = encode_value(run.rt, named, "tool.args")
    args_hash = run.rt.redactor.content_hash(arguments)
    approval = None
    if run.pending_approvals:  # read without the lock first: most runs record no approvals
        with run.lock:
            approval = run.pending_approvals.pop(meta.name, None)
    step = start_step(
        StepKind.TOOL if meta.handoff_to is None else StepKind.HANDOFF,
        meta.name,
        f"{semconv.SPAN_TOOL} {meta.name}",
        SpanKind.INTERNAL,
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.SPAN_TOOL,
            semconv.GEN_AI_TOOL_NAME: meta.name,
            semconv.GEN_AI_TOOL_TYPE: "function",
            semconv.TOOL_RISK: meta.recorded_risk,
            semconv.HANDOFF_TO: meta.handoff_to or None,
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
    return begin_call(step, state, args_hash)


def _tool_end(call: Call, *, result: Any = None, exc: BaseException | None = None) -> None:
    step, state, (step_token, ctx_token) = call.step, call.state, call.tokens
    meta: ToolMeta = state["meta"]
    rt = step.run.rt
    try:
        error = record_exception(rt, step.span, exc, "tool.exception") if exc is not None else None
        result_text, n, result_hash = "null", 0, None
        if exc is None:
            result_tree, result_text, n = encode_value(rt, result, "tool.result", ordered=True)
            result_hash = rt.redactor.content_hash(canonical_json(result_tree))
        approval = state["approval"] or _approval_of(step)
        if result_hash is not None:
            step.span.set_attribute(semconv.TOOL_RESULT_HASH, result_hash)
        emit_snapshot(
            step.run,
            step.span,
            SnapshotKind.TOOL,
            {
                "tool": meta.name,
                # made here from the span id ("call_" + 16 hex digits): spliced in, not pre-checked as a new string
                "call_id": RawJSON(f'"{state["call_id"]}"'),
                "schema_version": meta.schema_version,
                "risk": meta.recorded_risk,
                "arguments": RawJSON(state["arguments"]),
                "args_hash": _digest_json(state["args_hash"]),
                "approval_id": approval[0] if approval else None,
                "approval_status": approval[1] if approval else None,
                "result": RawJSON(result_text),
                "result_hash": _digest_json(result_hash),
                "error": error,
            },
            state["redactions"] + n,
        )
    except Exception:  # noqa: BLE001 - never into the agent
        log_failure("tool snapshot")
    finish_step(step, failed=exc is not None, step_token=step_token, ctx_token=ctx_token)


def _digest_json(digest: str | None) -> RawJSON | None:
    """A keyed hash the redactor just made (``hmac-sha256:`` and hex digits: nothing to escape) spliced into a
    snapshot as its JSON text: not pre-checked again as a new string of the payload, like the call id."""
    return RawJSON(f'"{digest}"') if digest is not None else None


def end_call(call: Call | None, *, result: Any = None, exc: BaseException | None = None) -> None:
    """Finish a step call begun with one of the ``begin_*_call`` functions (or by a decorator): record its
    result or exception and end its span. Does nothing for None (no run was active). Never raises."""
    if call is None:
        return
    try:
        call.state["end"](call, result=result, exc=exc)
    except Exception:  # noqa: BLE001
        log_failure("step end")


def begin_tool_call(
    name: str,
    arguments: Mapping[str, Any],
    *,
    risk: str | None = None,
    schema_version: str | None = None,
    function: str | None = None,
    instrumentation: str | None = None,
    runtime: Runtime | None = None,
    handoff_to: str | None = None,
) -> Call | None:
    """Begin a tool step for code that wraps a tool it does not own (instrumentors of agent frameworks).

    Returns None outside a run. During a replay, ``call.served`` holds the answer to use instead of calling
    the tool (raise ``served.error`` or return ``served.value``); raises :class:`ReplayInterrupt` when the
    replay forbids the call. Always finish with :func:`end_call`. ``instrumentation`` names the instrumentor
    (``otel_replay.step.instrumentation``), so a replay instruments that SDK again. ``runtime``: the step's
    span goes to that runtime's tracer instead of the run's (an instrumentor given ``tracer_provider=``;
    ignored during a replay). ``handoff_to``: the call is a multi-agent framework's own routing tool handing the
    conversation to that agent (a ``handoff`` step): the name rule does not apply, and without a declared
    ``risk`` it is routing (``read``), with no risk recorded.
    """
    if handoff_to is not None:
        meta = ToolMeta(
            name=name,
            risk=risk or "read",
            schema_version=schema_version,
            function=function,
            handoff_to=handoff_to,
            risk_declared=risk is not None,
        )
    else:
        meta = ToolMeta(name=name, risk=effective_risk(name, risk), schema_version=schema_version, function=function)
    return tool_begin(meta, dict(arguments), instrumentation, runtime)


def _approval_of(step: Step) -> tuple[str, str] | None:
    """An approval recorded while the tool itself was running (recorded on the step's span attributes)."""
    attrs = getattr(step.span, "attributes", None) or {}
    approval_id = attrs.get(semconv.APPROVAL_ID)
    if approval_id:
        return str(approval_id), str(attrs.get(semconv.APPROVAL_STATUS, ""))
    return None


def retrieval_begin(
    retriever_name: str, named: dict[str, Any], instrumentation: str | None = None, given: Runtime | None = None
) -> Call | None:
    top_k = as_int(first_attr(named, "top_k", "k", "limit"))
    step = start_step(
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
    arguments, text, n = encode_value(step.run.rt, named, "retrieval.args")
    query = first_attr(arguments, "query", "q", "question", "text")
    if query is None and isinstance(arguments, dict) and arguments:
        query = next(iter(arguments.values()))
    query_text = canonical_json(query)
    state = {
        "end": _retrieval_end,
        "name": retriever_name,
        "arguments": RawJSON(text),
        "query": RawJSON(query_text),
        "redactions": n,
        "rewritten_query": RawJSON(canonical_json(first_attr(arguments, "rewritten_query"))),
        "filters": RawJSON(canonical_json(first_attr(arguments, "filters", "filter", "where"))),
        "top_k": RawJSON(canonical_json(first_attr(arguments, "top_k", "k", "limit"))),
    }
    content_hash = step.run.rt.redactor.content_hash
    args_hash = content_hash(text)
    set_attrs(
        step.span, {semconv.RETRIEVAL_QUERY_HASH: content_hash(query_text), semconv.RETRIEVAL_ARGS_HASH: args_hash}
    )
    return begin_call(step, state, args_hash)


def _retrieval_end(call: Call, *, result: Any = None, exc: BaseException | None = None) -> None:
    step, state, (step_token, ctx_token) = call.step, call.state, call.tokens
    retriever_name = state["name"]
    rt = step.run.rt
    with guard("retrieval snapshot"):
        error = record_exception(rt, step.span, exc, "retrieval.exception") if exc is not None else None
        results: list[dict[str, Any]] = []
        returned, n = "null", 0
        if exc is None:
            returned_tree, returned, n = encode_value(rt, result, "retrieval.results", ordered=True)
            docs = result if isinstance(result, (list, tuple)) else []
            for i, doc in enumerate(docs):
                results.append(_document(rt, doc, i))
            set_attrs(
                step.span,
                {
                    semconv.RETRIEVAL_RESULT_COUNT: len(results),
                    semconv.RETRIEVAL_RESULTS_HASH: rt.redactor.content_hash(canonical_json(returned_tree)),
                },
            )
        emit_snapshot(
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
    finish_step(step, failed=exc is not None, step_token=step_token, ctx_token=ctx_token)


def begin_retrieval_call(
    name: str, arguments: Mapping[str, Any], *, instrumentation: str | None = None, runtime: Runtime | None = None
) -> Call | None:
    """Begin a retrieval step for instrumentors (see :func:`begin_tool_call`); finish with :func:`end_call`."""
    return retrieval_begin(name, dict(arguments), instrumentation, runtime)


def _document(rt: Runtime, doc: Any, position: int) -> dict[str, Any]:
    content = first_attr(doc, "content", "text", "page_content")
    metadata = first_attr(doc, "metadata")
    citation = first_attr(doc, "citation", "source", "url", "uri")
    if citation is None and metadata is not None:
        citation = first_attr(metadata, "citation", "source", "url")
    doc_id = first_attr(doc, "id", "doc_id", "document_id")
    if doc_id is None and metadata is not None:
        doc_id = first_attr(metadata, "id", "doc_id")
    fields, _, _ = encode_value(
        rt,
        {
            "id": doc_id,
            "score": first_attr(doc, "score"),
            "rerank_score": first_attr(doc, "rerank_score"),
            "citation": citation,
        },
        f"retrieval.results.{position}",
    )
    fields = dict(fields) if isinstance(fields, dict) else {"value": fields}
    fields["content_hash"] = rt.redactor.content_hash(safe_str(content)) if content is not None else None
    detached: dict[str, Any] = json.loads(canonical_json(fields))  # detached from the agent's documents
    return detached


def model_begin(
    step_name: str,
    provider: str | None,
    model_name: str | None,
    named: dict[str, Any],
    instrumentation: str | None = None,
    given: Runtime | None = None,
) -> Call | None:
    requested = model_name or first_attr(named, "model")
    if requested is None:
        run = run_now()
        requested = run.config.get("model") if run is not None and run.config else None
    requested = requested if isinstance(requested, str) else None
    run = run_now()
    if run is None:
        return None
    # encoded before the span starts, so its hash is one of the span's starting attributes
    _, request, n = encode_value(run.rt, named, "model.request")
    request_hash = run.rt.redactor.content_hash(request)
    prompt_version = (run.config or {}).get("prompt_version")
    step = start_step(
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
            semconv.MODEL_PROMPT_VERSION: scalar_text(prompt_version),
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
    session = current_replay.get()
    if session is not None and getattr(getattr(session, "mode", None), "value", None) in ("live", "whatif"):
        # What the call would really send, before redaction: a marker here came from the recording.
        state["markers"] = marker_paths(to_jsonable(named))
    return begin_call(step, state, request_hash)


def _model_end(call: Call, *, result: Any = None, exc: BaseException | None = None) -> None:
    step, state, (step_token, ctx_token) = call.step, call.state, call.tokens
    provider = state["provider"]
    run = step.run
    rt = run.rt
    try:
        error = record_exception(rt, step.span, exc, "model.exception") if exc is not None else None
        response, n, response_hash = "null", 0, None
        if exc is None:
            response_tree, response, n = encode_value(rt, result, "model.response", ordered=True)
            response_hash = rt.redactor.content_hash(canonical_json(response_tree))
            if call.served is None:
                _answered(step, response)
        usage = _usage(result) if exc is None else {}
        response_model = first_attr(result, "model") if exc is None else None
        finish = _finish_reasons(result) if exc is None else None
        set_attrs(
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
        emit_snapshot(
            run,
            step.span,
            SnapshotKind.MODEL,
            {
                "name": step.name,
                "provider": provider,
                "model": state["model"],
                "request": RawJSON(state["request"]),
                "request_hash": _digest_json(state["request_hash"]),
                "response": RawJSON(response),
                "response_hash": _digest_json(response_hash),
                "usage": usage,
                "prompt_version": state["prompt_version"],
                "error": error,
            },
            state["redactions"] + n,
        )
    except Exception:  # noqa: BLE001 - never into the agent
        log_failure("model snapshot")
    finish_step(step, failed=exc is not None, step_token=step_token, ctx_token=ctx_token)


def _answered(step: Step, response: str) -> None:
    """Tell the replay session (if any) what a model call it let execute answered: a live replay watches the
    tool calls a live answer asks for (see otel_replay.replay.safety.riskytools)."""
    session = current_replay.get()
    hook = getattr(session, "model_answered", None) if session is not None else None
    if hook is not None:
        try:
            hook(step, response)
        except Exception:  # noqa: BLE001 - never into the agent
            log_failure("replay model answer")


def begin_model_call(
    name: str,
    request: Mapping[str, Any],
    *,
    provider: str | None = None,
    model: str | None = None,
    instrumentation: str | None = None,
    runtime: Runtime | None = None,
) -> Call | None:
    """Begin a model step for instrumentors of model SDKs (see :func:`begin_tool_call`); ``request`` is
    what the SDK was asked (its hash is what deterministic replay matches on). Finish with :func:`end_call`,
    passing the response as plain data (e.g. the SDK object's ``model_dump()``).

    Inside another model step (a LangChain chat model calling the OpenAI SDK, both instrumented) the inner
    call is not a step of its own: the outer one records (and during a replay answers) it. Returns None."""
    current = current_step.get()
    if current is not None and current.kind is StepKind.MODEL:
        return None
    return model_begin(name, provider, model, dict(request), instrumentation, runtime)


def _usage(response: Any) -> dict[str, Any]:
    usage = first_attr(response, "usage")
    source = usage if usage is not None else response
    out: dict[str, Any] = {}
    input_tokens = as_int(first_attr(source, "input_tokens", "prompt_tokens"))
    output_tokens = as_int(first_attr(source, "output_tokens", "completion_tokens"))
    if input_tokens is not None:
        out["input_tokens"] = input_tokens
    if output_tokens is not None:
        out["output_tokens"] = output_tokens
    cost = as_float(first_attr(source, "cost_usd")) if usage is not None else None
    if cost is None:
        cost = as_float(first_attr(response, "cost_usd"))
    if cost is not None:
        out["cost_usd"] = cost
    return out


def _finish_reasons(response: Any) -> list[str] | None:
    reasons: list[str] = []
    choices = first_attr(response, "choices")
    if isinstance(choices, (list, tuple)):
        reasons = [str(r) for r in (first_attr(c, "finish_reason") for c in choices) if r is not None]
    single = first_attr(response, "finish_reason", "stop_reason")
    if single is not None:
        reasons.append(str(single))
    return reasons or None
