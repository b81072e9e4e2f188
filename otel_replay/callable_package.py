"""A package that is also the function it is named after: ``otel_replay.replay`` and ``otel_replay.lab``.

``import otel_replay.replay`` (or ``import otel_replay.replay as r``) gives the package, with its submodules
(``r.engine``, ``r.safety``...), and ``otel_replay.replay(trace_id, mode=...)`` still calls the function
:func:`otel_replay.replay.engine.replay`, which the package also names ``otel_replay.replay.replay``. The
function's module is imported on the first call, so importing the package stays as cheap as before.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any


class CallablePackage(types.ModuleType):
    """A package module whose call is the call of one function of one of its modules."""

    def function(self) -> Callable[..., Any]:
        """The function a call of this package calls (its module imported now if need be)."""
        module, _, name = self.__dict__["__call_target__"].partition(":")
        found: Callable[..., Any] = getattr(importlib.import_module(module), name)
        return found

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function()(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.function())


def make_callable(package: str, target: str) -> None:
    """Make the (already imported) package ``package`` callable as the function ``target``
    (``module:name``)."""
    module = sys.modules[package]
    module.__dict__["__call_target__"] = target
    module.__class__ = CallablePackage


def attribute(package: str, target: str, name: str) -> Any:
    """The package's module ``__getattr__`` for ``name``: the function of ``target`` under its own name."""
    module, _, function = target.partition(":")
    if name == function:
        return getattr(importlib.import_module(module), function)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")
