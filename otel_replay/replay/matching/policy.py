"""What a lab changes about a replay: the tool tape's matching policy, tools run live, injected tool faults,
and the overrides applied to every model call (model name, parameters, a role's prompt).

Plain frozen data, built and checked once (the lab's command line, ``otel_replay.lab(...)``) and handed to
:func:`otel_replay.replay.engine.replay` / ``replay_run`` as ``policy=``; the replay session applies it. A
replay given no policy behaves exactly as before.

It must never import, look up or run anything a value names, and never hold a secret (a prompt file's text
is the user's own input, redacted like every value when the replay records it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

ToolMatch = Literal["strict", "sequence"]
FaultKind = Literal["timeout", "exception", "empty", "value"]

TOOL_MATCHES: Final = ("strict", "sequence")
FAULT_KINDS: Final = ("timeout", "exception", "empty", "value")


@dataclass(frozen=True, kw_only=True)
class ToolFault:
    """One ``--inject TOOL:error=KIND[:p=P]`` rule: the recorded answer of tool ``tool`` replaced by a fault for
    a fraction ``p`` of its calls (drawn from the lab's seed, the run and the call's position, so the same
    lab injects at the same calls every time)."""

    tool: str
    kind: FaultKind
    value: Any = None
    """For ``kind="value"``: the JSON value served instead of the recorded answer."""
    p: float = 1.0


@dataclass(frozen=True, kw_only=True)
class ReplayPolicy:
    """How a lab's replay answers calls beyond its mode (see ``docs/lab.md``)."""

    lab_id: str | None = None
    """Written on the replay's root span (``otel_replay.replay.lab_id``) so ``otel-replay runs --lab ID``
    lists a lab's replays."""
    lane: str | None = None
    """Written on the replay's root span (``otel_replay.replay.lab_lane``): ``baseline`` or ``candidate``."""
    bisect_id: str | None = None
    """Written on the replay's root span (``otel_replay.replay.bisect_id``) so ``otel-replay runs --bisect ID``
    lists a bisect's replays."""
    bisect_revision: str | None = None
    """Written on the replay's root span (``otel_replay.replay.bisect_revision``): the revision a bisect step
    tried."""
    tool_match: ToolMatch = "strict"
    """``strict``: a recorded tool answer is served only for canonically equal arguments, else the call is
    refused and reported; ``sequence``: each tool's recorded answers in order, argument drift reported."""
    tools_live: tuple[str, ...] = ()
    """Tools executed for real instead of answered from the recording (write/high ones still need approvals)."""
    faults: tuple[ToolFault, ...] = ()
    seed: int = 0
    model: str | None = None
    """Every model call asks for this model instead (``--model``)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Request parameters set on every model call (``--set-param temperature=0``)."""
    prompts: Mapping[str, str] = field(default_factory=dict)
    """Role → text: the message of that role (``system``) replaced on every model call (``--prompt-file``)."""

    @property
    def overrides_models(self) -> bool:
        """True when the policy changes what model calls send."""
        return self.model is not None or bool(self.params) or bool(self.prompts)
