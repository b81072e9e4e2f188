"""otel-replay: record AI-agent runs as OpenTelemetry traces, store them in ClickHouse, and replay them.

The public API is exactly what ``__all__`` lists; a test pins it. Everything else is internal.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import (
    InvalidTraceIdError,
    OtelReplayError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    TraceNotFoundError,
)
from .exporting.setup import configure, flush
from .instrumentation import instrument, uninstrument
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
from .replay.engine import ReplayRefused, ReplayResult, diff, replay
from .replay.scopes import SessionReplayResult, ToolReplayResult, replay_session, replay_tool
from .replay.session import Divergence
from .runs import Run, RunSummary, Snapshot, Step
from .semconv import ApprovalStatus, ReplayMode, Risk, RunKind, SnapshotKind, StepKind
from .storage.store import Store

__all__ = [
    "ApprovalStatus",
    "Divergence",
    "InvalidTraceIdError",
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
    "SessionReplayResult",
    "RunSummary",
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
    "model",
    "new_uuid",
    "now",
    "random",
    "record_approval",
    "record_context",
    "record_safety",
    "record_state",
    "replay",
    "replay_session",
    "replay_tool",
    "retriever",
    "tool",
    "uninstrument",
]
