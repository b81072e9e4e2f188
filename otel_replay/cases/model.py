"""What a case file is: its format version, suffix, modes and expectations, :class:`Case` and :class:`CaseResult`,
:class:`CaseError`, and the checks both writing and reading apply (names, modes, expectations, convention
versions).

It must never read or write a file, or import the replay engine.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from .. import semconv
from ..errors import OtelReplayError
from ..records import SpanRecord
from ..runs import Run, build_run

CASE_FORMAT: Final = 1
"""Version of the case file layout (the ``otel_replay_case`` key). Bumped only for incompatible changes."""

CASE_SUFFIX: Final = ".case.json"
"""File name ending that marks a case file (the pytest plugin collects these)."""

CASE_MODES: Final = ("mock", "deterministic")
"""Replay modes a case may use: the ones that call no real model or tool."""

EXPECTATIONS: Final = ("no-divergence", "output", "tools")
"""What a case can require of its replay:

* ``no-divergence``: the replay followed the recording: same calls, same arguments, same output (the
  replay's ``outcome`` is ``matched``);
* ``output``: the run's output (and whether it raised) equals the recorded one;
* ``tools``: the tool calls (names, arguments, results, order) equal the recorded ones.
"""

DEFAULT_EXPECTATIONS: Final = ("no-divergence",)

_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_.-]+")
_NAME_MAX_BYTES: Final = 200
_NAME_BAD_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SHOWN_PATH_CHARS: Final = 160
ENTRYPOINT: Final = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*:[^\W\d]\w*(?:\.[^\W\d]\w*)*")


class CaseError(OtelReplayError):
    """A case file cannot be written, read or run as asked."""


@dataclass(frozen=True, kw_only=True)
class Case:
    """One regression case, as read from its file."""

    name: str
    entrypoint: str
    mode: str
    expect: tuple[str, ...]
    convention: str
    trace_id: str
    """Trace id of the recorded run (the spans in the file keep their ids)."""
    spans: tuple[SpanRecord, ...]
    path: Path | None = None

    def run(self) -> Run:
        """The recorded run, rebuilt from the case's spans, calling the case's entrypoint."""
        return replace(build_run(self.spans, trace_id=self.trace_id), entrypoint=self.entrypoint)


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    """What running one case found."""

    name: str
    path: Path | None
    status: str
    """``passed``, ``failed`` (a requirement did not hold) or ``error`` (the case could not run)."""
    mode: str | None = None
    expect: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    """One line per requirement that did not hold."""
    error: str | None = None
    cannot_test: bool = False
    """An ``error`` because the agent's code cannot be run as it stands (its entrypoint does not import or is
    missing): ``case run`` exits 125 for it, the code ``git bisect run`` skips a commit with."""
    replay: Any = None
    """The :class:`~otel_replay.replay.engine.ReplayResult`, when the replay ran."""

    @property
    def passed(self) -> bool:
        """True when every requirement held."""
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the items of ``otel-replay case run --json``)."""
        replayed = self.replay
        first = replayed.first_divergence if replayed is not None else None
        return {
            "name": self.name,
            "path": str(self.path) if self.path is not None else None,
            "status": self.status,
            "passed": self.passed,
            "mode": self.mode,
            "expect": list(self.expect),
            "failures": list(self.failures),
            "error": self.error,
            "cannot_test": self.cannot_test,
            "outcome": replayed.outcome if replayed is not None else None,
            "first_divergence": first.to_dict() if first is not None else None,
            "divergences": [d.to_dict() for d in replayed.divergences] if replayed is not None else [],
            "diff": replayed.diff.to_json() if replayed is not None and replayed.diff else {},
            "replay_trace_id": replayed.replay_trace_id if replayed is not None else None,
            "notes": list(replayed.notes) if replayed is not None else [],
            "sandbox": getattr(replayed, "sandbox", None) if replayed is not None else None,
        }


# ------------------------------------------------------------------------------------------------ write


def checked_expectations(expect: Iterable[str]) -> tuple[str, ...]:
    chosen: list[str] = []
    for item in expect:
        if item not in EXPECTATIONS:
            raise CaseError(f"unknown expectation {item!r}: use {', '.join(EXPECTATIONS)}")
        if item not in chosen:
            chosen.append(item)
    return tuple(sorted(chosen, key=EXPECTATIONS.index)) or DEFAULT_EXPECTATIONS


def checked_mode(mode: str) -> str:
    if mode not in CASE_MODES:
        raise CaseError(
            f"mode {mode!r} cannot be used for a case: use {' or '.join(CASE_MODES)} "
            "(a case never calls real models or tools)"
        )
    return mode


def default_case_name(run: Run) -> str:
    """``<agent>-<first 12 hex digits of the trace id>``, safe as a file name."""
    agent = _NAME_CHARS.sub("-", run.agent).strip("-.")[:64].strip("-.") or "run"
    return f"{agent}-{run.trace_id[:12]}"


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a case, or None. A name is one line of visible text without a path separator,
    at most 200 UTF-8 bytes, so that ``<name>.case.json`` is always a file name in one folder and a name
    printed in a report is what it seems."""
    if not isinstance(name, str) or not name.strip():
        return "must be a non-empty string"
    if "/" in name or "\\" in name:
        return "must not hold a path separator ('/' or '\\'): it names the case, not where its file goes"
    bad = next((c for c in name if unicodedata.category(c) in _NAME_BAD_CATEGORIES), None)
    if bad is not None:
        return f"must not hold control or invisible characters (found {bad!a})"
    if len(name.encode("utf-8")) > _NAME_MAX_BYTES:
        return f"is longer than {_NAME_MAX_BYTES} bytes"
    return None


def shown(path: str | os.PathLike[str] | None) -> str:
    """A path as messages show it: whole up to a length, else its start and end."""
    text = str(path) if path is not None else "case"
    if len(text) <= _SHOWN_PATH_CHARS:
        return text
    return text[: _SHOWN_PATH_CHARS // 2] + "…" + text[-_SHOWN_PATH_CHARS // 4 :]


def _schema_major(version: str) -> int | None:
    try:
        return semconv.schema_major(version)
    except ValueError:  # digits int() does not read (such as '²'), or more of them than it reads
        return None


# ------------------------------------------------------------------------------------------------- read


def version_problem(what: str, version: Any, current: str) -> str | None:
    if version is None:
        return f"{what} names no convention version; export the case again with `otel-replay case export`"
    if not isinstance(version, str):
        return (
            f"{what} names its convention version as a {type(version).__name__} ({str(version)[:40]}), not a "
            f"string such as {current!r}; export the case again with `otel-replay case export`"
        )
    major = _schema_major(version)
    if major in semconv.READABLE_MAJORS:
        return None
    if major is not None and major > max(semconv.READABLE_MAJORS):
        return (
            f"{what} was recorded with convention {version}, newer than this otel-replay reads "
            f"({current}): upgrade otel-replay to run it"
        )
    return (
        f"{what} was recorded with convention {version!r}, which this otel-replay ({current}) cannot read; "
        "re-record the run and export it again with `otel-replay case export`"
    )
