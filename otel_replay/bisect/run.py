"""``otel_replay.bisect``: find the commit, prompt version or model that first breaks a recorded run, by replaying
it at each revision the search picks.

Why it exists: when a case starts failing or the lab gates a change, the next question is which change did it.
This drives :func:`~otel_replay.bisect.search.search` over the revisions of :mod:`otel_replay.bisect.revisions`,
running each step in a child process (:mod:`otel_replay.bisect.step`) at that revision: a commit checked out
into a temporary ``git worktree`` (the child's working directory, first on its import path), or the user's code
as it is with a prompt file's text or a model as the replay's override. Each step's replays are replays like
any other (stored, audited, with ``otel_replay.replay.bisect_id`` and ``bisect_revision`` on their roots); the
bisect writes no span of its own.

What it must never do: touch the user's working tree, index, stash or branch; leave a worktree behind (they are
removed on success, on error and on SIGINT); test a revision twice; or give a replay less safety than ``replay``
does (offline modes unless the caller gave a reason for a live one).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from .revisions import (
    BisectInputError,
    Revision,
    Worktrees,
    commits_between,
    describe,
    model_versions,
    prompt_versions,
    read_prompt,
    repository_root,
    resolve,
)
from .search import GOOD_REVISION, Verdict, search

Target = Literal["case", "trace", "cohort"]
OFFLINE_MODES: Final = ("deterministic", "mock")
STEP_TIMEOUT_S: Final = 3600
"""Longest one step may take before it is killed and skipped (a hung agent, not a slow one)."""


@dataclass
class Step:
    """One revision tried."""

    index: int
    """Its index among the candidates (-1: the good revision)."""
    revision: Revision
    verdict: Verdict
    why: str
    replays: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "revision": self.revision.to_dict(),
            "verdict": self.verdict,
            "why": self.why,
            "replays": self.replays,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class BisectResult:
    """What a bisect found (``otel-replay bisect --json``, see ``docs/bisect.schema.json``)."""

    bisect_id: str
    axis: str
    """``git``, ``prompt`` or ``model``."""
    target: str
    targets: list[str]
    mode: str
    good: Revision
    bad: Revision
    candidates: int
    steps: list[Step]
    first_bad: Revision | None = None
    last_good: Revision | None = None
    found: bool = False
    ambiguous: list[Revision] = field(default_factory=list)
    problem: str | None = None
    """``bad_not_bad`` / ``good_not_good``: the answer the revisions given did not allow (exit 1)."""
    message: str = ""
    interrupted: bool = False
    history: list[Revision] = field(default_factory=list)
    """The good revision, then every candidate, oldest first."""

    @property
    def replays(self) -> int:
        return len(self.steps)

    @property
    def skipped(self) -> list[Step]:
        return [s for s in self.steps if s.verdict == "skip"]

    @property
    def boundary(self) -> Step | None:
        """The step that tested the first bad revision."""
        return next((s for s in self.steps if self.first_bad is not None and s.revision == self.first_bad), None)

    def to_dict(self) -> dict[str, Any]:
        boundary = self.boundary
        first = _first_divergence(boundary)
        return {
            "schema_version": "1",
            "bisect_id": self.bisect_id,
            "axis": self.axis,
            "target": self.target,
            "targets": list(self.targets),
            "mode": self.mode,
            "good": self.good.to_dict(),
            "bad": self.bad.to_dict(),
            "candidates": self.candidates,
            "found": self.found,
            "first_bad": self.first_bad.to_dict() if self.first_bad else None,
            "last_good": self.last_good.to_dict() if self.last_good else None,
            "first_divergence": first,
            "why": boundary.why if boundary else None,
            "ambiguous": [r.to_dict() for r in self.ambiguous],
            "skipped": [s.revision.to_dict() for s in self.skipped],
            "problem": self.problem,
            "message": self.message,
            "replays": self.replays,
            "interrupted": self.interrupted,
            "steps": [s.to_dict() for s in self.steps],
            "history": [r.to_dict() for r in self.history],
        }


def _first_divergence(step: Step | None) -> dict[str, Any] | None:
    """The first divergence of the first replay at ``step`` that has one (its step, kind and diff)."""
    for replay in step.replays if step else ():
        first = replay.get("first_divergence")
        if isinstance(first, dict):
            return {"target": replay.get("target"), **first}
    return None


class _Interrupted(Exception):
    pass


def bisect(
    *,
    good: str | None = None,
    bad: str | None = None,
    cases: Sequence[str | os.PathLike[str]] = (),
    traces: Sequence[str] = (),
    cohort: Mapping[str, Any] | None = None,
    mode: str = "deterministic",
    fail_if: Sequence[str] = (),
    repo: str | os.PathLike[str] | None = None,
    prompt_file: tuple[str, str | os.PathLike[str]] | None = None,
    models: Sequence[str] | str | None = None,
    reason: str | None = None,
    actor: str | None = None,
    approvals: Sequence[str] = (),
    workers: int | None = None,
    progress: Callable[[Step], None] | None = None,
) -> BisectResult:
    """Find the first revision at which the replays of ``cases``, ``traces`` or a ``cohort`` (lab filters: agent,
    status, since, until, tags, limit, sample, seed) go from passing to failing.

    Over commits: ``good`` and ``bad`` revisions of the git repository holding ``repo`` (default: the working
    directory). Over prompt versions: ``prompt_file=(ROLE, FOLDER)``, the files of FOLDER ordered by name (the
    first taken as good, the last as bad) replacing the ROLE message of every model call. Over models:
    ``models`` (``A,B,C`` or a list, oldest first) as every model call's model. A prompt or model bisect calls
    the models for real (``whatif``, ``reason`` needed) and replays traces or a cohort.

    Raises :class:`~otel_replay.bisect.revisions.BisectInputError` (or
    :class:`~otel_replay.errors.ReplayRefused`) with one line for bad input, before any step runs."""
    targets, target = _targets(cases, traces, cohort)
    axis = "git" if prompt_file is None and models is None else "prompt" if prompt_file is not None else "model"
    if sum(x is not None for x in (prompt_file, models)) + (good is not None or bad is not None) > 1:
        raise BisectInputError("bisect one thing: commits (--good/--bad), a prompt folder or models")
    mode = _checked_mode(axis, target, mode, reason)
    where = Path(repo) if repo is not None else Path.cwd()
    walk = _walk(axis, where, good=good, bad=bad, prompt_file=prompt_file, models=models)
    bisect_id = uuid.uuid4().hex
    base = {
        "target": target,
        "cases": [str(Path(c).resolve()) for c in cases],
        "traces": targets if target == "trace" else [],
        "cohort": dict(cohort or {}),
        "mode": mode,
        "fail_if": list(fail_if) or ["diverged > 0"],
        "bisect_id": bisect_id,
        "reason": reason,
        "actor": actor,
        "approvals": list(approvals),
        "workers": workers,
    }
    result = BisectResult(
        bisect_id=bisect_id,
        axis=axis,
        target=target,
        targets=targets,
        mode=mode,
        good=walk.good,
        bad=walk.candidates[-1],
        candidates=len(walk.candidates),
        steps=[],
        history=[walk.good, *walk.candidates],
    )

    def test(index: int) -> Verdict:
        revision = walk.good if index == GOOD_REVISION else walk.candidates[index]
        started = time.monotonic()
        folder, extra, cleanup = walk.prepare(revision)
        try:
            said = _run_step(folder, {**base, **extra, "revision": revision.id})
        finally:
            cleanup()
        step = Step(index, revision, said["verdict"], said["why"], said.get("replays") or [])
        step.seconds = time.monotonic() - started
        result.steps.append(step)
        if progress is not None:
            progress(step)
        return step.verdict

    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    try:
        if main:
            signal.signal(signal.SIGINT, _raise_interrupted)
        outcome = search(len(walk.candidates), test)
    except _Interrupted:
        result.interrupted = True
        result.message = "interrupted (Ctrl-C): the steps so far are reported, no answer"
        return result
    finally:
        if main:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop the cleanup
        try:
            walk.close()
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
    _conclude(result, outcome, walk.good, walk.candidates)
    return result


def _checked_mode(axis: str, target: str, mode: str, reason: str | None) -> str:
    """The replays' mode: as given for commits (offline, or live with a reason); ``whatif`` for a prompt or model
    bisect (the models must answer the changed requests)."""
    if axis != "git":
        if target == "case":
            raise BisectInputError(
                "a prompt or model bisect calls the models for real, which a case never does: use --trace or --cohort"
            )
        if mode not in ("deterministic", "whatif"):
            raise BisectInputError(
                f"a {axis} bisect calls the models for real and answers the tools from the recording (whatif): "
                f"--mode {mode} cannot be used for it"
            )
        mode = "whatif"
    elif mode not in (*OFFLINE_MODES, "live"):
        raise BisectInputError(f"--mode {mode!r}: use deterministic or mock (live with --reason)")
    if mode in ("whatif", "live") and not reason:
        raise BisectInputError(
            f"a {'live' if mode == 'live' else axis} bisect makes real calls: give a reason (--reason TEXT)"
        )
    if target == "case" and mode not in OFFLINE_MODES:
        raise BisectInputError("a case never calls real models or tools: use --mode deterministic or mock")
    return mode


Prepare = Callable[[Revision], tuple[Path, dict[str, Any], Callable[[], None]]]
"""A revision made ready for its step: the step's folder, what the step spec gets, and what undoes it."""


@dataclass
class _Walk:
    """The revisions a bisect walks and how each is made ready for its step."""

    good: Revision
    candidates: list[Revision]
    prepare: Prepare
    close: Callable[[], None] = lambda: None


def _walk(
    axis: str,
    where: Path,
    *,
    good: str | None,
    bad: str | None,
    prompt_file: tuple[str, str | os.PathLike[str]] | None,
    models: Sequence[str] | str | None,
) -> _Walk:
    if axis == "prompt":
        assert prompt_file is not None
        role, folder_name = prompt_file
        folder = Path(folder_name)
        versions = prompt_versions(folder)
        return _Walk(
            versions[0], versions[1:], lambda r: (where, {"prompts": {role: read_prompt(folder, r.id)}}, _nothing)
        )
    if axis == "model":
        versions = model_versions(models if isinstance(models, str) else ",".join(models or ()))
        return _Walk(versions[0], versions[1:], lambda r: (where, {"model": r.id}, _nothing))
    if good is None or bad is None:
        raise BisectInputError("give --good REV and --bad REV (or --prompt-file NAME=DIR, or --model A,B,C)")
    root = repository_root(where)
    good_hash, bad_hash = resolve(root, good), resolve(root, bad)
    candidates = commits_between(root, good_hash, bad_hash)
    good_revision = describe(root, good_hash)
    here = Path.cwd().resolve()
    inside = here.relative_to(root) if _under(here, root) else Path()  # the same subfolder in each worktree
    trees = Worktrees(root)

    def prepare(revision: Revision) -> tuple[Path, dict[str, Any], Callable[[], None]]:
        tree = trees.add(revision.id)
        return tree / inside, {}, lambda: trees.remove(tree)

    return _Walk(good_revision, candidates, prepare, trees.close)


def _nothing() -> None:
    pass


def _raise_interrupted(*_: Any) -> None:
    raise _Interrupted


def _under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _targets(
    cases: Sequence[str | os.PathLike[str]], traces: Sequence[str], cohort: Mapping[str, Any] | None
) -> tuple[list[str], Target]:
    given = [bool(cases), bool(traces), cohort is not None]
    if sum(given) != 1:
        raise BisectInputError("give one of --case PATH, --trace TRACE_ID or --cohort FILTERS")
    if cases:
        missing = [str(c) for c in cases if not Path(c).is_file()]
        if missing:
            raise BisectInputError(f"--case {missing[0]} is not a file")
        return [str(c) for c in cases], "case"
    if traces:
        from ..records import parse_trace_id

        return [parse_trace_id(t) for t in traces], "trace"
    return [f"{k}={v}" for k, v in sorted((cohort or {}).items())], "cohort"


def _run_step(folder: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Run one step in a child process in ``folder`` (first on its import path); its verdict."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), env.get("PYTHONPATH", "")) if p)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "otel_replay.bisect.step"],
            input=json.dumps(spec),
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {"verdict": "skip", "why": f"the step took over {STEP_TIMEOUT_S} s and was stopped", "replays": []}
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    try:
        said = json.loads(lines[-1]) if lines else None
    except ValueError:
        said = None
    if not isinstance(said, dict) or said.get("verdict") not in ("good", "bad", "skip"):
        tail = " ".join(done.stderr.split())[-300:] or f"exit {done.returncode}"
        return {"verdict": "skip", "why": f"the step gave no verdict: {tail}", "replays": []}
    return said


def _conclude(result: BisectResult, outcome: Any, good: Revision, candidates: list[Revision]) -> None:
    def at(index: int) -> Revision:
        return good if index == GOOD_REVISION else candidates[index]

    if outcome.problem == "bad_not_bad":
        result.problem = outcome.problem
        result.message = f"the bad revision {result.bad.label} is not bad: its replays pass"
        return
    if outcome.problem == "good_not_good":
        result.problem = outcome.problem
        result.message = f"the good revision {good.label} is not good: its replays fail"
        return
    result.first_bad = at(outcome.first_bad)
    result.last_good = at(outcome.last_good) if outcome.last_good is not None else None
    result.ambiguous = [at(i) for i in outcome.ambiguous]
    result.found = True
    if result.ambiguous:
        names = ", ".join(r.label for r in result.ambiguous)
        result.message = f"skipped revisions leave it open: the first bad one is one of {names}"
    else:
        result.message = f"the first bad revision is {result.first_bad.label}"
