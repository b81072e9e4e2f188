"""Record and replay OpenAI Python SDK calls: ``chat.completions.create`` and ``responses.create``.

Every call, sync (``OpenAI``) or async (``AsyncOpenAI``), streamed or not, plain or through
``with_raw_response`` (as ``langchain-openai``'s ``ChatOpenAI`` calls it), becomes a model step
(``openai.chat.completions`` / ``openai.responses``) of the current run, or of a single-call run of its own
outside any run. During a replay the recorded answer comes back as the SDK's own ``ChatCompletion``,
``Response`` or stream of chunk / event objects (inside a stand-in raw response for a ``with_raw_response``
call: ``parse()``, ``headers``, ``status_code``, ``http_request``), and no HTTP request leaves the process.

This module must never import ``openai`` at import time (the SDK is an optional extra), and never raise into
the host program from its own code (see :mod:`otel_replay.instrumentation._sdk`).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from typing import Any, Final

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from ..runtime import ProviderBinding, bind_provider
from ..streams import assemble_chat, assemble_responses, chat_delta_slots, responses_delta_slots
from . import _sdk
from ._sdk import SdkApi, as_list, field

_instruments: Final = ("openai >= 1.66.0",)
"""The SDK versions this instrumentor supports (``responses.create`` appeared in 1.66)."""

PROVIDER: Final = "openai"
"""``gen_ai.provider.name`` of the steps this instrumentor records."""
CHAT_STEP: Final = "openai.chat.completions"
"""Step name of a ``chat.completions.create`` call."""
RESPONSES_STEP: Final = "openai.responses"
"""Step name of a ``responses.create`` call."""

_TARGETS: Final = (
    ("openai.resources.chat.completions.completions", "Completions", "create", "chat", False),
    ("openai.resources.chat.completions.completions", "AsyncCompletions", "create", "chat", True),
    ("openai.resources.responses.responses", "Responses", "create", "responses", False),
    ("openai.resources.responses.responses", "AsyncResponses", "create", "responses", True),
)


# --------------------------------------------------------------------------------------- rebuilding


def _construct(type_: Any, value: Any) -> Any:
    """Build an SDK object from its wire JSON the way the SDK itself does (lenient, no validation)."""
    from openai._models import construct_type

    return construct_type(type_=type_, value=value)


@functools.cache
def _stream_classes() -> tuple[type, type]:
    import openai

    return (
        _sdk.replay_stream_class(openai.Stream, is_async=False),
        _sdk.replay_stream_class(openai.AsyncStream, is_async=True),
    )


def _replay_stream(items: list[Any], on_done: Any) -> Any:
    return _stream_classes()[0](items, on_done)


def _replay_async_stream(items: list[Any], on_done: Any) -> Any:
    return _stream_classes()[1](items, on_done)


def _chat_response(value: Any) -> Any:
    from openai.types.chat import ChatCompletion

    return _construct(ChatCompletion, value)


def _chat_chunk(value: Any) -> Any:
    from openai.types.chat import ChatCompletionChunk

    return _construct(ChatCompletionChunk, value)


def _responses_response(value: Any) -> Any:
    from openai.types.responses import Response

    return _construct(Response, value)


def _response_models() -> tuple[type, ...]:
    """The response models a replay may rebuild from a recorded value (see :mod:`otel_replay.revival`)."""
    from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
    from openai.types.responses import Response

    return (ChatCompletion, ChatCompletionChunk, ChatCompletionMessage, Response)


def _responses_event(value: Any) -> Any:
    from openai.types.responses import ResponseStreamEvent

    return _construct(ResponseStreamEvent, value)


# ----------------------------------------------------------------------------------- finish reasons


def chat_finish_reasons(response: Any) -> list[str] | None:
    """``finish_reason`` of every choice of a plain chat completion."""
    if not isinstance(response, Mapping):
        return None
    reasons = [str(c.get("finish_reason")) for c in response.get("choices") or () if c.get("finish_reason")]
    return reasons or None


def responses_finish_reasons(response: Any) -> list[str] | None:
    """Finish reasons of a plain ``Response``, in chat terms: ``tool_calls`` when it asks for a function call,
    the ``incomplete_details.reason`` (``max_output_tokens``…) when incomplete, else ``stop``."""
    if not isinstance(response, Mapping) or not response.get("status"):
        return None
    status = response["status"]
    if status == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return [str(reason or "incomplete")]
    if status != "completed":
        return [str(status)]
    if any(isinstance(i, Mapping) and i.get("type") == "function_call" for i in response.get("output") or ()):
        return ["tool_calls"]
    return ["stop"]


# ------------------------------------------------------------------------------------------ context


def _text(content: Any) -> Any:
    if isinstance(content, str) or content is None:
        return content
    parts = [field(p, "text") for p in as_list(content)]
    return "".join(p for p in parts if isinstance(p, str)) or content


def chat_context(request: Mapping[str, Any]) -> dict[str, Any]:
    """``record_context`` arguments of a chat request: system/developer messages, the messages, tool results."""
    messages = as_list(request.get("messages"))
    system: list[Any] = []
    results: list[dict[str, Any]] = []
    for m in messages:  # one pass, each message's role read once
        role = field(m, "role")
        if role in ("system", "developer"):
            system.append(_text(field(m, "content")))
        elif role == "tool":
            results.append({"tool_call_id": field(m, "tool_call_id"), "content": field(m, "content")})
    return {
        "system_rules": system[0] if len(system) == 1 else (system or None),
        "history": messages,
        "tool_results": results or None,
    }


def responses_context(request: Mapping[str, Any]) -> dict[str, Any]:
    """``record_context`` arguments of a Responses request: instructions, input items, function outputs."""
    items = request.get("input")
    listed = as_list(items) if not isinstance(items, str) else [items]
    results = [
        {"call_id": field(i, "call_id"), "output": field(i, "output")}
        for i in listed
        if field(i, "type") == "function_call_output"
    ]
    return {"system_rules": request.get("instructions"), "history": items, "tool_results": results or None}


def sdk_api(kind: str, capture_context: bool, runtime: ProviderBinding | None = None) -> SdkApi:
    if kind == "chat":
        return SdkApi(
            provider=PROVIDER,
            step=CHAT_STEP,
            build_response=_chat_response,
            build_chunk=_chat_chunk,
            assemble=assemble_chat,
            finish_reasons=chat_finish_reasons,
            context=chat_context,
            replay_stream=_replay_stream,
            replay_async_stream=_replay_async_stream,
            delta_slots=chat_delta_slots,
            capture_context=capture_context,
            recorder_reads_finish_reasons=True,
            path="/chat/completions",
            runtime=runtime,
        )
    return SdkApi(
        provider=PROVIDER,
        step=RESPONSES_STEP,
        build_response=_responses_response,
        build_chunk=_responses_event,
        assemble=assemble_responses,
        finish_reasons=responses_finish_reasons,
        context=responses_context,
        replay_stream=_replay_stream,
        replay_async_stream=_replay_async_stream,
        delta_slots=responses_delta_slots,
        capture_context=capture_context,
        path="/responses",
        runtime=runtime,
    )


class OpenAIInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Records OpenAI SDK model calls as otel-replay model steps and answers them during replays.

    ``OpenAIInstrumentor().instrument()`` wraps ``chat.completions.create`` and ``responses.create`` of
    ``OpenAI`` and ``AsyncOpenAI`` clients (every client, including ones created before the call).
    Options: ``capture_context`` (default True) also writes a context snapshot (system rules, messages,
    tool results) on each step; ``tracer_provider`` sends the spans it records to that provider instead of
    the current runtime's (see ``docs/instrumentation.md``). ``uninstrument()`` removes only this
    instrumentor's wrappers, also when another instrumentor wrapped the same methods after it.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        """The SDK requirement checked by ``instrument()`` and ``opentelemetry-instrument``."""
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        import importlib

        capture_context = bool(kwargs.get("capture_context", True))
        runtime = bind_provider(kwargs.get("tracer_provider"))
        for module_name, cls_name, method, kind, is_async in _TARGETS:
            owner = getattr(importlib.import_module(module_name), cls_name)
            _sdk.wrap(owner, method, _sdk.create_wrapper(sdk_api(kind, capture_context, runtime), is_async=is_async))
        _sdk.register_models(_response_models, PROVIDER)

    def _uninstrument(self, **kwargs: Any) -> None:
        import importlib

        for module_name, cls_name, method, _, _ in _TARGETS:
            _sdk.unwrap(getattr(importlib.import_module(module_name), cls_name), method)
