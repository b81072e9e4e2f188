"""Recorded values brought back as Python values for a replay: :func:`revive` (a recorded payload, its
registered dataclasses and pydantic models re-created) and :func:`revive_exception` (the exception a recorded
step raised, or a :class:`RecordedError` standing in for it).

It must never import a module or look up a class because the data names it (only registered classes, builtin
exceptions and classes of the project's own trusted, already imported code), never call a constructor the data
chooses, and never restore a redacted value (it stays a marker).
"""

from __future__ import annotations

import ast
import builtins
import sys
from collections.abc import Mapping
from typing import Any, Final

from .. import revival
from ..snapshots import REDACTED_TAG, TYPE_TAG, RedactedValue, from_jsonable, module_for

_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
"""Types :func:`revive` returns unchanged, so its walk does not call itself for them (most of a payload's values)."""


class RecordedError(Exception):
    """Raised in a replay where the original step raised an exception whose class cannot be rebuilt."""

    # The name replay reports and recorded errors give it (``module.Name``) stays where the class was first
    # defined: otel_replay.replay.session re-exports it.
    __module__ = "otel_replay.replay.session"

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


def revive(tree: Any) -> Any:
    """A recorded payload as Python values: tags rebuilt, and dataclasses and pydantic models re-created only
    when their class was registered (:func:`otel_replay.register_type`, or an SDK instrumentor). A class named
    by the data is never imported nor looked up: an unregistered one stays the plain dict of its fields, and
    the replay notes its name (see :mod:`otel_replay.revival`)."""
    if isinstance(tree, list):
        return [v if type(v) in _SCALARS else revive(v) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if len(tree) == 2 and isinstance(tree.get(REDACTED_TAG), str) and isinstance(tree.get("scope"), str):
        return RedactedValue(tree[REDACTED_TAG], tree["scope"])
    tag = tree.get(TYPE_TAG)
    if tag in ("dataclass", "pydantic"):
        name = str(tree.get("class", ""))
        cls = revival.registered(name)
        fields = revive(tree.get("fields", {}))
        if cls is None:
            revival.note_unregistered(name)
            return fields
        if isinstance(fields, dict):
            try:
                return revival.rebuild(cls, fields)
            except Exception:  # noqa: BLE001 - keep the recorded form when the class changed
                return fields
        return fields
    if tag is not None:
        return from_jsonable({k: revive(v) if k == "items" else v for k, v in tree.items()})
    return {k: v if type(v) in _SCALARS else revive(v) for k, v in tree.items()}


def _imported_class(qualified: str) -> type | None:
    """An exception class of the project's code already imported under ``module:qualname`` (a script's
    classes live under its replay alias too), or None. Nothing is imported; a module that the entrypoint rule
    does not trust (:func:`~otel_replay.replay.safety.trust.module_trusted`: the standard library, installed
    packages, code outside the project) is never searched."""
    from .safety.trust import module_trusted

    module_name, _, qualname = qualified.partition(":")
    for candidate in module_for(module_name):
        module = sys.modules.get(candidate)
        if module is None or not module_trusted(candidate, module):
            continue
        obj: Any = module
        for part in qualname.split("."):
            obj = getattr(obj, part, None) if obj is not None else None
        if isinstance(obj, type) and issubclass(obj, Exception):
            return obj
    return None


def revive_exception(error: Mapping[str, Any] | None) -> BaseException:
    """The exception a recorded step raised, as the same class when that is a builtin exception, a class
    registered with :func:`otel_replay.register_type`, or a class of the project's own code that is already
    imported; any other name gives a :class:`RecordedError` (the data never chooses a constructor to call)."""
    type_name = str((error or {}).get("type") or "Exception")
    message = str((error or {}).get("message") or "")
    cls: Any = getattr(builtins, type_name, None) if "." not in type_name else None
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = revival.registered_exception(type_name)
    if cls is None and "." in type_name:
        module_name, _, attr = type_name.rpartition(".")
        cls = _imported_class(f"{module_name}:{attr}")
    if isinstance(cls, type) and issubclass(cls, Exception):
        if issubclass(cls, KeyError):  # str(KeyError(k)) is repr(k): give the key back, not its repr
            try:
                return cls(ast.literal_eval(message))
            except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                pass
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - a constructor with other arguments
            pass
    return RecordedError(type_name, message)
