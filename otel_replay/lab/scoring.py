"""Scorers: how a replay compares with its original, per pair, and the :class:`~otel_replay.lab.model.PairResult`
of one replay built from its result.

A scorer is a function of the original :class:`~otel_replay.runs.Run` and the replay's ``Run`` (None when the
replay recorded no run) returning a ``bool``, a number, or None (the scorer does not apply to this pair). The
built-in ones (:data:`BUILTIN_SCORERS`):

``output_equal``         the replay ended as the original did (status, answer, structured output, error)
``tool_sequence_equal``  the same tool calls in the same order with the same arguments
``citations_kept``       every citation of the original's output is in the replay's (None: the original cited none)
``cost_delta``           relative change of the run's cost in US dollars, replay vs original (0.1 = +10 %)
``latency_delta``        relative change of the run's duration, replay vs original (0 while the change is within
                         the diff's latency threshold: 100 ms and 50 %, ``docs/diff.md``)
``safety_kept``          the replay recorded the same safety verdicts (None: the original recorded none)

User scorers are registered with :func:`scorer` (``@orp.scorer``) by code the user imports: the ``--app``
module, or the modules named with ``--scorers MODULE`` (:func:`import_scorers`). Each scorer also scores the
original against itself (its *reference*, what an exact replay scores) so the lab can tell an improvement from a
regression when there is no baseline lane. A scorer that raises gives None and an error noted on the pair; it
never stops the lab.

Process-wide state: the registry of user scorers (``_REGISTRY``), filled by the ``@scorer`` decorator when the
module defining a scorer is imported, as test frameworks register their plugins. Nothing else.

It must never run the agent, read a store, or import a module a recorded value names: :func:`import_scorers`
imports only the modules its caller names (the command line's ``--scorers``).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, overload

from .. import semconv
from ..exporting import setup
from ..replay import volatile
from ..replay.diff import RunDiff, diff_runs, normalize
from ..replay.engine import ReplayResult
from ..runs import Run
from ..snapshots import canonical_json
from .model import Lane, PairResult

ScorerFunction = Callable[[Run, "Run | None"], Any]
"""``(original, replay) -> bool | float | int | None``."""

_DiffScorer = Callable[[Run, Run, RunDiff], Any]


@dataclass(frozen=True, kw_only=True)
class Scorer:
    """One scorer: its name, its function, and how its values compare."""

    name: str
    func: ScorerFunction
    higher_is_better: bool = True
    """For a ``bool`` scorer, True means ``True`` is the good value; for a number, a larger value is better."""
    tolerance: float = 0.0
    """Numbers within this of the reference (absolute, in the scorer's unit) count as the same."""
    builtin: bool = False
    description: str = ""
    _from_diff: _DiffScorer | None = field(default=None, repr=False, compare=False)
    _reference: Any = field(default=None, repr=False, compare=False)
    """Built-ins: what an exact replay scores (True, 0.0), so the original is not scored against itself."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (``spec.scorers`` of the lab document)."""
        return {
            "name": self.name,
            "higher_is_better": self.higher_is_better,
            "tolerance": self.tolerance,
            "builtin": self.builtin,
            "description": self.description,
        }


# ------------------------------------------------------------------------------------------ built-ins


def _tool_sequence_equal(original: Run, replay: Run, diff: RunDiff) -> bool:
    details = diff.sections["tools"].details
    if details.get("added") or details.get("removed"):
        return False
    return not any("args_hash" in (entry.get("fields") or {}) for entry in details.get("changed") or [])


def _citations_kept(original: Run, replay: Run, diff: RunDiff) -> bool | None:
    citations = diff.sections["citations"].details.get("citations") or {}
    if not citations.get("a"):
        return None
    return not citations.get("removed")


def _relative(a: Any, b: Any) -> float | None:
    """``(b - a) / a``, or None when either side is unknown (0 → 0 is 0, 0 → more is unknown)."""
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return None
    if a == 0:
        return 0.0 if b == 0 else None
    value = (b - a) / a
    return round(value, 6) if math.isfinite(value) else None


def _cost_delta(original: Run, replay: Run, diff: RunDiff) -> float | None:
    return _relative(run_cost(original), run_cost(replay))


def _latency_delta(original: Run, replay: Run, diff: RunDiff) -> float | None:
    if not diff.sections["latency"].changed:  # within the diff's threshold (docs/diff.md): no change
        return 0.0
    return _relative(original.summary.duration_ms, replay.summary.duration_ms)


def _safety_kept(original: Run, replay: Run, diff: RunDiff) -> bool | None:
    verdicts = diff.sections["safety"].details.get("verdicts") or {}
    if not verdicts.get("a"):
        return None
    return not diff.sections["safety"].changed


def _builtin(
    name: str, from_diff: _DiffScorer, *, higher_is_better: bool, tolerance: float, reference: Any, description: str
) -> Scorer:
    def func(original: Run, replay: Run | None) -> Any:
        return None if replay is None else from_diff(original, replay, diff_runs(original, replay))

    func.__name__ = func.__qualname__ = name
    func.__doc__ = description
    return Scorer(
        name=name,
        func=func,
        higher_is_better=higher_is_better,
        tolerance=tolerance,
        builtin=True,
        description=description,
        _from_diff=from_diff,
        _reference=reference,
    )


BUILTIN_SCORERS: Final[tuple[Scorer, ...]] = (
    _builtin(
        "output_equal",
        lambda original, replay, diff: not diff.sections["output"].changed,
        higher_is_better=True,
        tolerance=0.0,
        reference=True,
        description="the replay ended as the original did (status, answer, structured output, error)",
    ),
    _builtin(
        "tool_sequence_equal",
        _tool_sequence_equal,
        higher_is_better=True,
        tolerance=0.0,
        reference=True,
        description="the same tool calls in the same order with the same arguments",
    ),
    _builtin(
        "citations_kept",
        _citations_kept,
        higher_is_better=True,
        tolerance=0.0,
        reference=True,
        description="every citation of the original's output is in the replay's output",
    ),
    _builtin(
        "cost_delta",
        _cost_delta,
        higher_is_better=False,
        tolerance=0.01,
        reference=0.0,
        description="relative change of the run's cost in US dollars, replay vs original (0.1 = +10 %)",
    ),
    _builtin(
        "latency_delta",
        _latency_delta,
        higher_is_better=False,
        tolerance=0.0,
        reference=0.0,
        description=(
            "relative change of the run's duration, replay vs original (0.1 = +10 %); 0 within the diff's "
            "latency threshold (100 ms and 50 %)"
        ),
    ),
    _builtin(
        "safety_kept",
        _safety_kept,
        higher_is_better=True,
        tolerance=0.0,
        reference=True,
        description="the replay recorded the same safety verdicts as the original",
    ),
)
"""The built-in scorers, in report order."""

_BUILTIN_NAMES: Final = frozenset(s.name for s in BUILTIN_SCORERS)

_REGISTRY: dict[str, Scorer] = {}
"""User scorers by name, in registration order (see the module docstring)."""


@overload
def scorer(func: ScorerFunction, /) -> ScorerFunction: ...


@overload
def scorer(
    *, name: str | None = None, higher_is_better: bool = True, tolerance: float = 0.0
) -> Callable[[ScorerFunction], ScorerFunction]: ...


def scorer(
    func: ScorerFunction | None = None,
    /,
    *,
    name: str | None = None,
    higher_is_better: bool = True,
    tolerance: float = 0.0,
) -> Any:
    """Register a scorer the lab runs on every pair (``@orp.scorer`` or ``@orp.scorer(name=..., ...)``).

    The function takes the original run and the replay's run (None when the replay recorded no run) and returns
    a ``bool``, a number or None (does not apply). ``higher_is_better`` says which way is better (for a bool:
    whether ``True`` is the good value); ``tolerance`` is how far a number may move from its reference and still
    count as the same. The function is returned unchanged. A name already used by a built-in scorer is refused
    with ``ValueError``; registering a name again replaces the earlier scorer (a module imported twice).
    """

    def register(target: ScorerFunction) -> ScorerFunction:
        scorer_name = name if name is not None else getattr(target, "__name__", "")
        if not isinstance(scorer_name, str) or not scorer_name.isidentifier():
            raise ValueError(f"a scorer needs a name made of letters, digits and _: got {scorer_name!r}")
        if scorer_name in _BUILTIN_NAMES:
            raise ValueError(f"{scorer_name!r} is a built-in scorer: give yours another name (@scorer(name=...))")
        if not callable(target):
            raise ValueError(f"@scorer decorates a function of (original, replay), not {type(target).__name__}")
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
            raise ValueError(f"a scorer's tolerance must be a number >= 0, got {tolerance!r}")
        doc = (getattr(target, "__doc__", None) or "").strip().splitlines()
        _REGISTRY[scorer_name] = Scorer(
            name=scorer_name,
            func=target,
            higher_is_better=bool(higher_is_better),
            tolerance=float(tolerance),
            description=doc[0] if doc else "",
        )
        return target

    if func is not None:
        return register(func)
    return register


def registered() -> tuple[Scorer, ...]:
    """Every scorer a lab runs now: the built-ins, then the user scorers in registration order."""
    return (*BUILTIN_SCORERS, *_REGISTRY.values())


def unregister(name: str) -> None:
    """Remove a user scorer (tests, notebooks); unknown names are ignored."""
    _REGISTRY.pop(name, None)


def import_scorers(modules: Iterable[str]) -> tuple[Scorer, ...]:
    """Import the modules named on the command line (``--scorers MODULE``) so their ``@scorer`` functions
    register; returns every scorer registered now. ``ValueError`` (one line) when a module cannot be imported.

    Only the names given here are imported: never a name read from a recording, a case file or the store."""
    for module in modules:
        if not isinstance(module, str) or not all(part.isidentifier() for part in module.split(".")):
            raise ValueError(f"--scorers takes a module name such as my_project.scorers, got {module!r}")
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix, said in one line
            raise ValueError(
                f"cannot import scorer module {module!r}: {type(exc).__name__}: {_one_line(str(exc))} "
                "(is it on PYTHONPATH?)"
            ) from None
    return registered()


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


# -------------------------------------------------------------------------------------------- scoring


def run_cost(run: Run) -> float | None:
    """The run's cost in US dollars: its root's ``otel_replay.run.cost_usd``, else the sum over its model steps
    (None when nothing recorded a cost)."""
    value = _number(run.attributes.get(semconv.RUN_COST_USD))
    if value is not None:
        return round(value, 12)
    costs = [_number(s.attributes.get(semconv.MODEL_COST_USD)) for s in run.steps if s.kind == "model"]
    known = [c for c in costs if c is not None]
    return round(sum(known), 12) if known else None


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _scrub(text: str) -> str:
    return setup.runtime().redactor.scrub_text(text, "lab")[0]


def _checked(value: Any) -> Any:
    """A scorer's value as the lab keeps it: bool, a finite number, or None (anything else is an error)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    raise TypeError(f"a scorer returns bool, a number or None, not {type(value).__name__}")


def _apply(s: Scorer, original: Run, replay: Run | None, diff: RunDiff | None) -> Any:
    if s._from_diff is not None:
        if replay is None:
            return None
        return s._from_diff(original, replay, diff if diff is not None else diff_runs(original, replay))
    return s.func(original, replay)


def _score(
    scorers: Sequence[Scorer], original: Run, replay: Run | None, diff: RunDiff | None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(scores, references, errors) of every scorer on one pair."""
    scores: dict[str, Any] = {}
    references: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for s in scorers:
        try:
            scores[s.name] = _checked(_apply(s, original, replay, diff))
            references[s.name] = s._reference if s.builtin else _checked(s.func(original, original))
        except Exception as exc:  # noqa: BLE001 - a scorer that raises is noted on the pair, never stops the lab
            scores[s.name] = None
            references.setdefault(s.name, None)
            errors[s.name] = _scrub(f"{type(exc).__name__}: {_one_line(str(exc))}")
    return scores, references, errors


def output_hash(run: Run | None) -> str | None:
    """A keyed hash (the installation's HMAC key, see :mod:`otel_replay.redaction`) of how the run ended: status,
    answer, structured output, error type. Equal endings hash equal on this installation; volatile ids and
    where a secret was redacted do not count. None when there is no run."""
    if run is None:
        return None
    payload = run.snapshots.get(semconv.SnapshotKind.OUTPUT.value)
    payload = payload if isinstance(payload, dict) else {}
    error = payload.get("error")
    error_type = error.get("type") if isinstance(error, dict) else (type(error).__name__ if error else None)
    if not error_type and run.status == "error":
        error_type = run.attributes.get(semconv.ERROR_TYPE) or "error"
    ending = {
        "status": run.status,
        "answer": payload.get("answer"),
        "structured": payload.get("structured"),
        "error_type": error_type or None,
    }
    try:
        text = canonical_json(volatile.normalise(normalize(ending)))
    except (TypeError, ValueError):
        text = repr(ending)
    return setup.runtime().redactor.content_hash(text)


def tool_changes(diff: RunDiff | None) -> list[dict[str, Any]]:
    """The replay's tool calls against the original's: ``{tool, change, a_index, b_index}`` with ``change``
    ``added`` (a call the original did not make), ``removed`` (an original call the replay did not make) or
    ``changed_args`` (the same call with other arguments)."""
    if diff is None or "tools" not in diff.sections:
        return []
    details = diff.sections["tools"].details
    out: list[dict[str, Any]] = []
    for entry in details.get("removed") or []:
        out.append({"tool": entry.get("name"), "change": "removed", "a_index": entry.get("a_index"), "b_index": None})
    for entry in details.get("added") or []:
        out.append({"tool": entry.get("name"), "change": "added", "a_index": None, "b_index": entry.get("b_index")})
    for entry in details.get("changed") or []:
        if "args_hash" in (entry.get("fields") or {}):
            out.append(
                {
                    "tool": entry.get("name"),
                    "change": "changed_args",
                    "a_index": entry.get("a_index"),
                    "b_index": entry.get("b_index"),
                }
            )
    return out


def first_divergence(original: Run, result: ReplayResult) -> dict[str, Any] | None:
    """The replay's first divergence with the original step's kind and name (``step_kind``, ``step_name``;
    None when the divergence names no step of the original)."""
    first = result.first_divergence
    if first is None:
        return None
    out = first.to_dict()
    step = None
    if first.step_index is not None:
        step = next((s for s in original.steps if s.index == first.step_index), None)
    out["step_kind"] = step.kind if step is not None else None
    out["step_name"] = step.name if step is not None else None
    return out


def _tape(tape: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """The tape as plain data, always with its four keys."""
    out: dict[str, list[dict[str, Any]]] = {"unused": [], "drift": [], "refused": [], "injected": []}
    for key, entries in (tape or {}).items():
        out[str(key)] = [dict(e) for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []
    return out


def pair_result(
    original: Run,
    result: ReplayResult,
    *,
    lane: Lane = "candidate",
    repeat: int = 0,
    scorers: Sequence[Scorer] | None = None,
) -> PairResult:
    """The pair one replay makes with its original: outcome, divergences, every scorer's value and reference,
    the tool tape, the tool-call changes, cost and latency on both sides, the replay's keyed output hash and the
    replay-vs-original diff. ``scorers`` defaults to :func:`registered`."""
    replay = result.replay
    diff = result.diff if isinstance(result.diff, RunDiff) else None
    scores, references, errors = _score(registered() if scorers is None else scorers, original, replay, diff)
    return PairResult(
        original_trace_id=original.trace_id,
        original_run_id=original.run_id,
        agent=original.agent,
        original_status=original.status,
        lane=lane,
        repeat=repeat,
        replay_trace_id=result.replay_trace_id,
        replay_run_id=result.replay_run_id,
        outcome=result.outcome,
        first_divergence=first_divergence(original, result),
        divergences=[d.to_dict() for d in result.divergences],
        agent_error=result.agent_error,
        scores=scores,
        reference_scores=references,
        scorer_errors=errors,
        tape=_tape(result.tape),
        tool_changes=tool_changes(diff),
        cost_usd={"original": run_cost(original), "replay": run_cost(replay) if replay is not None else None},
        latency_ms={
            "original": round(original.summary.duration_ms, 3),
            "replay": round(replay.summary.duration_ms, 3) if replay is not None else None,
        },
        output_hash=output_hash(replay),
        replay_status=replay.status if replay is not None else None,
        steps={"original": len(original.steps), "replay": len(replay.steps) if replay is not None else None},
        diff=diff.to_json() if diff is not None else None,
        sandbox=getattr(result, "sandbox", None) or None,
    )


def error_pair(original: Run, message: str, *, lane: Lane = "candidate", repeat: int = 0) -> PairResult:
    """The pair of a run the lab could not replay (``outcome`` ``error``, ``message`` saying why, redacted like
    every recorded value)."""
    return PairResult(
        original_trace_id=original.trace_id,
        original_run_id=original.run_id,
        agent=original.agent,
        original_status=original.status,
        lane=lane,
        repeat=repeat,
        outcome="error",
        error=_scrub(str(message)),
        tape=_tape(None),
        cost_usd={"original": run_cost(original), "replay": None},
        latency_ms={"original": round(original.summary.duration_ms, 3), "replay": None},
        steps={"original": len(original.steps), "replay": None},
    )
