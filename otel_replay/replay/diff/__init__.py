"""Compare two runs section by section: what the replay of a run (or any other run) did differently.

:func:`diff_runs` takes two :class:`~otel_replay.runs.Run` objects, usually an original and its replay, and
returns a frozen :class:`RunDiff` with one :class:`SectionDiff` per aspect a user checks after a replay:

``output``     how the run ended: status, answer, structured output, error type and message
``state``      the sequence of state snapshots: transitions, final ``task_state``, first differing position
``requests``   what the models were asked, model call by model call: each changed request's unified diff
``tools``      the ordered tool calls, aligned by name: added, removed and changed calls with step indices
``citations``  the output's citations and the ids of the documents the retrievals returned
``cost``       input / output tokens and cost in US dollars, with deltas
``latency``    total and per-step-kind durations with deltas and ratios; changed only past a threshold
``safety``     the guardrail verdicts recorded with ``record_safety``

``docs/diff.md`` documents every rule. Three rules hold throughout:

* Redaction markers (``{"$redacted": <fingerprint>, "scope": <where>}``) compare by their fingerprint alone,
  and ``$truncated`` markers by the sha256 of the payload they replaced, so where a secret was found or how
  large a payload was never makes two runs differ.
* Volatile ids (message, response and tool-call ids, ``created`` timestamps, system fingerprints; the rules of
  :mod:`otel_replay.replay.volatile`) compare as placeholders numbered in order of first appearance, and an
  SDK object's encoded form compares with its JSON form by its fields, so a fresh id is never a change.
* The diff only ever shows values that are already in the runs: it never decodes, restores or looks up
  anything. It reads the runs and never changes them.

The package's modules: ``result`` (the result objects and their JSON form), ``values`` (how two values
compare), ``sections``, ``requests`` and ``calls`` (the eight sections); :func:`diff_runs` and
:func:`render_diff` are here.
"""

from __future__ import annotations

from typing import Any

from ...runs import Run
from .calls import citations_section, tools_section
from .requests import requests_section
from .result import LATENCY_THRESHOLD_MS, LATENCY_THRESHOLD_RATIO, SECTIONS, RunDiff, SectionDiff
from .sections import cost_section, latency_section, output_section, safety_section, state_section
from .values import normalize

__all__ = [
    "LATENCY_THRESHOLD_MS",
    "LATENCY_THRESHOLD_RATIO",
    "SECTIONS",
    "RunDiff",
    "SectionDiff",
    "diff_runs",
    "normalize",
    "render_diff",
]


def diff_runs(
    a: Run,
    b: Run,
    *,
    latency_threshold_ms: float = LATENCY_THRESHOLD_MS,
    latency_threshold_ratio: float = LATENCY_THRESHOLD_RATIO,
) -> RunDiff:
    """Compare run ``a`` with run ``b`` in the sections of :data:`SECTIONS`.

    Any two runs can be compared; direction matters only for wording (``added`` is in ``b`` and not in ``a``)
    and for the latency threshold, which is relative to ``a``. Never changes either run.
    """
    if latency_threshold_ms < 0 or latency_threshold_ratio < 0:
        raise ValueError("latency thresholds must not be negative")
    sections = [
        output_section(a, b),
        state_section(a, b),
        requests_section(a, b),
        tools_section(a, b),
        citations_section(a, b),
        cost_section(a, b),
        latency_section(a, b, latency_threshold_ms, latency_threshold_ratio),
        safety_section(a, b),
    ]
    return RunDiff(a_trace_id=a.trace_id, b_trace_id=b.trace_id, sections={s.name: s for s in sections})


# ------------------------------------------------------------------------------------------- render


def render_diff(diff: RunDiff) -> Any:
    """A rich renderable for the CLI: one row per section with changed / unchanged and its summary.

    Summaries are shown as plain text (never parsed as rich markup), so values from the runs print as they are.
    """
    from rich.table import Table
    from rich.text import Text

    title = Text(f"diff {diff.a_trace_id} → {diff.b_trace_id}: ")
    title.append("changed" if diff.changed else "unchanged", style="bold red" if diff.changed else "bold green")
    table = Table(title=title, show_header=True, header_style="bold", expand=False)
    table.add_column("section", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("summary", overflow="fold")
    for name, section in diff.sections.items():
        mark = Text("changed", style="red") if section.changed else Text("unchanged", style="green")
        table.add_row(Text(name), mark, Text(section.summary))
    return table
