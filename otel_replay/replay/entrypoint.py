"""The recorded entrypoint of a replay: :func:`load_entrypoint` imports ``module:qualname`` once
:func:`~otel_replay.replay.safety.trust.entrypoint_refusal` has allowed it (a ``__main__`` entrypoint from its script,
under another module name, so its ``if __name__ == "__main__":`` block does not run), and
:func:`recorded_sdks` / ``instrumented`` instrument, for the replay, the SDKs the run was recorded through.

It must never import or run an entrypoint the trust rule refused, run a script's ``__main__`` block, leave
instrumented an SDK that was not instrumented before, or read a store.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import semconv
from ..errors import AgentCodeUnavailable, ReplayRefused
from ..runs import Run
from ..snapshots import register_module_alias


def load_entrypoint(spec: str, *, script: str | None = None, given: bool = False) -> Callable[..., Any]:
    """Import ``module:qualname``. A ``__main__`` entrypoint is loaded from its script under another module
    name, so the script's ``if __name__ == "__main__":`` block does not run.

    ``given``: the person replaying named ``spec`` (``--app``); otherwise it was read from recorded data. Either
    way :func:`~otel_replay.replay.safety.trust.entrypoint_refusal` decides, before anything is imported, whether it
    may run (:class:`ReplayRefused` when not)."""
    from .safety.trust import entrypoint_refusal

    module_name, _, qualname = spec.partition(":")
    if not module_name or not qualname:
        raise ReplayRefused(f"entrypoint {spec!r} is not module:function; pass --app module:function")
    if "<locals>" in qualname:
        raise ReplayRefused(
            f"entrypoint {spec!r} is defined inside a function and cannot be imported; pass --app module:function"
        )
    refusal = entrypoint_refusal(spec, given=given, script=script)
    if refusal is not None:
        raise ReplayRefused(refusal)
    module = entrypoint_module(spec, module_name, script)
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise AgentCodeUnavailable(
                f"entrypoint {spec!r}: {module_name} has no {qualname}; pass --app module:function"
            )
        if not given and isinstance(obj, types.ModuleType):
            raise ReplayRefused(
                f"entrypoint {spec!r} was not run: it reaches through module {obj.__name__!r}, and a "
                "recorded entrypoint must be defined in its own module; pass --app module:function"
            )
    if not given and getattr(obj, "__module__", None) != module.__name__:
        raise ReplayRefused(
            f"entrypoint {spec!r} was not run: {qualname} is not defined in {module_name} (it comes "
            f"from {getattr(obj, '__module__', None)!r}); pass --app module:function if you trust it"
        )
    if not callable(obj):
        raise ReplayRefused(f"entrypoint {spec!r} is not callable")
    if inspect.isgeneratorfunction(obj) or inspect.isasyncgenfunction(obj):
        raise ReplayRefused(
            f"entrypoint {spec!r} is a generator; replaying streaming agents is not supported yet: "
            "pass --app with a function that consumes it"
        )
    func: Callable[..., Any] = obj
    return func


def entrypoint_module(spec: str, module_name: str, script: str | None) -> types.ModuleType:
    """Import the module of entrypoint ``spec`` (a ``__main__`` one from its script, under another module name,
    so its ``if __name__ == "__main__":`` block does not run). The caller has already applied the trust rule
    (:func:`~otel_replay.replay.safety.trust.entrypoint_refusal`)."""
    if module_name == "__main__":
        if not script or not Path(script).is_file():
            raise AgentCodeUnavailable(
                f"entrypoint {spec!r} was started as a script that is not at {script!r}; pass --app module:function"
            )
        alias = f"otel_replay_script_{uuid.uuid5(uuid.NAMESPACE_URL, script).hex[:12]}"
        module = sys.modules.get(alias)
        if module is None:
            spec_obj = importlib.util.spec_from_file_location(alias, script)
            if spec_obj is None or spec_obj.loader is None:
                raise ReplayRefused(f"cannot load the script {script!r}")
            module = importlib.util.module_from_spec(spec_obj)
            sys.modules[alias] = module
            register_module_alias(alias, "__main__")
            sys.path.insert(0, str(Path(script).parent))
            try:
                spec_obj.loader.exec_module(module)
            except Exception as exc:
                sys.modules.pop(alias, None)
                raise AgentCodeUnavailable(
                    f"loading the script {script!r} failed: {type(exc).__name__}: {exc}"
                ) from exc
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise AgentCodeUnavailable(
                f"entrypoint module {module_name!r} is not importable ({type(exc).__name__}: "
                f"{exc}); run from the project folder or pass --app module:function"
            ) from exc
    return module


def recorded_sdks(run: Run) -> list[str]:
    """SDKs whose otel-replay instrumentor recorded steps of ``run`` (``otel_replay.step.instrumentation``;
    for 1.0 recordings, OpenAI and Anthropic model steps by their step names)."""
    from ..instrumentation import INSTRUMENTORS

    found: list[str] = []
    for step in run.steps:
        name = step.attributes.get(semconv.STEP_INSTRUMENTATION)
        if not name and step.kind == "model":
            prefix = step.name.partition(".")[0]
            if prefix in ("openai", "anthropic") and step.attributes.get(semconv.GEN_AI_PROVIDER_NAME) == prefix:
                name = prefix
        if name in INSTRUMENTORS and name not in found:
            found.append(name)
    return found


@contextlib.contextmanager
def instrumented(original: Run) -> Iterator[None]:
    """Instrument the SDKs the original's steps were recorded through, so their calls are answered from the
    recording and never reach the network; undo what was not instrumented before."""
    needed = recorded_sdks(original)
    if not needed:
        yield
        return
    from .. import instrumentation

    already = set(instrumentation.instrumented(*needed))
    done = instrumentation.instrument(*needed)
    missing = [name for name in needed if name not in done]
    try:
        if missing:
            extra = instrumentation.extra_of(missing[0])
            raise ReplayRefused(
                f"run {original.trace_id} was recorded through the {', '.join(missing)} SDK, which "
                f"is not installed here: pip install 'otel-replay[{extra}]'"
            )
        yield
    finally:
        added = [name for name in done if name not in already]
        if added:
            instrumentation.uninstrument(*added)
