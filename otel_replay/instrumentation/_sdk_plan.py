"""One instrumented SDK call: its plan (implicit run, model step, context), performed or answered.

``_start`` begins recording a call (or lets it through unrecorded: suppressed, a streaming raw response, a
failure), ``run_sync`` / ``run_async`` answer it from the replay or perform it, and a performed call's stream
is wrapped (:class:`RecordingStream`, :class:`AsyncRecordingStream`) to record its chunks, ending the step with
the stream. ``create_wrapper`` and ``stream_request`` / ``stream_request_async`` are the entry points the
instrumentors wrap methods with. Part of :mod:`otel_replay.instrumentation._sdk`, which re-exports it.

It must never raise into the host program from its own bookkeeping (the SDK's own exceptions and a replay's
``ReplayInterrupt`` pass unchanged), call the real SDK for a call the replay answered, or let a streaming raw
response reach the network during a replay that is not live.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any, Final

from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from .. import semconv
from ..recording import (
    DivergenceStop,
    ReplayInterrupt,
    begin_model_call,
    begin_run,
    current_replay,
    end_call,
    end_run,
    in_model_step,
    in_run,
    record_context,
    unguarded,
)
from ._sdk_api import (
    STREAM_ENVELOPE,
    ProxyBase,
    SdkApi,
    field,
    is_stream_envelope,
    log,
    plain,
    redact_stream,
    request_of,
)
from ._sdk_replayed import ReplayedRawResponse

_RAW_RESPONSE_HEADER: Final = "x-stainless-raw-response"
_UNRECORDED: Final = object()
"""Noted in place of a stream chunk that could not be converted to plain data: the stream's step then records
no response rather than a stream with a chunk missing."""


def _ensure_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _json_copy(value: Any) -> Any:
    """A copy of plain JSON data (dicts and lists copied all the way down; strings and numbers shared)."""
    if type(value) is dict:
        return {k: _json_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_json_copy(v) for v in value]
    return value


def _raw_response_requested(kwargs: Mapping[str, Any]) -> str | None:
    """The SDK's raw-response marker of a call: ``"true"`` (``with_raw_response``: the call returns the raw
    response, read), ``"stream"`` (``with_streaming_response``: the raw response, unread), else None."""
    headers = kwargs.get("extra_headers")
    if not isinstance(headers, Mapping):
        return None
    return next((str(v) for k, v in headers.items() if str(k).lower() == _RAW_RESPONSE_HEADER), None)


def _refuse_raw_during_replay(api: SdkApi) -> None:
    """A ``with_streaming_response`` call is neither recorded nor answerable; in a replay that is not live it
    would reach the network unasked, so it stops the replay instead."""
    from ..recording import current_replay

    session = current_replay.get()
    if session is None or getattr(getattr(session, "mode", None), "value", None) == "live":
        return

    reason = f"a {api.step} call through with_streaming_response cannot be answered from a recording"
    diverge = getattr(session, "_diverge", None)
    if diverge is not None:
        diverge(None, "unanswerable", reason)
    raise DivergenceStop(
        f"replay stopped: {reason} (use the plain method or with_raw_response, or replay in live mode)"
    )


class Plan:
    """One instrumented SDK call: its (implicit) run, its step, and the context they live in.

    A streamed call keeps its step open after ``create`` returns, until the stream ends; its run and step
    therefore live in a copy of the caller's context (``ctx``), so the caller's context is left exactly as
    it was and later steps of the agent are not nested under the stream's step. The stream's HTTP call itself
    runs in the caller's context inside a run (whatever the SDK or another instrumentor attaches there for
    the stream's lifetime is detached there too; their spans are children of the caller's current span, in
    the run's trace), and in ``ctx`` for an implicit run (so their spans join the implicit run's trace
    instead of starting traces of their own).
    """

    __slots__ = ("api", "call", "ctx", "done", "raw", "run", "stream")

    def __init__(self, api: SdkApi, stream: bool, raw: bool = False) -> None:
        self.api = api
        self.stream = stream
        self.raw = raw
        """The call asked for the raw response (``with_raw_response``): it returns one and is answered with
        a :class:`ReplayedRawResponse`."""
        self.ctx = contextvars.copy_context() if stream else None
        self.run: Any = None
        self.call: Any = None
        self.done = False

    def enter(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        ctx = self.ctx
        return ctx.run(fn, *args, **kwargs) if ctx is not None else fn(*args, **kwargs)

    def begin(self, request: dict[str, Any]) -> None:
        model = request.get("model")
        rt = self.api.runtime() if self.api.runtime is not None else None
        if not in_run():
            self.run = begin_run(self.api.step, arguments=request, runtime=rt)
        try:
            self.call = begin_model_call(
                self.api.step,
                request,
                provider=self.api.provider,
                model=model if isinstance(model, str) else None,
                instrumentation=self.api.provider,
                runtime=rt,
            )
        except ReplayInterrupt as stop:
            end_run(self.run, exc=stop)
            self.run = None
            raise
        if self.call is not None and self.api.capture_context:
            try:
                record_context(**self.api.context(request))
            except Exception:  # noqa: BLE001 - never into the host program
                log.warning("otel-replay: %s context snapshot failed", self.api.step, exc_info=True)

    @property
    def served(self) -> Any:
        return self.call.served if self.call is not None else None

    # ------------------------------------------------------------------------------------------ endings

    def _end(self, result: Any = None, exc: BaseException | None = None) -> None:
        end_call(self.call, result=result, exc=exc)
        end_run(self.run, result=result, exc=exc)

    def finish(self, *, result: Any = None, exc: BaseException | None = None) -> None:
        """End the step (and an implicit run) once; never raises."""
        if self.done:
            return
        self.done = True
        try:
            if exc is None and self.call is not None:
                streamed = is_stream_envelope(result)
                if streamed or not self.api.recorder_reads_finish_reasons:
                    reasons = self.api.finish_reasons(result.get("response") if streamed else result)
                    if reasons:
                        self.call.step.span.set_attribute(semconv.GEN_AI_RESPONSE_FINISH_REASONS, reasons)
        except Exception:  # noqa: BLE001 - an odd response loses its finish reasons, never its step's end
            log.warning("otel-replay: could not read the finish reasons of %s", self.api.step, exc_info=True)
        try:
            self.enter(self._end, result, exc)
        except Exception:  # noqa: BLE001
            log.warning("otel-replay: could not finish recording %s", self.api.step, exc_info=True)

    def finish_chunks(
        self, chunks: list[Any], *, complete: bool, exc: BaseException | None = None, replayed: bool = False
    ) -> None:
        """End a streamed call from the chunks it yielded, as plain data: snapshots taken as each chunk was
        received (:meth:`RecordingStreamBase._note`), or the recorded chunks when replayed (not redacted
        again)."""
        if self.done:
            return
        try:
            data = chunks
            if not replayed and any(c is _UNRECORDED for c in data):
                raise ValueError("a chunk of the stream could not be recorded")
            if self.call is not None and not replayed:
                redact_stream(data, self.api, self.call.step.run.rt.redactor)
            response = self.api.assemble(data)
            envelope = {
                STREAM_ENVELOPE: 1,
                "chunks": data,
                "complete": complete,
                "response": response,
                "model": field(response, "model") if isinstance(response, Mapping) else None,
                "usage": field(response, "usage") if isinstance(response, Mapping) else None,
            }
        except Exception:  # noqa: BLE001
            log.warning("otel-replay: could not assemble the %s stream", self.api.step, exc_info=True)
            envelope = None
        self.finish(result=envelope if exc is None else None, exc=exc)

    # --------------------------------------------------------------------------------------- answering

    def answer(self, value: Any, *, async_: bool) -> Any:
        """The SDK object for a recorded answer (a stream that ends the step when it is done)."""
        if self.stream:
            if is_stream_envelope(value):
                data = _ensure_list(value.get("chunks"))
            else:
                exc = DivergenceStop(
                    f"replay stopped: the recorded {self.api.step} call was not streamed and "
                    "this call asks for a stream (pass stream= as when it was recorded)"
                )
                self.finish(exc=exc)
                raise exc
            # Fresh chunk objects for every replayed call, built from copies of the recorded data (the SDKs'
            # lenient constructors keep untyped values as given): a consumer that changes them in place
            # (appending a tool call's arguments onto its first chunk, as LlamaIndex does) leaves the recorded
            # chunks, which this step ends with, as they were.
            build = self.api.build_chunk
            objects = [build(_json_copy(c)) for c in data]
            on_done = lambda: self.finish_chunks(data, complete=True, replayed=True)  # noqa: E731
            stream = (self.api.replay_async_stream if async_ else self.api.replay_stream)(objects, on_done)
            return ReplayedRawResponse(stream, None, self.api) if self.raw else stream
        if is_stream_envelope(value):
            value = value.get("response")
        obj = self.api.build_response(value)
        self.finish(result=value)
        return ReplayedRawResponse(obj, value, self.api) if self.raw else obj


def _start(
    api: SdkApi, request: dict[str, Any] | None, args: tuple[Any, ...], kwargs: Mapping[str, Any], stream: bool
) -> Plan | None:
    """Begin recording one call; None when the call must simply go through (suppressed, raw, or a failure)."""
    try:
        if not is_instrumentation_enabled():
            return None
        raw = _raw_response_requested(kwargs)
        if raw is not None and raw != "true":
            _refuse_raw_during_replay(api)
            return None
        if in_model_step():  # the step that made this call records it: nothing to read or begin here
            return None
        if request is None:
            request = request_of(args, kwargs)
        plan = Plan(api, stream, raw=raw is not None)
    except Exception:  # noqa: BLE001
        log.warning("otel-replay: could not record %s; calling it unrecorded", api.step, exc_info=True)
        return None
    try:
        plan.enter(plan.begin, request)
    except ReplayInterrupt:
        raise
    except Exception:  # noqa: BLE001
        log.warning("otel-replay: could not record %s; calling it unrecorded", api.step, exc_info=True)
        plan.finish(exc=None)
        return None
    if plan.call is None and plan.run is None:  # inside a step that records it (e.g. a LangChain chat model)
        return None
    return plan


def overridden(api: SdkApi, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` of a call with the model overrides of the replay's policy applied (the session's
    ``override_request``, before the call is recorded and sent); the same dict outside such a replay."""
    session = current_replay.get()
    override = getattr(session, "override_request", None) if session is not None else None
    if override is None:
        return kwargs
    try:
        changed: dict[str, Any] = override(api.step, kwargs)
    except Exception as exc:  # fail closed: never send a call the replay meant to change unchanged
        raise ReplayInterrupt(
            f"replay stopped at {api.step}: applying the model overrides failed ({type(exc).__name__}); "
            "nothing was sent"
        ) from exc
    return changed


def run_sync(api: SdkApi, plan: Plan, call: Callable[[], Any]) -> Any:
    """Answer or perform a sync call under ``plan``."""
    if plan.served is not None:
        return _served(plan, async_=False)
    try:
        with unguarded(plan.call):
            result = call() if plan.stream and plan.run is None else plan.enter(call)
    except BaseException as exc:
        plan.finish(exc=exc)
        raise
    return _performed(api, plan, result, RecordingStream)


async def run_async(api: SdkApi, plan: Plan, call: Callable[[], Any]) -> Any:
    """Answer or perform an async call under ``plan`` (``call()`` returns an awaitable)."""
    if plan.served is not None:
        return _served(plan, async_=True)
    try:
        with unguarded(plan.call):
            result = await call()
    except BaseException as exc:
        plan.finish(exc=exc)
        raise
    return _performed(api, plan, result, AsyncRecordingStream)


def _served(plan: Plan, *, async_: bool) -> Any:
    """The recorded answer of a call (its recorded error raised)."""
    served = plan.served
    if served.error is not None:
        plan.finish(exc=served.error)
        raise served.error
    return plan.answer(served.value, async_=async_)


def _performed(api: SdkApi, plan: Plan, result: Any, stream_type: Callable[[Any, Plan], Any]) -> Any:
    """A call that really ran: its stream, wrapped to record the chunks, or its response, recorded now."""
    if plan.raw:
        return _performed_raw(api, plan, result, stream_type)
    if plan.stream:
        try:
            return stream_type(result, plan)
        except Exception:  # noqa: BLE001
            log.warning("otel-replay: could not record the %s stream", api.step, exc_info=True)
            plan.finish(result=None)
            return result
    plan.finish(result=_plain_guarded(api, result))
    return result


def _performed_raw(api: SdkApi, plan: Plan, raw: Any, stream_type: Callable[[Any, Plan], Any]) -> Any:
    """A ``with_raw_response`` call that really ran: the raw response is parsed to the SDK object (what the
    recording holds; the raw response keeps the parsed object, so the caller's ``parse()`` gets the same one).
    For a stream, the caller's ``parse()`` returns the stream wrapped to record its chunks."""
    try:
        parsed = raw.parse()
    except Exception:  # noqa: BLE001 - the caller's own parse() will meet the same problem
        log.warning("otel-replay: could not read the raw %s response", api.step, exc_info=True)
        plan.finish(result=None)
        return raw
    if not plan.stream:
        plan.finish(result=_plain_guarded(api, parsed))
        return raw
    try:
        return RawRecording(raw, stream_type(parsed, plan))
    except Exception:  # noqa: BLE001
        log.warning("otel-replay: could not record the %s stream", api.step, exc_info=True)
        plan.finish(result=None)
        return raw


def _plain_guarded(api: SdkApi, result: Any) -> Any:
    try:
        return plain(result)
    except Exception:  # noqa: BLE001
        log.warning("otel-replay: could not record the %s response", api.step, exc_info=True)
        return None


def create_wrapper(api: SdkApi, *, is_async: bool) -> Callable[..., Any]:
    """A ``wrapt`` wrapper for a ``create``-shaped method (``stream=True`` returns a stream)."""
    if is_async:

        async def async_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            kwargs = overridden(api, kwargs)
            plan = _start(api, None, args, kwargs, bool(kwargs.get("stream")))
            if plan is None:
                return await wrapped(*args, **kwargs)
            return await run_async(api, plan, lambda: wrapped(*args, **kwargs))

        return async_wrapper

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        kwargs = overridden(api, kwargs)
        plan = _start(api, None, args, kwargs, bool(kwargs.get("stream")))
        if plan is None:
            return wrapped(*args, **kwargs)
        return run_sync(api, plan, lambda: wrapped(*args, **kwargs))

    return wrapper


def stream_request(api: SdkApi, request: dict[str, Any], original: Callable[[], Any]) -> Any:
    """Perform or answer the request behind a stream helper's context manager (sync)."""
    plan = _start(api, request, (), {}, True)
    if plan is None:
        return original()
    return run_sync(api, plan, original)


async def stream_request_async(api: SdkApi, request: dict[str, Any], original: Any) -> Any:
    """Perform or answer the awaitable request behind an async stream helper's context manager."""
    plan = _start(api, request, (), {}, True)
    if plan is None:
        return await original
    if plan.served is not None:
        close = getattr(original, "close", None)  # the SDK's coroutine is never awaited: close it quietly
        if close is not None:
            close()
    return await run_async(api, plan, lambda: original)


class RawRecording(ProxyBase):
    """The SDK's raw response of a recorded streamed call: ``parse()`` returns the recording stream."""

    def __init__(self, wrapped: Any, stream: Any) -> None:
        super().__init__(wrapped)
        self._self_stream = stream

    def parse(self, *, to: Any = None) -> Any:
        """The recording stream (a custom ``to`` type is parsed by the SDK, unrecorded)."""
        return self._self_stream if to is None else self.__wrapped__.parse(to=to)


class ClosingResponse(ProxyBase):
    """The stream's HTTP response; closing it (as the SDKs' stream helpers do) also ends the step."""

    def __init__(self, wrapped: Any, on_close: Callable[[], None]) -> None:
        super().__init__(wrapped)
        self._self_on_close = on_close

    def close(self) -> None:
        """Close the HTTP response; the step ends with what was received."""
        try:
            self.__wrapped__.close()
        finally:
            self._self_on_close()

    async def aclose(self) -> None:
        """Close the HTTP response (async); the step ends with what was received."""
        try:
            await self.__wrapped__.aclose()
        finally:
            self._self_on_close()


class RecordingStreamBase(ProxyBase):
    """What the sync and async recording streams share: the chunks seen so far and the HTTP response.

    Each chunk is noted as plain data (:func:`plain`, the JSON the server sent) when it is received, before the
    consumer gets the object: consumers change chunk objects in place (LlamaIndex's OpenAI LLM appends each
    tool-call argument fragment onto the first chunk's tool call), so objects converted only when the stream
    ends would record what the consumer made of them, not what the API sent."""

    def __init__(self, wrapped: Any, plan: Plan) -> None:
        super().__init__(wrapped)
        self._self_plan = plan
        self._self_chunks: list[Any] = []

    def _note(self, item: Any) -> None:
        """Keep a snapshot of ``item`` as the server sent it; never raises."""
        try:
            self._self_chunks.append(plain(item))
        except Exception:  # noqa: BLE001 - the step then records no response, never fails the stream
            log.warning("otel-replay: could not record a %s stream chunk", self._self_plan.api.step, exc_info=True)
            self._self_chunks.append(_UNRECORDED)

    @property
    def response(self) -> Any:
        """The SDK stream's HTTP response."""
        return ClosingResponse(
            self.__wrapped__.response, lambda: self._self_plan.finish_chunks(self._self_chunks, complete=False)
        )


class RecordingStream(RecordingStreamBase):
    """The SDK's own stream, passed through unchanged, noting each chunk; the step ends with the stream."""

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        try:
            item = next(self.__wrapped__)
        except StopIteration:
            self._self_plan.finish_chunks(self._self_chunks, complete=True)
            raise
        except BaseException as exc:
            self._self_plan.finish_chunks(self._self_chunks, complete=False, exc=exc)
            raise
        self._note(item)
        return item

    def __enter__(self) -> Any:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_plan.finish_chunks(self._self_chunks, complete=False)

    def close(self) -> None:
        """Close the SDK's stream; the step ends with what was received."""
        try:
            self.__wrapped__.close()
        finally:
            self._self_plan.finish_chunks(self._self_chunks, complete=False)


class AsyncRecordingStream(RecordingStreamBase):
    """The SDK's own async stream, passed through unchanged, noting each chunk; the step ends with it."""

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            self._self_plan.finish_chunks(self._self_chunks, complete=True)
            raise
        except BaseException as exc:
            self._self_plan.finish_chunks(self._self_chunks, complete=False, exc=exc)
            raise
        self._note(item)
        return item

    async def __aenter__(self) -> Any:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_plan.finish_chunks(self._self_chunks, complete=False)

    async def close(self) -> None:
        """Close the SDK's stream; the step ends with what was received."""
        try:
            await self.__wrapped__.close()
        finally:
            self._self_plan.finish_chunks(self._self_chunks, complete=False)
