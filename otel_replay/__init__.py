"""otel-replay: record AI-agent runs as OpenTelemetry traces, store them in ClickHouse, and replay them.

The public API is exactly what ``__all__`` lists; a test pins it. Everything else is internal.
"""

from __future__ import annotations

import sys
import types
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
    from .recording import (
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
    **dict.fromkeys(("ReplayResult", "diff", "replay"), ".replay.engine"),
    "ReplayRefused": ".errors",
    **dict.fromkeys(("SessionReplayResult", "ToolReplayResult", "replay_session", "replay_tool"), ".replay.scopes"),
    "Divergence": ".replay.session",
    **dict.fromkeys(("Run", "RunSummary", "Snapshot", "Step"), ".runs"),
    **dict.fromkeys(("ApprovalStatus", "ReplayMode", "Risk", "RunKind", "SnapshotKind", "StepKind"), ".semconv"),
    "Store": ".storage.store",
    "lab": ".lab.api",
    "LabResult": ".lab.model",
    "scorer": ".lab.scoring",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'otel_replay' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """``otel_replay.replay`` is the replay function and ``otel_replay.lab`` the lab function. Importing the
    ``otel_replay.replay`` or ``otel_replay.lab`` package (which the import system records as an attribute of its
    parent) must not replace them."""

    @property
    def replay(self) -> Any:
        value = self.__dict__.get("replay")
        return value if callable(value) and not isinstance(value, types.ModuleType) else __getattr__("replay")

    @replay.setter
    def replay(self, value: Any) -> None:
        if not isinstance(value, types.ModuleType):
            self.__dict__["replay"] = value

    @property
    def lab(self) -> Any:
        value = self.__dict__.get("lab")
        return value if callable(value) and not isinstance(value, types.ModuleType) else __getattr__("lab")

    @lab.setter
    def lab(self, value: Any) -> None:
        if not isinstance(value, types.ModuleType):
            self.__dict__["lab"] = value


sys.modules[__name__].__class__ = _Package


__all__ = [
    "ApprovalStatus",
    "Divergence",
    "InvalidTraceIdError",
    "LabResult",
    "OtelReplayError",
    "RedactionConfig",
    "Redactor",
    "ReplayMode",
    "ReplayRefused",
    "ReplayResult",
    "Risk",
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
