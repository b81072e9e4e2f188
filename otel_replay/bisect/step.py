"""One step of a bisect, run in a child process of its own: ``python -m otel_replay.bisect.step`` reads the step
(a JSON object) on stdin, replays its target at the code importable from its working directory, and prints its
verdict as one JSON object on stdout.

Why it exists: each commit's code must be imported fresh (a module imported once stays in ``sys.modules``), from
the commit's worktree first on the import path, with the current interpreter and installed dependencies; a
process per step gives exactly that, and a step that crashes or hangs cannot take the bisect with it.

The verdict: ``good`` when every replay passes (a case's expectations hold; a trace's replay ``matched``; a
cohort's lab gates do not hold), ``bad`` when one fails, ``skip`` when the code cannot be tested here (the
agent's entrypoint does not import or is missing, a replay was refused, a case could not run, the lab replayed
nothing), as ``git bisect run`` skips a commit on exit 125.

What it must never do: run a replay with less safety than ``otel-replay replay`` gives it (the same engine,
modes and approvals), or print anything on stdout but the verdict (the agent's own output goes to stderr).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from ..errors import OtelReplayError, ReplayRefused


def run_step(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict of one step (see the module's docstring for ``spec``'s keys, written by
    :func:`otel_replay.bisect.run.bisect`)."""
    from ..replay.matching.policy import ReplayPolicy

    policy = ReplayPolicy(
        bisect_id=spec["bisect_id"],
        bisect_revision=spec["revision"],
        model=spec.get("model"),
        prompts=dict(spec.get("prompts") or {}),
    )
    target = spec["target"]
    if target == "case":
        return _cases(spec, policy)
    if target == "trace":
        return _traces(spec, policy)
    return _cohort(spec)


def _reason(spec: Mapping[str, Any]) -> str:
    """The audit's reason: the one given, and always the bisect and revision."""
    step = f"bisect {spec['bisect_id']} at {spec['revision']}"
    return f"{spec['reason']} ({step})" if spec.get("reason") else step


def _said(verdict: str, why: str, replays: list[dict[str, Any]]) -> dict[str, Any]:
    return {"verdict": verdict, "why": why, "replays": replays}


def _divergence(result: Any) -> dict[str, Any] | None:
    first = result.first_divergence
    return first.to_dict() if first is not None else None


def _cases(spec: Mapping[str, Any], policy: Any) -> dict[str, Any]:
    from ..cases import load_case, run_case

    results: list[dict[str, Any]] = []
    for path in spec["cases"]:
        case = load_case(path)
        done = run_case(case, mode=spec["mode"], policy=policy, reason=_reason(spec), store_replay=True)
        results.append(
            {
                "target": str(path),
                "status": done.status,
                "passed": done.passed,
                "failures": list(done.failures),
                "error": done.error,
                "outcome": done.replay.outcome if done.replay is not None else None,
                "replay_trace_id": done.replay.replay_trace_id if done.replay is not None else None,
                "first_divergence": _divergence(done.replay) if done.replay is not None else None,
            }
        )
    if any(r["status"] == "failed" for r in results):
        failed = next(r for r in results if r["status"] == "failed")
        return _said("bad", f"case {failed['target']}: {'; '.join(failed['failures'])}", results)
    if any(r["status"] == "error" for r in results):
        error = next(r for r in results if r["status"] == "error")
        return _said("skip", f"case {error['target']} could not run: {error['error']}", results)
    return _said("good", "every case's expectations hold", results)


def _traces(spec: Mapping[str, Any], policy: Any) -> dict[str, Any]:
    from ..replay.engine import replay

    results: list[dict[str, Any]] = []
    for trace_id in spec["traces"]:
        try:
            done = replay(
                trace_id,
                mode=spec["mode"],
                policy=policy,
                reason=_reason(spec),
                actor=spec.get("actor"),
                approvals=list(spec.get("approvals") or ()),
            )
        except ReplayRefused as exc:
            results.append({"target": trace_id, "outcome": "refused", "error": str(exc)})
            return _said("skip", f"the replay of {trace_id} could not run: {exc}", results)
        results.append(
            {
                "target": trace_id,
                "outcome": done.outcome,
                "replay_trace_id": done.replay_trace_id,
                "first_divergence": _divergence(done),
                "error": done.refusal,
            }
        )
        if done.outcome == "refused":
            return _said("skip", f"the replay of {trace_id} was refused: {done.refusal}", results)
    diverged = [r for r in results if r["outcome"] != "matched"]
    if diverged:
        return _said("bad", f"the replay of {diverged[0]['target']} diverged", results)
    return _said("good", "every replay matched", results)


def _cohort(spec: Mapping[str, Any]) -> dict[str, Any]:
    from ..lab.api import lab

    cohort = dict(spec["cohort"])
    done = lab(
        **cohort,
        mode=spec["mode"],
        model=spec.get("model"),
        prompts=dict(spec.get("prompts") or {}),
        fail_if=list(spec["fail_if"]),
        workers=spec.get("workers"),
        reason=_reason(spec),
        actor=spec.get("actor"),
        approvals=list(spec.get("approvals") or ()),
        bisect_id=spec["bisect_id"],
        bisect_revision=spec["revision"],
    )
    totals = done.summary.get("totals", {}) if isinstance(done.summary, Mapping) else {}
    replays = [
        {
            "target": p.original_trace_id,
            "outcome": p.outcome,
            "replay_trace_id": p.replay_trace_id,
            "first_divergence": p.first_divergence,
        }
        for p in done.pairs
        if p.lane == "candidate"
    ][:50]
    held = [g for g in done.gates if g.held]
    if not totals.get("replays") or totals.get("replays") == totals.get("errors"):
        return _said("skip", "the lab replayed nothing it could run", replays)
    if held:
        why = "; ".join(f"{g.expression} (measured {g.value})" for g in held)
        return _said("bad", f"lab {done.lab_id}: gate held: {why}", replays)
    return _said("good", f"lab {done.lab_id}: no gate held", replays)


def main() -> int:
    """Read the step on stdin, print the verdict on stdout (exit 0), or one error line on stderr (exit 2)."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")  # the verdict's; fd 1 becomes stderr for the agent
    os.dup2(2, 1)
    try:
        spec = json.loads(sys.stdin.read())
        with contextlib.redirect_stdout(sys.stderr):
            verdict = run_step(spec)
    except (OtelReplayError, ValueError, OSError) as exc:
        verdict = {"verdict": "skip", "why": f"{type(exc).__name__}: {exc}", "replays": []}
    from ..exporting.setup import flush

    flush()  # the step's replays reach the spool before the next step (or the user) reads the store
    out.write(json.dumps(verdict, ensure_ascii=False, default=str) + "\n")
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
