"""One case run against the current code: its recorded run replayed in mock or deterministic mode with
nothing exported, the expectations checked (:func:`run_case`), and a failure described in one line.

It must never read or write a store while running a case.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from ..errorlines import error_line
from ..errors import AgentCodeUnavailable, OtelReplayError
from .model import Case, CaseResult, checked_mode


def _failures(expect: Sequence[str], result: Any) -> list[str]:
    failures: list[str] = []
    first = result.first_divergence
    sections = result.diff.sections if result.diff is not None and result.replay is not None else None
    for item in expect:
        if item == "no-divergence" and result.outcome != "matched":
            detail = first.reason if first is not None else (result.refusal or result.outcome)
            at = f" at step {first.step_index}" if first is not None and first.step_index is not None else ""
            failures.append(f"no-divergence: the replay {result.outcome}{at}: {detail}")
        elif item in ("output", "tools"):
            if sections is None:
                failures.append(f"{item}: the replay did not complete, nothing to compare")
            elif sections[item].changed:
                failures.append(f"{item}: {sections[item].summary}")
    return failures


def run_case(
    case: Case,
    *,
    mode: str | None = None,
    entrypoint: str | None = None,
    allow_side_effects: bool = False,
    root: str | os.PathLike[str] | None = None,
    allow_paths: Sequence[str] = (),
    allow_addresses: Sequence[str] = (),
    policy: Any = None,
    reason: str | None = None,
    store_replay: bool = False,
) -> CaseResult:
    """Replay one case against the code importable now and check its expectations.

    The case's own entrypoint is data from the file: it runs only when it is the project's code (under
    ``root``, default the working directory, or listed in ``OTEL_REPLAY_TRUSTED_MODULES``; see
    :mod:`otel_replay.replay.safety.trust`). ``entrypoint`` (``--app``) is the user's choice instead.

    Nothing is read from or written to a store: the replay's spans go nowhere but this process. The case's
    code runs under the side-effect guard; a side effect it blocked fails the case whatever it expects, unless
    ``allow_side_effects`` turned the guard off. ``policy`` (a
    :class:`~otel_replay.replay.matching.policy.ReplayPolicy`, as ``otel-replay bisect`` gives one) and
    ``reason`` are passed to the replay; ``store_replay`` sends the replay's spans where this process exports
    (a bisect stores its steps' replays). Never raises for a case that cannot run; that is a result with status
    ``error`` and one error line (with ``OTEL_REPLAY_DEBUG`` set, an error otel-replay did not
    expect is raised instead, to show its traceback).
    """
    from ..exporting import setup
    from ..replay.engine import replay_run
    from ..replay.safety.guard import DIVERGENCE_KIND
    from ..replay.safety.trust import project_root

    use_mode = mode or case.mode
    try:
        use_mode = checked_mode(use_mode)
        # The case's entrypoint goes to the engine as recorded data (the entrypoint rule applies to it);
        # only --app is the user's own choice.
        exporting = contextlib.nullcontext() if store_replay else setup.exporting_to("none")
        with project_root(root), exporting:
            result = replay_run(
                case.run(),
                mode=use_mode,
                entrypoint=entrypoint,
                reason=reason or f"regression case {case.name}",
                policy=policy,
                allow_side_effects=allow_side_effects,
                allow_paths=allow_paths,
                allow_addresses=allow_addresses,
            )
    except OtelReplayError as exc:  # ReplayRefused, CaseError, a trace that holds no run …
        return CaseResult(
            name=case.name,
            path=case.path,
            mode=use_mode,
            expect=case.expect,
            status="error",
            error=str(exc),
            cannot_test=isinstance(exc, AgentCodeUnavailable),
        )
    except Exception as exc:  # one case that cannot run must not stop the others
        if os.environ.get("OTEL_REPLAY_DEBUG"):
            raise  # the traceback the error line tells people to ask for
        return CaseResult(
            name=case.name, path=case.path, mode=use_mode, expect=case.expect, status="error", error=error_line(exc)
        )
    failures = _failures(case.expect, result)
    failures += [f"no side effects: {d.reason}" for d in result.divergences if d.kind == DIVERGENCE_KIND]
    return CaseResult(
        name=case.name,
        path=case.path,
        mode=use_mode,
        expect=case.expect,
        status="failed" if failures else "passed",
        failures=tuple(failures),
        replay=result,
    )


def describe_failure(result: CaseResult) -> str:
    """Several lines for people: the case, what did not hold, the first divergence and the changed diff
    sections."""
    lines = [f"case {result.name} ({result.path or 'in memory'}) {result.status}"]
    if result.error:
        lines.append(f"  error: {result.error}")
    for failure in result.failures:
        lines.append(f"  expected {failure}")
    replayed = result.replay
    if replayed is not None:
        first = replayed.first_divergence
        if first is not None:
            at = f"step {first.step_index}" if first.step_index is not None else "run"
            lines.append(f"  first divergence at {at} ({first.kind}): {first.reason}")
            if first.expected is not None or first.actual is not None:
                lines.append(f"    recorded: {first.expected}")
                lines.append(f"    replayed: {first.actual}")
        if replayed.diff is not None:
            for name, section in replayed.diff.sections.items():
                if section.changed:
                    lines.append(f"  diff {name}: {section.summary}")
    return "\n".join(lines)
