"""A call's arguments by parameter name, and fields read from the values an agent passes and returns.

``ArgNames`` (precomputed per decorated function: the hot path), ``named_arguments`` /
``positional_names`` for any signature, ``first_attr`` (first present attribute or key of a dict or object),
``as_int`` / ``as_float``, and a function's ``module:qualname`` entrypoint.

It must never call a value it reads (a callable attribute is skipped), encode or record anything.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from typing import Any


def signature_of(func: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


class ArgNames:
    """Names a call's arguments by parameter; precomputed per decorated function (this is on the hot path)."""

    __slots__ = ("names", "sig", "simple")

    def __init__(self, func: Callable[..., Any]) -> None:
        self.sig = signature_of(func)
        params = list(self.sig.parameters.values()) if self.sig is not None else []
        self.simple = self.sig is not None and all(
            p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) for p in params
        )
        self.names = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.simple and len(args) <= len(self.names):
            named = dict(zip(self.names, args, strict=False))
            if kwargs:
                named.update(kwargs)
            if self.names and self.names[0] in ("self", "cls"):
                named.pop(self.names[0], None)
            return named
        return named_arguments(self.sig, args, kwargs)


def named_arguments(sig: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Parameter name → value for a call (``args[i]`` / ``kwargs`` spill-over when binding fails)."""
    if sig is not None:
        try:
            bound = sig.bind_partial(*args, **kwargs)
        except TypeError:
            pass
        else:
            named: dict[str, Any] = {}
            for name, value in bound.arguments.items():
                param = sig.parameters[name]
                if param.kind is inspect.Parameter.VAR_POSITIONAL:
                    for i, item in enumerate(value):
                        named[f"{name}[{i}]"] = item
                elif param.kind is inspect.Parameter.VAR_KEYWORD:
                    named.update(value)
                else:
                    named[name] = value
            named.pop("self", None)
            named.pop("cls", None)
            return named
    named = {f"args[{i}]": a for i, a in enumerate(args)}
    named.update(kwargs)
    return named


def positional_names(sig: inspect.Signature | None, count: int) -> list[str]:
    names: list[str] = []
    if sig is not None:
        for param in sig.parameters.values():
            if param.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
                names.append(param.name)
            elif param.kind is inspect.Parameter.VAR_POSITIONAL:
                names.extend(f"{param.name}[{i}]" for i in range(count - len(names)))
                break
    names.extend(f"args[{i}]" for i in range(len(names), count))
    return names[:count]


def first_attr(obj: Any, *names: str) -> Any:
    """First present attribute or key among ``names`` (dicts and objects alike), else None."""
    for name in names:
        if isinstance(obj, dict):
            if name in obj and obj[name] is not None:
                return obj[name]
        else:
            value = getattr(obj, name, None)
            if value is not None and not callable(value):
                return value
    return None


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def entrypoint_of(func: Callable[..., Any]) -> tuple[str, str | None]:
    """``module:qualname`` of a function, plus the script path when it was defined in ``__main__``."""
    module = getattr(func, "__module__", None) or "?"
    script = None
    if module == "__main__":
        main = sys.modules.get("__main__")
        script = getattr(main, "__file__", None)
        if script:
            script = os.path.abspath(script)
    return f"{module}:{getattr(func, '__qualname__', getattr(func, '__name__', '?'))}", script
