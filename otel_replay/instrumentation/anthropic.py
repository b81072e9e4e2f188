"""Record and replay Anthropic Python SDK calls: ``messages.create`` and ``messages.stream``.

Every call, sync (``Anthropic``) or async (``AsyncAnthropic``), streamed or not, becomes an
``anthropic.messages`` model step of the current run, or of a single-call run of its own outside any run.
During a replay the recorded answer comes back as the SDK's own ``Message`` or stream of raw events; for
``messages.stream(...)`` the SDK's own ``MessageStream`` is built over the recorded events, so ``text_stream``,
``get_final_message()`` and ``with`` / ``async with`` behave as they did, and no HTTP request leaves the process.

This module must never import ``anthropic`` at import time (the SDK is an optional extra), and never raise
into the host program from its own code (see :mod:`otel_replay.instrumentation._sdk`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection, Mapping
from typing import Any, Final

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from ..runtime import bind_provider
from ..streams import assemble_message, message_delta_slots
from . import _sdk
from ._sdk import SdkApi, as_list, field

_log = logging.getLogger("otel_replay")

_instruments: Final = ("anthropic >= 0.40.0",)
"""The SDK versions this instrumentor supports."""

PROVIDER: Final = "anthropic"
"""``gen_ai.provider.name`` of the steps this instrumentor records."""
MESSAGES_STEP: Final = "anthropic.messages"
"""Step name of a ``messages.create`` / ``messages.stream`` call."""

_MODULE: Final = "anthropic.resources.messages.messages"
_MANAGER_REQUEST: Final = {False: "_MessageStreamManager__api_request", True: "_AsyncMessageStreamManager__api_request"}


# --------------------------------------------------------------------------------------- rebuilding


def _construct(type_: Any, value: Any) -> Any:
    """Build an SDK object from its wire JSON the way the SDK itself does (lenient, no validation)."""
    from anthropic._models import construct_type

    return construct_type(type_=type_, value=value)


def _message(value: Any) -> Any:
    from anthropic.types import Message

    return _construct(Message, value)


def _response_models() -> tuple[type, ...]:
    """The response models a replay may rebuild from a recorded value (see :mod:`otel_replay.revival`)."""
    from anthropic.types import Message, TextBlock, ToolUseBlock, Usage

    return (Message, TextBlock, ToolUseBlock, Usage)


def _event(value: Any) -> Any:
    from anthropic.types import RawMessageStreamEvent

    return _construct(RawMessageStreamEvent, value)


@functools.cache
def _stream_classes() -> tuple[type, type]:
    import anthropic

    return (
        _sdk.replay_stream_class(anthropic.Stream, is_async=False),
        _sdk.replay_stream_class(anthropic.AsyncStream, is_async=True),
    )


def _replay_stream(items: list[Any], on_done: Any) -> Any:
    return _stream_classes()[0](items, on_done)


def _replay_async_stream(items: list[Any], on_done: Any) -> Any:
    return _stream_classes()[1](items, on_done)


# ----------------------------------------------------------------------------------- finish reasons


def finish_reasons(response: Any) -> list[str] | None:
    """``stop_reason`` of a plain ``Message``."""
    reason = response.get("stop_reason") if isinstance(response, Mapping) else None
    return [str(reason)] if reason else None


def messages_context(request: Mapping[str, Any]) -> dict[str, Any]:
    """``record_context`` arguments of a Messages request: ``system``, the messages, the tool_result blocks."""
    messages = as_list(request.get("messages"))
    results = [
        {"tool_use_id": field(b, "tool_use_id"), "content": field(b, "content"), "is_error": field(b, "is_error")}
        for m in messages
        if field(m, "role") == "user" and not isinstance(field(m, "content"), str)
        for b in as_list(field(m, "content"))
        if field(b, "type") == "tool_result"
    ]
    return {"system_rules": request.get("system"), "history": messages, "tool_results": results or None}


# ------------------------------------------------------------------------------------ stream helper


def _stream_wrapper(api: SdkApi, *, is_async: bool) -> Any:
    """Wrap ``messages.stream``: the SDK builds its lazy ``MessageStreamManager``; we swap the request it
    makes on ``__enter__`` for one that records (or answers) it, so the SDK's own ``MessageStream`` runs over
    the recorded or live raw events."""
    attribute = _MANAGER_REQUEST[is_async]

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        kwargs = _sdk.overridden(api, kwargs)  # a replay's model overrides, before the request is built
        manager = wrapped(*args, **kwargs)
        try:
            original = getattr(manager, attribute)
            request = _sdk.request_of(args, kwargs, stream=True)
            if is_async:
                setattr(manager, attribute, _sdk.stream_request_async(api, request, original))
            else:
                setattr(manager, attribute, lambda: _sdk.stream_request(api, request, original))
        except Exception:  # noqa: BLE001 - an SDK whose stream helper changed: leave it unrecorded
            _log.warning("otel-replay: could not record %s.stream; calling it unrecorded", api.step, exc_info=True)
        return manager

    return wrapper


class AnthropicInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Records Anthropic SDK model calls as otel-replay model steps and answers them during replays.

    ``AnthropicInstrumentor().instrument()`` wraps ``messages.create`` and ``messages.stream`` of
    ``Anthropic`` and ``AsyncAnthropic`` clients. Options: ``capture_context`` (default True) also writes a
    context snapshot (system, messages, tool_result blocks) on each step; ``tracer_provider`` sends the spans it
    records to that provider instead of the current runtime's (see ``docs/instrumentation.md``).
    ``uninstrument()`` removes only this instrumentor's wrappers.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        """The SDK requirement checked by ``instrument()`` and ``opentelemetry-instrument``."""
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        import importlib

        module = importlib.import_module(_MODULE)
        api = SdkApi(
            provider=PROVIDER,
            step=MESSAGES_STEP,
            build_response=_message,
            build_chunk=_event,
            assemble=assemble_message,
            finish_reasons=finish_reasons,
            context=messages_context,
            replay_stream=_replay_stream,
            replay_async_stream=_replay_async_stream,
            delta_slots=message_delta_slots,
            capture_context=bool(kwargs.get("capture_context", True)),
            recorder_reads_finish_reasons=True,
            path="/v1/messages",
            runtime=bind_provider(kwargs.get("tracer_provider")),
        )
        _sdk.wrap(module.Messages, "create", _sdk.create_wrapper(api, is_async=False))
        _sdk.wrap(module.AsyncMessages, "create", _sdk.create_wrapper(api, is_async=True))
        _sdk.wrap(module.Messages, "stream", _stream_wrapper(api, is_async=False))
        _sdk.wrap(module.AsyncMessages, "stream", _stream_wrapper(api, is_async=True))
        _sdk.register_models(_response_models, PROVIDER)

    def _uninstrument(self, **kwargs: Any) -> None:
        import importlib

        module = importlib.import_module(_MODULE)
        for owner in (module.Messages, module.AsyncMessages):
            for method in ("create", "stream"):
                _sdk.unwrap(owner, method)
