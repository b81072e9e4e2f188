"""Auto-instrumentation of the SDKs agents are built on: OpenAI, Anthropic, LangChain / LangGraph, the OpenAI
Agents SDK, smolagents, LlamaIndex, Pydantic AI and the MCP client.

Each instrumentor is an OpenTelemetry ``BaseInstrumentor``; its entry point under ``opentelemetry_instrumentor``
(``otel_replay_openai``, ``otel_replay_anthropic``, ``otel_replay_langchain``, ``otel_replay_openai_agents``,
``otel_replay_smolagents``, ``otel_replay_llamaindex``, ``otel_replay_pydantic_ai``, ``otel_replay_mcp``) names a
light stand-in of :mod:`otel_replay.instrumentation.entry_points` that arms it, so ``opentelemetry-instrument
python app.py`` finds them; :func:`instrument` does the same from code. Each SDK
is an optional extra (``pip install otel-replay[openai]``); an instrumentor whose SDK is not installed is
skipped, never an error at import time. When an SDK is installed (or asked for by name) but its
instrumentation cannot load or does not fit the installed version, that is said once per SDK and process as a
warning (on stderr when the application configured no logging), never silently: otherwise its calls would go
unrecorded, and a replay could not answer them.

Lazy: an SDK the application has not imported yet is not imported here. :func:`instrument` *arms* its
instrumentor instead (a post-import hook, :mod:`otel_replay.instrumentation._lazy`), and the instrumentor
patches the SDK right after the application's own ``import`` of it; an SDK already imported is patched at
once. An armed SDK counts as instrumented (:func:`instrument` returns it, :func:`instrumented` lists it,
:func:`uninstrument` disarms it). The instrumentor modules themselves, which load the recorder, are imported
only then too. Process-wide state here: the set of SDKs already warned about and the armed SDKs.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from importlib import metadata
from typing import Any, Final

from ..runtime import bind_provider
from . import _lazy

_log = logging.getLogger("otel_replay")

INSTRUMENTORS: Final[dict[str, str]] = {
    "openai": "otel_replay.instrumentation.openai:OpenAIInstrumentor",
    "anthropic": "otel_replay.instrumentation.anthropic:AnthropicInstrumentor",
    "langchain": "otel_replay.instrumentation.langchain:LangChainInstrumentor",
    "openai_agents": "otel_replay.instrumentation.openai_agents:OpenAIAgentsInstrumentor",
    "smolagents": "otel_replay.instrumentation.smolagents:SmolagentsInstrumentor",
    "llamaindex": "otel_replay.instrumentation.llamaindex:LlamaIndexInstrumentor",
    "pydantic_ai": "otel_replay.instrumentation.pydantic_ai:PydanticAIInstrumentor",
    "mcp": "otel_replay.instrumentation.mcp:MCPInstrumentor",
}
"""SDK name → ``module:class`` of its instrumentor."""

_SDK_MODULES: Final[dict[str, str]] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "langchain": "langchain_core",
    "openai_agents": "agents",
    "llamaindex": "llama_index.core",
}
"""SDK name → the top-level module whose presence says the SDK is installed, and whose import patches it
(an SDK missing here is its own module name)."""

_EXTRA_MODULES: Final = ("wrapt", "opentelemetry.instrumentation")
"""Modules every instrumentor needs beyond otel-replay's own dependencies (each SDK's extra brings them)."""

EXTRAS: Final[dict[str, str]] = {"openai_agents": "openai-agents", "mcp": "mcp"}
"""SDK name → its distribution, checked because a project of its own may well use the SDK's module name
(``agents``, ``mcp``); also the name of the SDK's otel-replay extra."""

_warned: set[str] = set()
_armed: dict[str, tuple[dict[str, Any], object]] = {}  # SDK name → (instrument() options, post-import hook)


_EXTRA_NAMES: Final[dict[str, str]] = {"pydantic_ai": "pydantic-ai"}
"""SDK name → the name of its otel-replay extra where it differs and is not a distribution name to check."""


def extra_of(name: str) -> str:
    """The otel-replay extra that installs the SDK ``name`` (``pip install 'otel-replay[<extra>]'``)."""
    return _EXTRA_NAMES.get(name) or EXTRAS.get(name, name)


def _version_conflict(instrumentor: Any) -> bool:
    """Whether the installed SDK does not fit the instrumentor (OpenTelemetry's own check; a failure of that
    check counts as no conflict: the instrumentor then says so itself when it cannot patch)."""
    try:
        return bool(instrumentor._check_dependency_conflicts())
    except Exception:  # noqa: BLE001 - a private OpenTelemetry API: never into the application
        _log.debug("otel-replay: version check of %s failed", type(instrumentor).__name__, exc_info=True)
        return False


def sdk_installed(name: str) -> bool:
    """Whether the SDK's module can be found (without importing it), and its distribution is installed when
    its module name is a common one."""
    try:
        if importlib.util.find_spec(_sdk_module(name)) is None:
            return False
    except (ImportError, ValueError):
        return False
    if name not in EXTRAS:
        return True
    try:
        metadata.distribution(EXTRAS[name])
    except metadata.PackageNotFoundError:
        return False
    return True


def _sdk_module(name: str) -> str:
    """The top-level module of the SDK ``name`` (its import is what patches it)."""
    return _SDK_MODULES.get(name, name)


def _missing_extra() -> str | None:
    """A module the instrumentors need that cannot be found (the SDK's extra is not installed), or None."""
    for module in _EXTRA_MODULES:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):
            return module
    return None


def _say_once(name: str, why: str) -> None:
    if name in _warned:
        return
    _warned.add(name)
    _log.warning("otel-replay: %s calls are not recorded: %s; pip install 'otel-replay[%s]'", name, why, extra_of(name))


def _load(name: str, *, asked: bool = False) -> Any | None:
    module_name, _, cls_name = INSTRUMENTORS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, cls_name)()
    except ImportError as exc:
        if asked or sdk_installed(name):
            _say_once(name, f"its instrumentation cannot load ({exc})")
        else:
            _log.debug("otel-replay: %s instrumentation unavailable: %s", name, exc)
        return None


def instrument(*sdks: str, **options: Any) -> list[str]:
    """Instrument the named SDKs (default: every one that is installed); returns the names instrumented.

    An SDK that is already imported is patched at once; one that is not is armed, and patched right after the
    application imports it (nothing is imported here: ``orp.instrument()`` adds almost nothing to start). An
    armed SDK is in the returned list. Naming SDKs also checks their installed versions at once, and options
    are checked at once (both load otel-replay's instrumentation code); for an armed SDK not named, a version
    the instrumentor does not support is said when the SDK is imported.

    ``options`` go to each instrumentor's ``instrument()`` (e.g. ``tool_risks={...}`` for LangChain;
    ``tracer_provider=`` for every one: the spans it records go to that provider instead of the current
    runtime's). Unknown names, and a ``tracer_provider`` that is not one, raise ValueError; an SDK that is
    not installed is skipped (said once as a warning when it was named, or when it is installed but its
    instrumentation cannot load: the ``otel-replay[sdk]`` extra is missing).
    """
    unknown = [s for s in sdks if s not in INSTRUMENTORS]
    if unknown:
        raise ValueError(f"unknown SDK {', '.join(unknown)}: choose from {', '.join(INSTRUMENTORS)}")
    return [name for name in sdks or tuple(INSTRUMENTORS) if instrument_one(name, options, asked=bool(sdks))]


def instrument_one(name: str, options: dict[str, Any], *, asked: bool) -> bool:
    """Patch or arm one SDK; True when it is instrumented or armed. A bad ``tracer_provider`` raises ValueError
    here, before anything is armed (not when an armed SDK is imported)."""
    bind_provider(options.get("tracer_provider"))
    if _lazy.imported(_sdk_module(name)):
        return _patch(name, options, asked=asked)
    if not sdk_installed(name):
        if asked:
            _say_once(name, "the installed SDK is missing or of a version the instrumentor does not support")
        return False
    missing = _missing_extra()
    if missing is not None:
        _say_once(name, f"its instrumentation cannot load (no module named {missing!r})")
        return False
    if asked or options:
        instrumentor = _load(name, asked=asked)
        if instrumentor is None:
            return False
        check = getattr(instrumentor, "check_options", None)
        if options and check is not None:
            check(**options)  # bad values raise ValueError now, not when the SDK is imported
        if asked and not instrumentor.is_instrumented_by_opentelemetry and _version_conflict(instrumentor):
            _say_once(name, "the installed SDK is missing or of a version the instrumentor does not support")
            return False
    previous = _armed.pop(name, None)
    if previous is not None:
        _lazy.cancel(previous[1])
    handle = _lazy.when_imported(_sdk_module(name), lambda _module: _fire(name))
    _armed[name] = (dict(options), handle)
    return True


def _fire(name: str) -> None:
    """The SDK ``name`` has just been imported: patch it with the options it was armed with."""
    armed = _armed.pop(name, None)
    if armed is not None:
        _patch(name, armed[0], asked=True)


def _patch(name: str, options: dict[str, Any], *, asked: bool) -> bool:
    """Instrument the (imported) SDK ``name`` now; True when its instrumentor is active."""
    instrumentor = _load(name, asked=asked)
    if instrumentor is None:
        return False
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(**options)
    if not instrumentor.is_instrumented_by_opentelemetry:  # the SDK is missing, or of a version it does not fit
        if asked or sdk_installed(name):
            _say_once(name, "the installed SDK is missing or of a version the instrumentor does not support")
        return False
    return True


def _loaded(name: str) -> Any | None:
    """The instrumentor of ``name`` when its module is already imported (never imports it), else None."""
    module_name, _, cls_name = INSTRUMENTORS[name].partition(":")
    module = sys.modules.get(module_name)
    cls = getattr(module, cls_name, None) if module is not None else None
    return cls() if cls is not None else None


def instrumented(*sdks: str) -> list[str]:
    """Names of the SDKs (of ``sdks``, default all) whose otel-replay instrumentor is active or armed (patches
    the SDK when it is imported) in this process."""
    out: list[str] = []
    for name in sdks or tuple(INSTRUMENTORS):
        if name in _armed:
            out.append(name)
            continue
        instrumentor = _loaded(name) if name in INSTRUMENTORS else None
        if instrumentor is not None and instrumentor.is_instrumented_by_opentelemetry:
            out.append(name)
    return out


def uninstrument(*sdks: str) -> list[str]:
    """Undo :func:`instrument` for the named SDKs (default: all): unpatch them, or disarm an SDK not imported
    yet; returns the names uninstrumented."""
    done: list[str] = []
    for name in sdks or tuple(INSTRUMENTORS):
        if name not in INSTRUMENTORS:
            raise ValueError(f"unknown SDK {name}: choose from {', '.join(INSTRUMENTORS)}")
        armed = _armed.pop(name, None)
        if armed is not None:
            _lazy.cancel(armed[1])
            done.append(name)
            continue
        instrumentor = _loaded(name)
        if instrumentor is not None and instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
            done.append(name)
    return done
