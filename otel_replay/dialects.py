"""Runs recorded by other GenAI instrumentations, read into the same :class:`~otel_replay.runs.Run` objects.

Why it exists: traces written by ``opentelemetry-instrumentation-openai-v2`` and other emitters of the
OpenTelemetry GenAI conventions (old ``gen_ai.prompt.N`` / events and new ``gen_ai.input.messages`` style),
by OpenInference (Arize Phoenix) and by OpenLLMetry / Traceloop sit in the same ``otel_traces`` table as
otel-replay's own runs. This module turns such a trace into a run as far as its content allows, so ``show``,
dry replay, the readiness report and diff work on it, and deterministic model replay can match a model call
by its request hash when the message content was captured. ``docs/dialects.md`` documents the mapping and
what each dialect lacks for replay.

What it must never do: change, store or write anything (it only reads :class:`SpanRecord` objects); invent
content that was not recorded (a model call recorded without its messages gets a snapshot that says so,
never a guessed request); import an instrumentation package.

Every value arrives as the Collector stores it: a string (numbers in decimal, arrays and maps as compact
JSON), so numbers and JSON are parsed back here.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from . import semconv
from .errors import OtelReplayError, TraceNotFoundError
from .records import EventRecord, SpanRecord
from .records import stored_int as _int
from .risk import effective_risk
from .run_model import Run, RunSummary, Snapshot, Step, span_error
from .snapshots import canonical_json, sha256_hex

__all__ = [
    "DIALECT_GENAI",
    "DIALECT_OPENINFERENCE",
    "DIALECT_OTEL_REPLAY",
    "DIALECT_TRACELOOP",
    "FOREIGN_ROOT_KEYS",
    "build_foreign_run",
    "find_foreign_root",
    "span_dialect",
    "summary_from_root",
]

DIALECT_OTEL_REPLAY: Final = "otel_replay"
"""Dialect of runs recorded by otel-replay itself (the default of ``Run.dialect``)."""
DIALECT_GENAI: Final = "genai"
"""OpenTelemetry GenAI semantic conventions (``gen_ai.operation.name``; old and new content keys)."""
DIALECT_OPENINFERENCE: Final = "openinference"
"""OpenInference (Arize Phoenix): ``openinference.span.kind`` and flattened ``llm.*`` keys."""
DIALECT_TRACELOOP: Final = "traceloop"
"""OpenLLMetry / Traceloop: ``traceloop.span.kind``, ``traceloop.entity.*``, legacy ``gen_ai.prompt.N.*``."""

# ---------------------------------------------------------------------------------------- foreign keys
# Names of other conventions, kept here (not in semconv.py, which lists only what otel-replay writes).

GENAI_OPERATION: Final = "gen_ai.operation.name"
GENAI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GENAI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GENAI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GENAI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GENAI_INFERENCE_EVENT: Final = "gen_ai.client.inference.operation.details"
GENAI_LEGACY_PROMPT_EVENT: Final = "gen_ai.content.prompt"
GENAI_LEGACY_COMPLETION_EVENT: Final = "gen_ai.content.completion"
OI_SPAN_KIND: Final = "openinference.span.kind"
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_REQUEST_TYPE: Final = "llm.request.type"

FOREIGN_ROOT_KEYS: Final[tuple[str, ...]] = (GENAI_OPERATION, OI_SPAN_KIND, TRACELOOP_SPAN_KIND, TRACELOOP_REQUEST_TYPE)
"""A parentless span carrying one of these keys is listed as the root of a (foreign) run."""

REDACTED_OI: Final = "__REDACTED__"
"""The value OpenInference writes in place of hidden content."""

_MODEL_OPS: Final = frozenset({"chat", "text_completion", "generate_content", "embeddings", "completion"})
_AGENT_OPS: Final = frozenset({"invoke_agent", "create_agent"})
_OI_KINDS: Final = {
    "LLM": "model",
    "EMBEDDING": "model",
    "TOOL": "tool",
    "RETRIEVER": "retrieval",
    "RERANKER": "retrieval",
    "AGENT": "agent",
}
_TRACELOOP_KINDS: Final = {"tool": "tool", "agent": "agent"}

SDK_STEP_NAMES: Final[dict[tuple[str, str], str]] = {
    ("openai", "chat"): "openai.chat.completions",
    ("openai", "responses"): "openai.responses",
    ("anthropic", "chat"): "anthropic.messages",
}
"""(provider, operation) → the model step name otel-replay's own SDK instrumentor gives the same call
(``otel_replay.instrumentation.openai.CHAT_STEP`` …), so a replay through that instrumentor matches a
foreign model step by kind and name, then by request hash."""

_PARAMS: Final[tuple[tuple[str, str], ...]] = (
    # gen_ai.request.* suffix → OpenAI chat-completions argument name
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("top_k", "top_k"),
    ("max_tokens", "max_tokens"),
    ("stop_sequences", "stop"),
    ("seed", "seed"),
    ("frequency_penalty", "frequency_penalty"),
    ("presence_penalty", "presence_penalty"),
    ("choice.count", "n"),
    ("stream", "stream"),
)


# ------------------------------------------------------------------------------------------- parsing


def _json(text: str | None) -> Any:
    """A stored string parsed as JSON; the string itself when it is not JSON; None for absent/empty."""
    if text is None or text == "":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _json_or_none(text: str | None) -> Any:
    """A stored string parsed as JSON, None when absent or not JSON."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _first(attrs: Mapping[str, str], *keys: str) -> str | None:
    for key in keys:
        value = attrs.get(key)
        if value:
            return value
    return None


def _nest(attrs: Mapping[str, str], prefix: str) -> Any:
    """Flattened keys ``prefix.0.message.role`` … as a nested tree: numeric segments become lists."""
    root: dict[str, Any] = {}
    head = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(head):
            continue
        node = root
        parts = key[len(head) :].split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        if parts[-1] not in node or not isinstance(node[parts[-1]], dict):
            node[parts[-1]] = value

    def listify(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        if node and all(k.isdigit() for k in node):
            return [listify(node[k]) for k in sorted(node, key=int)]
        return {k: listify(v) for k, v in node.items()}

    return listify(root) if root else None


def _arguments_text(arguments: Any) -> str:
    """Tool-call arguments as the OpenAI wire format carries them (a JSON string)."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def _has_redacted(tree: Any) -> bool:
    if isinstance(tree, str):
        return tree == REDACTED_OI
    if isinstance(tree, dict):
        return any(_has_redacted(v) for v in tree.values())
    if isinstance(tree, list):
        return any(_has_redacted(v) for v in tree)
    return False


# ------------------------------------------------------------------------------------------ dialects


def span_dialect(span: SpanRecord) -> str | None:
    """The dialect a span was written in, or None (otel-replay's own spans and non-GenAI spans)."""
    attrs = span.span_attributes
    if semconv.STEP_INDEX in attrs or semconv.RUN_ID in attrs:
        return DIALECT_OTEL_REPLAY
    if OI_SPAN_KIND in attrs:
        return DIALECT_OPENINFERENCE
    if (
        TRACELOOP_SPAN_KIND in attrs
        or TRACELOOP_REQUEST_TYPE in attrs
        or "traceloop.entity.name" in attrs
        or "gen_ai.prompt.0.role" in attrs
        or "gen_ai.prompt.0.content" in attrs
        or "gen_ai.completion.0.role" in attrs
    ):
        return DIALECT_TRACELOOP
    if GENAI_OPERATION in attrs:
        return DIALECT_GENAI
    return None


def _step_kind(span: SpanRecord, dialect: str | None) -> str | None:
    """``model``, ``tool``, ``retrieval``, ``agent`` or None (a container such as a chain or workflow)."""
    attrs = span.span_attributes
    if dialect == DIALECT_OPENINFERENCE:
        return _OI_KINDS.get(attrs.get(OI_SPAN_KIND, "").upper())
    if dialect == DIALECT_TRACELOOP:
        if TRACELOOP_REQUEST_TYPE in attrs or "gen_ai.prompt.0.role" in attrs or "gen_ai.completion.0.role" in attrs:
            return "model"
        kind = _TRACELOOP_KINDS.get(attrs.get(TRACELOOP_SPAN_KIND, ""))
        if kind is not None:
            return kind
    op = attrs.get(GENAI_OPERATION)
    if op in _MODEL_OPS:
        return "model"
    if op == "execute_tool":
        return "tool"
    if op == "retrieval":
        return "retrieval"
    if op in _AGENT_OPS:
        return "agent"
    return None


def find_foreign_root(spans: Sequence[SpanRecord]) -> SpanRecord | None:
    """The root of a run recorded by another instrumentation: the earliest parentless span written in a
    GenAI dialect (else the earliest span whose parent is not in the trace, for a trace cut short)."""
    roots = [s for s in spans if not s.parent_span_id and span_dialect(s) not in (None, DIALECT_OTEL_REPLAY)]
    if not roots:
        ids = {s.span_id for s in spans}
        roots = [
            s
            for s in spans
            if s.parent_span_id and s.parent_span_id not in ids and span_dialect(s) not in (None, DIALECT_OTEL_REPLAY)
        ]
    return min(roots, key=lambda s: (s.timestamp_ns, s.span_id)) if roots else None


def _agent_name(root: SpanRecord) -> str:
    attrs = root.span_attributes
    name = _first(attrs, semconv.GEN_AI_AGENT_NAME, "traceloop.workflow.name", "traceloop.entity.name", "agent.name")
    if name:
        return name
    for prefix in ("invoke_agent ", "invoke_workflow ", "create_agent "):
        if root.span_name.startswith(prefix):
            return root.span_name[len(prefix) :].strip()
    return root.span_name


def summary_from_root(root: SpanRecord, *, step_count: int | None = None) -> RunSummary:
    """The ``RunSummary`` of a foreign run from its root span (kind ``original``, no run id)."""
    return RunSummary(
        trace_id=root.trace_id,
        run_id="",
        agent=_agent_name(root),
        status="error" if root.is_error else "ok",
        started_at=_dt.datetime.fromtimestamp(root.timestamp_ns / 1e9, tz=_dt.timezone.utc),
        duration_ms=root.duration_ns / 1e6,
        kind=semconv.RunKind.ORIGINAL.value,
        replay_of=None,
        service_name=root.service_name,
        step_count=step_count,
        dialect=span_dialect(root) or DIALECT_GENAI,
    )


# ------------------------------------------------------------------------------------------ messages


def _from_genai_parts(messages: Any) -> list[dict[str, Any]] | None:
    """New-style ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (role + parts) as OpenAI chat messages."""
    if not isinstance(messages, list):
        return None
    out: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role") or "user"
        parts = message.get("parts")
        if not isinstance(parts, list):  # old-style {"role", "content"} objects in the same keys
            msg: dict[str, Any] = {k: v for k, v in message.items() if k != "finish_reason"}
            out.append(msg)
            continue
        texts: list[str] = []
        tool_calls: list[dict[str, Any]] = []
        responses: list[dict[str, Any]] = []
        others: list[Any] = []
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("content", "")))
            elif kind == "tool_call":
                tool_calls.append(
                    {
                        "id": part.get("id"),
                        "type": "function",
                        "function": {"name": part.get("name"), "arguments": _arguments_text(part.get("arguments"))},
                    }
                )
            elif kind == "tool_call_response":
                response = part.get("response")
                responses.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.get("id"),
                        "content": response if isinstance(response, str) else json.dumps(response, ensure_ascii=False),
                    }
                )
            else:
                others.append(part)
        if responses:
            out.extend(responses)
            continue
        msg = {"role": role}
        if texts or not tool_calls:
            msg["content"] = "".join(texts) if not others else [{"type": "text", "text": t} for t in texts] + others
        if tool_calls:
            msg["tool_calls"] = tool_calls
        out.append(msg)
    return out


def _system_messages(instructions: Any) -> list[dict[str, Any]]:
    if isinstance(instructions, str):
        return [{"role": "system", "content": instructions}]
    if isinstance(instructions, list):
        text = "".join(
            str(p.get("content", "")) for p in instructions if isinstance(p, dict) and p.get("type", "text") == "text"
        )
        return [{"role": "system", "content": text}]
    return []


def _from_flat(messages: Any, *, wrapper: str | None) -> list[dict[str, Any]] | None:
    """Flattened OpenInference (``message.role`` …, wrapper ``message``) or Traceloop (``role`` …) messages."""
    if not isinstance(messages, list):
        return None
    out: list[dict[str, Any]] = []
    for item in messages:
        m = item.get(wrapper) if wrapper and isinstance(item, dict) else item
        if not isinstance(m, dict):
            continue
        msg: dict[str, Any] = {"role": m.get("role") or "user"}
        content = m.get("content")
        if content is None and isinstance(m.get("contents"), list):  # OpenInference multi-part content
            parts = [c.get("message_content", c) for c in m["contents"] if isinstance(c, dict)]
            content = "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
        if isinstance(content, str) and content[:1] == "[":  # Traceloop stores list content as JSON text
            parsed = _json_or_none(content)
            content = parsed if isinstance(parsed, list) else content
        calls = []
        for call in m.get("tool_calls") or []:
            c = call.get("tool_call", call) if isinstance(call, dict) else {}
            given = c.get("function")
            function = given if isinstance(given, dict) else {}
            calls.append(
                {
                    "id": c.get("id"),
                    "type": "function",
                    "function": {
                        "name": function.get("name", c.get("name")),
                        "arguments": _arguments_text(function.get("arguments", c.get("arguments", ""))),
                    },
                }
            )
        if content is not None or not calls:
            msg["content"] = content
        if calls:
            msg["tool_calls"] = calls
        for key in ("tool_call_id", "name"):
            if m.get(key) is not None:
                msg[key] = m[key]
        if m.get("finish_reason") is not None:
            msg["finish_reason"] = m["finish_reason"]
        out.append(msg)
    return out


def _event_attr(span: SpanRecord, name: str, key: str) -> str | None:
    for event in span.events:
        if event.name == name and event.attributes.get(key):
            return event.attributes[key]
    return None


# --------------------------------------------------------------------------------------------- calls


@dataclass(frozen=True, kw_only=True)
class _ModelCall:
    provider: str | None
    model: str | None
    response_model: str | None
    messages: list[dict[str, Any]] | None
    outputs: list[dict[str, Any]] | None
    parameters: dict[str, Any]
    tools: list[Any] | None
    exact_request: dict[str, Any] | None
    exact_response: Any
    usage: dict[str, int]
    finish_reasons: list[str] | None
    response_id: str | None
    created: int


def _parameters(attrs: Mapping[str, str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for suffix, name in _PARAMS:
        value = attrs.get("gen_ai.request." + suffix)
        if value:
            params[name] = _json(value)
    return params


def _usage(attrs: Mapping[str, str]) -> dict[str, int]:
    usage: dict[str, int] = {}
    tokens_in = _int(
        _first(
            attrs,
            semconv.GEN_AI_USAGE_INPUT_TOKENS,
            "gen_ai.usage.prompt_tokens",
            "llm.token_count.prompt",
            "llm.usage.prompt_tokens",
        )
    )
    tokens_out = _int(
        _first(
            attrs,
            semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
            "gen_ai.usage.completion_tokens",
            "llm.token_count.completion",
            "llm.usage.completion_tokens",
        )
    )
    if tokens_in is not None:
        usage["input_tokens"] = tokens_in
    if tokens_out is not None:
        usage["output_tokens"] = tokens_out
    return usage


def _model_call(span: SpanRecord, dialect: str) -> _ModelCall:
    attrs = span.span_attributes
    params = _parameters(attrs)
    messages: list[dict[str, Any]] | None = None
    outputs: list[dict[str, Any]] | None = None
    tools: Any = _json_or_none(attrs.get(GENAI_TOOL_DEFINITIONS))
    exact_request: dict[str, Any] | None = None
    exact_response: Any = None
    model = attrs.get(semconv.GEN_AI_REQUEST_MODEL)
    if dialect == DIALECT_OPENINFERENCE:
        invocation = _json_or_none(attrs.get("llm.invocation_parameters"))
        if isinstance(invocation, dict):
            params = {k: v for k, v in invocation.items() if k not in ("model", "messages")} or params
            model = model or (invocation.get("model") if isinstance(invocation.get("model"), str) else None)
        messages = _from_flat(_nest(attrs, "llm.input_messages"), wrapper="message")
        outputs = _from_flat(_nest(attrs, "llm.output_messages"), wrapper="message")
        oi_tools = _nest(attrs, "llm.tools")
        if isinstance(oi_tools, list):
            tools = [_json(t.get("tool", {}).get("json_schema")) for t in oi_tools if isinstance(t, dict)]
        if attrs.get("input.mime_type") == "application/json":
            value = _json_or_none(attrs.get("input.value"))
            if isinstance(value, dict) and ("messages" in value or "prompt" in value or "input" in value):
                exact_request = value
        if attrs.get("output.mime_type") == "application/json":
            value = _json_or_none(attrs.get("output.value"))
            if isinstance(value, dict) and ("choices" in value or "output" in value or "content" in value):
                exact_response = value
    else:
        for prefix in ("gen_ai.prompt", "llm.prompts"):  # Traceloop / legacy GenAI flattened keys
            messages = messages or _from_flat(_nest(attrs, prefix), wrapper=None)
        for prefix in ("gen_ai.completion", "llm.completions"):
            outputs = outputs or _from_flat(_nest(attrs, prefix), wrapper=None)
        functions = _nest(attrs, "llm.request.functions")
        if isinstance(functions, list) and tools is None:
            tools = [
                {"type": "function", "function": {k: _json(v) if k == "parameters" else v for k, v in f.items()}}
                for f in functions
                if isinstance(f, dict)
            ]
        new_in = _json_or_none(
            attrs.get(GENAI_INPUT_MESSAGES) or _event_attr(span, GENAI_INFERENCE_EVENT, GENAI_INPUT_MESSAGES)
        )
        new_out = _json_or_none(
            attrs.get(GENAI_OUTPUT_MESSAGES) or _event_attr(span, GENAI_INFERENCE_EVENT, GENAI_OUTPUT_MESSAGES)
        )
        if messages is None and new_in is not None:
            messages = _from_genai_parts(new_in)
            system = _json(
                attrs.get(GENAI_SYSTEM_INSTRUCTIONS)
                or _event_attr(span, GENAI_INFERENCE_EVENT, GENAI_SYSTEM_INSTRUCTIONS)
            )
            if messages is not None and system is not None:
                messages = _system_messages(system) + messages
        if outputs is None and new_out is not None:
            outputs = _from_genai_parts(new_out)
            if outputs is not None and isinstance(new_out, list):
                for msg, raw in zip(outputs, new_out, strict=False):
                    if isinstance(raw, dict) and raw.get("finish_reason"):
                        msg["finish_reason"] = raw["finish_reason"]
        if messages is None:  # GenAI conventions up to v1.26: span events with JSON lists
            legacy = _json_or_none(_event_attr(span, GENAI_LEGACY_PROMPT_EVENT, "gen_ai.prompt"))
            messages = _from_flat(legacy, wrapper=None) if isinstance(legacy, list) else None
        if outputs is None:
            legacy = _json_or_none(_event_attr(span, GENAI_LEGACY_COMPLETION_EVENT, "gen_ai.completion"))
            outputs = _from_flat(legacy, wrapper=None) if isinstance(legacy, list) else None
    finish = _json_or_none(attrs.get(semconv.GEN_AI_RESPONSE_FINISH_REASONS))
    if not isinstance(finish, list):
        finish = [attrs["llm.finish_reason"]] if attrs.get("llm.finish_reason") else None
    if finish is None and outputs:
        finish = [str(m["finish_reason"]) for m in outputs if m.get("finish_reason")] or None
    return _ModelCall(
        provider=_first(attrs, semconv.GEN_AI_PROVIDER_NAME, "gen_ai.system", "llm.provider", "llm.system"),
        model=model or _first(attrs, "llm.model_name"),
        response_model=_first(attrs, semconv.GEN_AI_RESPONSE_MODEL, "llm.model_name", "llm.response.model"),
        messages=messages,
        outputs=outputs,
        parameters=params,
        tools=tools if isinstance(tools, list) else None,
        exact_request=exact_request,
        exact_response=exact_response,
        usage=_usage(attrs),
        finish_reasons=[str(f) for f in finish] if finish else None,
        response_id=_first(attrs, "gen_ai.response.id", "llm.response.id"),
        created=span.timestamp_ns // 1_000_000_000,
    )


def _request(call: _ModelCall) -> tuple[dict[str, Any] | None, bool]:
    """The request as the SDK call's arguments (exact when recorded whole), and whether it is exact."""
    if call.exact_request is not None:
        return call.exact_request, True
    if not call.messages:
        return None, False
    request: dict[str, Any] = {"messages": call.messages}
    if call.model:
        request["model"] = call.model
    request.update(call.parameters)
    if call.tools:
        request["tools"] = call.tools
    return request, False


def _response(call: _ModelCall) -> tuple[Any, bool]:
    """The response as the OpenAI chat-completion wire format (exact when recorded whole)."""
    if call.exact_response is not None:
        return call.exact_response, True
    if not call.outputs:
        return None, False
    choices = []
    for i, message in enumerate(call.outputs):
        msg = {k: v for k, v in message.items() if k != "finish_reason"}
        msg.setdefault("role", "assistant")
        msg.setdefault("content", None)
        reason = message.get("finish_reason") or (
            call.finish_reasons[i] if call.finish_reasons and i < len(call.finish_reasons) else None
        )
        choices.append({"index": i, "message": msg, "finish_reason": reason})
    response: dict[str, Any] = {"object": "chat.completion", "created": call.created, "choices": choices}
    if call.response_id:
        response["id"] = call.response_id
    if call.response_model:
        response["model"] = call.response_model
    if call.usage:
        prompt, completion = call.usage.get("input_tokens"), call.usage.get("output_tokens")
        response["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": (prompt or 0) + (completion or 0),
        }
    return response, False


# ----------------------------------------------------------------------------------------- snapshots


@dataclass(frozen=True, kw_only=True)
class _Pending:
    kind: str
    span_id: str
    step_index: int | None
    timestamp_ns: int
    payload: dict[str, Any]


def _model_step(span: SpanRecord, dialect: str, name: str, derived: dict[str, str]) -> dict[str, Any]:
    call = _model_call(span, dialect)
    request, exact_request = _request(call)
    response, exact_response = _response(call)
    captured = request is not None and not _has_redacted(request)
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
        "response_captured": response is not None and not _has_redacted(response),
        "request_exact": bool(exact_request and captured),
        "response_exact": exact_response,
        "dialect": dialect,
    }


def _tool_io(span: SpanRecord, dialect: str) -> tuple[Any, Any, str | None]:
    """Arguments, result and call id of a tool span (None where not captured)."""
    attrs = span.span_attributes
    if dialect == DIALECT_OPENINFERENCE:
        args: Any = (
            _json(attrs.get("input.value"))
            if attrs.get("input.mime_type") != "text/plain"
            else attrs.get("input.value")
        )
        if args is None:
            args = _json(attrs.get("tool_call.function.arguments"))
        result = (
            _json(attrs.get("output.value"))
            if attrs.get("output.mime_type") != "text/plain"
            else attrs.get("output.value")
        )
        return args, result, _first(attrs, "tool_call.id", "gen_ai.tool.call.id")
    if dialect == DIALECT_TRACELOOP and "traceloop.entity.input" in attrs:
        entity = _json(attrs.get("traceloop.entity.input"))
        if isinstance(entity, dict) and set(entity) <= {"args", "kwargs"}:
            positional = entity.get("args") or []
            kwargs = dict(entity.get("kwargs") or {})
            args = kwargs if not positional else {"args": positional, "kwargs": kwargs}
        else:
            args = entity
        return args, _json(attrs.get("traceloop.entity.output")), attrs.get("gen_ai.tool.call.id")
    return (
        _json(attrs.get("gen_ai.tool.call.arguments")),
        _json(attrs.get("gen_ai.tool.call.result")),
        attrs.get("gen_ai.tool.call.id"),
    )


def _tool_step(span: SpanRecord, dialect: str, name: str, derived: dict[str, str]) -> dict[str, Any]:
    args, result, call_id = _tool_io(span, dialect)
    if args is not None and not isinstance(args, dict):
        args = {"input": args}
    error = span_error(span)
    captured = args is not None and not _has_redacted(args)
    result_captured = error is not None or (result is not None and not _has_redacted(result))
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


def _retrieval_step(span: SpanRecord, dialect: str, name: str, derived: dict[str, str]) -> dict[str, Any]:
    attrs = span.span_attributes
    top_k = _int(attrs.get(semconv.GEN_AI_REQUEST_TOP_K))
    documents: Any
    if dialect == DIALECT_OPENINFERENCE:
        query = attrs.get("input.value")
        if attrs.get("input.mime_type") == "application/json":
            query = _json(query)
        nested = _nest(attrs, "retrieval.documents")
        documents = [d.get("document", d) for d in nested if isinstance(d, dict)] if isinstance(nested, list) else None
        for doc in documents or []:
            if isinstance(doc.get("metadata"), str):
                doc["metadata"] = _json(doc["metadata"])
            if "score" in doc:
                doc["score"] = _json(doc["score"])
    else:
        query = _first(attrs, "gen_ai.retrieval.query.text")
        documents = _json_or_none(attrs.get("gen_ai.retrieval.documents"))
        if dialect == DIALECT_TRACELOOP and query is None:
            query = _json(attrs.get("traceloop.entity.input"))
            documents = documents if documents is not None else _json(attrs.get("traceloop.entity.output"))
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
    captured = query is not None and not _has_redacted(query)
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
    return (_first(attrs, semconv.GEN_AI_PROVIDER_NAME, "gen_ai.system", "llm.provider", "llm.system") or "").lower()


def _operation(attrs: Mapping[str, str], dialect: str) -> str:
    """``chat``, ``responses`` or another operation name of a model span."""
    if dialect == DIALECT_OPENINFERENCE:
        value = _json_or_none(attrs.get("input.value")) if attrs.get("input.mime_type") == "application/json" else None
        if isinstance(value, dict) and "input" in value and "messages" not in value:
            return "responses"
        return "chat" if attrs.get(OI_SPAN_KIND, "").upper() == "LLM" else "embeddings"
    return attrs.get(GENAI_OPERATION) or attrs.get(TRACELOOP_REQUEST_TYPE) or ""


def _step_name(span: SpanRecord, kind: str, dialect: str) -> str:
    attrs = span.span_attributes
    if kind == "model":
        sdk = SDK_STEP_NAMES.get((_provider(attrs), _operation(attrs, dialect)))
        if sdk is not None:
            return sdk
        invocation = _json_or_none(attrs.get("llm.invocation_parameters")) if dialect == DIALECT_OPENINFERENCE else None
        model = attrs.get(semconv.GEN_AI_REQUEST_MODEL) or (
            invocation.get("model") if isinstance(invocation, dict) else None
        )
        return str(model or attrs.get("llm.model_name") or span.span_name)
    if kind == "tool":
        return _first(
            attrs, semconv.GEN_AI_TOOL_NAME, "tool.name", "tool_call.function.name", "traceloop.entity.name"
        ) or span.span_name.removeprefix("execute_tool ").removesuffix(".tool")
    if kind == "retrieval":
        return _first(attrs, semconv.GEN_AI_DATA_SOURCE_ID, "traceloop.entity.name") or span.span_name.removeprefix(
            "retrieval "
        )
    return _first(attrs, semconv.GEN_AI_AGENT_NAME, "traceloop.entity.name") or span.span_name.removeprefix(
        "invoke_agent "
    ).removesuffix(".agent")


# --------------------------------------------------------------------------------------- run-level io


def _root_io(root: SpanRecord, dialect: str) -> tuple[Any, bool, Any, bool]:
    """The root's input and output values, each with whether it was recorded."""
    attrs = root.span_attributes
    if dialect == DIALECT_OPENINFERENCE:

        def value(prefix: str) -> tuple[Any, bool]:
            raw = attrs.get(prefix + ".value")
            if raw is None:
                return None, False
            return (raw if attrs.get(prefix + ".mime_type") != "application/json" else _json(raw)), True

        inp, has_in = value("input")
        out, has_out = value("output")
        return inp, has_in, out, has_out
    if dialect == DIALECT_TRACELOOP and ("traceloop.entity.input" in attrs or "traceloop.entity.output" in attrs):
        return (
            _json(attrs.get("traceloop.entity.input")),
            "traceloop.entity.input" in attrs,
            _json(attrs.get("traceloop.entity.output")),
            "traceloop.entity.output" in attrs,
        )
    inp = _json_or_none(attrs.get(GENAI_INPUT_MESSAGES))
    out = _json_or_none(attrs.get(GENAI_OUTPUT_MESSAGES))
    return inp, inp is not None, out, out is not None


def _input_payload(value: Any, dialect: str) -> dict[str, Any]:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    if dialect == DIALECT_TRACELOOP and isinstance(value, dict) and set(value) <= {"args", "kwargs"}:
        args = list(value.get("args") or [])
        kwargs = dict(value.get("kwargs") or {})
    elif dialect == DIALECT_GENAI and isinstance(value, list):
        users = [m for m in _from_genai_parts(value) or [] if m.get("role") == "user"]
        if len(value) == 1 and len(users) == 1 and isinstance(users[0].get("content"), str):
            args = [users[0]["content"]]
        else:
            args = [value]
    elif dialect == DIALECT_OPENINFERENCE and isinstance(value, dict):
        kwargs = value
    elif value is not None:
        args = [value]
    return {
        "entrypoint": "",
        "script": None,
        "args": args,
        "kwargs": kwargs,
        "input": value,
        "files": [],
        "session": None,
        "tenant": None,
        "role": None,
        "dialect": dialect,
    }


def _output_payload(value: Any, dialect: str, error: dict[str, str] | None) -> dict[str, Any]:
    answer: Any = None
    structured: Any = None
    if dialect == DIALECT_GENAI and isinstance(value, list):
        outputs = _from_genai_parts(value) or []
        texts = [m.get("content") for m in outputs if isinstance(m.get("content"), str)]
        answer = texts[-1] if texts else None
        structured = None if answer is not None else value
    elif isinstance(value, str):
        answer = value
    elif value is not None:
        structured = value
        if isinstance(value, dict):
            for key in ("answer", "output", "final_answer", "text", "content", "response"):
                if isinstance(value.get(key), str):
                    answer = value[key]
                    break
    citations = value.get("citations") if isinstance(value, dict) else None
    return {
        "answer": answer,
        "structured": structured,
        "citations": citations,
        "safety": None,
        "error": error,
        "dialect": dialect,
    }


# ------------------------------------------------------------------------------------------- the run


def _is_descendant(span: SpanRecord, root: SpanRecord, parents: Mapping[str, str]) -> bool:
    seen: set[str] = set()
    current = span.parent_span_id
    while current and current not in seen:
        if current == root.span_id:
            return True
        seen.add(current)
        current = parents.get(current, "")
    return False


def build_foreign_run(spans: Iterable[SpanRecord], *, trace_id: str | None = None) -> Run:
    """Rebuild a run recorded by another GenAI instrumentation into a :class:`~otel_replay.runs.Run`.

    Steps are the root's descendants (and the root itself when it is a single model, tool or retrieval
    call) that the dialect marks as model, tool, retrieval or agent calls, numbered in start order.
    Snapshots are built from the content the spans carry; a call recorded without content gets a snapshot
    with ``content_captured`` false and an empty request / arguments (no request hash). Raises
    :class:`~otel_replay.errors.OtelReplayError` when no span is written in a known dialect.
    """
    spans = tuple(spans)
    if not spans:
        raise TraceNotFoundError(f"no run with trace id {trace_id} in the store; list runs with `otel-replay runs`")
    root = find_foreign_root(spans)
    tid = trace_id or spans[0].trace_id
    if root is None:
        raise OtelReplayError(
            f"trace {tid} has {len(spans)} spans but no run root: neither an otel-replay run nor GenAI spans "
            "(OpenTelemetry GenAI, OpenInference, OpenLLMetry) this reader knows; the run may still be in "
            "progress (call otel_replay.flush() in the agent)"
        )
    dialect = span_dialect(root) or DIALECT_GENAI
    parents = {s.span_id: s.parent_span_id for s in spans}
    candidates: list[tuple[SpanRecord, str, str]] = []
    for span in spans:
        span_dialect_ = span_dialect(span)
        if span_dialect_ in (None, DIALECT_OTEL_REPLAY):
            continue
        kind = _step_kind(span, span_dialect_)
        if kind is None or (span is root and kind == "agent"):
            continue
        if span is not root and not _is_descendant(span, root, parents):
            continue
        candidates.append((span, kind, span_dialect_))
    candidates.sort(key=lambda c: (c[0].timestamp_ns, c[0].span_id))
    pending: list[_Pending] = []
    raw_steps: list[tuple[SpanRecord, str, str, dict[str, str]]] = []
    for index, (span, kind, d) in enumerate(candidates):
        name = _step_name(span, kind, d)
        derived: dict[str, str] = {}
        payload: dict[str, Any] | None = None
        if kind == "model":
            payload = _model_step(span, d, name, derived)
        elif kind == "tool":
            payload = _tool_step(span, d, name, derived)
        elif kind == "retrieval":
            payload = _retrieval_step(span, d, name, derived)
        if payload is not None:
            pending.append(
                _Pending(kind=kind, span_id=span.span_id, step_index=index, timestamp_ns=span.end_ns, payload=payload)
            )
        raw_steps.append((span, kind, name, derived))
    root_is_step = any(span is root for span, *_ in raw_steps)
    if not root_is_step:
        inp, has_in, out, has_out = _root_io(root, dialect)
        if has_in:
            pending.append(
                _Pending(
                    kind="input",
                    span_id=root.span_id,
                    step_index=None,
                    timestamp_ns=root.timestamp_ns,
                    payload=_input_payload(inp, dialect),
                )
            )
        error = span_error(root)
        if has_out or error is not None:
            pending.append(
                _Pending(
                    kind="output",
                    span_id=root.span_id,
                    step_index=None,
                    timestamp_ns=root.end_ns,
                    payload=_output_payload(out, dialect, error),
                )
            )
    # snapshot order: by time (the input first); seq numbers them as the recorder would
    pending.sort(key=lambda p: (p.kind != "input", p.timestamp_ns, p.kind == "output"))
    snapshots: dict[tuple[str, int | None], list[Snapshot]] = {}
    for seq, item in enumerate(pending):
        text = canonical_json(item.payload)
        snapshot = Snapshot(
            kind=item.kind,
            seq=seq,
            span_id=item.span_id,
            step_index=item.step_index,
            timestamp_ns=item.timestamp_ns,
            payload=json.loads(text),
            sha256=sha256_hex(text),
            size=len(text.encode("utf-8")),
            truncated=False,
            redactions=0,
            intact=True,
        )
        snapshots.setdefault((item.span_id, item.step_index), []).append(snapshot)
    steps = []
    for index, (span, kind, name, derived) in enumerate(raw_steps):
        attrs = dict(span.span_attributes)
        for key, value in derived.items():
            attrs.setdefault(key, value)
        steps.append(
            Step(
                index=index,
                kind=kind,
                name=name,
                status="error" if span.is_error else "ok",
                span_id=span.span_id,
                parent_span_id=span.parent_span_id,
                attempt=1,
                start_ns=span.timestamp_ns,
                duration_ns=span.duration_ns,
                attributes=attrs,
                snapshot_list=tuple(snapshots.get((span.span_id, index), ())),
                events=tuple(e for e in span.events if not _is_content_event(e)),
                error=span_error(span),
            )
        )
    _attempts(steps)
    root_attrs = dict(root.span_attributes)
    usage = [s.snapshots.get("model", {}).get("usage", {}) for s in steps if s.kind == "model"]
    for key, field in ((semconv.RUN_INPUT_TOKENS, "input_tokens"), (semconv.RUN_OUTPUT_TOKENS, "output_tokens")):
        values = [u[field] for u in usage if field in u]
        if values:
            root_attrs.setdefault(key, str(sum(values)))
    summary = summary_from_root(root, step_count=len(steps))
    return Run(
        summary=summary,
        entrypoint=None,
        # the run is translated into convention 1.0 objects by this reader; the dialect says where it came from
        schema_version=semconv.SCHEMA_VERSION,
        attributes=root_attrs,
        snapshot_list=tuple(snapshots.get((root.span_id, None), ())),
        steps=tuple(steps),
        spans=spans,
        problems=(),
        dialect=dialect,
    )


def _is_content_event(event: EventRecord) -> bool:
    return event.name in (GENAI_INFERENCE_EVENT, GENAI_LEGACY_PROMPT_EVENT, GENAI_LEGACY_COMPLETION_EVENT)


def _attempts(steps: list[Step]) -> None:
    """Attempt numbers as the recorder counts them: a step directly following failed attempts of the same kind
    and name under the same parent is attempt n + 1."""
    last: dict[str, tuple[str, str, int, bool]] = {}
    for i, step in enumerate(steps):
        previous = last.get(step.parent_span_id)
        attempt = 1
        if previous is not None and previous[:2] == (step.kind, step.name) and previous[3]:
            attempt = previous[2] + 1
        if attempt != step.attempt:
            steps[i] = replace(step, attempt=attempt)
        last[step.parent_span_id] = (step.kind, step.name, attempt, step.status == "error")
