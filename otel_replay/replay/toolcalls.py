"""The tool calls a model asked for, and whether a tool step of the run answered them.

A plain tool loop on the ``openai`` / ``anthropic`` client (the OpenAI cookbook's function-calling agent)
records its model calls as steps, and with them the tool calls each response asks for: Chat Completions'
``choices[].message.tool_calls``, the Responses API's ``function_call`` output items, Anthropic's ``tool_use``
content blocks, LangChain's ``AIMessage.tool_calls``. The tool functions themselves are steps only when the
user decorated them (``@otel_replay.tool``) or an instrumentor wraps them; a tool call with no tool step of its
own ran outside the firewall: no replay can answer it from the recording, and a mock or deterministic replay
runs it for real (the side-effect guard blocks what it changes). This module finds those calls:

* :func:`not_firewalled` (a dry replay's report): tools the model asked for at a step that no later tool step
  of the same name answered;
* :func:`requested_calls` and :func:`result_ids` (used by the replay session): the calls a recorded response
  asks for, and the tool-call ids whose results a request carries back to the model, so a replay can tell
  that code outside the firewall produced a tool result.

It reads recorded data only; it must never call, import or look up a tool by the names it finds.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Final

from ..runs import Run
from ..snapshots import TYPE_TAG

_MAX_DEPTH: Final = 60


def _fields(value: Any) -> Any:
    """A recorded object's fields (``{"$type": "pydantic", "fields": {...}}`` → the fields), else the value."""
    if (
        isinstance(value, dict)
        and value.get(TYPE_TAG) in ("pydantic", "dataclass")
        and isinstance(value.get("fields"), dict)
    ):
        return value["fields"]
    return value


def requested_calls(response: Any) -> list[tuple[str, str | None]]:
    """``(tool name, call id)`` of every tool call a recorded model response asks for, in order.

    A streamed response is read from its assembled ``response``; other shapes are searched for
    ``tool_calls`` lists (OpenAI chat, LangChain), ``function_call`` items (Responses API) and ``tool_use``
    blocks (Anthropic)."""
    if isinstance(response, dict) and "otel_replay.stream" in response:
        response = response.get("response")
    found: list[tuple[str, str | None]] = []

    def call_of(item: Any) -> None:
        item = _fields(item)
        if not isinstance(item, dict):
            return
        function = _fields(item.get("function"))
        name = function.get("name") if isinstance(function, dict) else item.get("name")
        call_id = item.get("id") or item.get("call_id")
        if isinstance(name, str) and name:
            found.append((name, call_id if isinstance(call_id, str) else None))

    def walk(value: Any, depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        value = _fields(value)
        if isinstance(value, dict):
            kind = value.get("type")
            if kind in ("function_call", "tool_use") and isinstance(value.get("name"), str):
                call_id = value.get("call_id") if kind == "function_call" else value.get("id")
                found.append((value["name"], call_id if isinstance(call_id, str) else None))
                return
            for key, item in value.items():
                if key == "tool_calls" and isinstance(item, list):
                    for call in item:
                        call_of(call)
                elif key not in ("tool_call_chunks", "additional_kwargs", "usage", "usage_metadata"):
                    walk(item, depth + 1)
        elif isinstance(value, list):
            for item in value:
                walk(item, depth + 1)

    walk(response, 0)
    return found


def result_ids(request: Any) -> set[str]:
    """Tool-call ids whose results a model request carries: ``tool`` messages' ``tool_call_id`` (OpenAI chat,
    LangChain), ``function_call_output`` items' ``call_id`` (Responses API), ``tool_result`` blocks'
    ``tool_use_id`` (Anthropic)."""
    ids: set[str] = set()

    def walk(value: Any, depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        value = _fields(value)
        if isinstance(value, dict):
            for key in ("tool_call_id", "tool_use_id"):
                if isinstance(value.get(key), str):
                    ids.add(value[key])
            if value.get("type") == "function_call_output" and isinstance(value.get("call_id"), str):
                ids.add(value["call_id"])
            for item in value.values():
                walk(item, depth + 1)
        elif isinstance(value, list):
            for item in value:
                walk(item, depth + 1)

    walk(request, 0)
    return ids


def not_firewalled(run: Run) -> list[str]:
    """Names of the tools the model asked for in ``run`` that no tool step answered: for each model step's
    requested calls, a later tool step of the same name answers one call each; what is left ran (if it ran)
    outside the firewall. Sorted, each name once."""
    steps = sorted(run.steps, key=lambda s: s.index)
    unanswered: set[str] = set()
    later_tools: Counter[str] = Counter(s.name for s in steps if s.kind == "tool")
    pending: Counter[str] = Counter()
    for step in steps:
        if step.kind == "tool":
            later_tools[step.name] -= 1
            if pending[step.name] > 0:
                pending[step.name] -= 1
        elif step.kind == "model":
            payload = step.snapshots.get("model")
            if isinstance(payload, dict):
                for name, _ in requested_calls(payload.get("response")):
                    if later_tools[name] - pending[name] > 0:
                        pending[name] += 1
                    else:
                        unanswered.add(name)
    return sorted(unanswered)


def unrecorded_results(asked: list[tuple[str, str | None, int]], sent: str | None) -> list[tuple[str, int]]:
    """``(tool, recorded model step)`` for each tool (once) whose call, asked for by a model answer served from
    the recording (``asked``: name, call id, step), has its result carried by the model request ``sent`` (JSON)
    with no tool step of the replay answering it: code outside the firewall produced that result."""
    if sent is None:
        return []
    try:
        returned = result_ids(json.loads(sent))
    except ValueError:
        return []
    reported: dict[str, int] = {}
    for tool, call_id, index in asked:
        if call_id is not None and call_id in returned and tool not in reported:
            reported[tool] = index
    return list(reported.items())
