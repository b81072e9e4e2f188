"""Auto-instrumentation of the SDKs agents are built on: OpenAI, Anthropic, LangChain / LangGraph, the OpenAI
Agents SDK.

Each instrumentor is an OpenTelemetry ``BaseInstrumentor`` registered under the ``opentelemetry_instrumentor``
entry point (``otel_replay_openai``, ``otel_replay_anthropic``, ``otel_replay_langchain``,
``otel_replay_openai_agents``), so
``opentelemetry-instrument python app.py`` finds them; :func:`instrument` does the same from code. Each SDK
is an optional extra (``pip install otel-replay[openai]``); an instrumentor whose SDK is not installed is
skipped, never an error at import time. When an SDK is installed (or asked for by name) but its
instrumentation cannot load or does not fit the installed version, that is said once per SDK and process as a
warning (on stderr when the application configured no logging), never silently: otherwise its calls would go
unrecorded, and a replay could not answer them. The set of SDKs already warned about is the one piece of
process-wide state here.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from importlib import metadata
from typing import Any, Final

_log = logging.getLogger("otel_replay")

INSTRUMENTORS: Final[dict[str, str]] = {
    "openai": "otel_replay.instrumentation.openai:OpenAIInstrumentor",
    "anthropic": "otel_replay.instrumentation.anthropic:AnthropicInstrumentor",
    "langchain": "otel_replay.instrumentation.langchain:LangChainInstrumentor",
    "openai_agents": "otel_replay.instrumentation.openai_agents:OpenAIAgentsInstrumentor",
}
"""SDK name → ``module:class`` of its instrumentor."""

_SDK_MODULES: Final[dict[str, str]] = {"openai": "openai", "anthropic": "anthropic", "langchain": "langchain_core",
                                        "openai_agents": "agents"}
"""SDK name → the top-level module whose presence says the SDK is installed."""

_EXTRAS: Final[dict[str, str]] = {"openai_agents": "openai-agents"}
"""SDK name → the name of its otel-replay extra, where the two differ."""

_warned: set[str] = set()


_SDK_DISTRIBUTIONS: Final[dict[str, str]] = {"openai_agents": "openai-agents"}
"""SDK name → its distribution, for SDKs whose module name a project of its own may well use (``agents``)."""


def _sdk_installed(name: str) -> bool:
    """Whether the SDK's module can be found (without importing it), and its distribution is installed when
    its module name is a common one."""
    try:
        if importlib.util.find_spec(_SDK_MODULES[name]) is None:
            return False
    except (ImportError, ValueError):
        return False
    if name not in _SDK_DISTRIBUTIONS:
        return True
    try:
        metadata.distribution(_SDK_DISTRIBUTIONS[name])
    except metadata.PackageNotFoundError:
        return False
    return True


def _say_once(name: str, why: str) -> None:
    if name in _warned:
        return
    _warned.add(name)
    _log.warning("otel-replay: %s calls are not recorded: %s; pip install 'otel-replay[%s]'", name, why,
                 _EXTRAS.get(name, name))


def _load(name: str, *, asked: bool = False) -> Any | None:
    module_name, _, cls_name = INSTRUMENTORS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, cls_name)()
    except ImportError as exc:
        if asked or _sdk_installed(name):
            _say_once(name, f"its instrumentation cannot load ({exc})")
        else:
            _log.debug("otel-replay: %s instrumentation unavailable: %s", name, exc)
        return None


def instrument(*sdks: str, **options: Any) -> list[str]:
    """Instrument the named SDKs (default: every one that is installed); returns the names instrumented.

    ``options`` go to each instrumentor's ``instrument()`` (e.g. ``tool_risks={...}`` for LangChain).
    Unknown names raise ValueError; an SDK that is not installed is skipped (said once as a warning when it was
    named, or when it is installed but its instrumentation cannot load: the ``otel-replay[sdk]`` extra is
    missing).
    """
    unknown = [s for s in sdks if s not in INSTRUMENTORS]
    if unknown:
        raise ValueError(f"unknown SDK {', '.join(unknown)}: choose from {', '.join(INSTRUMENTORS)}")
    done: list[str] = []
    for name in sdks or tuple(INSTRUMENTORS):
        instrumentor = _load(name, asked=bool(sdks))
        if instrumentor is None:
            continue
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(**options)
        if not instrumentor.is_instrumented_by_opentelemetry:  # the SDK is missing, or of a version it does not fit
            if sdks or _sdk_installed(name):
                _say_once(name, "the installed SDK is missing or of a version the instrumentor does not support")
            continue
        done.append(name)
    return done


def instrumented(*sdks: str) -> list[str]:
    """Names of the SDKs (of ``sdks``, default all) whose otel-replay instrumentor is active in this process."""
    out: list[str] = []
    for name in sdks or tuple(INSTRUMENTORS):
        instrumentor = _load(name)
        if instrumentor is not None and instrumentor.is_instrumented_by_opentelemetry:
            out.append(name)
    return out


def uninstrument(*sdks: str) -> list[str]:
    """Undo :func:`instrument` for the named SDKs (default: all); returns the names uninstrumented."""
    done: list[str] = []
    for name in sdks or tuple(INSTRUMENTORS):
        if name not in INSTRUMENTORS:
            raise ValueError(f"unknown SDK {name}: choose from {', '.join(INSTRUMENTORS)}")
        instrumentor = _load(name)
        if instrumentor is not None and instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
            done.append(name)
    return done
