"""otel-replay: record AI-agent runs as OpenTelemetry traces, store them in ClickHouse, and replay them.

The public API is exactly what ``__all__`` lists; a test pins it. Everything else is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import runtime as _runtime
from ._version import __version__
from .errors import (
    InvalidTraceIdError,
    OtelReplayError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    TraceNotFoundError,
)

if TYPE_CHECKING:
    from .errors import ReplayRefused
    from .exporting.setup import configure, flush
    from .instrumentation import instrument, uninstrument
    from .lab.api import lab
    from .lab.model import LabResult
    from .lab.scoring import scorer
    from .recording import (
        OutsideRunWarning,
        agent,
        attach_file,
        identity,
        model,
        new_uuid,
        now,
        random,
        record_approval,
        record_context,
        record_safety,
        record_state,
        retriever,
        tool,
    )
    from .redaction import RedactionConfig, Redactor
    from .replay.diff import RunDiff
    from .replay.engine import ReplayResult, diff, replay
    from .replay.scopes import SessionReplayResult, ToolReplayResult, replay_session, replay_tool
    from .replay.session import Divergence
    from .revival import register_type
    from .risk import RiskLevel
    from .runs import Run, RunSummary, Snapshot, Step
    from .semconv import ApprovalStatus, ReplayMode, Risk, RunKind, SnapshotKind, StepKind
    from .storage.store import Store


def _default_runtime() -> _runtime.Runtime:
    """``configure()`` with defaults: what recording uses when the application never configured otel-replay
    (imported here, on first use, so ``import otel_replay`` does not load the OTel SDK)."""
    from .exporting.setup import default_runtime

    return default_runtime()


_runtime.set_factory(_default_runtime)

# Names are imported on first use, so a command that only lists runs does not load the recorder, the OTel
# SDK or the replay engine (``import otel_replay`` stays cheap; ``from otel_replay import agent`` works as usual).
_LAZY: dict[str, str] = {
    **dict.fromkeys(("configure", "flush"), ".exporting.setup"),
    **dict.fromkeys(("instrument", "uninstrument"), ".instrumentation"),
    **dict.fromkeys(
        (
            "OutsideRunWarning",
            "agent",
            "attach_file",
            "identity",
            "model",
            "new_uuid",
            "now",
            "random",
            "record_approval",
            "record_context",
            "record_safety",
            "record_state",
            "retriever",
            "tool",
        ),
        ".recording",
    ),
    **dict.fromkeys(("RedactionConfig", "Redactor"), ".redaction"),
    "RunDiff": ".replay.diff",
    "register_type": ".revival",
    "RiskLevel": ".risk",
    **dict.fromkeys(("ReplayResult", "diff"), ".replay.engine"),
    "ReplayRefused": ".errors",
    **dict.fromkeys(("SessionReplayResult", "ToolReplayResult", "replay_session", "replay_tool"), ".replay.scopes"),
    "Divergence": ".replay.session",
    **dict.fromkeys(("Run", "RunSummary", "Snapshot", "Step"), ".runs"),
    **dict.fromkeys(("ApprovalStatus", "ReplayMode", "Risk", "RunKind", "SnapshotKind", "StepKind"), ".semconv"),
    "Store": ".storage.store",
    "LabResult": ".lab.model",
    "scorer": ".lab.scoring",
}


_CALLABLE_PACKAGES = frozenset({"replay", "lab"})
"""Sub-packages that are also the function of their name: ``otel_replay.replay(...)`` calls the replay and
``import otel_replay.replay`` gives the package (see :mod:`otel_replay.callable_package`). Type checkers see the
functions (the imports above); at run time the attribute is the callable package."""


def __getattr__(name: str) -> Any:
    import importlib

    if name in _CALLABLE_PACKAGES:
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'otel_replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | _CALLABLE_PACKAGES)


__all__ = [
    "ApprovalStatus",
    "Divergence",
    "InvalidTraceIdError",
    "LabResult",
    "OtelReplayError",
    "OutsideRunWarning",
    "RedactionConfig",
    "Redactor",
    "ReplayMode",
    "ReplayRefused",
    "ReplayResult",
    "Risk",
    "RiskLevel",
    "Run",
    "RunDiff",
    "RunKind",
    "RunSummary",
    "SessionReplayResult",
    "Snapshot",
    "SnapshotKind",
    "Step",
    "StepKind",
    "Store",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "ToolReplayResult",
    "TraceNotFoundError",
    "__version__",
    "agent",
    "attach_file",
    "configure",
    "diff",
    "flush",
    "identity",
    "instrument",
    "lab",
    "model",
    "new_uuid",
    "now",
    "random",
    "record_approval",
    "record_context",
    "record_safety",
    "record_state",
    "register_type",
    "replay",
    "replay_session",
    "replay_tool",
    "retriever",
    "scorer",
    "tool",
    "uninstrument",
]
