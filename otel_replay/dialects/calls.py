"""One model call of a foreign trace: its request, response, parameters and usage, as far as the dialect recorded
them.

It must never guess a request whose messages were not recorded (the call then says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .. import semconv
from ..records import SpanRecord
from ..records import stored_int as _int
from .keys import (
    DIALECT_OPENINFERENCE,
    GENAI_INFERENCE_EVENT,
    GENAI_INPUT_MESSAGES,
    GENAI_LEGACY_COMPLETION_EVENT,
    GENAI_LEGACY_PROMPT_EVENT,
    GENAI_OUTPUT_MESSAGES,
    GENAI_SYSTEM_INSTRUCTIONS,
    GENAI_TOOL_DEFINITIONS,
    PARAMS,
    first,
    json_or_none,
    nest,
    parse_json,
)
from .messages import event_attr, from_flat, from_genai_parts, system_messages

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
    for suffix, name in PARAMS:
        value = attrs.get("gen_ai.request." + suffix)
        if value:
            params[name] = parse_json(value)
    return params


def _usage(attrs: Mapping[str, str]) -> dict[str, int]:
    usage: dict[str, int] = {}
    tokens_in = _int(
        first(
            attrs,
            semconv.GEN_AI_USAGE_INPUT_TOKENS,
            "gen_ai.usage.prompt_tokens",
            "llm.token_count.prompt",
            "llm.usage.prompt_tokens",
        )
    )
    tokens_out = _int(
        first(
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


_CHAT_FINISH: Final = {"tool_call": "tool_calls"}
"""The conventions' finish reasons (``gen_ai.response.finish_reasons``) where chat completions name them
otherwise."""


def model_call(span: SpanRecord, dialect: str) -> _ModelCall:
    attrs = span.span_attributes
    params = _parameters(attrs)
    messages: list[dict[str, Any]] | None = None
    outputs: list[dict[str, Any]] | None = None
    tools: Any = json_or_none(attrs.get(GENAI_TOOL_DEFINITIONS))
    exact_request: dict[str, Any] | None = None
    exact_response: Any = None
    model = attrs.get(semconv.GEN_AI_REQUEST_MODEL)
    if dialect == DIALECT_OPENINFERENCE:
        invocation = json_or_none(attrs.get("llm.invocation_parameters"))
        if isinstance(invocation, dict):
            params = {k: v for k, v in invocation.items() if k not in ("model", "messages")} or params
            model = model or (invocation.get("model") if isinstance(invocation.get("model"), str) else None)
        messages = from_flat(nest(attrs, "llm.input_messages"), wrapper="message")
        outputs = from_flat(nest(attrs, "llm.output_messages"), wrapper="message")
        oi_tools = nest(attrs, "llm.tools")
        if isinstance(oi_tools, list):
            tools = [parse_json(t.get("tool", {}).get("json_schema")) for t in oi_tools if isinstance(t, dict)]
        if attrs.get("input.mime_type") == "application/json":
            value = json_or_none(attrs.get("input.value"))
            if isinstance(value, dict) and ("messages" in value or "prompt" in value or "input" in value):
                exact_request = value
        if attrs.get("output.mime_type") == "application/json":
            value = json_or_none(attrs.get("output.value"))
            if isinstance(value, dict) and ("choices" in value or "output" in value or "content" in value):
                exact_response = value
    else:
        for prefix in ("gen_ai.prompt", "llm.prompts"):  # Traceloop / legacy GenAI flattened keys
            messages = messages or from_flat(nest(attrs, prefix), wrapper=None)
        for prefix in ("gen_ai.completion", "llm.completions"):
            outputs = outputs or from_flat(nest(attrs, prefix), wrapper=None)
        functions = nest(attrs, "llm.request.functions")
        if isinstance(functions, list) and tools is None:
            tools = [
                {"type": "function", "function": {k: parse_json(v) if k == "parameters" else v for k, v in f.items()}}
                for f in functions
                if isinstance(f, dict)
            ]
        new_in = json_or_none(
            attrs.get(GENAI_INPUT_MESSAGES) or event_attr(span, GENAI_INFERENCE_EVENT, GENAI_INPUT_MESSAGES)
        )
        new_out = json_or_none(
            attrs.get(GENAI_OUTPUT_MESSAGES) or event_attr(span, GENAI_INFERENCE_EVENT, GENAI_OUTPUT_MESSAGES)
        )
        if messages is None and new_in is not None:
            messages = from_genai_parts(new_in)
            system = parse_json(
                attrs.get(GENAI_SYSTEM_INSTRUCTIONS)
                or event_attr(span, GENAI_INFERENCE_EVENT, GENAI_SYSTEM_INSTRUCTIONS)
            )
            if messages is not None and system is not None:
                messages = system_messages(system) + messages
        if outputs is None and new_out is not None:
            outputs = from_genai_parts(new_out)
            if outputs is not None and isinstance(new_out, list):
                for msg, raw in zip(outputs, new_out, strict=False):
                    if isinstance(raw, dict) and raw.get("finish_reason"):
                        msg["finish_reason"] = raw["finish_reason"]
        if messages is None:  # GenAI conventions up to v1.26: span events with JSON lists
            legacy = json_or_none(event_attr(span, GENAI_LEGACY_PROMPT_EVENT, "gen_ai.prompt"))
            messages = from_flat(legacy, wrapper=None) if isinstance(legacy, list) else None
        if outputs is None:
            legacy = json_or_none(event_attr(span, GENAI_LEGACY_COMPLETION_EVENT, "gen_ai.completion"))
            outputs = from_flat(legacy, wrapper=None) if isinstance(legacy, list) else None
    finish = json_or_none(attrs.get(semconv.GEN_AI_RESPONSE_FINISH_REASONS))
    if not isinstance(finish, list):
        finish = [attrs["llm.finish_reason"]] if attrs.get("llm.finish_reason") else None
    if finish is None and outputs:
        finish = [str(m["finish_reason"]) for m in outputs if m.get("finish_reason")] or None
    return _ModelCall(
        provider=first(attrs, semconv.GEN_AI_PROVIDER_NAME, "gen_ai.system", "llm.provider", "llm.system"),
        model=model or first(attrs, "llm.model_name"),
        response_model=first(attrs, semconv.GEN_AI_RESPONSE_MODEL, "llm.model_name", "llm.response.model"),
        messages=messages,
        outputs=outputs,
        parameters=params,
        tools=tools if isinstance(tools, list) else None,
        exact_request=exact_request,
        exact_response=exact_response,
        usage=_usage(attrs),
        finish_reasons=[str(f) for f in finish] if finish else None,
        response_id=first(attrs, "gen_ai.response.id", "llm.response.id"),
        created=span.timestamp_ns // 1_000_000_000,
    )


def model_request(call: _ModelCall) -> tuple[dict[str, Any] | None, bool]:
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


def model_response(call: _ModelCall) -> tuple[Any, bool]:
    """The response in the wire format of the call's provider (exact when recorded whole): an Anthropic
    message for Anthropic, else the OpenAI chat-completion format."""
    if call.exact_response is not None:
        return call.exact_response, True
    if not call.outputs:
        return None, False
    if (call.provider or "").lower() == "anthropic":
        return _anthropic_message(call), False
    choices = []
    for i, message in enumerate(call.outputs):
        msg = {k: v for k, v in message.items() if k != "finish_reason"}
        msg.setdefault("role", "assistant")
        msg.setdefault("content", None)
        reason = message.get("finish_reason") or (
            call.finish_reasons[i] if call.finish_reasons and i < len(call.finish_reasons) else None
        )
        reason = _CHAT_FINISH.get(reason, reason) if isinstance(reason, str) else reason
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


_STOP_REASONS: Final = {"stop": "end_turn", "tool_call": "tool_use", "tool_calls": "tool_use", "length": "max_tokens"}
"""The conventions' finish reasons as an Anthropic message's ``stop_reason`` (an Anthropic value stays as is)."""


def _anthropic_message(call: _ModelCall) -> dict[str, Any]:
    """An Anthropic Messages response rebuilt from the first output message: its text, then its tool calls as
    tool-use blocks (their arguments parsed back)."""
    assert call.outputs
    message = call.outputs[0]
    content: list[dict[str, Any]] = []
    text = message.get("content")
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    for tool_call in message.get("tool_calls") or ():
        function = tool_call.get("function") if isinstance(tool_call, dict) else None
        if isinstance(function, dict):
            arguments = json_or_none(function.get("arguments"))
            block = {"type": "tool_use", "id": tool_call.get("id"), "name": function.get("name")}
            content.append({**block, "input": arguments if isinstance(arguments, dict) else {}})
    reason = message.get("finish_reason") or (call.finish_reasons[0] if call.finish_reasons else None)
    response: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": _STOP_REASONS.get(reason, reason) if isinstance(reason, str) else reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": call.usage.get("input_tokens", 0),
            "output_tokens": call.usage.get("output_tokens", 0),
        },
    }
    if call.response_id:
        response["id"] = call.response_id
    if call.response_model:
        response["model"] = call.response_model
    return response
