"""A lab's summary from its pairs: totals, per-scorer improved/regressed/same and pass rate, the divergence
histogram, cost and latency deltas, the tool-call change matrix, the tool tape, the worst runs and baseline
stability (the ``summary`` of ``otel-replay lab --json``; ``docs/lab.md`` documents every key).

Rules (also in ``docs/lab.md``):

* Everything counts the **candidate** lane; the baseline lane (``--baseline``) is the reference and the noise
  measure. ``%`` in a gate means percent of the candidate replays.
* A candidate pair's score is compared with its *reference*: with a baseline lane, the baseline pairs of the same
  run (the majority value of a ``bool`` scorer, the median of a number); without one, the original scored
  against itself. Different in the scorer's good direction (``higher_is_better``) is ``improved``, in the other
  ``regressed``; a number within the scorer's ``tolerance`` is ``same``. A score or reference of None is
  ``not_applicable``; a run the baseline shows to be ``flaky`` counts as ``flaky``, never as a change.
* Pass rate: a ``bool`` scorer passes when its value is the good one, a number scorer when it did not regress;
  the rate is over the pairs the scorer applied to (None when it applied to none).
* Cost and latency deltas: per candidate pair, ``(replay - original) / original`` in percent; p50 and p95 by
  linear interpolation between closest ranks.
* Against the baseline (``cost_vs_baseline``, ``latency_vs_baseline``; only with a baseline lane): per candidate
  pair, ``(replay - baseline) / baseline`` in percent, the baseline being the median of the run's baseline
  replays (those with a known value); the same percentiles.
* Worst runs: ordered by badness = 10 × the number of regressed scorers + the outcome's rank (error 3, refused 2,
  diverged 1, matched 0), then the earlier first divergence, then the trace id; pairs of badness 0 are left out.
* Stability (only with a baseline lane), per run: ``flaky`` when its baseline repeats disagree on outcome or
  output hash, else ``stable-changed`` when a candidate pair differs from the baseline in either, else
  ``stable-same``.

It must never read a store, run a replay or look at anything but the pairs it is given.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from .model import PairResult
from .scoring import Scorer, registered

WORST_RUNS: Final = 10
"""How many worst runs the summary lists by default."""

_OUTCOME_RANK: Final = {"error": 3, "refused": 2, "diverged": 1, "matched": 0}

TOTALS: Final = (
    "runs",
    "replays",
    "matched",
    "diverged",
    "refused",
    "errors",
    "agent_errors",
    "scorer_errors",
    "baseline_replays",
)
"""The names under ``summary.totals`` (every one usable in a ``--fail-if`` gate)."""

STABILITY: Final = ("flaky", "stable-changed", "stable-same")


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` (0..100) percentile of ``values`` by linear interpolation between closest ranks; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    value = ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    return round(value, 4)


def _relative_percent(side: Mapping[str, Any]) -> float | None:
    a, b = side.get("original"), side.get("replay")
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool):
        return None
    if a == 0:
        return 0.0 if b == 0 else None
    value = (b - a) / a * 100.0
    return value if math.isfinite(value) else None


def _deltas(pairs: Iterable[PairResult], attribute: str) -> dict[str, Any]:
    values = [v for v in (_relative_percent(getattr(p, attribute)) for p in pairs) if v is not None]
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "mean": round(statistics.fmean(values), 4) if values else None,
        "n": len(values),
    }


def _baseline_deltas(candidate: Iterable[PairResult], baseline: Iterable[PairResult], attribute: str) -> dict[str, Any]:
    """The candidate's relative change in percent against the median of its run's baseline replays."""
    sides: dict[str, list[float]] = defaultdict(list)
    for p in baseline:
        value = getattr(p, attribute).get("replay")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            sides[p.original_trace_id].append(float(value))
    values: list[float] = []
    for p in candidate:
        known = sides.get(p.original_trace_id)
        if not known:
            continue
        change = _relative_percent(
            {"original": statistics.median(known), "replay": getattr(p, attribute).get("replay")}
        )
        if change is not None:
            values.append(change)
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "mean": round(statistics.fmean(values), 4) if values else None,
        "n": len(values),
    }


def has_baseline(summary: Mapping[str, Any]) -> bool:
    """Whether the summarized lab had a baseline lane (its ``stability`` section says so)."""
    return bool((summary.get("stability") or {}).get("baseline"))


def delta_sections(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The cost and latency sections a report shows, with their labels: against the original, and with a
    baseline lane also against it (``cost vs baseline``)."""
    keys = ["cost", "latency"] + (["cost_vs_baseline", "latency_vs_baseline"] if has_baseline(summary) else [])
    return [(key, key.replace("_vs_", " vs ")) for key in keys]


def _majority(values: list[Any]) -> Any:
    counts = Counter(values)
    best = max(counts.values())
    return next(v for v in values if counts[v] == best)  # ties: the earliest repeat's value


def _baseline_reference(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    if not known:
        return None
    if all(isinstance(v, bool) for v in known):
        return _majority(known)
    numbers = [float(v) for v in known if not isinstance(v, bool)]
    return statistics.median(numbers) if numbers else _majority(known)


def _compare(value: Any, reference: Any, s: Scorer) -> str:
    """``improved``, ``regressed``, ``same`` or ``not_applicable``."""
    if value is None or reference is None:
        return "not_applicable"
    if isinstance(value, bool) or isinstance(reference, bool):
        if bool(value) == bool(reference):
            return "same"
        return "improved" if bool(value) == s.higher_is_better else "regressed"
    delta = float(value) - float(reference)
    if abs(delta) <= s.tolerance:
        return "same"
    return "improved" if (delta > 0) == s.higher_is_better else "regressed"


def _passes(value: Any, verdict: str, s: Scorer) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value == s.higher_is_better
    if verdict == "not_applicable":
        return None
    return verdict != "regressed"


def _ending(pair: PairResult) -> tuple[str, str | None]:
    return pair.outcome, pair.output_hash


def stability(pairs: Sequence[PairResult]) -> dict[str, str]:
    """Trace id → ``flaky`` / ``stable-changed`` / ``stable-same`` for each run with baseline pairs."""
    baseline: dict[str, list[PairResult]] = defaultdict(list)
    candidate: dict[str, list[PairResult]] = defaultdict(list)
    for p in pairs:
        (baseline if p.lane == "baseline" else candidate)[p.original_trace_id].append(p)
    out: dict[str, str] = {}
    for tid, base in baseline.items():
        endings = {_ending(p) for p in base}
        if len(endings) > 1:
            out[tid] = "flaky"
        elif any(_ending(p) not in endings for p in candidate.get(tid, [])):
            out[tid] = "stable-changed"
        else:
            out[tid] = "stable-same"
    return out


def _scorer_summary(
    candidate: Sequence[PairResult],
    references: Mapping[str, Mapping[str, Any]],
    flaky: set[str],
    s: Scorer,
    *,
    against: str,
) -> dict[str, Any]:
    counts = {"improved": 0, "regressed": 0, "same": 0, "not_applicable": 0, "flaky": 0, "errors": 0}
    passed = applied = 0
    numbers: list[float] = []
    for p in candidate:
        value = p.scores.get(s.name)
        if s.name in p.scorer_errors:
            counts["errors"] += 1
        reference = references.get(p.original_trace_id, {}).get(s.name, p.reference_scores.get(s.name))
        verdict = _compare(value, reference, s)
        if verdict != "not_applicable" and p.original_trace_id in flaky:
            counts["flaky"] += 1
        else:
            counts[verdict] += 1
        ok = _passes(value, verdict, s)
        if ok is not None:
            applied += 1
            passed += ok
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            numbers.append(float(value))
    return {
        **s.to_dict(),
        "against": against,
        **counts,
        "applied": applied,
        "pass_rate": round(passed / applied, 4) if applied else None,
        "mean": round(statistics.fmean(numbers), 6) if numbers else None,
    }


def _histogram(candidate: Sequence[PairResult]) -> list[dict[str, Any]]:
    groups: dict[tuple[str | None, str | None], Counter[str]] = defaultdict(Counter)
    for p in candidate:
        first = p.first_divergence
        if not first:
            continue
        groups[(first.get("step_kind"), first.get("step_name"))][str(first.get("kind"))] += 1
    rows: list[dict[str, Any]] = [
        {"step_kind": kind, "step_name": name, "count": sum(kinds.values()), "kinds": dict(sorted(kinds.items()))}
        for (kind, name), kinds in groups.items()
    ]
    rows.sort(key=lambda r: (-r["count"], r["step_kind"] or "", r["step_name"] or ""))
    return rows


def _tool_matrix(candidate: Sequence[PairResult]) -> dict[str, dict[str, int]]:
    matrix: dict[str, dict[str, int]] = {}
    for p in candidate:
        for change in p.tool_changes:
            row = matrix.setdefault(str(change.get("tool")), {"added": 0, "removed": 0, "changed_args": 0})
            kind = str(change.get("change"))
            if kind in row:
                row[kind] += 1
    return dict(sorted(matrix.items()))


def _tape(candidate: Sequence[PairResult]) -> dict[str, int]:
    totals = {"unused": 0, "drift": 0, "refused": 0, "injected": 0}
    for p in candidate:
        for key, entries in p.tape.items():
            totals[key] = totals.get(key, 0) + len(entries)
    return totals


def _worst(
    pairs: Sequence[PairResult], verdicts: Mapping[int, list[str]], stable: Mapping[str, str], limit: int
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for index, p in enumerate(pairs):
        if p.lane != "candidate":
            continue
        regressed = verdicts.get(index, [])
        badness = 10 * len(regressed) + _OUTCOME_RANK.get(p.outcome, 3)
        if badness == 0:
            continue
        first = p.first_divergence or {}
        step = first.get("step_index")
        rows.append(
            {
                "pair_index": index,
                "original_trace_id": p.original_trace_id,
                "replay_trace_id": p.replay_trace_id,
                "agent": p.agent,
                "repeat": p.repeat,
                "outcome": p.outcome,
                "badness": badness,
                "regressed": regressed,
                "first_divergence": p.first_divergence,
                "error": p.error,
                "stability": stable.get(p.original_trace_id),
                "_order": (-badness, step if isinstance(step, int) else math.inf, p.original_trace_id, p.repeat),
            }
        )
    rows.sort(key=lambda r: r["_order"])
    for row in rows:
        del row["_order"]
    return rows[:limit]


def summarize(
    pairs: Sequence[PairResult], *, scorers: Sequence[Scorer] | None = None, worst: int = WORST_RUNS
) -> dict[str, Any]:
    """The summary of a lab's pairs (the ``summary`` of ``otel-replay lab --json``; see the module docstring).

    ``scorers`` (default: :func:`~otel_replay.lab.scoring.registered`) gives each scorer's direction and
    tolerance; a score of a name not among them is summarised as a scorer where higher is better."""
    candidate = [p for p in pairs if p.lane == "candidate"]
    baseline = [p for p in pairs if p.lane == "baseline"]
    outcomes = Counter(p.outcome for p in candidate)
    known = {s.name: s for s in (registered() if scorers is None else scorers)}
    names = list(dict.fromkeys([*known, *(n for p in candidate for n in p.scores)]))
    in_use = [n for n in names if any(n in p.scores for p in candidate)]
    by_name = {n: known.get(n) or Scorer(name=n, func=lambda original, replay: None) for n in in_use}

    stable = stability(pairs)
    flaky = {tid for tid, label in stable.items() if label == "flaky"}
    base_scores: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for p in sorted(baseline, key=lambda p: p.repeat):
        for name, value in p.scores.items():
            base_scores[p.original_trace_id][name].append(value)
    references = {
        tid: {name: _baseline_reference(values) for name, values in by_scorer.items()}
        for tid, by_scorer in base_scores.items()
    }
    against = "baseline" if baseline else "original"

    regressed_by_pair: dict[int, list[str]] = defaultdict(list)
    for index, p in enumerate(pairs):
        if p.lane != "candidate" or p.original_trace_id in flaky:
            continue
        for name, s in by_name.items():
            reference = references.get(p.original_trace_id, {}).get(name, p.reference_scores.get(name))
            if _compare(p.scores.get(name), reference, s) == "regressed":
                regressed_by_pair[index].append(name)

    stability_counts = Counter(stable.values())
    return {
        "totals": {
            "runs": len({p.original_trace_id for p in candidate}),
            "replays": len(candidate),
            "matched": outcomes.get("matched", 0),
            "diverged": outcomes.get("diverged", 0),
            "refused": outcomes.get("refused", 0),
            "errors": outcomes.get("error", 0),
            "agent_errors": sum(1 for p in candidate if p.agent_error),
            "scorer_errors": sum(1 for p in candidate if p.scorer_errors),
            "baseline_replays": len(baseline),
        },
        "scorers": {
            name: _scorer_summary(candidate, references, flaky, s, against=against) for name, s in by_name.items()
        },
        "divergences": _histogram(candidate),
        "cost": _deltas(candidate, "cost_usd"),
        "latency": _deltas(candidate, "latency_ms"),
        "cost_vs_baseline": _baseline_deltas(candidate, baseline, "cost_usd"),
        "latency_vs_baseline": _baseline_deltas(candidate, baseline, "latency_ms"),
        "tools": _tool_matrix(candidate),
        "tape": _tape(candidate),
        "worst": _worst(pairs, regressed_by_pair, stable, max(0, int(worst))),
        "stability": {
            "baseline": bool(baseline),
            "counts": {label: stability_counts.get(label, 0) for label in STABILITY},
            "runs": dict(sorted(stable.items())),
        },
    }
