"""The chat model and retriever wrappers of the LangChain instrumentor: record each call, or answer it in a replay.

``BaseChatModel._generate_with_cache`` / ``_agenerate_with_cache`` / ``stream`` / ``astream`` and
``BaseRetriever.invoke`` / ``ainvoke`` become model and retrieval steps; during a replay the recorded answer is
rebuilt as LangChain's objects (streamed as one chunk, with the ``on_llm_new_token`` callbacks its streaming
handlers expect). Part of :mod:`otel_replay.instrumentation.langchain`.

It must never call the real model or retriever when the replay answered the call, raise into the host
program from its own bookkeeping, or swallow the host's exceptions.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from ..recording import (
    begin_model_call,
    begin_retrieval_call,
    current_replay,
    end_call,
    in_run,
    permit,
    unguarded,
)
from ._guarded import enabled as _enabled
from ._langchain_codecs import (
    STRUCTURED_OUTPUT_KWARGS,
    arg,
    chat_result_from,
    chat_result_plain,
    chunks_from,
    chunks_plain,
    documents_from,
    documents_plain,
    model_request,
    retrieval_arguments,
    token_events,
)
from ._langchain_runs import (
    NAME,
    aiter_in_run,
    aiterate_in,
    async_in_run,
    iter_in_run,
    iterate_in,
    langchain_begin,
    langchain_safely,
    name_of,
    ran,
    served_answer,
    sync_in_run,
)


class _ModelCall:
    """What a chat model wrapper needs to begin a step: name, request, provider and model."""

    __slots__ = ("model", "name", "provider", "request")

    def __init__(self, instance: Any, messages: Any, stop: Any, extra: dict[str, Any], run_manager: Any = None) -> None:
        self.name = name_of(instance, type(instance).__name__)
        self.request, ls = model_request(instance, messages, stop, extra, run_manager)
        provider, model = ls.get("ls_provider"), ls.get("ls_model_name")
        self.provider = provider if isinstance(provider, str) else None
        self.model = model if isinstance(model, str) else None

    def begin(self) -> Any:
        return langchain_begin(
            "model",
            begin_model_call,
            self.name,
            self.request,
            provider=self.provider,
            model=self.model,
            instrumentation=NAME,
        )


def _generate_parts(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _ModelCall:
    """``_generate_with_cache(messages, stop=None, run_manager=None, **kwargs)``."""
    extra = {k: v for k, v in kwargs.items() if k not in ("messages", "stop", "run_manager")}
    return _ModelCall(
        instance,
        arg(args, kwargs, 0, "messages"),
        arg(args, kwargs, 1, "stop"),
        extra,
        arg(args, kwargs, 2, "run_manager"),
    )


def _stream_parts(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _ModelCall:
    """``stream(input, config=None, *, stop=None, **kwargs)``: the messages as ``stream`` will send them."""
    extra = {k: v for k, v in kwargs.items() if k not in ("input", "config", "stop", *STRUCTURED_OUTPUT_KWARGS)}
    messages = instance._convert_input(arg(args, kwargs, 0, "input")).to_messages()
    return _ModelCall(instance, messages, kwargs.get("stop"), extra)


def _streams(instance: Any, kwargs: dict[str, Any], *, async_api: bool) -> bool:
    """Whether ``stream``/``astream`` will really stream (else they call ``invoke``, recorded there)."""
    extra = {k: v for k, v in kwargs.items() if k not in ("input", "config", "stop")}
    try:
        return bool(instance._should_stream(async_api=async_api, **{**extra, "stream": True}))
    except Exception:  # noqa: BLE001 - a LangChain without _should_stream: record at the stream level
        return True


def _session_override() -> Callable[[str, dict[str, Any]], dict[str, Any]] | None:
    """The current replay's ``override_request`` (its policy's model overrides), or None outside such a replay."""
    session = current_replay.get()
    return getattr(session, "override_request", None) if session is not None else None


def _with_override(
    override: Callable[[str, dict[str, Any]], dict[str, Any]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
    messages: Any,
    keep: tuple[str, ...] = (),
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` / ``kwargs`` of a call whose first argument ``name`` stands for ``messages``, with ``override``
    applied to the request (those messages and the other keyword arguments but ``keep``, which stay as given)."""
    request = {k: v for k, v in kwargs.items() if k != name and k not in keep}
    request["messages"] = messages
    changed = override("langchain", request)
    if changed is request:
        return args, kwargs
    changed = dict(changed)
    messages = changed.pop("messages", None)
    changed.update({k: kwargs[k] for k in keep if k in kwargs})
    if args:
        return (messages, *args[1:]), changed
    return args, {**changed, name: messages}


def _overridden(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``_generate_with_cache``'s arguments with the model overrides of a replay's policy applied (the
    session's ``override_request``, before the call is recorded and made); unchanged outside such a replay."""
    override = _session_override()
    if override is None:
        return args, kwargs
    return _with_override(override, args, kwargs, "messages", arg(args, kwargs, 0, "messages"))


def _stream_overridden(
    instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``stream``/``astream``'s arguments (``input, config=None, *, stop=None, **kwargs``) with the model
    overrides of a replay's policy applied, as :func:`_overridden` does for ``_generate_with_cache``: the input
    becomes the messages it stands for, with the prompts replaced; the model and the params are keyword
    arguments, which the chat model merges into its request. Unchanged outside such a replay."""
    override = _session_override()
    if override is None:
        return args, kwargs
    messages = langchain_safely(
        "read the streamed input", lambda: instance._convert_input(arg(args, kwargs, 0, "input"))
    )
    if messages is None:  # an input the chat model cannot read: it raises its own error, unchanged
        return args, kwargs
    return _with_override(override, args, kwargs, "input", messages.to_messages(), keep=("config",))


def generate_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatModel._generate_with_cache``: one model step, answered with a ``ChatResult`` in a replay."""
    if not _enabled():
        return wrapped(*args, **kwargs)
    args, kwargs = _overridden(args, kwargs)

    def body() -> Any:
        parts = langchain_safely("read the model request", _generate_parts, instance, args, kwargs)
        call = parts.begin() if parts is not None else None
        served = call.served if call is not None else None
        if served is None:
            try:
                with unguarded(call):  # a whatif replay's model call may connect to its model
                    result = wrapped(*args, **kwargs)
            except BaseException as exc:
                end_call(call, exc=exc)
                raise
            return ran(call, result, "model response", chat_result_plain)
        result = served_answer(call, "model", parts.name, served, chat_result_from)
        for manager, text, chunk in langchain_safely(
            "replay the token callbacks", token_events, instance, args, kwargs, result, async_api=False, default=[]
        ):
            manager.on_llm_new_token(text, chunk=chunk)
        return result

    if in_run():  # the common case (a step of a graph's run): no implicit run, so no name or input to read
        return body()
    return sync_in_run(
        name_of(instance, "chat_model"), lambda: {"messages": arg(args, kwargs, 0, "messages")}, None, body
    )


def agenerate_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatModel._agenerate_with_cache``: the async twin of :func:`generate_wrapper`."""
    if not _enabled():
        return wrapped(*args, **kwargs)
    args, kwargs = _overridden(args, kwargs)

    async def body() -> Any:
        parts = langchain_safely("read the model request", _generate_parts, instance, args, kwargs)
        call = parts.begin() if parts is not None else None
        served = call.served if call is not None else None
        if served is None:
            try:
                with unguarded(call):  # a whatif replay's model call may connect to its model
                    result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                end_call(call, exc=exc)
                raise
            return ran(call, result, "model response", chat_result_plain)
        result = served_answer(call, "model", parts.name, served, chat_result_from)
        for manager, text, chunk in langchain_safely(
            "replay the token callbacks", token_events, instance, args, kwargs, result, async_api=True, default=[]
        ):
            await manager.on_llm_new_token(text, chunk=chunk)
        return result

    return async_in_run(
        name_of(instance, "chat_model"), lambda: {"messages": arg(args, kwargs, 0, "messages")}, None, body
    )


def stream_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatModel.stream`` when the model streams: one model step whose response is the merged chunks;
    a replay yields the recorded message as one ``AIMessageChunk``."""
    if not _enabled() or not _streams(instance, kwargs, async_api=False):
        return wrapped(*args, **kwargs)
    args, kwargs = _stream_overridden(instance, args, kwargs)

    def body() -> Iterator[Any]:
        # The step stays open while the stream is consumed: it lives in a context of its own, advanced
        # inside it, so the model's own calls nest under it and the consumer's context is untouched.
        parts = langchain_safely("read the model request", _stream_parts, instance, args, kwargs)
        ctx = contextvars.copy_context()
        call = ctx.run(parts.begin) if parts is not None else None
        served = call.served if call is not None else None
        if served is None:
            chunks: list[Any] = []
            try:
                ctx.run(permit, call)  # a whatif replay's model call may connect to its model
                for chunk in iterate_in(ctx, ctx.run(wrapped, *args, **kwargs)):
                    chunks.append(langchain_safely("copy a streamed chunk", _as_received, chunk, default=chunk))
                    yield chunk
            except GeneratorExit:
                _end_stream(ctx, call, chunks)
                raise
            except BaseException as exc:
                ctx.run(end_call, call, exc=exc)
                raise
            _end_stream(ctx, call, chunks)
            return
        replayed = _served_chunks(ctx, call, parts, served)
        yield from replayed

    return iter_in_run(
        name_of(instance, "chat_model"),
        lambda: {"input": arg(args, kwargs, 0, "input")},
        arg(args, kwargs, 1, "config"),
        body,
    )


def _as_received(chunk: Any) -> Any:
    """A copy of a streamed chunk as the model yielded it: the consumer gets the object itself and may change
    it in place (append later fragments onto it), which the step's response, merged from the chunks when the
    stream ends, must not show. A deep copy costs less than the merge's own addition of the chunk."""
    copy = getattr(chunk, "model_copy", None)
    return copy(deep=True) if copy is not None else chunk


def _end_stream(ctx: contextvars.Context, call: Any, chunks: list[Any]) -> None:
    """End a streamed model step with the chunks received so far, in the step's own context."""
    ctx.run(end_call, call, result=langchain_safely("encode the model response", chunks_plain, chunks))


def _served_chunks(ctx: contextvars.Context, call: Any, parts: Any, served: Any) -> list[Any]:
    """The chunks of a streamed model call answered from the recording (or its recorded error, raised)."""

    def end(*args: Any, **kwargs: Any) -> None:
        ctx.run(end_call, *args, **kwargs)

    chunks: list[Any] = served_answer(call, "model", parts.name, served, chunks_from, end=end)
    return chunks


def astream_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatModel.astream``: the async twin of :func:`stream_wrapper`."""
    if not _enabled() or not _streams(instance, kwargs, async_api=True):
        return wrapped(*args, **kwargs)
    args, kwargs = _stream_overridden(instance, args, kwargs)

    async def body() -> AsyncIterator[Any]:
        # The step is begun and ended in a context of its own (the consumer's is untouched between chunks)
        # and each chunk is awaited with that context's values (aiterate_in), so the model's own calls are
        # nested under the step, as in ``stream``.
        parts = langchain_safely("read the model request", _stream_parts, instance, args, kwargs)
        ctx = contextvars.copy_context()
        call = ctx.run(parts.begin) if parts is not None else None
        served = call.served if call is not None else None
        if served is None:
            chunks: list[Any] = []
            try:
                ctx.run(permit, call)  # a whatif replay's model call may connect to its model
                async for chunk in aiterate_in(ctx, wrapped(*args, **kwargs)):
                    chunks.append(langchain_safely("copy a streamed chunk", _as_received, chunk, default=chunk))
                    yield chunk
            except GeneratorExit:
                _end_stream(ctx, call, chunks)
                raise
            except BaseException as exc:
                ctx.run(end_call, call, exc=exc)
                raise
            _end_stream(ctx, call, chunks)
            return
        replayed = _served_chunks(ctx, call, parts, served)
        for chunk in replayed:
            yield chunk

    return aiter_in_run(
        name_of(instance, "chat_model"),
        lambda: {"input": arg(args, kwargs, 0, "input")},
        arg(args, kwargs, 1, "config"),
        body,
    )


def _begin_retrieval(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    named = langchain_safely("read the retrieval", retrieval_arguments, args, kwargs)
    return (
        langchain_begin("retrieval", begin_retrieval_call, name, named, instrumentation=NAME)
        if named is not None
        else None
    )


def retriever_wrappers() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Wrappers of ``BaseRetriever.invoke`` and ``BaseRetriever.ainvoke``."""

    def invoke(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled():
            return wrapped(*args, **kwargs)
        name = name_of(instance, "retriever")

        def body() -> Any:
            call = _begin_retrieval(name, args, kwargs)
            served = call.served if call is not None else None
            if served is None:
                try:
                    docs = wrapped(*args, **kwargs)
                except BaseException as exc:
                    end_call(call, exc=exc)
                    raise
                return ran(call, docs, "documents", documents_plain)
            return served_answer(call, "retrieval", name, served, documents_from)

        return sync_in_run(name, lambda: {"input": arg(args, kwargs, 0, "input")}, arg(args, kwargs, 1, "config"), body)

    def ainvoke(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled():
            return wrapped(*args, **kwargs)
        name = name_of(instance, "retriever")

        async def body() -> Any:
            call = _begin_retrieval(name, args, kwargs)
            served = call.served if call is not None else None
            if served is None:
                try:
                    docs = await wrapped(*args, **kwargs)
                except BaseException as exc:
                    end_call(call, exc=exc)
                    raise
                return ran(call, docs, "documents", documents_plain)
            return served_answer(call, "retrieval", name, served, documents_from)

        return async_in_run(
            name, lambda: {"input": arg(args, kwargs, 0, "input")}, arg(args, kwargs, 1, "config"), body
        )

    return invoke, ainvoke
