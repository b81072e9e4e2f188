"""LangChain's objects as plain data and back: the request and response conversion of the LangChain instrumentor.

A chat model's request (messages without per-run ids, invocation parameters, bound tools as JSON schema) and
its response (LangChain's own message dicts, with usage, model and finish reason lifted to the top), a
stream's chunks, a tool's input and output (``ToolMessage``), a retriever's Documents; and back, a recorded
value rebuilt as the ``ChatResult``, ``AIMessageChunk``, ``ToolMessage`` or Documents LangChain expects.
LangChain is imported inside the functions that need it (by then the application has imported it). Part of
:mod:`otel_replay.instrumentation.langchain`.

It must never call a model, tool or retriever, record or answer a step, import LangChain at module level, or
guess a value the recording does not hold (a recording it cannot rebuild raises, and the replay stops).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Mapping
from typing import Any, Final

_SCORE_KEYS: Final = ("score", "relevance_score", "similarity_score", "_score")
STRUCTURED_OUTPUT_KWARGS: Final = ("ls_structured_output_format", "structured_output_format")
"""``gen_ai.tool.call.id``, written only once the project's convention defines it."""


def arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], position: int, name: str, default: Any = None) -> Any:
    if len(args) > position:
        return args[position]
    return kwargs.get(name, default)


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
    if type(tools) is list and all(type(t) is dict for t in tools):
        return params  # bound already converted (``bind_tools`` does): nothing to convert
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    converted = [convert_to_openai_tool(t) if isinstance(t, BaseTool) or callable(t) else t for t in tools]
    return {**params, "tools": converted}


_LS_KEYS: Final = ("ls_provider", "ls_model_name")


def _ls_from_run(instance: Any, run_manager: Any) -> dict[str, Any] | None:
    """The LangSmith params (provider, model) LangChain already worked out for this call: ``generate`` puts
    ``_get_ls_params`` into the run manager's metadata, so asking the model again (which recomputes its
    invocation parameters) is not needed. None when they are not there, or when the model's own ``metadata``
    names them (it is merged last, and would hide what ``_get_ls_params`` returns). The run's config metadata is
    merged first: it can only supply a key the model's ``_get_ls_params`` does not return at all."""
    metadata = getattr(run_manager, "metadata", None)
    if type(metadata) is not dict or not all(type(metadata.get(k)) is str for k in _LS_KEYS):
        return None
    own = getattr(instance, "metadata", None)
    if own and any(k in own for k in _LS_KEYS):
        return None
    return {k: metadata[k] for k in _LS_KEYS}


def model_request(
    instance: Any, messages: Any, stop: Any, extra: dict[str, Any], run_manager: Any = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model request (messages + invocation parameters) and the LangSmith params (provider, model): from
    ``run_manager`` when LangChain put them there, else asked of the model."""
    params = _plain_tools(dict(instance._get_invocation_params(stop=stop, **extra)))
    ls = _ls_from_run(instance, run_manager) if run_manager is not None else None
    if ls is None:
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


def chat_result_plain(result: Any) -> Any:
    generations = list(getattr(result, "generations", None) or [])
    return _response_plain(
        [g.message for g in generations], [g.generation_info for g in generations], getattr(result, "llm_output", None)
    )


def chunks_plain(chunks: list[Any]) -> Any:
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


def chat_result_from(value: Any) -> Any:
    """The recorded response as a ``ChatResult`` of ``ChatGeneration``s."""
    from langchain_core.outputs import ChatGeneration, ChatResult

    pairs = _recorded_messages(value)
    return ChatResult(
        generations=[ChatGeneration(message=m, generation_info=info) for m, info in pairs],
        llm_output=value.get("llm_output"),
    )


def chunks_from(value: Any) -> list[Any]:
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


def token_events(
    instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any, *, async_api: bool
) -> list[tuple[Any, Any, Any]]:
    """(run manager, text, chunk) of the ``on_llm_new_token`` callbacks a served answer owes its streaming
    handlers (LangGraph ``stream_mode="messages"``): one chunk per generation, when the model would have
    streamed. Empty when nothing listens."""
    from langchain_core.outputs import ChatGenerationChunk

    run_manager = arg(args, kwargs, 2, "run_manager")
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


def tool_arguments(tool: Any, tool_input: Any) -> dict[str, Any]:
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


def tool_output_plain(output: Any) -> Any:
    """A tool's output as plain data: a ``ToolMessage`` as LangChain's own message dict."""
    from langchain_core.messages import BaseMessage, message_to_dict

    return message_to_dict(output) if isinstance(output, BaseMessage) else output


def tool_output_from(value: Any, tool_call_id: Any) -> Any:
    """The recorded output as the tool returned it: a ``ToolMessage`` when one was recorded and LangChain
    asked for one (``tool_call_id`` given), else the recorded value."""
    if tool_call_id is None or not isinstance(value, dict) or set(value) != {"type", "data"}:
        return value
    from langchain_core.messages import ToolMessage, messages_from_dict

    message = messages_from_dict([value])[0]
    if isinstance(message, ToolMessage) and message.tool_call_id != tool_call_id:
        message.tool_call_id = str(tool_call_id)
    return message


def with_replayed_message_ids(value: Any, tool_input: Any) -> Any:
    """A recorded tool result that carries the graph's messages (a handoff's ``Command(update={"messages":
    ...})`` or its ``Send`` arguments) with the recorded message ids replaced by the replay's own.

    Message ids are volatile (LangGraph gives the user's message a fresh uuid, LangChain each answer a fresh
    run id), and LangGraph merges messages by id: a recorded message with its recorded id would be added next
    to the replay's copy instead of replacing it. The recorded messages are paired, in order, with the messages
    of the state the replay's tool call was given (``tool_input["state"]["messages"]``, or under ``"args"`` of
    a tool call: LangGraph's injected state) for as long as each pair is the same message (type, content and
    tool calls: a parallel handoff sends each agent a copy of the model's answer holding only its own call,
    under an id of its own, which keeps that id);
    each recorded id of a pair maps to the replay's id, and every message of ``value`` with a mapped id gets a
    copy with the replay's id. A ``Command`` also gets LangGraph's own ``Command.PARENT`` back (the recording
    holds its text, and ``ToolNode`` merges parallel handoffs only for the constant itself). Anything else is
    returned as it is."""
    current = _state_messages(tool_input)
    recorded = _first_messages(value) if current else []
    mapping: dict[Any, Any] = {}
    for old, new in zip(recorded, current, strict=False):
        if (
            type(old) is not type(new)
            or getattr(old, "content", None) != getattr(new, "content", None)
            or _calls(old) != _calls(new)
        ):
            break
        if getattr(old, "id", None) and getattr(new, "id", None) and old.id != new.id:
            mapping[old.id] = new.id
    return _map_ids(value, mapping)


def _calls(message: Any) -> list[tuple[Any, Any]]:
    """The tool calls of a message, by name and arguments."""
    calls = getattr(message, "tool_calls", None) or []
    return [(c.get("name"), c.get("args")) for c in calls if isinstance(c, Mapping)]


def _state_messages(tool_input: Any) -> list[Any]:
    """The messages of the injected state in a tool's input: the arguments themselves, or a tool call's."""
    args = tool_input.get("args", tool_input) if isinstance(tool_input, Mapping) else None
    state = args.get("state") if isinstance(args, Mapping) else None
    messages = state.get("messages") if isinstance(state, Mapping) else None
    return list(messages) if isinstance(messages, (list, tuple)) else []


def _first_messages(value: Any, depth: int = 0) -> list[Any]:
    """The first list of LangChain messages inside a Command, Send, dict or list (or [])."""
    from langchain_core.messages import BaseMessage

    if depth > 6:
        return []
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(m, BaseMessage) for m in value):
            return list(value)
        children: Any = value
    elif isinstance(value, Mapping):
        children = value.values()
    else:
        children = [getattr(value, name, None) for name in ("update", "goto", "arg")]
    for child in children:
        found = _first_messages(child, depth + 1)
        if found:
            return found
    return []


def _map_ids(value: Any, mapping: Mapping[Any, Any], depth: int = 0) -> Any:
    """``value`` with every LangChain message whose id ``mapping`` names copied with the mapped id; Commands
    (with LangGraph's own ``Command.PARENT``), Sends, dicts, lists and tuples rebuilt around them; everything
    else as it is."""
    from langchain_core.messages import BaseMessage

    if depth > 8:
        return value
    if isinstance(value, BaseMessage):
        new = mapping.get(value.id)
        return value.model_copy(update={"id": new}) if new is not None else value
    if isinstance(value, list):
        return [_map_ids(v, mapping, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(_map_ids(v, mapping, depth + 1) for v in value)
    if isinstance(value, dict):
        return {k: _map_ids(v, mapping, depth + 1) for k, v in value.items()}
    try:
        from langgraph.types import Command, Send
    except ImportError:
        return value
    if isinstance(value, Command):
        return dataclasses.replace(
            value,
            graph=Command.PARENT if value.graph == Command.PARENT else value.graph,
            update=_map_ids(value.update, mapping, depth + 1),
            goto=_map_ids(value.goto, mapping, depth + 1),
        )
    if isinstance(value, Send):
        return Send(value.node, _map_ids(value.arg, mapping, depth + 1))
    return value


def retrieval_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``invoke(input, config=None, **kwargs)`` → the query and the retriever's own keyword arguments."""
    named = {"query": arg(args, kwargs, 0, "input")}
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


def documents_plain(docs: Any) -> Any:
    return [_document_plain(d) for d in docs] if isinstance(docs, (list, tuple)) else docs


def documents_from(value: Any) -> list[Any]:
    from langchain_core.documents import Document

    if not isinstance(value, list):
        raise ValueError("the recorded retrieval returned no list of documents")
    return [
        Document(page_content=d["page_content"], metadata=d.get("metadata") or {}, id=d.get("id"))
        if isinstance(d, dict) and "page_content" in d
        else d
        for d in value
    ]
