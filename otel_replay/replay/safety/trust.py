"""Which code a replay may import and run: one rule, decided before anything is imported.

A recorded run names the code that made it: the entrypoint (``module:function``, or ``__main__`` and the
script's path), the function behind each tool (``otel_replay.tool.function``), the module of an exception
class. Whoever could write the trace, the store or a case file wrote those names, so a replay never imports
or runs one just because it is named. An entrypoint runs only when:

* the person replaying gave it (``--app``, ``entrypoint=``, ``app=``): then anything but the Python standard
  library (an installed package is fine: the user's agent may be installed);
* or it is the current project's code: its top-level module, located without importing it (the already
  imported module's file, else :class:`importlib.machinery.PathFinder` over ``sys.path``), resolves under the
  project folder (the working directory; the rootdir under pytest), and not inside an installed package
  (``site-packages``) or the standard library;
* or its module name matches a prefix listed in ``OTEL_REPLAY_TRUSTED_MODULES`` (never the standard library);
* or it is otel-replay's own demo (``otel_replay.demo.*``); no other module of ``otel_replay`` is run.

A recorded ``__main__`` entrypoint runs its script only when the script's path (symlinks resolved) is under
the project folder, whoever named the function.

Process-wide state: a context variable holding the project folder while a block runs under
:func:`project_root` (the pytest plugin's rootdir; the default is the working directory at the moment of the
check), and the interpreter's standard-library and installed-packages folders, resolved once on first use
(facts of the running interpreter that do not change while it runs; resolving them again cost about 1 ms of
every replay).

This module must never import a module it is asked about, nor execute anything: it only reads paths.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.machinery
import os
import re
import site
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Final

from ...settings import OTEL_REPLAY_TRUSTED_MODULES

DEMO_PACKAGE: Final = "otel_replay.demo"
"""otel-replay's own demo agents: trusted (otel-replay is already running its own code)."""

_OWN_PACKAGE: Final = "otel_replay"
_SCRIPT_ALIAS_PREFIX: Final = "otel_replay_script_"  # entrypoint.load_entrypoint's name for a loaded script
_DOTTED: Final = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
_INSTALLED_PARTS: Final = frozenset({"site-packages", "dist-packages"})

_root: contextvars.ContextVar[Path | None] = contextvars.ContextVar("otel_replay_project_root", default=None)


@contextlib.contextmanager
def project_root(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Judge entrypoints against ``path`` instead of the working directory inside the block (None: no
    change)."""
    if path is None:
        yield
        return
    token = _root.set(Path(path).resolve())
    try:
        yield
    finally:
        _root.reset(token)


def current_root() -> Path:
    """The project folder entrypoints must live under: the one set by :func:`project_root`, else the working
    directory (symlinks resolved)."""
    return _root.get() or Path.cwd().resolve()


def trusted_prefixes() -> tuple[str, ...]:
    """The module name prefixes of ``OTEL_REPLAY_TRUSTED_MODULES``; ValueError for an entry that is not a
    dotted module name."""
    raw = os.environ.get(OTEL_REPLAY_TRUSTED_MODULES, "")
    prefixes: list[str] = []
    for entry in raw.split(","):
        entry = entry.strip().rstrip(".")
        if not entry:
            continue
        if not _DOTTED.fullmatch(entry):
            raise ValueError(
                f"{OTEL_REPLAY_TRUSTED_MODULES} entry {entry[:80]!r} is not a module name prefix: "
                "give dotted Python module names separated by commas"
            )
        prefixes.append(entry)
    return tuple(prefixes)


def _matches(module_name: str, prefix: str) -> bool:
    return module_name == prefix or module_name.startswith(prefix + ".")


def is_stdlib_name(top: str) -> bool:
    """True for a top-level module name of the standard library or a module built into the interpreter."""
    return top in sys.stdlib_module_names or top in sys.builtin_module_names


def _resolved(path: str | os.PathLike[str]) -> Path | None:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@functools.cache
def _stdlib_dirs() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    return tuple(p for p in (_resolved(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)) if p is not None)


@functools.cache
def _installed_dirs() -> tuple[Path, ...]:
    found: list[str] = []
    paths = sysconfig.get_paths()
    found += [paths[k] for k in ("purelib", "platlib") if paths.get(k)]
    with contextlib.suppress(Exception):  # site helpers are missing in some embedded interpreters
        found += list(site.getsitepackages())
    with contextlib.suppress(Exception):
        found.append(site.getusersitepackages())
    return tuple(p for p in (_resolved(f) for f in found) if p is not None)


def _environments(root: Path) -> list[Path]:
    """The interpreter's environment folders (``sys.prefix``: a virtual environment) that do not hold the
    project folder: what is inside them was installed, even when they sit inside the project."""
    found = {p for p in (_resolved(sys.prefix), _resolved(sys.exec_prefix)) if p is not None}
    return [p for p in found if not _under(root, p)]


def _installed(path: Path, root: Path | None = None) -> bool:
    """True when ``path`` is inside an installed-packages folder (site-packages) or the interpreter's
    environment, wherever that lives (a virtual environment inside the project folder is not the project)."""
    if _INSTALLED_PARTS.intersection(path.parts) or any(_under(path, d) for d in _installed_dirs()):
        return True
    return root is not None and any(_under(path, e) for e in _environments(root))


def _in_stdlib(path: Path) -> bool:
    return not _installed(path) and any(_under(path, d) for d in _stdlib_dirs())


def _search_path() -> list[str]:
    """``sys.path`` as the engine imports with it (it adds the working directory when neither it nor ``""``
    is on the path)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        return [cwd, *sys.path]
    return list(sys.path)


def _module_locations(module: ModuleType) -> list[Path] | None:
    file = getattr(module, "__file__", None)
    if isinstance(file, str) and file:
        return [Path(file)]
    search = getattr(module, "__path__", None)
    try:
        found = [Path(p) for p in search] if search is not None else []
    except TypeError:
        return None
    return found or None


def locate(top: str) -> list[Path] | None:
    """Where top-level module ``top`` is (its file, or a namespace package's folders), without importing it;
    None when it cannot be found or has no file (built into the interpreter)."""
    module = sys.modules.get(top)
    if module is not None:
        return _module_locations(module)
    try:
        spec = importlib.machinery.PathFinder.find_spec(top, _search_path())
    except (ImportError, ValueError, OSError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.has_location:
        return [Path(spec.origin)]
    if spec.submodule_search_locations:
        return [Path(p) for p in spec.submodule_search_locations]
    return None


def _outside_project(top: str, locations: list[Path] | None, root: Path) -> str | None:
    """Why code found at ``locations`` is not the project's code under ``root``, or None when it is."""
    if not locations:
        return f"module {top!r} is not found under the project folder {root}"
    for location in locations:
        path = _resolved(location)
        if path is None:
            return f"module {top!r} has a location that cannot be resolved"
        if _in_stdlib(path):
            return f"module {top!r} is part of the Python standard library"
        if _installed(path, root):
            return f"module {top!r} is an installed package ({path}), not code of the project in {root}"
        if not _under(path, root):
            return f"module {top!r} is at {path}, outside the project folder {root}"
    return None


def entrypoint_refusal(spec: str, *, given: bool, script: str | None = None) -> str | None:
    """Why ``spec`` (``module:qualname``) may not be imported and run by a replay, as one line naming it and
    how to trust it; None when it may. ``given``: the person replaying named it (``--app``); otherwise it
    was read from recorded data. ``script``: the recorded script path of a ``__main__`` entrypoint.

    Nothing is imported to decide."""
    module_name = spec.partition(":")[0]
    root = current_root()
    head = f"entrypoint {spec[:200]!r} was not run"
    if module_name == "__main__":
        if not script:
            return None  # the engine refuses a __main__ entrypoint without its script
        path = _resolved(script)
        if path is None or not _under(path, root):
            return (
                f"{head}: its script {script[:300]!r} is not under the project folder {root}; run the replay "
                "from the script's project folder, or pass --app module:function"
            )
        return None
    if not _DOTTED.fullmatch(module_name):
        return f"{head}: {module_name[:200]!r} is not a Python module name; pass --app module:function"
    top = module_name.partition(".")[0]
    if is_stdlib_name(top):
        return (
            f"{head}: {top!r} is part of the Python standard library, which a replay never runs; pass "
            "--app module:function naming your agent"
        )
    try:
        prefixes = trusted_prefixes()
    except ValueError as exc:
        return f"{head}: {exc}"
    locations = locate(top)
    stdlib_file = next((p for p in locations or () if (r := _resolved(p)) is not None and _in_stdlib(r)), None)
    if stdlib_file is not None:
        return (
            f"{head}: {top!r} is part of the Python standard library ({stdlib_file}), which a replay never "
            "runs; pass --app module:function naming your agent"
        )
    if given or module_name == DEMO_PACKAGE or module_name.startswith(DEMO_PACKAGE + "."):
        return None
    if any(_matches(module_name, p) for p in prefixes):
        return None
    how = f"pass --app {spec} if you trust it, or set {OTEL_REPLAY_TRUSTED_MODULES}={top}"
    if top == _OWN_PACKAGE:
        return (
            f"{head}: it names otel-replay's own code (only {DEMO_PACKAGE} is run from a recording); "
            "pass --app module:function naming your agent"
        )
    why = _outside_project(top, locations, root)
    if why is not None:
        return f"{head}: {why}; {how}"
    return None


def module_trusted(name: str, module: ModuleType) -> bool:
    """True when already imported ``module`` (imported as ``name``) is code a replay may use by a recorded name
    (for rebuilding a recorded exception of one of its classes): the same rule as for a recorded entrypoint."""
    spec = getattr(module, "__spec__", None)
    real = name if name.startswith(_SCRIPT_ALIAS_PREFIX) else (getattr(spec, "name", None) or name)
    if not isinstance(real, str) or not _DOTTED.fullmatch(real):
        return False
    top = real.partition(".")[0]
    if is_stdlib_name(top):
        return False
    if real == DEMO_PACKAGE or real.startswith(DEMO_PACKAGE + "."):
        return True
    try:
        if any(_matches(real, p) for p in trusted_prefixes()):
            return True
    except ValueError:
        return False
    if top == _OWN_PACKAGE:
        return False
    return _outside_project(top, _module_locations(module), current_root()) is None
