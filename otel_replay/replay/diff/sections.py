"""The ``output``, ``state``, ``cost``, ``latency`` and ``safety`` sections of a diff, each from two runs.

It must never change a run, or show a value the runs do not hold.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

from ... import semconv
from ...records import stored_int as _int
from ...runs import Run
from ...snapshots import REDACTED_TAG, TRUNCATED_TAG
from .result import SectionDiff
from .values import MODEL_KIND, STATE_SNAPSHOT, a_b, as_float, listed, same_value, value_key

# ------------------------------------------------------------------------------------------ output


def _output_fields(run: Run) -> dict[str, Any]:
    payload = run.snapshots.get(semconv.SnapshotKind.OUTPUT.value)
    payload = payload if isinstance(payload, dict) else {}
    if payload.get(TRUNCATED_TAG) is True:
        # the whole output was too large to keep: only its fingerprint can be compared
        payload = {"structured": payload}
    error = payload.get("error")
    error = error if isinstance(error, dict) else ({"type": "", "message": str(error)} if error else {})
    if not error and run.status == "error":
        error_type = run.attributes.get(semconv.ERROR_TYPE, "")
        error = {"type": error_type, "message": ""}
    return {
        "status": run.status,
        "answer": payload.get("answer"),
        "structured": payload.get("structured"),
        "error_type": error.get("type") or None,
        "error_message": error.get("message") or None,
    }


def output_section(a: Run, b: Run) -> SectionDiff:
    fa, fb = _output_fields(a), _output_fields(b)
    differences = {name: a_b(fa[name], fb[name]) for name in fa if not same_value(fa[name], fb[name])}
    parts = []
    if "status" in differences:
        parts.append(f"status {fa['status']} → {fb['status']}")
    parts.extend(f"{name.replace('_', ' ')} changed" for name in differences if name != "status")
    return SectionDiff(
        name="output",
        changed=bool(differences),
        summary="; ".join(parts) or "unchanged",
        details={"status": a_b(fa["status"], fb["status"]), "differences": differences},
    )


# ------------------------------------------------------------------------------------------- state


def _states(run: Run) -> list[dict[str, Any]]:
    out = []
    for snap in run.timeline:
        if snap.kind != STATE_SNAPSHOT:
            continue
        payload = snap.payload if isinstance(snap.payload, dict) else {"task_state": snap.payload}
        out.append(
            {
                "step_index": snap.step_index,
                "task_state": payload.get("task_state"),
                "step_state": payload.get("step_state"),
                "transition": payload.get("transition"),
                "retry_count": payload.get("retry_count"),
                "extra": payload.get("extra") or {},
            }
        )
    return out


def _state_key(state: dict[str, Any]) -> str:
    return value_key({k: v for k, v in state.items() if k != "step_index"})


def state_section(a: Run, b: Run) -> SectionDiff:
    sa, sb = _states(a), _states(b)
    first: dict[str, Any] | None = None
    for position in range(max(len(sa), len(sb))):
        x = sa[position] if position < len(sa) else None
        y = sb[position] if position < len(sb) else None
        if x is None or y is None or _state_key(x) != _state_key(y):
            first = {"position": position, "a": x, "b": y}
            break
    final_a = sa[-1]["task_state"] if sa else None
    final_b = sb[-1]["task_state"] if sb else None
    details = {
        "count": a_b(len(sa), len(sb)),
        "transitions": a_b([s["transition"] for s in sa], [s["transition"] for s in sb]),
        "final_task_state": a_b(final_a, final_b),
        "first_difference": first,
    }
    if first is None:
        summary = f"unchanged ({len(sa)} state snapshots)" if sa else "unchanged (no state snapshots)"
    else:
        parts = [f"first difference at state {first['position']}"]
        if len(sa) != len(sb):
            parts.append(f"{len(sa)} → {len(sb)} snapshots")
        if not same_value(final_a, final_b):
            parts.append("final task_state changed")
        summary = "; ".join(parts)
    return SectionDiff(name="state", changed=first is not None, summary=summary, details=details)


# ---------------------------------------------------------------------------------------------- cost


def _usage(run: Run) -> dict[str, int | float | None]:
    attrs = run.attributes
    models = [s for s in run.steps if s.kind == MODEL_KIND]

    def summed(key: str, parse: Any) -> Any:
        values = [parse(s.attributes.get(key)) for s in models]
        values = [v for v in values if v is not None]
        return sum(values) if values else None

    input_tokens = _int(attrs.get(semconv.RUN_INPUT_TOKENS))
    output_tokens = _int(attrs.get(semconv.RUN_OUTPUT_TOKENS))
    cost = as_float(attrs.get(semconv.RUN_COST_USD))
    return {
        "input_tokens": input_tokens if input_tokens is not None else summed(semconv.GEN_AI_USAGE_INPUT_TOKENS, _int),
        "output_tokens": (
            output_tokens if output_tokens is not None else summed(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, _int)
        ),
        "cost_usd": cost if cost is not None else summed(semconv.MODEL_COST_USD, as_float),
    }


def cost_section(a: Run, b: Run) -> SectionDiff:
    ua, ub = _usage(a), _usage(b)
    details: dict[str, Any] = {}
    parts = []
    for name in ("input_tokens", "output_tokens", "cost_usd"):
        x, y = ua[name], ub[name]
        delta = (y - x) if x is not None and y is not None else None
        if name == "cost_usd":
            same = (x is None and y is None) or (
                x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
            )
            delta = round(delta, 12) if delta is not None else None
        else:
            same = x == y
        details[name] = {"a": x, "b": y, "delta": delta, "changed": not same}
        if not same:
            shown = f"{delta:+g}" if delta is not None else f"{x} → {y}"
            parts.append(f"{name.replace('_', ' ')} {shown}")
    changed = bool(parts)
    return SectionDiff(
        name="cost", changed=changed, summary="; ".join(parts) if changed else "unchanged", details=details
    )


# ------------------------------------------------------------------------------------------- latency


def _ratio(x: float, y: float) -> float | None:
    return round(y / x, 4) if x > 0 else None


def latency_section(a: Run, b: Run, threshold_ms: float, threshold_ratio: float) -> SectionDiff:
    ta, tb = a.summary.duration_ms, b.summary.duration_ms
    delta = tb - ta
    changed = abs(delta) > threshold_ms and (ta <= 0 or abs(delta) > threshold_ratio * ta)
    kinds: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for side, run in enumerate((a, b)):
        for step in run.steps:
            kinds[step.kind][side] += step.duration_ms
    by_kind = {
        kind: {"a_ms": round(x, 3), "b_ms": round(y, 3), "delta_ms": round(y - x, 3), "ratio": _ratio(x, y)}
        for kind, (x, y) in sorted(kinds.items())
    }
    ratio = _ratio(ta, tb)
    shown = f"{ta:.1f} ms → {tb:.1f} ms ({delta:+.1f} ms" + (f", ×{ratio:.2f})" if ratio is not None else ")")
    summary = shown if changed else f"within threshold: {shown}"
    return SectionDiff(
        name="latency",
        changed=changed,
        summary=summary,
        details={
            "total": {"a_ms": round(ta, 3), "b_ms": round(tb, 3), "delta_ms": round(delta, 3), "ratio": ratio},
            "by_kind": by_kind,
            "threshold": {"ms": threshold_ms, "ratio": threshold_ratio},
        },
    )


# -------------------------------------------------------------------------------------------- safety


def _verdict_of(result: Any) -> str:
    """The verdict word of one safety result, read the way ``record_safety`` reads it."""
    verdict = result
    if isinstance(result, dict) and REDACTED_TAG not in result:
        verdict = next((result[k] for k in ("verdict", "decision", "status") if result.get(k) is not None), None)
    if isinstance(verdict, bool):
        return "pass" if verdict else "block"
    if verdict is None:
        return "unknown"
    return verdict if isinstance(verdict, str) else value_key(verdict)


def _safety_results(run: Run) -> tuple[list[str], list[Any]]:
    """Verdicts and payloads of the run's safety events (any span, in time order), else of its output."""
    events = sorted(
        ((e.timestamp_ns, e) for span in run.spans for e in span.events if e.name == semconv.EVENT_SAFETY),
        key=lambda pair: pair[0],
    )
    if events:
        verdicts, payloads = [], []
        for _, event in events:
            text = event.attributes.get(semconv.SAFETY_PAYLOAD)
            try:
                payload = json.loads(text) if text else None
            except ValueError:
                payload = text
            verdicts.append(event.attributes.get(semconv.SAFETY_VERDICT) or _verdict_of(payload))
            payloads.append(payload)
        return verdicts, payloads
    output = run.snapshots.get(semconv.SnapshotKind.OUTPUT.value)
    safety = output.get("safety") if isinstance(output, dict) else None
    if safety is None:
        return [], []
    if isinstance(safety, dict) and isinstance(safety.get("verdicts"), list) and "last" in safety:
        results = list(safety["verdicts"])
    else:
        results = [safety]
    return [_verdict_of(r) for r in results], results


def safety_section(a: Run, b: Run) -> SectionDiff:
    va, pa = _safety_results(a)
    vb, pb = _safety_results(b)
    changed = va != vb
    payloads_differ = not same_value(pa, pb)
    if changed:
        summary = f"verdicts {listed(va) or 'none'} → {listed(vb) or 'none'}"
    elif va:
        summary = f"unchanged ({listed(va)})" + ("; verdict details differ" if payloads_differ else "")
    else:
        summary = "unchanged (no safety verdicts)"
    return SectionDiff(
        name="safety",
        changed=changed,
        summary=summary,
        details={
            "verdicts": a_b(va, vb),
            "last": a_b(pa[-1] if pa else None, pb[-1] if pb else None),
            "payloads_differ": payloads_differ,
        },
    )
