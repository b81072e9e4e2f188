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
  that code outside the firewall produced a tool result;
* :func:`code_calls` (code agents, whose model writes Python that calls the tools instead of asking for tool
  calls: a run marked ``otel_replay.run.executes_code``, see :func:`code_tools`): the calls, by name, of the
  run's tools in the code blobs of a recorded response (smolagents' ``<code>…</code>`` and ```` ```py ````
  fences, parsed with :mod:`ast`, never run). Their results go back to the model as plain text (smolagents'
  ``Observation:`` messages), with no id to follow: a call counts as answered when a tool step of that name
  follows before the next model call.

It reads recorded data only; it must never call, import or look up a tool by the names it finds.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Collection
from typing import Any, Final

from ... import semconv
from ...runs import Run
from ...snapshots import TYPE_TAG

_MAX_DEPTH: Final = 60
CODE_CALL: Final = "otel_replay:code"
"""The call id :func:`calls_asked` gives a call found in model-written code (it has none of its own)."""
_CODE_BLOBS: Final = re.compile(
    r"<code>(.*?)(?:</code>|\Z)|```(?:python|py)\s*\n(.*?)(?:\n```|\Z)|<execute>(.*?)(?:</execute>|\Z)", re.DOTALL
)
"""Code blobs of the code agents: smolagents' default ``<code>…</code>`` tags (the closing one is a stop sequence,
so a recorded answer may end without it) and the Markdown fences it also accepts; LlamaIndex ``CodeActAgent``'s
``<execute>…</execute>``."""
_SMOLAGENTS_PROMPT: Final = ("code blobs", "final_answer")
"""Words of smolagents' ``CodeAgent`` system prompt, which lists each tool as a Python ``def name(...)``."""
_ENDS_RUN: Final = frozenset({"final_answer"})
"""smolagents' ``final_answer`` tool: it ends the run (its value is the run's output), its result never goes back
to the model, and it has no effect; never counted as a tool the code called."""
_PROMPT_TOOL: Final = re.compile(r"^def ([A-Za-z_]\w*)\(", re.MULTILINE)
_PARSED_MAX: Final = 100_000
"""Longest code blob parsed with :mod:`ast`; a longer one (or one Python's parser cannot take: nesting that
exhausts its recursion or memory) is searched for ``name(`` instead."""


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


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def code_tools(run: Run) -> frozenset[str] | None:
    """The tools the model-written code of ``run`` could call, when the run executes model-written code; None
    for any other run. Such a run is marked ``otel_replay.run.executes_code`` (the smolagents instrumentor), or
    recognised by its first model request: smolagents' ``CodeAgent`` system prompt, whose ``def name(...)``
    lines name the tools (a run recorded with only the model SDK instrumented)."""
    attributes = getattr(run, "attributes", None) or {}
    if not _truthy(attributes.get(semconv.RUN_EXECUTES_CODE)):
        return _prompted_tools(run)
    names = attributes.get(semconv.RUN_CODE_TOOLS)
    if isinstance(names, str):  # a list attribute reads back from the store as JSON text
        try:
            names = json.loads(names)
        except ValueError:
            names = []
    return frozenset(n for n in names or () if isinstance(n, str) and n not in _ENDS_RUN)


def _prompted_tools(run: Run) -> frozenset[str] | None:
    """The tools a smolagents ``CodeAgent`` system prompt in the run's first model request lists, or None."""
    first = next((s for s in sorted(getattr(run, "steps", ()), key=lambda s: s.index) if s.kind == "model"), None)
    payload = (getattr(first, "snapshots", None) or {}).get("model")
    request = payload.get("request") if isinstance(payload, dict) else None
    for text in _texts(request)[:2]:
        if all(word in text for word in _SMOLAGENTS_PROMPT):
            return frozenset(_PROMPT_TOOL.findall(text)) - _ENDS_RUN
    return None


def _texts(value: Any, depth: int = 0) -> list[str]:
    """The text fields of a recorded response (chat ``content``, Responses ``text``), in order."""
    if depth > _MAX_DEPTH:
        return []
    value = _fields(value)
    if isinstance(value, dict):
        out: list[str] = []
        for key, item in value.items():
            if key in ("content", "text") and isinstance(item, str):
                out.append(item)
            elif key not in ("usage", "usage_metadata"):
                out.extend(_texts(item, depth + 1))
        return out
    if isinstance(value, list):
        return [t for item in value for t in _texts(item, depth + 1)]
    return []


def code_calls(response: Any, tools: Collection[str]) -> list[str]:
    """Names of ``tools`` called in the code blobs of a recorded model response, in the order they appear in
    the code (each call once; code that does not parse, or is too long or too deep to parse, is searched for
    ``name(``). Never raises for what a recording or a model wrote."""
    if isinstance(response, dict) and "otel_replay.stream" in response:
        response = response.get("response")
    if not tools:
        return []
    found: list[str] = []
    for text in _texts(response):
        for match in _CODE_BLOBS.finditer(text):
            code = next(group for group in match.groups() if group is not None)
            try:
                if len(code) > _PARSED_MAX:
                    raise ValueError("too long to parse")
                tree = ast.parse(code)
            except (SyntaxError, ValueError, RecursionError, MemoryError):  # hostile or broken: searched instead
                found += [m.group(1) for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", code) if m.group(1) in tools]
                continue
            calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
            calls.sort(key=lambda n: (n.lineno, n.col_offset))
            found += [n.func.id for n in calls if isinstance(n.func, ast.Name) and n.func.id in tools]
    return found


def calls_asked(response: Any, tools: frozenset[str] | None) -> list[tuple[str, str | None]]:
    """The tool calls a recorded response asks for: structured calls, and, for a run that executes model-written
    code (``tools``: its :func:`code_tools`, worked out once per run), the calls of those tools in that code
    (with the call id :data:`CODE_CALL`)."""
    asked = requested_calls(response)
    if tools:
        asked += [(name, CODE_CALL) for name in code_calls(response, tools)]
    return asked


def replay_code_tools(run: Run) -> frozenset[str] | None:
    """The tools whose calls in model-written code a replay of ``run`` checks (:func:`unrecorded_code_calls`).
    For a code agent recognised by its prompt only, all of them. In a run the smolagents instrumentor marked,
    only those with no tool step in the recording (a ``Tool`` that overrides ``__call__``, a remote executor):
    the others are steps during the replay too, and a call of theirs the code did not reach (a branch not
    taken) must not count as unanswered."""
    tools = code_tools(run)
    if tools and _truthy((getattr(run, "attributes", None) or {}).get(semconv.RUN_EXECUTES_CODE)):
        tools = tools - {s.name for s in getattr(run, "steps", ()) if s.kind in semconv.TOOL_CALL_KINDS}
    return tools or None


def not_firewalled(run: Run) -> list[str]:
    """Names of the tools the model asked for in ``run`` that no tool step answered: for each model step's
    requested calls, a later tool step of the same name answers one call each; what is left ran (if it ran)
    outside the firewall. Sorted, each name once."""
    steps = sorted(run.steps, key=lambda s: s.index)
    tools = code_tools(run)
    unanswered: set[str] = set()
    later_tools: Counter[str] = Counter(s.name for s in steps if s.kind in semconv.TOOL_CALL_KINDS)
    pending: Counter[str] = Counter()
    for step in steps:
        if step.kind in semconv.TOOL_CALL_KINDS:
            later_tools[step.name] -= 1
            if pending[step.name] > 0:
                pending[step.name] -= 1
        elif step.kind == "model":
            payload = step.snapshots.get("model")
            if isinstance(payload, dict):
                for name, _ in calls_asked(payload.get("response"), tools):
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


def unrecorded_code_calls(asked: list[tuple[str, str | None, int]]) -> list[tuple[str, int]]:
    """``(tool, recorded model step)`` for each tool (once) that model-written code called (``asked`` entries
    with the call id :data:`CODE_CALL`, see :func:`calls_asked`) and that no tool step answered before the next
    model call: its result went back to the model as plain text (smolagents' ``Observation:``) from outside the
    firewall."""
    reported: dict[str, int] = {}
    for tool, call_id, index in asked:
        if call_id == CODE_CALL and tool not in reported:
            reported[tool] = index
    return list(reported.items())
