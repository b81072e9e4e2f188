"""The lab's results as plain data: one :class:`PairResult` per replay of a cohort run (original × replay), and
the :class:`LabResult` of a whole lab (its spec, every pair, the summary, the gates).

Workers build pairs, the lab process gathers them; everything here is JSON-ready (``to_dict`` /
``from_dict``), so pairs cross process boundaries (local workers, Ray tasks) as JSON, never as pickles of
objects a value could name.

It must never read a store, run a replay or import the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Final, Literal

Lane = Literal["baseline", "candidate"]
Stability = Literal["flaky", "stable-changed", "stable-same"]

LAB_SCHEMA_VERSION: Final = "1"
"""Version of the ``otel-replay lab --json`` document (``docs/lab.schema.json``)."""


@dataclass(frozen=True, kw_only=True)
class PairResult:
    """One replay of one cohort run, compared with the original."""

    original_trace_id: str
    original_run_id: str | None
    agent: str | None
    original_status: str | None
    """``ok`` or ``error``: how the original run ended."""
    lane: Lane = "candidate"
    repeat: int = 0
    """0-based repeat within the lane (``--repeats N``)."""
    replay_trace_id: str | None = None
    replay_run_id: str | None = None
    outcome: str = "error"
    """``matched``, ``diverged``, ``refused`` (the replay stopped before a call it may not make) or ``error``
    (the lab could not replay the run: ``error`` says why)."""
    error: str | None = None
    first_divergence: dict[str, Any] | None = None
    """``{step_index, kind, reason, step_kind, step_name}`` of the first divergence (the step's kind and name in
    the original, when the divergence names a step)."""
    divergences: list[dict[str, Any]] = field(default_factory=list)
    agent_error: dict[str, Any] | None = None
    """What the replayed agent raised: ``{type, message, file, line, function}``."""
    scores: dict[str, Any] = field(default_factory=dict)
    """Scorer name → its value for this pair (``bool``, number, or None when the scorer does not apply)."""
    reference_scores: dict[str, Any] = field(default_factory=dict)
    """Scorer name → its value for the original scored against itself (what an exact replay scores): the
    reference a candidate is judged against when the lab has no baseline lane."""
    scorer_errors: dict[str, str] = field(default_factory=dict)
    """Scorer name → ``Type: message`` of a scorer that raised on this pair (its score is None)."""
    tape: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The tool tape both ways: ``unused`` (recorded calls the replay never made), ``drift`` (argument drift under
    ``--tool-match sequence``), ``refused`` (calls the tape could not answer), ``injected`` (faults served)."""
    tool_changes: list[dict[str, Any]] = field(default_factory=list)
    """``{tool, change}`` with ``change`` one of ``added``, ``removed``, ``changed_args``: the tool calls of the
    replay against the original's."""
    cost_usd: dict[str, float | None] = field(default_factory=dict)
    """``{original, replay}``."""
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    """``{original, replay}``."""
    replay_status: str | None = None
    """``ok`` or ``error``: how the replay's run ended (None when the replay recorded no run)."""
    steps: dict[str, int | None] = field(default_factory=dict)
    """``{original, replay}``: step counts."""
    output_hash: str | None = None
    """A keyed hash of the replay's output (answer, structured output, error type): equal outputs, equal hashes;
    the baseline lane compares repeats with it."""
    diff: dict[str, Any] | None = None
    """The replay-vs-original diff (the ``diff`` document of ``docs/diff.schema.json``)."""
    sandbox: str | None = None
    """What stopped the replay's unrecorded side effects in the worker (``landlock ABI n``, ``audit hooks only``,
    ``none``), as ``ReplayResult.sandbox``; None when the run could not be replayed."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (one entry of ``runs`` in the lab's ``--json`` document)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairResult:
        """The pair a worker sent as :meth:`to_dict` (unknown keys ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, kw_only=True)
class GateResult:
    """One ``--fail-if`` expression and whether it held (a held gate fails the lab)."""

    expression: str
    held: bool
    value: float | None
    """The measured left-hand side (a count, a percentage, or a relative change in percent)."""
    note: str | None = None
    """Why the gate could not be measured (no data; a scorer this lab did not run), else None."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class LabResult:
    """What ``otel_replay.lab(...)`` returns and ``otel-replay lab --json`` prints."""

    lab_id: str
    mode: str
    spec: dict[str, Any]
    """The lab as asked: cohort filters, candidate overrides, tool policy, injections, repeats, workers."""
    cohort: list[str]
    """Trace ids of the cohort's runs, in the order they were selected."""
    pairs: list[PairResult]
    summary: dict[str, Any] = field(default_factory=dict)
    """Totals, per-scorer improved/regressed, divergence histogram, cost and latency deltas, tool-change matrix,
    worst runs, baseline stability (see ``docs/lab.md``)."""
    gates: list[GateResult] = field(default_factory=list)
    interrupted: bool = False
    """True when the lab was stopped (Ctrl-C) and holds only the pairs that finished."""

    @property
    def failed(self) -> bool:
        """True when a ``--fail-if`` gate held (the CLI exits 1)."""
        return any(g.held for g in self.gates)

    def to_dict(self) -> dict[str, Any]:
        """The ``otel-replay lab --json`` document."""
        return {
            "schema_version": LAB_SCHEMA_VERSION,
            "lab_id": self.lab_id,
            "mode": self.mode,
            "spec": self.spec,
            "cohort": list(self.cohort),
            "summary": self.summary,
            "gates": [g.to_dict() for g in self.gates],
            "failed": self.failed,
            "interrupted": self.interrupted,
            "runs": [p.to_dict() for p in self.pairs],
        }
