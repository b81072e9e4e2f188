"""The classes otel-replay's ``opentelemetry_instrumentor`` entry points name: one light stand-in per SDK.

Why it exists: the ``opentelemetry-instrument`` launcher imports every registered instrumentor class and calls
``instrument()`` on it before the application starts. otel-replay's instrumentor modules load the recorder,
and instrumenting imports the SDK: seconds of start for SDKs the application may never import. The class of
each entry point is therefore built here, from :data:`otel_replay.instrumentation.INSTRUMENTORS`, as an
attribute named after the SDK (``otel_replay.instrumentation.entry_points:openai``): its ``instrument()`` arms
the real instrumentor exactly like :func:`otel_replay.instrument` (patched when the application imports the
SDK, at once when it already has), its ``uninstrument()`` undoes that. A new entry of ``INSTRUMENTORS`` needs
only its entry point line in ``pyproject.toml``.

What it must never do: import an SDK, an instrumentor module or the recorder. The classes built are the one
piece of process-wide state (``BaseInstrumentor`` keeps one instance per class).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from . import INSTRUMENTORS, instrument_one, uninstrument

_classes: dict[str, type] = {}


class DeferredInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Arms the otel-replay instrumentor of one SDK (:attr:`sdk`); subclassed once per SDK."""

    sdk: str = ""
    """The SDK name, a key of :data:`otel_replay.instrumentation.INSTRUMENTORS`."""

    def instrumentation_dependencies(self) -> Collection[str]:
        """None here: the real instrumentor checks the SDK's version when the SDK is imported."""
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        instrument_one(self.sdk, kwargs, asked=False)

    def _uninstrument(self, **kwargs: Any) -> None:
        uninstrument(self.sdk)


def __getattr__(name: str) -> type:
    """The stand-in class of the SDK ``name`` (built on first use, then the same class)."""
    if name not in INSTRUMENTORS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    cls = _classes.get(name)
    if cls is None:
        title = "".join(part.title() for part in name.split("_"))
        cls = type(
            f"{title}DeferredInstrumentor",
            (DeferredInstrumentor,),
            {"sdk": name, "__module__": __name__, "__doc__": f"Arms the otel-replay {name} instrumentor."},
        )
        cls = _classes.setdefault(name, cls)
    return cls
