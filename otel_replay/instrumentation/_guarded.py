"""The bookkeeping guards the framework instrumentors (LangChain, the OpenAI Agents SDK, smolagents, LlamaIndex,
Pydantic AI) share, and :class:`FrameworkInstrumentor`, the patching part of those that wrap a fixed table of
methods (smolagents, Pydantic AI).

Why it exists: an instrumentor's own work around a call (reading arguments, beginning and ending steps) must
never reach the host program; each failure is logged once with the framework's name and the call goes ahead
unrecorded there. A replay's :class:`~otel_replay.recording.ReplayInterrupt` is the one exception that passes.
The tool-risk option (``tool_risks={name: risk}``) is checked here the same way for every framework, and the
``tracer_provider=`` option is carried here: a framework's :class:`Guards` begins its runs and steps with the
runtime of the provider its instrumentor was given (:meth:`Guards.bind`).

Process-wide state: each framework module's one :class:`Guards` object, which holds the provider binding of
that framework's instrumentor (a ``BaseInstrumentor`` is a singleton, so there is one binding per framework;
``uninstrument()`` clears it).

What it must never do: swallow a ``ReplayInterrupt``, or raise from a guard.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

import wrapt
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap

from .. import semconv
from ..recording import ReplayInterrupt, begin_run, current_replay, end_call
from ..runtime import ProviderBinding, bind_provider

_log = logging.getLogger("otel_replay")

RISKS: Final = frozenset(r.value for r in semconv.Risk)
"""The risk levels a tool may be declared with."""


def enabled() -> bool:
    """Whether OpenTelemetry's suppression flag lets instrumentation record here (an old
    ``opentelemetry-instrumentation`` without the flag: record)."""
    try:
        return bool(is_instrumentation_enabled())
    except Exception:  # noqa: BLE001
        return True


def check_risks(tool_risks: Mapping[str, str] | None) -> dict[str, str]:
    """``tool_risks`` as a plain name → risk map; ValueError for anything else."""
    if tool_risks is None:
        return {}
    if not isinstance(tool_risks, Mapping):
        raise ValueError("tool_risks must map tool names to a risk (read, write or high)")
    bad = {k: v for k, v in tool_risks.items() if v not in RISKS}
    if bad:
        raise ValueError(f"tool_risks: risk must be one of {sorted(RISKS)}, got {bad!r}")
    return {str(k): str(v) for k, v in tool_risks.items()}


class Guards:
    """``warn``, ``safely``, ``begin`` and ``begin_run`` for the instrumentation of one framework (its name in
    the log), recording with the runtime of the ``tracer_provider=`` its instrumentor was given, if any."""

    def __init__(self, framework: str) -> None:
        self.framework = framework
        self.runtime: ProviderBinding | None = None
        """The binding of the instrumentor's ``tracer_provider=`` (None: record with the current runtime)."""

    def bind(self, tracer_provider: Any) -> None:
        """Record with ``tracer_provider`` from now on (None: with the current runtime again). Anything that is
        not a TracerProvider raises ValueError (at ``instrument()``, never while recording)."""
        self.runtime = bind_provider(tracer_provider)

    def warn(self, what: str) -> None:
        """Log (with the traceback) that the instrumentation could not do ``what``."""
        _log.warning(
            "otel-replay: %s instrumentation could not %s; the call goes ahead unrecorded there",
            self.framework,
            what,
            exc_info=True,
        )

    def safely(self, what: str, func: Callable[..., Any], *args: Any, default: Any = None, **kwargs: Any) -> Any:
        """``func(*args, **kwargs)``, or ``default`` (logged) when it fails: bookkeeping never reaches the host."""
        try:
            return func(*args, **kwargs)
        except Exception:  # noqa: BLE001
            self.warn(what)
            return default

    def _given(self) -> Any:
        """The runtime of the ``tracer_provider=`` this framework was instrumented with, or None. Not worked out
        during a replay, which ignores it: a provider that fails must not leave a replayed call unanswered."""
        binding = self.runtime
        return binding() if binding is not None and current_replay.get() is None else None

    def begin(self, what: str, begin: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Begin a step with ``begin`` (a ``begin_*_call`` of the recorder: it is given ``runtime=``); a replay's
        :class:`ReplayInterrupt` propagates, any other failure means unrecorded."""
        try:
            return begin(*args, runtime=self._given(), **kwargs)
        except ReplayInterrupt:
            raise
        except Exception:  # noqa: BLE001
            self.warn(f"begin the {what} step")
            return None

    def begin_run(self, name: str, **kwargs: Any) -> Any:
        """Begin an implicit run (:func:`~otel_replay.recording.begin_run` with ``kwargs``), or None (logged)
        when that fails; a replay's :class:`ReplayInterrupt` propagates."""
        try:
            return begin_run(name, runtime=self._given(), **kwargs)
        except ReplayInterrupt:
            raise
        except Exception:  # noqa: BLE001
            self.warn("begin an implicit run")
            return None


def answered(step: Any) -> Any:
    """The answer of a step the replay answered (``step.served``): the recorded error raised, or the recorded
    value returned, the step ended with it either way."""
    served = step.served
    if served.error is not None:
        end_call(step, exc=served.error)
        raise served.error
    end_call(step, result=served.value)
    return served.value


def main_script() -> str | None:
    """The file of the ``__main__`` module, recorded as a framework run's script (a replay loads a ``__main__``
    entrypoint from it), or None when ``__main__`` is no ``.py`` file."""
    main = sys.modules.get("__main__")
    file = getattr(main, "__file__", None)
    return os.path.abspath(file) if isinstance(file, str) and file.endswith(".py") else None


def plain_json(value: Any, depth: int = 0) -> bool:
    """True when ``value`` is plain JSON (str-keyed dicts, lists and tuples, strings, numbers, booleans, None), so
    a framework tool's output can be recorded as it is; anything else is recorded as its text."""
    if value is None or type(value) in (str, int, float, bool):
        return True
    if depth > 32:
        return False
    if type(value) in (list, tuple):
        return all(plain_json(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and plain_json(v, depth + 1) for k, v in value.items())
    return False


def turn_on_openai(options: Mapping[str, Any]) -> bool:
    """Turn the OpenAI instrumentor on, for a framework whose models call the ``openai`` client (smolagents,
    Pydantic AI), when it is installed and off; True when this did it (the framework's instrumentor then turns it
    off again with itself)."""
    from . import instrument, instrumented

    if instrumented("openai"):
        return False
    provider = options.get("tracer_provider")
    extra = {"tracer_provider": provider} if provider is not None else {}
    return "openai" in instrument("openai", **extra)


def patch(
    framework: str, module: str, target: str, wrapper: Callable[..., Any], patched: list[tuple[str, str]]
) -> None:
    """Wrap ``module``'s ``target`` (``"Class.method"`` or a function's name) with ``wrapper`` and note it in
    ``patched``; a version without this boundary is said (those calls go unrecorded) and skipped."""
    try:
        wrapt.wrap_function_wrapper(module, target, wrapper)
    except Exception:  # noqa: BLE001 - a version without this boundary: skip it, say so
        _log.warning(
            "otel-replay: cannot instrument %s.%s of %s; those calls are not recorded",
            module,
            target,
            framework,
            exc_info=True,
        )
        return
    patched.append((module, target))


def unpatch(patched: list[tuple[str, str]]) -> None:
    """Put back what :func:`patch` wrapped, last first; one that cannot be put back is said."""
    for module, target in reversed(patched):
        owner_name, _, method = target.rpartition(".")
        try:
            owner = sys.modules[module]
            unwrap(getattr(owner, owner_name) if owner_name else owner, method)
        except Exception:  # noqa: BLE001
            _log.warning("otel-replay: cannot uninstrument %s.%s", module, target, exc_info=True)


class FrameworkInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """The shared part of an instrumentor that wraps a fixed table of methods of a framework whose models call the
    ``openai`` client: the ``tool_risks`` option, each method of :meth:`wrappers` wrapped with wrapt (one that
    cannot be is said and skipped) and put back, and the OpenAI instrumentor turned on with it (and off again
    when this turned it on). A subclass sets :attr:`guards`, :attr:`framework` and :attr:`instruments`, and
    gives :meth:`wrappers`."""

    guards: Guards
    """The framework's guards (its ``tracer_provider=`` binding)."""
    framework: str = ""
    """The framework's name in messages."""
    instruments: tuple[str, ...] = ()
    """The framework versions supported (``opentelemetry-instrument`` checks them)."""

    def __init__(self, *, tool_risks: Mapping[str, str] | None = None) -> None:
        if tool_risks is not None or not hasattr(self, "_tool_risks"):
            self._tool_risks: dict[str, str] = check_risks(tool_risks)

    def instrumentation_dependencies(self) -> Collection[str]:
        """The framework requirement checked by ``instrument()`` and ``opentelemetry-instrument``."""
        return self.instruments

    def check_options(self, **options: Any) -> None:
        """Raise ValueError for options :meth:`instrument` would refuse, without instrumenting."""
        if "tool_risks" in options:
            check_risks(options["tool_risks"])

    def wrappers(self) -> list[tuple[str, str, Callable[..., Any]]]:
        """``(module, "Class.method", wrapper)`` of every method to wrap."""
        raise NotImplementedError

    def prepare(self) -> None:
        """Work to do before the methods are wrapped (registering types); never raises."""

    def _instrument(self, **kwargs: Any) -> None:
        if "tool_risks" in kwargs:
            self._tool_risks = check_risks(kwargs["tool_risks"])
        self.guards.bind(kwargs.get("tracer_provider"))
        self.prepare()
        self._patched: list[tuple[str, str]] = []
        for module, target, wrapper in self.wrappers():
            patch(self.framework, module, target, wrapper, self._patched)
        self._openai_added = bool(
            self.guards.safely("instrument the openai client", turn_on_openai, kwargs, default=False)
        )

    def _uninstrument(self, **kwargs: Any) -> None:
        unpatch(getattr(self, "_patched", []))
        self._patched = []
        self.guards.bind(None)
        if getattr(self, "_openai_added", False):
            from . import uninstrument

            self.guards.safely("uninstrument the openai client", uninstrument, "openai")
            self._openai_added = False
