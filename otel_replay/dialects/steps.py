"""The steps of a foreign run (model, tool, retrieval) with their snapshots, and the names they are shown under.

It must never run or import a tool a span names, or lower a tool's risk.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import semconv
from ..records import SpanRecord
from ..records import stored_int as _int
from ..risk import effective_risk
from ..run_model import span_error
from ..snapshots import canonical_json, sha256_hex
from .calls import model_call, model_request, model_response
from .keys import (
    DIALECT_OPENINFERENCE,
    DIALECT_TRACELOOP,
    GENAI_OPERATION,
    OI_SPAN_KIND,
    SDK_STEP_NAMES,
    TRACELOOP_REQUEST_TYPE,
    first,
    has_redacted,
    json_or_none,
    nest,
    parse_json,
)

# ----------------------------------------------------------------------------------------- snapshots


@dataclass(frozen=True, kw_only=True)
class Pending:
    kind: str
    span_id: str
    step_index: int | None
    timestamp_ns: int
    payload: dict[str, Any]


def model_step(span: SpanRecord, dialect: str, name: str, derived: dict[str, str]) -> dict[str, Any]:
    call = model_call(span, dialect)
    request, exact_request = model_request(call)
    response, exact_response = model_response(call)
    captured = request is not None and not has_redacted(request)
    request_hash = sha256_hex(canonical_json(request)) if captured else ""
    response_hash = sha256_hex(canonical_json(response)) if response is not None else None
    error = span_error(span)
    if captured:
        derived[semconv.MODEL_REQUEST_HASH] = request_hash
    if response_hash is not None and error is None:
        derived[semconv.MODEL_RESPONSE_HASH] = response_hash
    for key, value in (
        (semconv.GEN_AI_REQUEST_MODEL, call.model),
        (semconv.GEN_AI_PROVIDER_NAME, call.provider),
        (semconv.GEN_AI_RESPONSE_MODEL, call.response_model),
    ):
        if value:
            derived[key] = value
    if call.finish_reasons:
        derived[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = json.dumps(call.finish_reasons, separators=(",", ":"))
    for key, field in (
        (semconv.GEN_AI_USAGE_INPUT_TOKENS, "input_tokens"),
        (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, "output_tokens"),
    ):
        if field in call.usage:
            derived[key] = str(call.usage[field])
    return {
        "name": name,
        "provider": call.provider,
        "model": call.model,
        "request": request if captured else {},
        "request_hash": request_hash,
        "response": None if error is not None and response is None else response,
        "response_hash": response_hash,
        "usage": call.usage,
        "prompt_version": None,
        "error": error,
        "parameters": call.parameters,
        "content_captured": captured,
        "response_captured": response is not None and not has_redacted(response),
        "request_exact": bool(exact_request and captured),
        "response_exact": exact_response,
        "dialect": dialect,
    }


def _tool_io(span: SpanRecord, dialect: str) -> tuple[Any, Any, str | None]:
    """Arguments, result and call id of a tool span (None where not captured)."""
    attrs = span.span_attributes
    if dialect == DIALECT_OPENINFERENCE:
        args: Any = (
            parse_json(attrs.get("input.value"))
            if attrs.get("input.mime_type") != "text/plain"
            else attrs.get("input.value")
        )
        if args is None:
            args = parse_json(attrs.get("tool_call.function.arguments"))
        result = (
            parse_json(attrs.get("output.value"))
            if attrs.get("output.mime_type") != "text/plain"
            else attrs.get("output.value")
        )
        return args, result, first(attrs, "tool_call.id", "gen_ai.tool.call.id")
    if dialect == DIALECT_TRACELOOP and "traceloop.entity.input" in attrs:
        entity = parse_json(attrs.get("traceloop.entity.input"))
        if isinstance(entity, dict) and set(entity) <= {"args", "kwargs"}:
            positional = entity.get("args") or []
            kwargs = dict(entity.get("kwargs") or {})
            args = kwargs if not positional else {"args": positional, "kwargs": kwargs}
        else:
            args = entity
        return args, parse_json(attrs.get("traceloop.entity.output")), attrs.get("gen_ai.tool.call.id")
    return (
        parse_json(attrs.get("gen_ai.tool.call.arguments")),
        parse_json(attrs.get("gen_ai.tool.call.result")),
        attrs.get("gen_ai.tool.call.id"),
    )


def tool_step(span: SpanRecord, dialect: str, name: str, derived: dict[str, str]) -> dict[str, Any]:
    args, result, call_id = _tool_io(span, dialect)
    if args is not None and not isinstance(args, dict):
        args = {"input": args}
    error = span_error(span)
    captured = args is not None and not has_redacted(args)
    result_captured = error is not None or (result is not None and not has_redacted(result))
    args_hash = sha256_hex(canonical_json(args)) if captured else ""
    result_hash = sha256_hex(canonical_json(result)) if result is not None and error is None else None
    risk = effective_risk(name, None)
    derived[semconv.GEN_AI_TOOL_NAME] = name
    derived[semconv.TOOL_RISK] = risk
    if captured:
        derived[semconv.TOOL_ARGS_HASH] = args_hash
    if result_hash is not None:
        derived[semconv.TOOL_RESULT_HASH] = result_hash
    return {
        "tool": name,
        "call_id": call_id or "",
        "schema_version": None,
        "risk": risk,
        "arguments": args if captured else {},
        "args_hash": args_hash,
        "approval_id": None,
        "approval_status": None,
        "result": result if error is None else None,
        "result_hash": result_hash,
        "error": error,
        "content_captured": captured,
        "result_captured": result_captured,
        "dialect": dialect,
    }


def retrieval_step(span: SpanRecord, dialect: str, name: str, derived: dict[str, str]) -> dict[str, Any]:
    attrs = span.span_attributes
    top_k = _int(attrs.get(semconv.GEN_AI_REQUEST_TOP_K))
    documents: Any
    if dialect == DIALECT_OPENINFERENCE:
        query = attrs.get("input.value")
        if attrs.get("input.mime_type") == "application/json":
            query = parse_json(query)
        nested = nest(attrs, "retrieval.documents")
        documents = [d.get("document", d) for d in nested if isinstance(d, dict)] if isinstance(nested, list) else None
        for doc in documents or []:
            if isinstance(doc.get("metadata"), str):
                doc["metadata"] = parse_json(doc["metadata"])
            if "score" in doc:
                doc["score"] = parse_json(doc["score"])
    else:
        query = first(attrs, "gen_ai.retrieval.query.text")
        documents = json_or_none(attrs.get("gen_ai.retrieval.documents"))
        if dialect == DIALECT_TRACELOOP and query is None:
            query = parse_json(attrs.get("traceloop.entity.input"))
            documents = documents if documents is not None else parse_json(attrs.get("traceloop.entity.output"))
    arguments: dict[str, Any] = {}
    if query is not None:
        arguments["query"] = query
    if top_k is not None:
        arguments["top_k"] = top_k
    results = []
    for doc in documents if isinstance(documents, list) else []:
        doc = doc if isinstance(doc, dict) else {"content": doc}
        content = doc.get("content")
        given = doc.get("metadata")
        metadata = given if isinstance(given, dict) else {}
        results.append(
            {
                "id": doc.get("id"),
                "score": doc.get("score"),
                "rerank_score": None,
                "content_hash": sha256_hex(content if isinstance(content, str) else canonical_json(content))
                if content is not None
                else None,
                "citation": doc.get("source") or doc.get("url") or metadata.get("source") or metadata.get("url"),
            }
        )
    error = span_error(span)
    captured = query is not None and not has_redacted(query)
    derived[semconv.GEN_AI_DATA_SOURCE_ID] = name
    if captured:
        derived[semconv.RETRIEVAL_ARGS_HASH] = sha256_hex(canonical_json(arguments))
        derived[semconv.RETRIEVAL_QUERY_HASH] = sha256_hex(canonical_json(query))
    if isinstance(documents, list) and error is None:
        derived[semconv.RETRIEVAL_RESULT_COUNT] = str(len(documents))
        derived[semconv.RETRIEVAL_RESULTS_HASH] = sha256_hex(canonical_json(documents))
    return {
        "retriever": name,
        "query": query,
        "rewritten_query": None,
        "filters": None,
        "top_k": top_k,
        "arguments": arguments,
        "results": results,
        "returned": documents if error is None else None,
        "error": error,
        "content_captured": captured,
        "result_captured": isinstance(documents, list),
        "dialect": dialect,
    }


def _provider(attrs: Mapping[str, str]) -> str:
    return (first(attrs, semconv.GEN_AI_PROVIDER_NAME, "gen_ai.system", "llm.provider", "llm.system") or "").lower()


def _operation(attrs: Mapping[str, str], dialect: str) -> str:
    """``chat``, ``responses`` or another operation name of a model span."""
    if dialect == DIALECT_OPENINFERENCE:
        value = json_or_none(attrs.get("input.value")) if attrs.get("input.mime_type") == "application/json" else None
        if isinstance(value, dict) and "input" in value and "messages" not in value:
            return "responses"
        return "chat" if attrs.get(OI_SPAN_KIND, "").upper() == "LLM" else "embeddings"
    return attrs.get(GENAI_OPERATION) or attrs.get(TRACELOOP_REQUEST_TYPE) or ""


def step_name(span: SpanRecord, kind: str, dialect: str) -> str:
    attrs = span.span_attributes
    if kind == "model":
        sdk = SDK_STEP_NAMES.get((_provider(attrs), _operation(attrs, dialect)))
        if sdk is not None:
            return sdk
        invocation = json_or_none(attrs.get("llm.invocation_parameters")) if dialect == DIALECT_OPENINFERENCE else None
        model = attrs.get(semconv.GEN_AI_REQUEST_MODEL) or (
            invocation.get("model") if isinstance(invocation, dict) else None
        )
        return str(model or attrs.get("llm.model_name") or span.span_name)
    if kind == "tool":
        return first(
            attrs, semconv.GEN_AI_TOOL_NAME, "tool.name", "tool_call.function.name", "traceloop.entity.name"
        ) or span.span_name.removeprefix("execute_tool ").removesuffix(".tool")
    if kind == "retrieval":
        return first(attrs, semconv.GEN_AI_DATA_SOURCE_ID, "traceloop.entity.name") or span.span_name.removeprefix(
            "retrieval "
        )
    return first(attrs, semconv.GEN_AI_AGENT_NAME, "traceloop.entity.name") or span.span_name.removeprefix(
        "invoke_agent "
    ).removesuffix(".agent")
