"""A policy's model overrides applied to one model call's request, before it is hashed and before it is sent.

``policy.model`` (the model asked for), ``policy.params`` (request parameters set) and ``policy.prompts`` (role
→ text: the content of that role's message replaced) reach every model call of a replay given a
:class:`~otel_replay.replay.matching.policy.ReplayPolicy`, whatever its mode. Where each goes, per call shape:

* OpenAI Chat Completions (``openai.chat.completions``): ``model=``, params as keyword arguments, the
  content of each ``messages`` entry of that role replaced; a ``system`` (or ``developer``) prompt with no
  such message is inserted first;
* OpenAI Responses (``openai.responses``): ``model=``, params, ``system``/``developer`` → ``instructions=``,
  other roles replace the content of ``input`` items of that role (a plain-text ``input`` is the ``user``'s);
* Anthropic Messages (``anthropic.messages``): ``model=``, params, ``system`` → ``system=``, other roles in
  ``messages``;
* ``@otel_replay.model`` functions: a parameter named ``model``, parameters named as the params (or
  ``**kwargs``), a ``messages`` argument of ``{"role", "content"}`` dicts (as Chat Completions);
* LangChain chat models (``langchain``, the instrumented ``_generate_with_cache`` and, when the model streams,
  ``stream`` / ``astream``, whose input is turned into its messages first): the messages of that role
  (``system``, ``user``/``human``, ``assistant``/``ai``) get the text as content, a missing system message is
  put first; ``model`` and the params are passed as the call's keyword arguments, which the chat model merges
  into its request (as ``ChatOpenAI`` does) or refuses.

An override with no place to go in a call (no ``model`` parameter, no message of that role) is a note on
the replay's result, never silently dropped. It must never change the caller's own objects (messages lists
are copied), import anything a value names, or raise into the agent (a failure leaves the call as it was,
with a note).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Final

from .policy import ReplayPolicy

CHAT: Final = "openai.chat.completions"
RESPONSES: Final = "openai.responses"
MESSAGES: Final = "anthropic.messages"
LANGCHAIN: Final = "langchain"
_LANGCHAIN_TYPES: Final = {"system": "system", "user": "human", "human": "human", "assistant": "ai", "ai": "ai"}
_SYSTEM_ROLES: Final = ("system", "developer")


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def replace_role(messages: Any, role: str, text: str, *, insert: bool) -> list[Any] | None:
    """A copy of ``messages`` with the content of each message of ``role`` set to ``text`` (a message that
    is an SDK object becomes a plain dict); with ``insert`` and no such message, one is put first. None when
    ``messages`` is not a list or nothing could be placed."""
    if not isinstance(messages, (list, tuple)):
        return None
    out: list[Any] = []
    found = False
    for message in messages:
        if _get(message, "role") == role:
            found = True
            base = dict(message) if isinstance(message, Mapping) else {"role": role}
            out.append({**base, "content": text})
        else:
            out.append(message)
    if not found:
        if not insert:
            return None
        out.insert(0, {"role": role, "content": text})
    return out


def replace_langchain_role(messages: Any, role: str, text: str) -> list[Any] | None:
    """A copy of a LangChain ``messages`` list with the content of each message of ``role`` set to ``text``
    (a missing system message put first), or None when nothing could be placed."""
    if not isinstance(messages, (list, tuple)):
        return None
    kind = _LANGCHAIN_TYPES.get(role, role)
    out: list[Any] = []
    found = False
    for message in messages:
        if getattr(message, "type", None) == kind and hasattr(message, "model_copy"):
            found = True
            out.append(message.model_copy(update={"content": text}))
        else:
            out.append(message)
    if not found:
        if kind != "system":
            return None
        from langchain_core.messages import SystemMessage  # LangChain is present: its model made this call

        out.insert(0, SystemMessage(content=text))
    return out


def override_request(policy: ReplayPolicy, shape: str, request: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``request`` (an SDK method's keyword arguments) with the policy's overrides applied, and the notes of
    those that had no place to go."""
    out = dict(request)
    notes: list[str] = []
    if policy.model is not None:
        out["model"] = policy.model
    out.update(policy.params)
    for role, text in policy.prompts.items():
        placed = True
        if shape == RESPONSES:
            if role in _SYSTEM_ROLES:
                out["instructions"] = text
            elif isinstance(out.get("input"), str) and role == "user":
                out["input"] = text
            else:
                items = replace_role(out.get("input"), role, text, insert=False)
                placed = items is not None
                if items is not None:
                    out["input"] = items
        elif shape == MESSAGES and role == "system":
            out["system"] = text
        elif shape == LANGCHAIN:
            messages = replace_langchain_role(out.get("messages"), role, text)
            placed = messages is not None
            if messages is not None:
                out["messages"] = messages
        else:
            messages = replace_role(out.get("messages"), role, text, insert=shape == CHAT and role in _SYSTEM_ROLES)
            placed = messages is not None
            if messages is not None:
                out["messages"] = messages
        if not placed:
            notes.append(f"the {role!r} prompt override had no message of that role to replace in {shape} calls")
    return out, notes


def override_call(
    policy: ReplayPolicy, name: str, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], list[str]]:
    """The arguments of a call of the ``@otel_replay.model`` function ``func`` (step ``name``) with the
    policy's overrides applied, and the notes of those that had no place to go."""
    notes: list[str] = []
    try:
        signature = inspect.signature(func)
        bound = signature.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs, [f"model function {name!r}: its arguments could not be read, nothing was overridden"]
    params = signature.parameters
    var_kw = next((p.name for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD), None)

    def put(key: str, value: Any) -> bool:
        param = params.get(key)
        if param is not None and param.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            bound.arguments[key] = value
            return True
        if var_kw is not None:
            bound.arguments[var_kw] = {**bound.arguments.get(var_kw, {}), key: value}
            return True
        return False

    if policy.model is not None and not put("model", policy.model):
        notes.append(f"model function {name!r} has no 'model' parameter: the model override was not applied")
    for key, value in policy.params.items():
        if not put(key, value):
            notes.append(f"model function {name!r} has no {key!r} parameter: that parameter was not set")
    for role, text in policy.prompts.items():
        messages = replace_role(bound.arguments.get("messages"), role, text, insert=role in _SYSTEM_ROLES)
        if messages is None:
            notes.append(f"model function {name!r} takes no 'messages' list: the {role!r} prompt was not replaced")
        else:
            bound.arguments["messages"] = messages
    return tuple(bound.args), dict(bound.kwargs), notes
