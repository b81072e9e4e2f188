"""Regression cases: a recorded run frozen into one file that replays against the current code, anywhere.

A case file (``*.case.json``) holds the run's trace as OTLP JSON, the entrypoint to call, the replay mode and
what must hold. Running it needs no store and no server: the trace is rebuilt in memory, the entrypoint runs
under a mock or deterministic replay (every model, tool and retrieval call answered from the trace), and the
replay's own spans are read back from this process. The layout is in ``docs/cases.md``.

Files are written with sorted keys and two-space indent, so the same run always gives the same bytes and a
change to a case reads as a small diff in review.

The package's modules: ``model`` (the format, :class:`Case`, :class:`CaseResult`, the checks), ``writing``
(export), ``reading`` (load and find) and ``running`` (run against the current code); this module re-exports
their public names.
"""

from __future__ import annotations

from .model import (
    CASE_FORMAT,
    CASE_MODES,
    CASE_SUFFIX,
    DEFAULT_EXPECTATIONS,
    EXPECTATIONS,
    Case,
    CaseError,
    CaseResult,
    default_case_name,
)
from .reading import find_cases, load_case, parse_case
from .running import describe_failure, run_case
from .writing import case_document, dumps_case, write_case

__all__ = [
    "CASE_FORMAT",
    "CASE_MODES",
    "CASE_SUFFIX",
    "DEFAULT_EXPECTATIONS",
    "EXPECTATIONS",
    "Case",
    "CaseError",
    "CaseResult",
    "case_document",
    "default_case_name",
    "describe_failure",
    "dumps_case",
    "find_cases",
    "load_case",
    "parse_case",
    "run_case",
    "write_case",
]
