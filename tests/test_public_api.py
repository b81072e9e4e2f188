"""The public API is a contract: this test pins it."""

from __future__ import annotations

import inspect

import otel_replay as orp

EXPECTED = {
    "scorer",
    "ApprovalStatus",
    "InvalidTraceIdError",
    "OtelReplayError",
    "RedactionConfig",
    "Redactor",
    "ReplayMode",
    "Risk",
    "RiskLevel",
    "OutsideRunWarning",
    "Run",
    "RunKind",
    "RunSummary",
    "Snapshot",
    "SnapshotKind",
    "Step",
    "StepKind",
    "Store",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "TraceNotFoundError",
    "__version__",
    "agent",
    "attach_file",
    "configure",
    "flush",
    "identity",
    "model",
    "record_approval",
    "record_context",
    "record_safety",
    "record_state",
    "retriever",
    "tool",
    "Divergence",
    "ReplayRefused",
    "ReplayResult",
    "RunDiff",
    "diff",
    "new_uuid",
    "now",
    "random",
    "replay",
    "replay_session",
    "replay_tool",
    "SessionReplayResult",
    "ToolReplayResult",
    "instrument",
    "uninstrument",
    "register_type",
    "lab",
    "LabResult",
}


def test_all_is_pinned() -> None:
    assert set(orp.__all__) == EXPECTED
    for name in orp.__all__:
        assert hasattr(orp, name), name


def test_contract_signatures() -> None:
    def params(func: object) -> list[str]:
        return list(inspect.signature(func).parameters)  # type: ignore[arg-type]

    assert params(orp.configure) == ["service_name", "store", "exporter", "home", "redaction"]
    assert params(orp.agent) == ["name", "config", "input"]
    assert params(orp.tool)[:2] == ["name", "risk"]
    assert params(orp.retriever) == ["name"]
    assert params(orp.model) == ["name", "provider", "model"]
    assert params(orp.record_state)[:5] == ["task_state", "step_state", "transition", "retry_count", "extra"]
    assert params(orp.record_context) == ["system_rules", "rag_context", "memory", "history", "tool_results"]
    assert params(orp.identity) == ["tenant", "role", "session"]
    assert params(orp.record_approval) == ["approval_id", "status", "approver", "tool"]
    assert params(orp.record_safety) == ["result"]
    assert params(orp.attach_file) == ["path_or_bytes", "name", "media_type", "store_binary"]
    assert params(orp.Store.open)[:1] == ["url"]
    assert params(orp.replay) == [
        "trace_id",
        "mode",
        "from_step",
        "approvals",
        "actor",
        "reason",
        "store",
        "entrypoint",
        "mocks",
        "allow_side_effects",
        "volatile_keys",
        "policy",
        "allow_paths",
        "allow_addresses",
    ]
    assert params(orp.diff) == ["trace_id_a", "trace_id_b", "store", "volatile_keys"]
    assert params(orp.register_type) == ["cls"]
    for name in ("runs", "load_run", "close"):
        assert callable(getattr(orp.Store, name)), name


def test_every_public_name_is_documented() -> None:
    import typing
    from pathlib import Path

    docs = "".join(path.read_text(encoding="utf-8") for path in Path(__file__).parents[1].glob("docs/*.md"))
    for name in orp.__all__:
        if name.startswith("__"):
            continue
        value = getattr(orp, name)
        if typing.get_origin(value) is typing.Literal:  # a type alias carries no docstring: the docs name it
            assert f"`otel_replay.{name}`" in docs or f"`orp.{name}`" in docs, f"{name} is not in docs/"
            continue
        assert inspect.getdoc(value), f"{name} has no docstring"


def test_replay_and_lab_are_packages_that_call_their_function() -> None:
    import types

    import pytest

    import otel_replay.lab as lab_package
    import otel_replay.replay as replay_package
    from otel_replay.lab import api
    from otel_replay.replay import engine

    assert isinstance(replay_package, types.ModuleType) and replay_package is orp.replay
    assert isinstance(lab_package, types.ModuleType) and lab_package is orp.lab
    assert replay_package.engine is engine and replay_package.replay is engine.replay
    assert lab_package.api is api and lab_package.lab is api.lab
    assert inspect.signature(orp.replay) == inspect.signature(engine.replay)
    assert inspect.signature(orp.lab) == inspect.signature(api.lab)
    with pytest.raises(orp.InvalidTraceIdError):  # the call reaches the replay, which checks the trace id
        orp.replay("not-a-trace-id", mode="mock")
    with pytest.raises(AttributeError):
        replay_package.no_such_name  # noqa: B018
