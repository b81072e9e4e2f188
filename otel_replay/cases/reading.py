"""Case files read back: one file loaded and checked (:func:`load_case`, :func:`parse_case`), the case files of
folders found (:func:`find_cases`).

It must never import or run the entrypoint a case names (the runner does that, through the replay's trust
rule), or read a store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import semconv
from ..errorlines import error_line
from ..otlp_json import OtlpJsonError, from_otlp_json
from .model import (
    CASE_FORMAT,
    CASE_SUFFIX,
    DEFAULT_EXPECTATIONS,
    ENTRYPOINT,
    EXPECTATIONS,
    Case,
    CaseError,
    checked_expectations,
    checked_mode,
    name_problem,
    shown,
    version_problem,
)


def load_case(path: str | os.PathLike[str]) -> Case:
    """Read and check a case file (:class:`CaseError` with the file's name and what is wrong)."""
    file = Path(path)
    try:
        if not file.is_file():
            raise CaseError(f"{shown(file)}: no such case file")
        document = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, OSError):
            reason = exc.strerror or error_line(exc)
        elif isinstance(exc, UnicodeDecodeError):
            reason = f"not UTF-8 text: byte {exc.start} cannot be decoded"
        else:  # what the JSON decoder found, and where
            reason = str(exc)
        raise CaseError(f"{shown(file)}: not a readable JSON case file ({shown(reason)})") from None
    except RecursionError:
        raise CaseError(f"{shown(file)}: not a readable JSON case file (nested too deeply)") from None
    return parse_case(document, path=file)


def parse_case(document: Any, *, path: Path | None = None) -> Case:
    """A :class:`Case` from a decoded case file."""
    where = shown(path)
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
    problem = version_problem(where, document.get("convention"), semconv.SCHEMA_VERSION)
    if problem:
        raise CaseError(problem)
    fields: dict[str, str] = {}
    for key in ("name", "entrypoint", "mode"):
        value = document.get(key)
        if not isinstance(value, str) or not value:
            raise CaseError(f"{where}: {key} must be a non-empty string")
        fields[key] = value
    problem = name_problem(fields["name"])
    if problem:
        raise CaseError(f"{where}: name {fields['name'][:80]!r} {problem}")
    entry = fields["entrypoint"]
    if not ENTRYPOINT.fullmatch(entry) or entry.startswith("__main__:"):
        raise CaseError(
            f"{where}: entrypoint {entry[:120]!r} is not module:function naming an importable "
            "function (dotted Python names, not a script or a path)"
        )
    expect = document.get("expect", list(DEFAULT_EXPECTATIONS))
    if not isinstance(expect, list) or not all(isinstance(e, str) for e in expect):
        raise CaseError(f"{where}: expect must be a list of {', '.join(EXPECTATIONS)}")
    try:
        mode = checked_mode(fields["mode"])
        expectations = checked_expectations(expect)
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
        problem = version_problem(f"{where}: a span", version, semconv.SCHEMA_VERSION)
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
                raise CaseError(f"{shown(path)}: no such file or folder")
        except OSError as exc:
            raise CaseError(f"{shown(path)}: cannot be read ({exc.strerror or error_line(exc)})") from None
    unique: dict[Path, None] = {}
    for path in found:
        unique.setdefault(path, None)
    return list(unique)


# -------------------------------------------------------------------------------------------------- run
