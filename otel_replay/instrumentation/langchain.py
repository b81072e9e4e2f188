"""LangChain core / LangGraph instrumentation: chat models, tools and retrievers as otel-replay steps.

Why it exists: agents built on LangChain or LangGraph should be recorded step by step and replayed in mock,
deterministic, live or partial mode without touching their code. This module wraps LangChain core at the
boundaries where the whole call is visible as LangChain's own objects, and answers each call from the
recording at that same boundary during a replay:

* chat models: ``BaseChatModel._generate_with_cache`` / ``_agenerate_with_cache`` (what ``invoke``,
  ``ainvoke``, ``batch`` and ``generate`` reach, inside LangChain's callbacks, after its normalisation of the
  messages: the request messages, the invocation parameters incl. bound tools, and the ``ChatResult`` with
  the ``AIMessage``, its ``tool_calls`` and ``usage_metadata``), plus ``BaseChatModel.stream`` / ``astream``
  when the model really streams (otherwise they fall back to ``invoke`` and are recorded there);
* tools: ``BaseTool.run`` / ``arun`` (name, input, output, and the ``ToolMessage`` LangGraph's ``ToolNode``
  expects);
* retrievers: ``BaseRetriever.invoke`` / ``ainvoke`` (query, Documents with ids, metadata sources, scores);
* the top-level invocation outside a run: LangGraph ``Pregel.invoke`` / ``ainvoke`` / ``stream`` /
  ``astream``, LCEL ``RunnableSequence.invoke`` / ``ainvoke`` and legacy ``Chain.invoke`` / ``ainvoke``
  (``langchain_classic``: ``AgentExecutor``, whose whole loop is then one run) begin an implicit run, so
  nothing is lost when the application has no ``@orp.agent``; a model, tool or retriever called alone outside any
  run is an implicit run of one step.

What it must never do: raise into the host program from its own bookkeeping (every failure is logged and the
real call goes ahead), swallow or wrap the host's exceptions (they are recorded and re-raised unchanged),
call the real model, tool or retriever when the replay answered the call, import LangChain before
:meth:`LangChainInstrumentor.instrument` is called, or import LangGraph at all (its ``Pregel`` is patched right
after the application imports it, see :mod:`otel_replay.instrumentation._lazy`).
:class:`~otel_replay.recording.ReplayInterrupt` (a ``BaseException``) always propagates: LangChain and LangGraph
only catch ``Exception`` on these paths.
"""

from __future__ import annotations

import contextvars
import functools
import importlib.util
import logging
import operator
import sys
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from types import ModuleType
from typing import Any, Final

import wrapt
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap

from ..recording import (
    DivergenceStop,
    ReplayInterrupt,
    begin_model_call,
    begin_retrieval_call,
    begin_tool_call,
    end_call,
    end_run,
    in_run,
)
from ..snapshots import qualname_of
from . import _lazy
from ._guarded import RISKS as _RISKS
from ._guarded import Guards
from ._guarded import check_risks as _check_risks
from ._guarded import enabled as _enabled

_log = logging.getLogger("otel_replay")
_guards = Guards("LangChain")
_warn, _safely, _begin = _guards.warn, _guards.safely, _guards.begin

_instruments: Final = ("langchain-core >= 0.3",)
"""Packages this instrumentor needs (``opentelemetry-instrument`` checks them); LangGraph is optional."""

RISK_METADATA_KEY: Final = "otel_replay_risk"
"""Key in a tool's ``metadata`` (or prefix ``otel_replay_risk:`` of one of its ``tags``) that marks its risk."""

_NAME: Final = "langchain"  # otel_replay.step.instrumentation of the steps recorded here

_SCORE_KEYS: Final = ("score", "relevance_score", "similarity_score", "_score")
_STRUCTURED_OUTPUT_KWARGS: Final = ("ls_structured_output_format", "structured_output_format")
"""``gen_ai.tool.call.id``, written only once the project's convention defines it."""

_CHAT: Final = "langchain_core.language_models.chat_models"
_TOOLS: Final = "langchain_core.tools.base"
_RETRIEVERS: Final = "langchain_core.retrievers"
_RUNNABLES: Final = "langchain_core.runnables.base"
_LANGGRAPH: Final = "langgraph.pregel"

OPTIONAL_ENTRY_POINTS: Final[tuple[tuple[str, str, str], ...]] = (
    (_LANGGRAPH, "Pregel", "invoke"),
    (_LANGGRAPH, "Pregel", "ainvoke"),
    (_LANGGRAPH, "Pregel", "stream"),
    (_LANGGRAPH, "Pregel", "astream"),
    ("langchain_classic.chains.base", "Chain", "invoke"),
    ("langchain_classic.chains.base", "Chain", "ainvoke"),
    ("langchain.chains.base", "Chain", "invoke"),
    ("langchain.chains.base", "Chain", "ainvoke"),
)
"""(module, class, method) of the top-level invocations of packages beside LangChain core that begin an
implicit run when called outside one: LangGraph graphs, and legacy chains (``AgentExecutor`` is a ``Chain``:
its whole loop is one run). Patched only when the module's package is installed; the method names are those
of :func:`_entry_wrappers`."""


# -------------------------------------------------------------------------------------------- helpers


def _installed(module: str) -> bool:
    """Whether the package of ``module`` is imported or installed (found without importing it)."""
    top = module.partition(".")[0]
    if top in sys.modules:
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def _unbuildable(kind: str, name: str, exc: BaseException) -> ReplayInterrupt:
    """The replay stops: the recorded answer cannot be rebuilt into LangChain objects (never a guess)."""

    return DivergenceStop(
        f"replay stopped: the recorded answer of {kind} {name!r} cannot be rebuilt as "
        f"LangChain objects ({type(exc).__name__}: {exc}); pass a mock for it"
    )


def _ran(call: Any, output: Any, what: str, plain: Callable[[Any], Any]) -> Any:
    """Finish a step whose call really ran, recording ``plain(output)``; returns the output."""
    if call is not None:
        end_call(call, result=_safely(f"encode the {what}", plain, output, default=output))
    return output


def _served_answer(
    call: Any, kind: str, name: str, served: Any, build: Callable[[Any], Any], end: Callable[..., Any] = end_call
) -> Any:
    """What LangChain expects for a call answered from the recording: ``build(recorded value)``, or the
    recorded error raised. A recording that cannot be rebuilt stops the replay. ``end`` ends the step."""
    if served.error is not None:
        end(call, exc=served.error)
        raise served.error
    try:
        value = build(served.value)
    except Exception as exc:  # a recording that cannot answer stops the replay
        stop = _unbuildable(kind, name, exc)
        end(call, exc=stop)
        raise stop from exc
    end(call, result=served.value)
    return value


def _name_of(instance: Any, default: str) -> str:
    try:
        name = instance.get_name()
    except Exception:  # noqa: BLE001
        name = getattr(instance, "name", None)
    return name if isinstance(name, str) and name else default


def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], position: int, name: str, default: Any = None) -> Any:
    if len(args) > position:
        return args[position]
    return kwargs.get(name, default)


# ------------------------------------------------------------------------------------ message codecs


def _message_request(message: Any) -> Any:
    """A request message as plain data for the request hash: role, content, name, tool calls and tool call
    id; without the per-run ``id`` and the response-only metadata (which would change every run)."""
    dump = getattr(message, "model_dump", None)
    if dump is None:
        return message
    data = dump(exclude={"id", "response_metadata", "usage_metadata"})
    return {k: v for k, v in data.items() if k in ("type", "content") or v not in (None, {}, [], "")}


def _plain_tools(params: dict[str, Any]) -> dict[str, Any]:
    """Bound tools as their JSON schema (a BaseTool object would otherwise be encoded by identity)."""
    tools = params.get("tools")
    if not isinstance(tools, (list, tuple)):
        return params
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    converted = [convert_to_openai_tool(t) if isinstance(t, BaseTool) or callable(t) else t for t in tools]
    return {**params, "tools": converted}


def _model_request(
    instance: Any, messages: Any, stop: Any, extra: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model request (messages + invocation parameters) and the LangSmith params (provider, model)."""
    params = _plain_tools(dict(instance._get_invocation_params(stop=stop, **extra)))
    try:
        ls = dict(instance._get_ls_params(stop=stop, **extra))
    except Exception:  # noqa: BLE001 - a subclass with its own signature
        ls = {}
    return {"messages": [_message_request(m) for m in messages or []], "params": params}, ls


def _response_plain(messages: list[Any], generation_info: list[Any], llm_output: Any) -> dict[str, Any]:
    """A model response as plain data: LangChain's own message dicts, plus usage, model and finish reason at
    the top so the recorder writes the ``gen_ai.*`` attributes."""
    from langchain_core.messages import message_to_dict

    out: dict[str, Any] = {
        "generations": [
            {"message": message_to_dict(m), "generation_info": info}
            for m, info in zip(messages, generation_info, strict=False)
        ],
        "llm_output": llm_output,
    }
    first = messages[0] if messages else None
    usage = getattr(first, "usage_metadata", None)
    if usage:
        out["usage"] = dict(usage)
    meta = dict(getattr(first, "response_metadata", None) or {})
    model = meta.get("model_name") or meta.get("model")
    if model is None and isinstance(llm_output, dict):
        model = llm_output.get("model_name") or llm_output.get("model")
    if isinstance(model, str):
        out["model"] = model
    finish = meta.get("finish_reason") or meta.get("stop_reason")
    if isinstance(finish, str):
        out["finish_reason"] = finish
    return out


def _chat_result_plain(result: Any) -> Any:
    generations = list(getattr(result, "generations", None) or [])
    return _response_plain(
        [g.message for g in generations], [g.generation_info for g in generations], getattr(result, "llm_output", None)
    )


def _chunks_plain(chunks: list[Any]) -> Any:
    if not chunks:
        return {"generations": [], "llm_output": None}
    merged = functools.reduce(operator.add, chunks)
    return _response_plain([merged], [None], None)


def _recorded_messages(value: Any) -> list[tuple[Any, Any]]:
    """(message, generation_info) pairs of a recorded model response."""
    from langchain_core.messages import messages_from_dict

    if not isinstance(value, dict) or not isinstance(value.get("generations"), list):
        raise ValueError("the recorded response has no generations")
    gens = value["generations"]
    messages = messages_from_dict([g["message"] for g in gens])
    return [(m, g.get("generation_info")) for m, g in zip(messages, gens, strict=True)]


def _chat_result_from(value: Any) -> Any:
    """The recorded response as a ``ChatResult`` of ``ChatGeneration``s."""
    from langchain_core.outputs import ChatGeneration, ChatResult

    pairs = _recorded_messages(value)
    return ChatResult(
        generations=[ChatGeneration(message=m, generation_info=info) for m, info in pairs],
        llm_output=value.get("llm_output"),
    )


def _chunks_from(value: Any) -> list[Any]:
    """The recorded response as the ``AIMessageChunk`` a stream yields (one chunk: boundaries are not kept)."""
    from langchain_core.messages import AIMessageChunk

    pairs = _recorded_messages(value)
    if not pairs:
        raise ValueError("the recorded stream produced no message")
    chunk = _as_chunk(pairs[0][0])
    if not isinstance(chunk, AIMessageChunk):
        raise ValueError(f"the recorded stream produced a {type(chunk).__name__}, not an AI message")
    return [chunk]


def _as_chunk(message: Any) -> Any:
    from langchain_core.messages import AIMessageChunk

    if isinstance(message, AIMessageChunk) or not hasattr(message, "tool_calls"):
        return message
    return AIMessageChunk(
        content=message.content,
        additional_kwargs=message.additional_kwargs,
        response_metadata=message.response_metadata,
        name=message.name,
        id=message.id,
        tool_calls=list(message.tool_calls or []),
        usage_metadata=message.usage_metadata,
    )


def _token_events(
    instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any, *, async_api: bool
) -> list[tuple[Any, Any, Any]]:
    """(run manager, text, chunk) of the ``on_llm_new_token`` callbacks a served answer owes its streaming
    handlers (LangGraph ``stream_mode="messages"``): one chunk per generation, when the model would have
    streamed. Empty when nothing listens."""
    from langchain_core.outputs import ChatGenerationChunk

    run_manager = _arg(args, kwargs, 2, "run_manager")
    if run_manager is None:
        return []
    extra = {k: v for k, v in kwargs.items() if k not in ("messages", "stop", "run_manager")}
    if not instance._should_stream(async_api=async_api, run_manager=run_manager, **extra):
        return []
    events = []
    for generation in result.generations:
        chunk = _as_chunk(generation.message)
        text = chunk.content if isinstance(chunk.content, str) else ""
        events.append((run_manager, text, ChatGenerationChunk(message=chunk)))
    return events


# --------------------------------------------------------------------------------------- implicit runs


def _run_config(config: Any) -> dict[str, Any] | None:
    """The plain part of a RunnableConfig worth keeping (thread id and such; no callbacks, no internals)."""
    if not isinstance(config, Mapping):
        return None
    kept: dict[str, Any] = {}
    configurable = config.get("configurable")
    if isinstance(configurable, Mapping):
        kept["configurable"] = {k: v for k, v in configurable.items() if not str(k).startswith("__")}
    for key in ("tags", "metadata", "run_name", "recursion_limit"):
        if config.get(key) is not None:
            kept[key] = config[key]
    return kept or None


def _implicit_run(name: str, arguments: dict[str, Any], config: Any = None) -> Any:
    return _guards.begin_run(name, arguments=arguments, config=_run_config(config))


def _sync_in_run(name: str, arguments: Callable[[], dict[str, Any]], config: Any, body: Callable[[], Any]) -> Any:
    """``body()`` inside a run: the current one, or an implicit one begun here and ended with its outcome."""
    if in_run():
        return body()
    handle = _implicit_run(name, _safely("read the input", arguments, default={}), config)
    if handle is None:
        return body()
    try:
        result = body()
    except BaseException as exc:
        end_run(handle, exc=exc)
        raise
    end_run(handle, result=result)
    return result


async def _async_in_run(
    name: str, arguments: Callable[[], dict[str, Any]], config: Any, body: Callable[[], Any]
) -> Any:
    if in_run():
        return await body()
    handle = _implicit_run(name, _safely("read the input", arguments, default={}), config)
    if handle is None:
        return await body()
    try:
        result = await body()
    except BaseException as exc:
        end_run(handle, exc=exc)
        raise
    end_run(handle, result=result)
    return result


def _iterate_in(ctx: contextvars.Context, iterator: Iterator[Any]) -> Iterator[Any]:
    """Yield from ``iterator``, advancing it inside ``ctx``: a run or step kept open across the yields of a
    stream lives there, so the consumer's own context is left as it was between items."""
    try:
        while True:
            try:
                item = ctx.run(next, iterator)
            except StopIteration:
                return
            yield item
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            ctx.run(close)


def _iter_in_run(
    name: str, arguments: Callable[[], dict[str, Any]], config: Any, body: Callable[[], Iterator[Any]]
) -> Iterator[Any]:
    """A generator run inside a run (implicit when none is current, kept in a context of its own); the run
    ends when the generator is exhausted or closed, its output being the last item."""
    if in_run():
        yield from body()
        return
    ctx = contextvars.copy_context()
    handle = ctx.run(_implicit_run, name, _safely("read the input", arguments, default={}), config)
    if handle is None:
        yield from body()
        return
    last = None
    try:
        for item in _iterate_in(ctx, ctx.run(body)):
            last = item
            yield item
    except GeneratorExit:
        ctx.run(end_run, handle, result=last)
        raise
    except BaseException as exc:
        ctx.run(end_run, handle, exc=exc)
        raise
    ctx.run(end_run, handle, result=last)


async def _aiter_in_run(
    name: str, arguments: Callable[[], dict[str, Any]], config: Any, body: Callable[[], AsyncIterator[Any]]
) -> AsyncIterator[Any]:
    if in_run():
        async for item in body():
            yield item
        return
    handle = _implicit_run(name, _safely("read the input", arguments, default={}), config)
    if handle is None:
        async for item in body():
            yield item
        return
    last = None
    try:
        async for item in body():
            last = item
            yield item
    except GeneratorExit:
        end_run(handle, result=last)
        raise
    except BaseException as exc:
        end_run(handle, exc=exc)
        raise
    end_run(handle, result=last)


def _entry_wrappers() -> tuple[Callable[..., Any], ...]:
    """Wrappers of a graph's / chain's top-level invoke, ainvoke, stream, astream: implicit runs only."""

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        return lambda: {"input": _arg(args, kwargs, 0, "input")}

    def invoke(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        return _sync_in_run(
            _name_of(instance, type(instance).__name__),
            arguments(args, kwargs),
            _arg(args, kwargs, 1, "config"),
            lambda: wrapped(*args, **kwargs),
        )

    def ainvoke(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        return _async_in_run(
            _name_of(instance, type(instance).__name__),
            arguments(args, kwargs),
            _arg(args, kwargs, 1, "config"),
            lambda: wrapped(*args, **kwargs),
        )

    def stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        return _iter_in_run(
            _name_of(instance, type(instance).__name__),
            arguments(args, kwargs),
            _arg(args, kwargs, 1, "config"),
            lambda: wrapped(*args, **kwargs),
        )

    def astream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        return _aiter_in_run(
            _name_of(instance, type(instance).__name__),
            arguments(args, kwargs),
            _arg(args, kwargs, 1, "config"),
            lambda: wrapped(*args, **kwargs),
        )

    return invoke, ainvoke, stream, astream


# ------------------------------------------------------------------------------------------- models


class _ModelCall:
    """What a chat model wrapper needs to begin a step: name, request, provider and model."""

    __slots__ = ("model", "name", "provider", "request")

    def __init__(self, instance: Any, messages: Any, stop: Any, extra: dict[str, Any]) -> None:
        self.name = _name_of(instance, type(instance).__name__)
        self.request, ls = _model_request(instance, messages, stop, extra)
        provider, model = ls.get("ls_provider"), ls.get("ls_model_name")
        self.provider = provider if isinstance(provider, str) else None
        self.model = model if isinstance(model, str) else None

    def begin(self) -> Any:
        return _begin(
            "model",
            begin_model_call,
            self.name,
            self.request,
            provider=self.provider,
            model=self.model,
            instrumentation=_NAME,
        )


def _generate_parts(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _ModelCall:
    """``_generate_with_cache(messages, stop=None, run_manager=None, **kwargs)``."""
    extra = {k: v for k, v in kwargs.items() if k not in ("messages", "stop", "run_manager")}
    return _ModelCall(instance, _arg(args, kwargs, 0, "messages"), _arg(args, kwargs, 1, "stop"), extra)


def _stream_parts(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _ModelCall:
    """``stream(input, config=None, *, stop=None, **kwargs)``: the messages as ``stream`` will send them."""
    extra = {k: v for k, v in kwargs.items() if k not in ("input", "config", "stop", *_STRUCTURED_OUTPUT_KWARGS)}
    messages = instance._convert_input(_arg(args, kwargs, 0, "input")).to_messages()
    return _ModelCall(instance, messages, kwargs.get("stop"), extra)


def _streams(instance: Any, kwargs: dict[str, Any], *, async_api: bool) -> bool:
    """Whether ``stream``/``astream`` will really stream (else they call ``invoke``, recorded there)."""
    extra = {k: v for k, v in kwargs.items() if k not in ("input", "config", "stop")}
    try:
        return bool(instance._should_stream(async_api=async_api, **{**extra, "stream": True}))
    except Exception:  # noqa: BLE001 - a LangChain without _should_stream: record at the stream level
        return True


def _generate_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatModel._generate_with_cache``: one model step, answered with a ``ChatResult`` in a replay."""
    if not _enabled():
        return wrapped(*args, **kwargs)

    def body() -> Any:
        parts = _safely("read the model request", _generate_parts, instance, args, kwargs)
        call = parts.begin() if parts is not None else None
        served = call.served if call is not None else None
        if served is None:
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as exc:
                end_call(call, exc=exc)
                raise
            return _ran(call, result, "model response", _chat_result_plain)
        result = _served_answer(call, "model", parts.name, served, _chat_result_from)
        for manager, text, chunk in _safely(
            "replay the token callbacks", _token_events, instance, args, kwargs, result, async_api=False, default=[]
        ):
            manager.on_llm_new_token(text, chunk=chunk)
        return result

    return _sync_in_run(
        _name_of(instance, "chat_model"), lambda: {"messages": _arg(args, kwargs, 0, "messages")}, None, body
    )


def _agenerate_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatModel._agenerate_with_cache``: the async twin of :func:`_generate_wrapper`."""
    if not _enabled():
        return wrapped(*args, **kwargs)

    async def body() -> Any:
        parts = _safely("read the model request", _generate_parts, instance, args, kwargs)
        call = parts.begin() if parts is not None else None
        served = call.served if call is not None else None
        if served is None:
            try:
                result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                end_call(call, exc=exc)
                raise
            return _ran(call, result, "model response", _chat_result_plain)
        result = _served_answer(call, "model", parts.name, served, _chat_result_from)
        for manager, text, chunk in _safely(
            "replay the token callbacks", _token_events, instance, args, kwargs, result, async_api=True, default=[]
        ):
            await manager.on_llm_new_token(text, chunk=chunk)
        return result

    return _async_in_run(
        _name_of(instance, "chat_model"), lambda: {"messages": _arg(args, kwargs, 0, "messages")}, None, body
    )


def _stream_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatModel.stream`` when the model streams: one model step whose response is the merged chunks;
    a replay yields the recorded message as one ``AIMessageChunk``."""
    if not _enabled() or not _streams(instance, kwargs, async_api=False):
        return wrapped(*args, **kwargs)

    def body() -> Iterator[Any]:
        # The step stays open while the stream is consumed: it lives in a context of its own, advanced
        # inside it, so the model's own calls nest under it and the consumer's context is untouched.
        parts = _safely("read the model request", _stream_parts, instance, args, kwargs)
        ctx = contextvars.copy_context()
        call = ctx.run(parts.begin) if parts is not None else None
        served = call.served if call is not None else None
        if served is None:
            chunks: list[Any] = []
            try:
                for chunk in _iterate_in(ctx, ctx.run(wrapped, *args, **kwargs)):
                    chunks.append(chunk)
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

    return _iter_in_run(
        _name_of(instance, "chat_model"),
        lambda: {"input": _arg(args, kwargs, 0, "input")},
        _arg(args, kwargs, 1, "config"),
        body,
    )


def _end_stream(ctx: contextvars.Context, call: Any, chunks: list[Any]) -> None:
    """End a streamed model step with the chunks received so far, in the step's own context."""
    ctx.run(end_call, call, result=_safely("encode the model response", _chunks_plain, chunks))


def _served_chunks(ctx: contextvars.Context, call: Any, parts: Any, served: Any) -> list[Any]:
    """The chunks of a streamed model call answered from the recording (or its recorded error, raised)."""

    def end(*args: Any, **kwargs: Any) -> None:
        ctx.run(end_call, *args, **kwargs)

    chunks: list[Any] = _served_answer(call, "model", parts.name, served, _chunks_from, end=end)
    return chunks


def _astream_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatModel.astream``: the async twin of :func:`_stream_wrapper`."""
    if not _enabled() or not _streams(instance, kwargs, async_api=True):
        return wrapped(*args, **kwargs)

    async def body() -> AsyncIterator[Any]:
        # The step is begun and ended in a context of its own (the consumer's is untouched between chunks);
        # an async generator cannot be advanced inside another context before Python 3.11, so the model's
        # own calls are not nested under the step here.
        parts = _safely("read the model request", _stream_parts, instance, args, kwargs)
        ctx = contextvars.copy_context()
        call = ctx.run(parts.begin) if parts is not None else None
        served = call.served if call is not None else None
        if served is None:
            chunks: list[Any] = []
            try:
                async for chunk in wrapped(*args, **kwargs):
                    chunks.append(chunk)
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

    return _aiter_in_run(
        _name_of(instance, "chat_model"),
        lambda: {"input": _arg(args, kwargs, 0, "input")},
        _arg(args, kwargs, 1, "config"),
        body,
    )


# -------------------------------------------------------------------------------------------- tools


def _tool_arguments(tool: Any, tool_input: Any) -> dict[str, Any]:
    """The tool's input as the model gave it: a dict without injected arguments (``InjectedState``,
    ``InjectedToolCallId``, …, which hold per-run values), or a string under the tool's single argument."""
    visible: list[str] | None = None
    try:
        schema = tool.tool_call_schema
        if isinstance(schema, dict):
            visible = list((schema.get("properties") or {}).keys())
        else:
            visible = list(getattr(schema, "model_fields", {}).keys())
    except Exception:  # noqa: BLE001 - no schema: keep the input as given
        visible = None
    if isinstance(tool_input, Mapping):
        if visible is None:
            return dict(tool_input)
        return {k: v for k, v in tool_input.items() if k in visible}
    key = visible[0] if visible is not None and len(visible) == 1 else "input"
    return {key: tool_input}


def _tool_function(tool: Any) -> str | None:
    """``module:qualname`` of the tool's function when that name imports to the function itself (so
    ``replay_tool`` can call it); None for a ``@tool`` whose module attribute is the tool object."""
    func = getattr(tool, "func", None) or getattr(tool, "coroutine", None)
    if not callable(func):
        return None
    module = sys.modules.get(getattr(func, "__module__", "") or "")
    obj: Any = module
    for part in (getattr(func, "__qualname__", "") or "").split("."):
        obj = getattr(obj, part, None) if obj is not None else None
    return qualname_of(func) if obj is func else None


def _tool_output_plain(output: Any) -> Any:
    """A tool's output as plain data: a ``ToolMessage`` as LangChain's own message dict."""
    from langchain_core.messages import BaseMessage, message_to_dict

    return message_to_dict(output) if isinstance(output, BaseMessage) else output


def _tool_output_from(value: Any, tool_call_id: Any) -> Any:
    """The recorded output as the tool returned it: a ``ToolMessage`` when one was recorded and LangChain
    asked for one (``tool_call_id`` given), else the recorded value."""
    if tool_call_id is None or not isinstance(value, dict) or set(value) != {"type", "data"}:
        return value
    from langchain_core.messages import ToolMessage, messages_from_dict

    message = messages_from_dict([value])[0]
    if isinstance(message, ToolMessage) and message.tool_call_id != tool_call_id:
        message.tool_call_id = str(tool_call_id)
    return message


class _ToolParts:
    __slots__ = ("arguments", "function", "name", "risk", "tool_call_id")

    def __init__(
        self, instrumentor: LangChainInstrumentor, tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self.name = str(getattr(tool, "name", None) or type(tool).__name__)
        self.arguments = _tool_arguments(tool, _arg(args, kwargs, 0, "tool_input"))
        self.risk = instrumentor.risk_of(tool)
        self.function = _tool_function(tool)
        self.tool_call_id = kwargs.get("tool_call_id")

    def begin(self) -> Any:
        return _begin(
            "tool",
            begin_tool_call,
            self.name,
            self.arguments,
            risk=self.risk,
            function=self.function,
            instrumentation=_NAME,
        )


def _served_tool_output(call: Any, parts: Any, served: Any) -> Any:
    """The output LangChain expects for a tool call answered from the recording (or its recorded error)."""
    return _served_answer(call, "tool", parts.name, served, lambda v: _tool_output_from(v, parts.tool_call_id))


def _tool_wrappers(instrumentor: LangChainInstrumentor) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Wrappers of ``BaseTool.run`` and ``BaseTool.arun``."""

    def run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled():
            return wrapped(*args, **kwargs)

        def body() -> Any:
            parts = _safely("read the tool call", _ToolParts, instrumentor, instance, args, kwargs)
            call = parts.begin() if parts is not None else None
            served = call.served if call is not None else None
            if served is None:
                try:
                    output = wrapped(*args, **kwargs)
                except BaseException as exc:
                    end_call(call, exc=exc)
                    raise
                return _ran(call, output, "tool output", _tool_output_plain)
            return _served_tool_output(call, parts, served)

        return _sync_in_run(
            _name_of(instance, "tool"),
            lambda: {"input": _arg(args, kwargs, 0, "tool_input")},
            kwargs.get("config"),
            body,
        )

    def arun(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled():
            return wrapped(*args, **kwargs)

        async def body() -> Any:
            parts = _safely("read the tool call", _ToolParts, instrumentor, instance, args, kwargs)
            call = parts.begin() if parts is not None else None
            served = call.served if call is not None else None
            if served is None:
                try:
                    output = await wrapped(*args, **kwargs)
                except BaseException as exc:
                    end_call(call, exc=exc)
                    raise
                return _ran(call, output, "tool output", _tool_output_plain)
            return _served_tool_output(call, parts, served)

        return _async_in_run(
            _name_of(instance, "tool"),
            lambda: {"input": _arg(args, kwargs, 0, "tool_input")},
            kwargs.get("config"),
            body,
        )

    return run, arun


# --------------------------------------------------------------------------------------- retrievers


def _retrieval_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``invoke(input, config=None, **kwargs)`` → the query and the retriever's own keyword arguments."""
    named = {"query": _arg(args, kwargs, 0, "input")}
    named.update({k: v for k, v in kwargs.items() if k not in ("input", "config", "run_id", "callbacks")})
    return named


def _document_plain(doc: Any) -> Any:
    """A Document as plain data, with its score lifted from the metadata when the retriever put one there."""
    page_content = getattr(doc, "page_content", None)
    if page_content is None:
        return doc
    metadata = dict(getattr(doc, "metadata", None) or {})
    out: dict[str, Any] = {"id": getattr(doc, "id", None), "page_content": page_content, "metadata": metadata}
    score = getattr(doc, "score", None)
    if score is None:
        score = next((metadata[k] for k in _SCORE_KEYS if isinstance(metadata.get(k), (int, float))), None)
    if score is not None:
        out["score"] = score
    return out


def _documents_plain(docs: Any) -> Any:
    return [_document_plain(d) for d in docs] if isinstance(docs, (list, tuple)) else docs


def _documents_from(value: Any) -> list[Any]:
    from langchain_core.documents import Document

    if not isinstance(value, list):
        raise ValueError("the recorded retrieval returned no list of documents")
    return [
        Document(page_content=d["page_content"], metadata=d.get("metadata") or {}, id=d.get("id"))
        if isinstance(d, dict) and "page_content" in d
        else d
        for d in value
    ]


def _begin_retrieval(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    named = _safely("read the retrieval", _retrieval_arguments, args, kwargs)
    return _begin("retrieval", begin_retrieval_call, name, named, instrumentation=_NAME) if named is not None else None


def _retriever_wrappers() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Wrappers of ``BaseRetriever.invoke`` and ``BaseRetriever.ainvoke``."""

    def invoke(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled():
            return wrapped(*args, **kwargs)
        name = _name_of(instance, "retriever")

        def body() -> Any:
            call = _begin_retrieval(name, args, kwargs)
            served = call.served if call is not None else None
            if served is None:
                try:
                    docs = wrapped(*args, **kwargs)
                except BaseException as exc:
                    end_call(call, exc=exc)
                    raise
                return _ran(call, docs, "documents", _documents_plain)
            return _served_answer(call, "retrieval", name, served, _documents_from)

        return _sync_in_run(
            name, lambda: {"input": _arg(args, kwargs, 0, "input")}, _arg(args, kwargs, 1, "config"), body
        )

    def ainvoke(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled():
            return wrapped(*args, **kwargs)
        name = _name_of(instance, "retriever")

        async def body() -> Any:
            call = _begin_retrieval(name, args, kwargs)
            served = call.served if call is not None else None
            if served is None:
                try:
                    docs = await wrapped(*args, **kwargs)
                except BaseException as exc:
                    end_call(call, exc=exc)
                    raise
                return _ran(call, docs, "documents", _documents_plain)
            return _served_answer(call, "retrieval", name, served, _documents_from)

        return _async_in_run(
            name, lambda: {"input": _arg(args, kwargs, 0, "input")}, _arg(args, kwargs, 1, "config"), body
        )

    return invoke, ainvoke


# -------------------------------------------------------------------------------------- instrumentor


def _register_models() -> None:
    """Register LangChain's messages and Document, so a recorded value holding one (a tool result, a graph's
    input) is rebuilt in a replay with ``model_validate`` (see :mod:`otel_replay.revival`); never raises."""
    from ..revival import register_types

    try:
        from langchain_core.documents import Document
        from langchain_core.messages import (
            AIMessage,
            AIMessageChunk,
            ChatMessage,
            FunctionMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
        )

        register_types(
            (
                AIMessage,
                AIMessageChunk,
                ChatMessage,
                FunctionMessage,
                HumanMessage,
                SystemMessage,
                ToolMessage,
                Document,
            )
        )
    except Exception:  # noqa: BLE001 - a LangChain version without one of them: replays get plain dicts
        _log.warning("otel-replay: could not register the LangChain message models", exc_info=True)


class LangChainInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Records LangChain chat models, tools and retrievers (and LangGraph agents built from them) as
    otel-replay steps, and answers them from the recording during a replay.

    ``tool_risks`` maps tool names to ``read`` / ``write`` / ``high``; a tool not in the map takes the risk
    marked on it (``metadata={"otel_replay_risk": "high"}`` or a tag ``otel_replay_risk:high``), else the
    recorder's name heuristic (``send_email``, ``delete_user``, … are ``high``), else ``read``. Passing
    ``tool_risks`` to :meth:`instrument` replaces the map. ``tracer_provider`` sends the spans it records to that
    provider instead of the current runtime's (see ``docs/instrumentation.md``). Bad values raise ValueError.

    Like every ``BaseInstrumentor`` it is a singleton: constructing it again keeps the current map unless a
    new one is given.
    """

    def __init__(self, *, tool_risks: Mapping[str, str] | None = None) -> None:
        if tool_risks is not None or not hasattr(self, "_tool_risks"):
            self._tool_risks: dict[str, str] = _check_risks(tool_risks)

    @property
    def tool_risks(self) -> dict[str, str]:
        """The configured tool name → risk map (a copy)."""
        return dict(self._tool_risks)

    def instrumentation_dependencies(self) -> Collection[str]:
        """The packages this instrumentor needs: ``langchain-core`` (LangGraph is optional)."""
        return _instruments

    def check_options(self, **options: Any) -> None:
        """Raise ValueError for options :meth:`instrument` would refuse (``tool_risks``), without instrumenting:
        ``orp.instrument()`` checks them before it arms the instrumentor for a LangChain not imported yet."""
        if "tool_risks" in options:
            _check_risks(options["tool_risks"])

    def risk_of(self, tool: Any) -> str | None:
        """The declared risk of a LangChain tool: from ``tool_risks``, else its metadata or tags; None when
        undeclared (the recorder then applies its name heuristic). Never raises."""
        try:
            name = str(getattr(tool, "name", "") or "")
            if name in self._tool_risks:
                return self._tool_risks[name]
            metadata = getattr(tool, "metadata", None) or {}
            marked = metadata.get(RISK_METADATA_KEY) if isinstance(metadata, Mapping) else None
            if marked is None:
                prefix = f"{RISK_METADATA_KEY}:"
                marked = next(
                    (
                        t[len(prefix) :]
                        for t in getattr(tool, "tags", None) or []
                        if isinstance(t, str) and t.startswith(prefix)
                    ),
                    None,
                )
            if marked is None:
                return None
            if marked not in _RISKS:
                _log.warning("otel-replay: tool %r is marked with unknown risk %r; treated as undeclared", name, marked)
                return None
            return str(marked)
        except Exception:  # noqa: BLE001
            _warn("read the tool's risk")
            return None

    def _targets(self) -> list[tuple[str, str, str, Callable[..., Any]]]:
        """(module, class, method, wrapper) of every patch of LangChain core."""
        tool_run, tool_arun = _tool_wrappers(self)
        retriever_invoke, retriever_ainvoke = _retriever_wrappers()
        invoke, ainvoke, _, _ = _entry_wrappers()
        return [
            (_CHAT, "BaseChatModel", "_generate_with_cache", _generate_wrapper),
            (_CHAT, "BaseChatModel", "_agenerate_with_cache", _agenerate_wrapper),
            (_CHAT, "BaseChatModel", "stream", _stream_wrapper),
            (_CHAT, "BaseChatModel", "astream", _astream_wrapper),
            (_TOOLS, "BaseTool", "run", tool_run),
            (_TOOLS, "BaseTool", "arun", tool_arun),
            (_RETRIEVERS, "BaseRetriever", "invoke", retriever_invoke),
            (_RETRIEVERS, "BaseRetriever", "ainvoke", retriever_ainvoke),
            (_RUNNABLES, "RunnableSequence", "invoke", invoke),
            (_RUNNABLES, "RunnableSequence", "ainvoke", ainvoke),
        ]

    @staticmethod
    def _optional_targets(module: str) -> list[tuple[str, str, str, Callable[..., Any]]]:
        """(module, class, method, wrapper) of the :data:`OPTIONAL_ENTRY_POINTS` of ``module``."""
        entry = dict(zip(("invoke", "ainvoke", "stream", "astream"), _entry_wrappers(), strict=True))
        return [(mod, cls, method, entry[method]) for mod, cls, method in OPTIONAL_ENTRY_POINTS if mod == module]

    def _instrument(self, **kwargs: Any) -> None:
        if "tool_risks" in kwargs:
            self._tool_risks = _check_risks(kwargs["tool_risks"])
        _guards.bind(kwargs.get("tracer_provider"))
        self._patched: list[tuple[str, str, str]] = []
        self._patch(self._targets())
        _register_models()
        # LangGraph and legacy chains are patched after their own import (at once when imported already),
        # never imported here
        modules = [module for module in dict.fromkeys(m for m, _, _ in OPTIONAL_ENTRY_POINTS) if _installed(module)]
        self._hooks = [_lazy.when_imported(module, self._patch_optional(module)) for module in modules]

    def _patch_optional(self, module: str) -> Callable[[ModuleType], None]:
        """The import hook that patches the optional entry points of ``module``."""

        def patch(_module: ModuleType) -> None:
            self._patch(self._optional_targets(module))

        return patch

    def _patch(self, targets: list[tuple[str, str, str, Callable[..., Any]]]) -> None:
        for module, cls, method, wrapper in targets:
            try:
                wrapt.wrap_function_wrapper(module, f"{cls}.{method}", wrapper)
            except ImportError:  # an installed package without this module (``langchain`` 1.x has no chains)
                _log.debug("otel-replay: %s is not importable; %s.%s not instrumented", module, cls, method)
                continue
            except Exception:  # noqa: BLE001 - a LangChain version without this method: skip it
                _log.warning("otel-replay: cannot instrument %s.%s.%s", module, cls, method, exc_info=True)
                continue
            self._patched.append((module, cls, method))

    def _uninstrument(self, **kwargs: Any) -> None:
        for hook in getattr(self, "_hooks", []):
            _lazy.cancel(hook)
        for module, cls, method in reversed(getattr(self, "_patched", [])):
            try:
                unwrap(getattr(sys.modules[module], cls), method)
            except Exception:  # noqa: BLE001
                _log.warning("otel-replay: cannot uninstrument %s.%s.%s", module, cls, method, exc_info=True)
        self._patched = []
        _guards.bind(None)
