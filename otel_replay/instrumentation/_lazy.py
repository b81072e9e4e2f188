"""Post-import hooks: run a function when a module has been imported, never importing it ourselves.

Why it exists: :func:`otel_replay.instrument` and the ``opentelemetry-instrument`` entry points must not
import an SDK the application has not imported (each SDK costs a second or more at start). They *arm* a hook
here instead; the hook patches the SDK right after the application's own ``import`` of it has finished.

How: one meta path finder at the front of ``sys.meta_path`` answers only for the modules
that have a pending hook. It asks the other finders for the module's spec and wraps the spec's loader so that,
once the module's code has run, the hooks are called with the module. The module's ``__loader__`` and
``__spec__.loader`` are set back to the real loader before its code runs, so nothing in the module or in tools
that inspect it can see the wrapper. A module whose import is running when a hook is registered for it (the
hook is armed from inside that import, e.g. LangChain core first imported by ``langgraph.pregel``) is no longer
seen by finders: its spec is marked instead, and the hook runs when the import system sets the spec's
``_initializing`` flag back to False at the end of that import (failing that, at the next import of any module
after it has finished).

This module is the process-wide state of the lazy instrumentation (unavoidable: an import hook is global):
the pending hooks and the one finder, installed on first use and left in place (it costs one dict look-up per
import while no hook is pending).

What it must never do: import a module itself, raise into the application's import (a failing hook is logged
and the import goes on), or change what the import returns.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

_log = logging.getLogger("otel_replay")

Hook = Callable[[ModuleType], None]

_lock = threading.RLock()
_pending: dict[str, list[tuple[object, Hook]]] = {}  # module name → (handle, hook) in registration order
_waiting: set[str] = set()  # pending modules whose import was already running when the hook was registered
_finder: _Finder | None = None


def imported(name: str) -> bool:
    """Whether module ``name`` has been imported and its code has finished running."""
    module = sys.modules.get(name)
    if module is None:
        return False
    return not getattr(getattr(module, "__spec__", None), "_initializing", False)


def when_imported(name: str, hook: Hook) -> object:
    """Call ``hook(module)`` once module ``name`` is imported: at once when it already is, else right after
    the application's import of it has finished. Returns a handle for :func:`cancel`."""
    handle = object()
    with _lock:
        if not imported(name):
            _install()
            _pending.setdefault(name, []).append((handle, hook))
            if name in sys.modules:  # its import is running now: the finder will not see it again
                _watch_end(name, sys.modules[name])
            return handle
    _call(name, hook, sys.modules[name])
    return handle


def cancel(handle: object) -> bool:
    """Disarm a hook registered by :func:`when_imported`; True when it was still pending."""
    with _lock:
        for name, hooks in list(_pending.items()):
            kept = [(h, f) for h, f in hooks if h is not handle]
            if len(kept) != len(hooks):
                if kept:
                    _pending[name] = kept
                else:
                    del _pending[name]
                    _waiting.discard(name)
                return True
    return False


def _install() -> None:
    global _finder
    if _finder is None:
        _finder = _Finder()
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def _call(name: str, hook: Hook, module: ModuleType) -> None:
    try:
        hook(module)
    except Exception:  # noqa: BLE001 - never break the application's import
        _log.warning("otel-replay: could not instrument %s after its import", name, exc_info=True)


def _fire(name: str, module: ModuleType) -> None:
    with _lock:
        hooks = _pending.pop(name, [])
        _waiting.discard(name)
    for _, hook in hooks:
        _call(name, hook, module)


class _WatchedSpec(ModuleSpec):
    """The class a running import's spec is given for its last moments: the import system's
    ``spec._initializing = False`` at the end of the import runs the module's hooks, then the spec is a plain
    ``ModuleSpec`` again."""

    def __setattr__(self, attr: str, value: Any) -> None:
        object.__setattr__(self, attr, value)
        if attr == "_initializing" and not value:
            object.__setattr__(self, "__class__", ModuleSpec)
            module = sys.modules.get(self.name)
            if module is not None and getattr(module, "__spec__", None) is self:
                _fire(self.name, module)


def _watch_end(name: str, module: ModuleType) -> None:
    spec = getattr(module, "__spec__", None)
    if type(spec) is ModuleSpec and getattr(spec, "_initializing", False):
        try:
            spec.__class__ = _WatchedSpec
            return
        except TypeError:
            pass
    _waiting.add(name)


def _fire_waiting() -> None:
    """Run the hooks of modules whose import was running when they were armed and has finished since."""
    with _lock:
        done = [name for name in _waiting if imported(name)]
    for name in done:
        module = sys.modules.get(name)
        if module is not None:
            _fire(name, module)


class _Finder:  # a meta path finder (not subclassing importlib.abc: that import costs ~20 ms)
    """Finds nothing itself: for a module with a pending hook it returns the spec the other finders give,
    with a loader that runs the hooks after the module's code."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if _waiting:
            _fire_waiting()
        if fullname not in _pending:
            return None
        for finder in list(sys.meta_path):
            if finder is self or isinstance(finder, _Finder):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            try:
                spec = find(fullname, path, target)
            except Exception:  # noqa: BLE001 - let the import system ask the finders itself and report it
                return None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        spec.loader = _Loader(loader, fullname)
        return spec


class _Loader:  # an importlib loader
    """The real loader, which then runs the module's pending hooks; invisible to the module once it runs."""

    def __init__(self, loader: Any, name: str) -> None:
        self._otel_replay_loader = loader
        self._otel_replay_name = name

    def __getattr__(self, attr: str) -> Any:  # is_package, get_code, get_resource_reader, …
        return getattr(self._otel_replay_loader, attr)

    def create_module(self, spec: Any) -> Any:
        return self._otel_replay_loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        loader = self._otel_replay_loader
        if getattr(module, "__loader__", None) in (None, self):
            try:
                module.__loader__ = loader
            except AttributeError:
                pass
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = loader
        loader.exec_module(module)
        _fire(self._otel_replay_name, module)
