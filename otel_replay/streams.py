"""The providers' streamed answers as plain data: the whole answer a list of chunk or event dicts makes up (and
the stream a whole answer is sent as, for a client that streams a call recorded whole), and the text-delta slots
that redaction treats as one text.

Why it exists: the SDK instrumentors (which hold SDK objects turned into dicts) and the recording proxy (which
holds the server-sent events themselves) record the same three wire formats: OpenAI chat completion chunks, the
Responses API's stream events and Anthropic's Messages stream events. Both assemble a stream into the answer it
makes up and redact a secret the model split over several deltas as the text those deltas make up together.

The ``*_stream`` functions are :func:`assemble_chat`, :func:`assemble_responses` and :func:`assemble_message`
the other way round: the events a server would send for a whole answer, one per content part (the text in one
delta, each tool call's arguments in one delta), so that assembling them gives the answer back.

What it must never do: import an SDK or anything of otel_replay (it is a leaf), or change the dicts it reads
(except :func:`assemble_message`'s deep copies, which are its own).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any


def assemble_chat(chunks: list[Any]) -> dict[str, Any] | None:
    """The ``ChatCompletion`` (as plain data) that a list of ``chat.completion.chunk`` dicts makes up."""
    if not chunks:
        return None
    first = chunks[0]
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in chunks:
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            index = choice.get("index", 0)
            slot = choices.setdefault(
                index,
                {
                    "index": index,
                    "message": {"role": "assistant", "content": None},
                    "finish_reason": None,
                    "logprobs": None,
                },
            )
            delta = choice.get("delta") or {}
            message = slot["message"]
            if delta.get("role"):
                message["role"] = delta["role"]
            for key in ("content", "refusal"):
                if delta.get(key) is not None:
                    message[key] = (message.get(key) or "") + delta[key]
            for call in delta.get("tool_calls") or ():
                calls = message.setdefault("tool_calls", [])
                position = call.get("index", len(calls))
                while len(calls) <= position:
                    calls.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                target = calls[position]
                if call.get("id"):
                    target["id"] = call["id"]
                if call.get("type"):
                    target["type"] = call["type"]
                function = call.get("function") or {}
                if function.get("name"):
                    target["function"]["name"] += function["name"]
                if function.get("arguments"):
                    target["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                slot["finish_reason"] = choice["finish_reason"]
    out = {
        "id": first.get("id"),
        "object": "chat.completion",
        "created": first.get("created"),
        "model": first.get("model"),
        "choices": [choices[i] for i in sorted(choices)],
    }
    if first.get("system_fingerprint") is not None:
        out["system_fingerprint"] = first["system_fingerprint"]
    if usage is not None:
        out["usage"] = usage
    return out


def assemble_responses(events: list[Any]) -> dict[str, Any] | None:
    """The ``Response`` (as plain data) of a list of Responses-API stream event dicts: the last one carrying
    the whole response (``response.completed``, ``.incomplete``, ``.failed``, else ``.created``)."""
    final = None
    for event in events:
        if isinstance(event, Mapping) and isinstance(event.get("response"), Mapping):
            final = event["response"]
    return dict(final) if final is not None else None


def assemble_message(events: list[Any]) -> dict[str, Any] | None:
    """The Anthropic ``Message`` (as plain data) that a list of raw Messages stream event dicts makes up."""
    message: dict[str, Any] | None = None
    partial_json: dict[int, str] = {}
    for event in events:
        kind = event.get("type") if isinstance(event, Mapping) else None
        if kind == "message_start":
            message = copy.deepcopy(dict(event.get("message") or {}))
            message.setdefault("content", [])
        elif message is None:
            continue
        elif kind == "content_block_start":
            block = copy.deepcopy(dict(event.get("content_block") or {}))
            index = event.get("index", len(message["content"]))
            while len(message["content"]) <= index:
                message["content"].append({})
            message["content"][index] = block
        elif kind == "content_block_delta":
            index = event.get("index", 0)
            if index >= len(message["content"]):
                continue
            block, delta = message["content"][index], event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "input_json_delta":
                partial_json[index] = partial_json.get(index, "") + delta.get("partial_json", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = delta.get("signature")
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop":
            index = event.get("index", 0)
            if index in partial_json and index < len(message["content"]):
                try:
                    message["content"][index]["input"] = json.loads(partial_json[index] or "{}")
                except ValueError:
                    message["content"][index]["input"] = partial_json[index]
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            for key in ("stop_reason", "stop_sequence", "container"):
                if key in delta:
                    message[key] = delta[key]
            usage = dict(message.get("usage") or {})
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
            message["usage"] = usage
    return message


def chat_delta_slots(chunk: Any) -> Iterator[tuple[Any, Any, str]]:
    """Text deltas of a ``chat.completion.chunk`` dict: each choice's content and refusal, each tool call's
    arguments, as ``(channel, container, key)``: the pieces of one channel make up one text."""
    if not isinstance(chunk, Mapping):
        return
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, Mapping) or not isinstance(choice.get("delta"), Mapping):
            continue
        index, delta = choice.get("index", 0), choice["delta"]
        for key in ("content", "refusal", "reasoning_content"):
            yield ("choice", index, key), delta, key
        for call in delta.get("tool_calls") or ():
            if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
                yield ("tool_call", index, call.get("index", 0)), call["function"], "arguments"


def responses_delta_slots(event: Any) -> Iterator[tuple[Any, Any, str]]:
    """Text deltas of a Responses stream event dict: every ``*.delta`` event (output text, refusal, function
    call arguments, reasoning), one channel per event type and output / content / summary position."""
    if isinstance(event, Mapping) and str(event.get("type", "")).endswith(".delta"):
        yield (
            (
                event.get("type"),
                event.get("output_index"),
                event.get("content_index"),
                event.get("summary_index"),
                event.get("item_id"),
            ),
            event,
            "delta",
        )


def message_delta_slots(event: Any) -> Iterator[tuple[Any, Any, str]]:
    """Text deltas of a raw Anthropic Messages stream event dict: the ``text``, ``partial_json`` (tool input)
    and ``thinking`` pieces of each content block."""
    if (
        isinstance(event, Mapping)
        and event.get("type") == "content_block_delta"
        and isinstance(event.get("delta"), Mapping)
    ):
        for key in ("text", "partial_json", "thinking"):
            yield (event.get("index", 0), key), event["delta"], key


def redact_deltas(chunks: list[Any], delta_slots: Any, redactor: Any) -> int:
    """Redact the text deltas of stream ``chunks`` in place, channel by channel (``delta_slots``: one of the
    ``*_delta_slots`` above), as the text each channel's pieces make up together (the redactor's
    ``scrub_pieces``): joining the stored deltas gives the redacted text, never a secret that was split over
    several chunks. Returns the number of replacements."""
    channels: dict[Any, list[tuple[Any, str]]] = {}
    for chunk in chunks:
        for channel, container, key in delta_slots(chunk):
            if isinstance(container, dict) and isinstance(container.get(key), str):
                channels.setdefault(channel, []).append((container, key))
    total = 0
    for channel, slots in channels.items():
        pieces = [container[key] for container, key in slots]
        clean, n = redactor.scrub_pieces(pieces, f"model.response.stream.{channel}")
        if n:
            total += n
            for (container, key), piece in zip(slots, clean, strict=False):
                container[key] = piece
    return total


# ------------------------------------------------------------------------- a whole answer as a stream


def chat_stream(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` dicts a server streams for the ``ChatCompletion`` ``response``: per
    choice, its role, text and tool calls in one delta, then its finish reason; the usage in a last chunk of
    no choices (as with ``stream_options.include_usage``)."""
    head = {
        "id": response.get("id", ""),
        "object": "chat.completion.chunk",
        "created": response.get("created", 0),
        "model": response.get("model", ""),
    }
    chunks: list[dict[str, Any]] = []
    for position, choice in enumerate(_items(response.get("choices"))):
        index = choice.get("index", position)
        message = choice.get("message") if isinstance(choice.get("message"), Mapping) else {}
        assert isinstance(message, Mapping)
        delta: dict[str, Any] = {"role": message.get("role") or "assistant", "content": message.get("content")}
        calls = [
            {"index": i, "id": c.get("id"), "type": c.get("type", "function"), "function": _mapping(c.get("function"))}
            for i, c in enumerate(_items(message.get("tool_calls")))
        ]
        if calls:
            delta["tool_calls"] = calls
        if message.get("refusal") is not None:
            delta["refusal"] = message["refusal"]
        chunks.append({**head, "choices": [{"index": index, "delta": delta, "finish_reason": None}]})
        finish = {"index": index, "delta": {}, "finish_reason": choice.get("finish_reason")}
        chunks.append({**head, "choices": [finish]})
    if response.get("usage") is not None:
        chunks.append({**head, "choices": [], "usage": response["usage"]})
    return chunks


def responses_stream(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Responses API events a server streams for ``response``: created, each output item added, its text
    or arguments in one delta and done, then completed."""
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    emit("response.created", response={**response, "status": "in_progress", "output": []})
    for index, item in enumerate(_items(response.get("output"))):
        kind = item.get("type")
        if kind == "message":
            emit(
                "response.output_item.added", output_index=index, item={**item, "content": [], "status": "in_progress"}
            )
            for part_index, part in enumerate(_items(item.get("content"))):
                place = {"item_id": item.get("id"), "output_index": index, "content_index": part_index}
                text = part.get("text", "") if part.get("type") == "output_text" else None
                emit(
                    "response.content_part.added", **place, part={**part, **({"text": ""} if text is not None else {})}
                )
                if text is not None:
                    emit("response.output_text.delta", **place, delta=text)
                    emit("response.output_text.done", **place, text=text)
                emit("response.content_part.done", **place, part=part)
        elif kind == "function_call":
            emit("response.output_item.added", output_index=index, item={**item, "arguments": ""})
            place = {"item_id": item.get("id"), "output_index": index}
            emit("response.function_call_arguments.delta", **place, delta=item.get("arguments", ""))
            emit("response.function_call_arguments.done", **place, arguments=item.get("arguments", ""))
        else:
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=dict(response))
    return events


def message_stream(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Anthropic Messages events a server streams for ``message``: message_start, each content block
    started, its text or input in one delta and stopped, message_delta (stop reason, output tokens),
    message_stop."""
    usage = message.get("usage") if isinstance(message.get("usage"), Mapping) else {}
    assert isinstance(usage, Mapping)
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(_items(message.get("content"))):
        kind = block.get("type")
        if kind == "text":
            empty: dict[str, Any] = {**block, "text": ""}
            delta = {"type": "text_delta", "text": block.get("text", "")}
        elif kind in ("tool_use", "server_tool_use"):
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block.get("input", {}), ensure_ascii=False)}
        elif kind == "thinking":
            empty = {**block, "thinking": "", "signature": ""}
            delta = {"type": "thinking_delta", "thinking": block.get("thinking", "")}
        else:
            empty, delta = dict(block), {}
        events.append({"type": "content_block_start", "index": index, "content_block": empty})
        if delta:
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        if kind == "thinking" and block.get("signature"):
            signature = {"type": "signature_delta", "signature": block["signature"]}
            events.append({"type": "content_block_delta", "index": index, "delta": signature})
        events.append({"type": "content_block_stop", "index": index})
    stop = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    events.append({"type": "message_delta", "delta": stop, "usage": {"output_tokens": usage.get("output_tokens", 0)}})
    events.append({"type": "message_stop"})
    return events


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
