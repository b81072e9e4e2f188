"""Which recorded types a replay may rebuild: a closed registry, filled only by code, never by data.

A recorded value that JSON cannot hold carries its class as text (``{"$type": "dataclass", "class":
"module:Qualname", "fields": {...}}``). That text was written by whoever could write the trace, the store or a
case file, so it is data: a replay that imported the module it names, or called the constructor of a class it
names, would run code chosen by the data (``subprocess:Popen`` as a "dataclass" starts a process,
``io:FileIO`` creates a file). Here only classes registered by code are rebuilt:

* the user registers their own dataclasses, pydantic models and exception classes with
  :func:`register_type` (``otel_replay.register_type``), the documented way to have them back as objects;
* the project's SDK instrumentors register the SDK's response models when they instrument (an SDK is never
  imported just to register it).

A pydantic model is rebuilt only with ``model_validate`` (validation, never an arbitrary ``__init__``); a
registered dataclass with its constructor, which the user chose by registering it. Anything else stays the
plain dict or list it was recorded as, and the replay collects the names it met (:func:`noting`) so it can
say so once.

Process-wide state: the registry itself (a dict behind a lock), because registration happens at import time
of the user's modules and of instrumentors, far from any replay. The names met during one replay live in a
context variable, so concurrent replays in threads keep theirs apart.

This module must never import a module named by data, look a name up in ``sys.modules``, import the replay
or storage layers, or construct an object of a class that was not registered.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from .snapshots import encode_by_slots, qualname_of

T = TypeVar("T", bound=type)

_REGISTRY: dict[str, type] = {}
_EXCEPTIONS: dict[str, type[Exception]] = {}
_lock = threading.Lock()

_NOTE_NAMES_SHOWN: Final = 8
_NAME_CHARS_SHOWN: Final = 120

_met: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("otel_replay_unregistered_types", default=None)


def register_type(cls: T) -> T:
    """Let replays rebuild recorded values of ``cls``; returns ``cls``, so it also works as a class decorator.

    ``cls`` is a pydantic model (rebuilt with ``cls.model_validate(fields)``), a dataclass (rebuilt with
    ``cls(**fields)``), a slotted value class whose constructor takes each of its ``__slots__`` by keyword
    (recorded by its slots and rebuilt with ``cls(**fields)``, such as LangGraph's ``Send``) or a subclass of
    ``Exception`` (a recorded exception of that class is raised again as ``cls(message)``). A recorded value of
    a class that was never registered is handed back as the plain dict it was recorded as, and the replay notes
    it. Raises TypeError for anything else.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_type takes a class, got {type(cls).__name__}")
    is_model = issubclass(cls, BaseModel)
    is_exception = issubclass(cls, Exception)
    slots = None if is_model or is_exception or dataclasses.is_dataclass(cls) else _keyword_slots(cls)
    if not (is_model or is_exception or dataclasses.is_dataclass(cls) or slots):
        raise TypeError(
            f"register_type takes a dataclass, a pydantic model, a slotted value class or an exception class; "
            f"{cls.__qualname__} is none of them"
        )
    name = qualname_of(cls)
    with _lock:
        if slots:
            encode_by_slots(cls, slots)
        _REGISTRY[name] = cls
        if is_exception:
            _EXCEPTIONS[name.replace(":", ".").removeprefix("builtins.")] = cls
    return cls


def _keyword_slots(cls: type) -> tuple[str, ...] | None:
    """The ``__slots__`` of ``cls`` and its bases when ``cls`` keeps no ``__dict__`` and its constructor takes
    each of them by keyword, else None."""
    names: list[str] = []
    for klass in reversed(cls.__mro__[:-1]):  # without object
        declared = klass.__dict__.get("__slots__")
        if declared is None:
            return None  # a class in the chain without __slots__: instances have a __dict__
        for slot in (declared,) if isinstance(declared, str) else declared:
            if slot not in ("__dict__", "__weakref__") and slot not in names:
                names.append(slot)
    if not names:
        return None
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return None
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    fits = all(takes_any or (n in parameters and parameters[n].kind in keyword) for n in names)
    return tuple(names) if fits else None


def register_types(classes: Iterable[Any]) -> None:
    """Register each class of ``classes`` that :func:`register_type` takes, skipping the others silently
    (used by instrumentors, which must never raise into the host program)."""
    for cls in classes:
        try:
            register_type(cls)
        except TypeError:
            continue


def registered(name: str) -> type | None:
    """The class registered under ``module:qualname`` ``name``, or None."""
    return _REGISTRY.get(name)


def registered_exception(type_name: str) -> type[Exception] | None:
    """The exception class registered under its recorded type name (``module.Qualname``), or None."""
    return _EXCEPTIONS.get(type_name)


def rebuild(cls: type, fields: dict[str, Any]) -> Any:
    """A registered class rebuilt from its recorded fields: by its kind, never by the tag the data gives."""
    if issubclass(cls, BaseModel):
        return cls.model_validate(fields)
    if dataclasses.is_dataclass(cls) or _keyword_slots(cls):
        return cls(**fields)
    raise TypeError(f"{cls.__qualname__} is not rebuilt from fields")


def note_unregistered(name: str) -> None:
    """Remember that the current replay met a recorded value of unregistered class ``name``."""
    met = _met.get()
    if met is not None and name not in met:
        met.append(name)


@contextlib.contextmanager
def noting() -> Iterator[list[str]]:
    """Collect the unregistered class names met inside the block (threads and tasks that carry the context
    add to the same list)."""
    met: list[str] = []
    token = _met.set(met)
    try:
        yield met
    finally:
        _met.reset(token)


def unregistered_note(names: Iterable[str]) -> str | None:
    """The one line a replay shows about the unregistered types it met, or None when there were none."""
    names = list(names)
    if not names:
        return None
    shown = ", ".join(repr(n[:_NAME_CHARS_SHOWN]) for n in names[:_NOTE_NAMES_SHOWN])
    more = f" and {len(names) - _NOTE_NAMES_SHOWN} more" if len(names) > _NOTE_NAMES_SHOWN else ""
    return (
        f"recorded values of unregistered types were replayed as plain dicts: {shown}{more}; register a "
        "class with otel_replay.register_type(cls) to have it rebuilt"
    )
