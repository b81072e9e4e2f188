"""Regression cases: a recorded run frozen into one file that replays against the current code, anywhere.

A case file (``*.case.json``) holds the run's trace as OTLP JSON, the entrypoint to call, the replay mode and
what must hold. Running it needs no store and no server: the trace is rebuilt in memory, the entrypoint runs
under a mock or deterministic replay (every model, tool and retrieval call answered from the trace), and the
replay's own spans are read back from this process. The layout is in ``docs/cases.md``.

Files are written with sorted keys and two-space indent, so the same run always gives the same bytes and a
change to a case reads as a small diff in review.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from . import semconv
from .errorlines import error_line
from .errors import OtelReplayError
from .otlp_json import OtlpJsonError, from_otlp_json, to_otlp_json
from .records import EventRecord, SpanRecord
from .runs import Run, build_run
from .snapshots import sha256_hex

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
_ENTRYPOINT: Final = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*:[^\W\d]\w*(?:\.[^\W\d]\w*)*")


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
            "outcome": replayed.outcome if replayed is not None else None,
            "first_divergence": first.to_dict() if first is not None else None,
            "divergences": [d.to_dict() for d in replayed.divergences] if replayed is not None else [],
            "diff": replayed.diff.to_json() if replayed is not None and replayed.diff else {},
            "replay_trace_id": replayed.replay_trace_id if replayed is not None else None,
            "notes": list(replayed.notes) if replayed is not None else [],
        }


# ------------------------------------------------------------------------------------------------ write


def _checked_expectations(expect: Iterable[str]) -> tuple[str, ...]:
    chosen: list[str] = []
    for item in expect:
        if item not in EXPECTATIONS:
            raise CaseError(f"unknown expectation {item!r}: use {', '.join(EXPECTATIONS)}")
        if item not in chosen:
            chosen.append(item)
    return tuple(sorted(chosen, key=EXPECTATIONS.index)) or DEFAULT_EXPECTATIONS


def _checked_mode(mode: str) -> str:
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


def _name_problem(name: Any) -> str | None:
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


def _shown(path: str | os.PathLike[str] | None) -> str:
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


def _scrub_spans(spans: Sequence[SpanRecord], redactor: Any) -> tuple[list[SpanRecord], int]:
    """A second redaction pass over every recorded string, for traces that reached the store without
    otel-replay's own redaction (other instrumentations' spans): shape-matching secrets are replaced inline.
    A snapshot whose text changes is rejoined into one chunk with a new sha256, so it stays intact."""
    total = 0

    def scrub(text: str, scope: str) -> str:
        nonlocal total
        clean: str
        hits: int
        clean, hits = redactor.scrub_text(text, scope)
        total += hits
        return clean

    def scrub_map(mapping: dict[str, str], scope: str) -> dict[str, str]:
        return {k: scrub(v, scope) for k, v in mapping.items()}

    out: list[SpanRecord] = []
    for span in spans:
        events: list[EventRecord] = []
        # snapshot chunks are scrubbed joined (a secret may straddle two chunks), in the group's first slot
        groups: dict[tuple[str, str], tuple[int, list[EventRecord]]] = {}
        for event in span.events:
            if event.name.startswith(semconv.SNAPSHOT_EVENT_PREFIX) and semconv.SNAPSHOT_PAYLOAD in event.attributes:
                key = (event.name, event.attributes.get(semconv.SNAPSHOT_SEQ, ""))
                if key not in groups:
                    groups[key] = (len(events), [])
                    events.append(event)
                groups[key][1].append(event)
                continue
            events.append(replace(event, attributes=scrub_map(event.attributes, "export")))
        for position, chunks in sorted(groups.values(), key=lambda g: -g[0]):  # back to front: slots stay put
            ordered = sorted(chunks, key=lambda e: int(e.attributes.get(semconv.SNAPSHOT_CHUNK_INDEX, "0") or 0))
            text = "".join(e.attributes[semconv.SNAPSHOT_PAYLOAD] for e in ordered)
            before = total
            clean = scrub(text, "export")
            if total == before:
                events[position : position + 1] = [
                    replace(
                        e,
                        attributes={
                            k: v if k == semconv.SNAPSHOT_PAYLOAD else scrub(v, "export")
                            for k, v in e.attributes.items()
                        },
                    )
                    for e in ordered
                ]
                continue
            attributes = {
                k: v
                for k, v in ordered[0].attributes.items()
                if k not in (semconv.SNAPSHOT_CHUNK_INDEX, semconv.SNAPSHOT_CHUNK_COUNT)
            }
            redactions = int(attributes.get(semconv.SNAPSHOT_REDACTIONS, "0") or 0) + total - before
            attributes.update(
                {
                    semconv.SNAPSHOT_PAYLOAD: clean,
                    semconv.SNAPSHOT_SHA256: sha256_hex(clean),
                    semconv.SNAPSHOT_REDACTIONS: str(redactions),
                }
            )
            events[position] = replace(ordered[0], attributes=attributes)
        out.append(
            replace(
                span,
                span_attributes=scrub_map(span.span_attributes, "export"),
                resource_attributes=scrub_map(span.resource_attributes, "export"),
                status_message=scrub(span.status_message, "export"),
                events=tuple(events),
                links=tuple(replace(link, attributes=scrub_map(link.attributes, "export")) for link in span.links),
            )
        )
    return out, total


def case_document(
    run: Run,
    *,
    expect: Iterable[str] = (),
    mode: str = "mock",
    name: str | None = None,
    entrypoint: str | None = None,
    redactor: Any = None,
) -> dict[str, Any]:
    """The case file content for a recorded run (see ``docs/cases.md``).

    ``entrypoint`` replaces the recorded one (needed when the run was started as a script). Raises
    :class:`CaseError` when the run cannot be replayed in ``mode`` (what is missing is named).
    """
    from .replay.engine import readiness

    mode = _checked_mode(mode)
    expectations = _checked_expectations(expect)
    case_name = name or default_case_name(run)
    problem = _name_problem(case_name)
    if problem:
        raise CaseError(f"case name {case_name[:80]!r} {problem}: pass --name with letters, digits, '-', '_' or '.'")
    entry = entrypoint or run.entrypoint or ""
    if not entry or ":" not in entry:
        raise CaseError(f"run {run.trace_id} records no entrypoint: pass --app module:function")
    if entry.startswith("__main__:"):
        raise CaseError(
            f"run {run.trace_id} was started as a script ({entry}); a case must name an importable "
            "function: pass --app module:function"
        )
    if not _ENTRYPOINT.fullmatch(entry):
        raise CaseError(
            f"entrypoint {entry[:120]!r} is not module:function (dotted Python names): pass --app module:function"
        )
    missing = [m for m in readiness(run)["modes"][mode]["missing"] if not m.startswith("no entrypoint")]
    if missing:
        raise CaseError(f"run {run.trace_id} cannot be replayed in {mode} mode: {'; '.join(missing)}")
    spans = list(run.spans)
    redactions = 0
    if redactor is not None:
        spans, redactions = _scrub_spans(spans, redactor)
    return {
        "otel_replay_case": CASE_FORMAT,
        "name": case_name,
        "agent": run.agent,
        "entrypoint": entry,
        "mode": mode,
        "expect": list(expectations),
        "convention": run.schema_version or semconv.SCHEMA_VERSION,
        "source": {
            "trace_id": run.trace_id,
            "run_id": run.run_id,
            "kind": run.summary.kind,
            "redactions_at_export": redactions,
        },
        "trace": to_otlp_json(spans),
    }


def dumps_case(document: dict[str, Any]) -> str:
    """The file text of a case: sorted keys, two-space indent, UTF-8, a final newline."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_case(document: dict[str, Any], path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write a case file atomically, creating its missing folders; an existing file is replaced only with
    ``force``."""
    target = Path(path)
    if target.exists() and not force:
        raise CaseError(f"{target} exists: pass --force to replace it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CaseError(
            f"cannot write {target}: cannot create folder {target.parent} ({(exc.strerror or 'error').lower()})"
        ) from None
    if not target.parent.is_dir():
        raise CaseError(f"cannot write {target}: {target.parent} is not a folder")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(dumps_case(document))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


# ------------------------------------------------------------------------------------------------- read


def _version_problem(what: str, version: Any, current: str) -> str | None:
    if version is None:
        return f"{what} names no convention version; export the case again with `otel-replay case export`"
    if not isinstance(version, str):
        return (
            f"{what} names its convention version as a {type(version).__name__} ({str(version)[:40]}), not a "
            f"string such as {current!r}; export the case again with `otel-replay case export`"
        )
    major = _schema_major(version)
    if major == semconv.SCHEMA_MAJOR:
        return None
    if major is not None and major > semconv.SCHEMA_MAJOR:
        return (
            f"{what} was recorded with convention {version}, newer than this otel-replay reads "
            f"({current}): upgrade otel-replay to run it"
        )
    return (
        f"{what} was recorded with convention {version!r}, which this otel-replay ({current}) cannot read; "
        "re-record the run and export it again with `otel-replay case export`"
    )


def load_case(path: str | os.PathLike[str]) -> Case:
    """Read and check a case file (:class:`CaseError` with the file's name and what is wrong)."""
    file = Path(path)
    try:
        if not file.is_file():
            raise CaseError(f"{_shown(file)}: no such case file")
        document = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, OSError):
            reason = exc.strerror or error_line(exc)
        elif isinstance(exc, UnicodeDecodeError):
            reason = f"not UTF-8 text: byte {exc.start} cannot be decoded"
        else:  # what the JSON decoder found, and where
            reason = str(exc)
        raise CaseError(f"{_shown(file)}: not a readable JSON case file ({_shown(reason)})") from None
    except RecursionError:
        raise CaseError(f"{_shown(file)}: not a readable JSON case file (nested too deeply)") from None
    return parse_case(document, path=file)


def parse_case(document: Any, *, path: Path | None = None) -> Case:
    """A :class:`Case` from a decoded case file."""
    where = _shown(path)
    if not isinstance(document, dict) or "otel_replay_case" not in document:
        raise CaseError(f"{where}: not an otel-replay case file (no otel_replay_case key)")
    version = document["otel_replay_case"]
    if type(version) is not int or version != CASE_FORMAT:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > CASE_FORMAT
        raise CaseError(
            f"{where}: case format {version!r} "
            + (
                f"is newer than this otel-replay reads ({CASE_FORMAT}): upgrade otel-replay"
                if newer
                else f"is not one this otel-replay reads ({CASE_FORMAT}): export the case again"
            )
        )
    problem = _version_problem(where, document.get("convention"), semconv.SCHEMA_VERSION)
    if problem:
        raise CaseError(problem)
    fields: dict[str, str] = {}
    for key in ("name", "entrypoint", "mode"):
        value = document.get(key)
        if not isinstance(value, str) or not value:
            raise CaseError(f"{where}: {key} must be a non-empty string")
        fields[key] = value
    problem = _name_problem(fields["name"])
    if problem:
        raise CaseError(f"{where}: name {fields['name'][:80]!r} {problem}")
    entry = fields["entrypoint"]
    if not _ENTRYPOINT.fullmatch(entry) or entry.startswith("__main__:"):
        raise CaseError(
            f"{where}: entrypoint {entry[:120]!r} is not module:function naming an importable "
            "function (dotted Python names, not a script or a path)"
        )
    expect = document.get("expect", list(DEFAULT_EXPECTATIONS))
    if not isinstance(expect, list) or not all(isinstance(e, str) for e in expect):
        raise CaseError(f"{where}: expect must be a list of {', '.join(EXPECTATIONS)}")
    try:
        mode = _checked_mode(fields["mode"])
        expectations = _checked_expectations(expect)
    except CaseError as exc:
        raise CaseError(f"{where}: {exc}") from None
    try:
        spans = from_otlp_json(document.get("trace"))
    except OtlpJsonError as exc:
        raise CaseError(f"{where}: trace: {exc}") from None
    trace_ids = {s.trace_id for s in spans}
    source = document.get("source")
    named = source.get("trace_id") if isinstance(source, dict) else None
    trace_id = named if isinstance(named, str) and named in trace_ids else None
    if trace_id is None:
        if len(trace_ids) != 1:
            raise CaseError(f"{where}: trace must hold exactly one trace, found {len(trace_ids)}")
        (trace_id,) = trace_ids
    recorded = {v for s in spans if (v := s.span_attributes.get(semconv.SCHEMA_VERSION_ATTR)) is not None}
    for version in sorted(recorded):
        problem = _version_problem(f"{where}: a span", version, semconv.SCHEMA_VERSION)
        if problem:
            raise CaseError(problem)
    return Case(
        name=fields["name"],
        entrypoint=fields["entrypoint"],
        mode=mode,
        expect=expectations,
        convention=document["convention"],
        trace_id=trace_id,
        spans=tuple(spans),
        path=path,
    )


def find_cases(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Case files named by ``paths``: files as given, folders searched for ``*.case.json`` (sorted)."""
    found: list[Path] = []
    for item in paths:
        path = Path(item)
        try:
            if path.is_dir():
                found.extend(sorted(p for p in path.rglob(f"*{CASE_SUFFIX}") if p.is_file()))
            elif path.exists():
                found.append(path)
            else:
                raise CaseError(f"{_shown(path)}: no such file or folder")
        except OSError as exc:
            raise CaseError(f"{_shown(path)}: cannot be read ({exc.strerror or error_line(exc)})") from None
    unique: dict[Path, None] = {}
    for path in found:
        unique.setdefault(path, None)
    return list(unique)


# -------------------------------------------------------------------------------------------------- run


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
) -> CaseResult:
    """Replay one case against the code importable now and check its expectations.

    The case's own entrypoint is data from the file: it runs only when it is the project's code (under
    ``root``, default the working directory, or listed in ``OTEL_REPLAY_TRUSTED_MODULES``; see
    :mod:`otel_replay.replay.trust`). ``entrypoint`` (``--app``) is the user's choice instead.

    Nothing is read from or written to a store: the replay's spans go nowhere but this process. The case's
    code runs under the side-effect guard; a side effect it blocked fails the case whatever it expects, unless
    ``allow_side_effects`` turned the guard off. Never raises for a case that cannot run; that is a result
    with status ``error`` and one error line (with ``OTEL_REPLAY_DEBUG`` set, an error otel-replay did not
    expect is raised instead, to show its traceback).
    """
    from .exporting import setup
    from .replay.engine import replay_run
    from .replay.guard import DIVERGENCE_KIND
    from .replay.trust import project_root

    use_mode = mode or case.mode
    try:
        use_mode = _checked_mode(use_mode)
        # The case's entrypoint goes to the engine as recorded data (the entrypoint rule applies to it);
        # only --app is the user's own choice.
        with project_root(root), setup.exporting_to("none"):
            result = replay_run(
                case.run(),
                mode=use_mode,
                entrypoint=entrypoint,
                reason=f"regression case {case.name}",
                allow_side_effects=allow_side_effects,
            )
    except OtelReplayError as exc:  # ReplayRefused, CaseError, a trace that holds no run …
        return CaseResult(
            name=case.name, path=case.path, mode=use_mode, expect=case.expect, status="error", error=str(exc)
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
