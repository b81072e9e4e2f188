"""What the SDK instrumentors hand the shared machinery, and an SDK call as plain data.

:class:`SdkApi` (everything SDK-specific about one ``create``-shaped method, supplied by the instrumentor
module), the request a call records (:func:`request_of`: transport-only keywords and "not given" markers left
out), SDK objects as the JSON their server sent (:func:`plain`), the recorded stream envelope
(:data:`STREAM_ENVELOPE`) and the redaction of a stream's text deltas as the text they make up
(:func:`redact_stream`). Part of :mod:`otel_replay.instrumentation._sdk`, which re-exports it.

It must never import an SDK, record or answer a call, or let a secret split over several stream chunks through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import wrapt

from ..streams import redact_deltas

log = logging.getLogger("otel_replay")
TRANSPORT_ONLY: Final = frozenset(
    {
        "timeout",
        "extra_headers",
        "extra_query",
        "extra_body",
        "idempotency_key",
        "max_retries",
        "stream_cls",
        "request_options",
        "options",
    }
)
"""Keyword arguments that shape the HTTP exchange, not what the model is asked: left out of the recorded
request so its hash (what deterministic replay matches on) does not change with a timeout or a header."""


if TYPE_CHECKING:
    from ..runtime import Runtime

    ProxyBase = wrapt.ObjectProxy[Any]
else:
    ProxyBase = wrapt.ObjectProxy  # not subscriptable before wrapt 2


STREAM_ENVELOPE: Final = "otel_replay.stream"
"""Key marking a recorded streamed response: ``{"otel_replay.stream": 1, "chunks": [...], "response": {...},
"complete": bool, "model": ..., "usage": {...}}``."""


def is_sentinel(value: Any) -> bool:
    """True for the SDKs' "argument not given" markers (``NOT_GIVEN``, ``omit``)."""
    return type(value).__name__ in ("NotGiven", "Omit")


def request_of(args: tuple[Any, ...], kwargs: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """The request a call records: its keyword arguments minus transport-only ones and "not given" markers."""
    request = {k: v for k, v in kwargs.items() if k not in TRANSPORT_ONLY and not is_sentinel(v)}
    if args:
        request["args"] = list(args)
    request.update(extra)
    return request


def plain(obj: Any) -> Any:
    """An SDK object as the JSON its server sent (``model_dump`` of the fields that were set)."""
    dump = getattr(obj, "model_dump", None)
    if dump is None:
        return obj
    try:
        return dump(mode="json", exclude_unset=True, by_alias=True, warnings=False)
    except TypeError:  # an older pydantic signature
        return dump(mode="json", exclude_unset=True, by_alias=True)


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for a dict, ``obj.name`` otherwise (request messages may be dicts or SDK objects)."""
    if type(obj) is dict or isinstance(obj, Mapping):  # plain dicts first: the ABC check costs more than the get
        return obj.get(name, default)
    return getattr(obj, name, default)


def as_list(value: Any) -> list[Any]:
    """A request value as a list (iterables of messages may be generators or tuples)."""
    if value is None or isinstance(value, (str, bytes, Mapping)):
        return [] if value is None else [value]
    try:
        return list(value)
    except TypeError:
        return [value]


@dataclass(frozen=True, kw_only=True)
class SdkApi:
    """What the shared machinery needs to know about one SDK method (supplied by the instrumentor module)."""

    provider: str
    """``gen_ai.provider.name``: ``openai`` or ``anthropic``."""
    step: str
    """Step name, e.g. ``openai.chat.completions``; also the name of an implicit run."""
    build_response: Callable[[Any], Any]
    """Recorded response (plain data) → the SDK's response object."""
    build_chunk: Callable[[Any], Any]
    """One recorded chunk → the SDK's chunk / event object."""
    assemble: Callable[[list[Any]], Any]
    """Recorded chunks, in order → the response they make up (plain data), or None."""
    finish_reasons: Callable[[Any], list[str] | None]
    """Plain response → ``gen_ai.response.finish_reasons``."""
    context: Callable[[Mapping[str, Any]], dict[str, Any]]
    """Request → keyword arguments of :func:`~otel_replay.recording.record_context`."""
    replay_stream: Callable[[list[Any], Callable[[], None]], Any]
    """``(chunk objects, on_done)`` → a sync stream object that yields them like the SDK's stream."""
    replay_async_stream: Callable[[list[Any], Callable[[], None]], Any]
    """The same, as an async stream."""
    delta_slots: Callable[[Any], Iterable[tuple[Any, Any, str]]] | None = None
    """One plain chunk → ``(channel, container, key)`` for each text delta it carries (``container[key]`` is
    the piece; the pieces of one channel, in order, make up one text: a message's content, a tool call's
    arguments). Lets :func:`redact_stream` redact the joined text of each channel."""
    capture_context: bool = True
    path: str = ""
    """The API path of the method (``/chat/completions``), shown as the URL of a replayed raw response."""
    recorder_reads_finish_reasons: bool = False
    """True when the recorder takes ``gen_ai.response.finish_reasons`` from the plain response itself (Chat
    Completions' ``choices[].finish_reason``, Messages' ``stop_reason``) and sets it over ours: then
    :attr:`finish_reasons` is applied only to a streamed call, whose recorded envelope the recorder does not
    read that way."""
    runtime: Callable[[], Runtime] | None = None
    """What the instrumentor given ``tracer_provider=`` records with (:func:`otel_replay.runtime.bind_provider`,
    resolved per call); None: the current runtime."""


def redact_stream(chunks: list[Any], api: SdkApi, redactor: Any) -> int:
    """Redact the text deltas of recorded stream ``chunks`` in place, channel by channel, as the text each
    channel's pieces make up together (:func:`otel_replay.streams.redact_deltas`). Returns the number of
    replacements."""
    return 0 if api.delta_slots is None else redact_deltas(chunks, api.delta_slots, redactor)


def is_stream_envelope(value: Any) -> bool:
    """True for a recorded streamed response."""
    return isinstance(value, Mapping) and STREAM_ENVELOPE in value
