"""Rendering report pages: the view of a run, a replay or a diff through this package's Jinja2 templates.

The templates are files of the installed package (``otel_replay/report/templates``), loaded with a
``PackageLoader``: never from the current folder or from a path a trace or an option names. Autoescape is on
for every template and no value is marked safe, so every string from a trace reaches the page escaped. The
page's script is the package's ``report.js``; the Content-Security-Policy allows it by its sha256 and forbids
every fetch.

Process-wide state: one :class:`jinja2.Environment` (templates compiled once), built on first use.
"""

from __future__ import annotations

import base64
import datetime as _dt
import functools
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from jinja2.ext import Extension
from markupsafe import Markup

from .._version import __version__
from ..runs import Run
from ..terminal import clean
from . import compare, views
from . import values as v
from .links import Links

if TYPE_CHECKING:  # annotations only: rendering a run's page does not load the replay engine
    from ..replay.diff import RunDiff
    from ..replay.engine import ReplayResult

_LINE_BREAK = re.compile(r"\n[ \t]*")


class _Compact(Extension):
    """Drops each line break and the indentation after it from the page templates' source, so the templates
    can be laid out one element a line without adding white space to the page (the styles and the script are
    left as they are)."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        if name is not None and name.endswith(".html.j2"):
            return _LINE_BREAK.sub("", source)
        return source


@functools.lru_cache(maxsize=1)
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("otel_replay.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        extensions=[_Compact],
        auto_reload=False,
        finalize=_visible,
    )


def _visible(value: Any) -> Any:
    """Every string a page shows with its control characters as visible stand-ins (``␛`` for ESC), as the
    terminal shows them: a report opened with ``cat`` or ``less`` cannot drive the terminal either."""
    if isinstance(value, Markup):  # a macro's output: escaped already, its control characters still raw
        return Markup(clean(value))
    return clean(value) if isinstance(value, str) else value


@functools.lru_cache(maxsize=1)
def _csp() -> str:
    script = _environment().get_template("report.js").render()
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (
        f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
        "base-uri 'none'; form-action 'none'"
    )


def _page(template: str, title: str, *, has_first: bool = False, **context: Any) -> str:
    return (
        _environment()
        .get_template(template)
        .render(
            title=title,
            csp=_csp(),
            version=__version__,
            generated=v.when(_dt.datetime.now(tz=_dt.timezone.utc)),
            has_first=has_first,
            legend=compare.legend(),
            **context,
        )
    )


def render_page(template: str, title: str, *, has_first: bool = False, **context: Any) -> str:
    """A page of another package (the lab's report) through this package's frame (``page.html.j2``): the same
    environment, autoescape, styles, script and Content-Security-Policy as the run, replay and diff pages.
    ``template`` is a template file of this package."""
    return _page(template, title, has_first=has_first, **context)


# -------------------------------------------------------------------------------------------------- run


@dataclass(frozen=True, slots=True)
class _RunPage:
    agent: str
    status: str
    meta: views.Meta
    problems: tuple[tuple[str, tuple[v.Piece, ...]], ...]
    waterfall: views.Waterfall
    snapshots: tuple[views.RunSnapshot, ...]
    events: tuple[views.EventView, ...]


def run_report(run: Run, *, links: Links | None = None) -> str:
    """One run as a self-contained HTML page: header, waterfall of the steps with their snapshots, run-level
    snapshots and events. ``links`` adds links to the trace in Jaeger / Grafana (see :meth:`Links.from_env`)."""
    page = _RunPage(
        agent=run.agent,
        status=run.status,
        meta=views.run_meta(run, links),
        problems=views.problems([("", run)]),
        waterfall=views.waterfall(run),
        snapshots=views.run_snapshots(run, open_kinds=("output",)),
        events=views.root_events(run),
    )
    return _page("run.html.j2", f"otel-replay · run {run.agent} · {run.trace_id}", run=page)


# ----------------------------------------------------------------------------------------------- replay


@dataclass(frozen=True, slots=True)
class _ReplayPage:
    agent: str
    outcome: str
    explain: str
    mode: str
    settings: views.Meta
    original_meta: views.Meta
    replay_meta: views.Meta | None
    problems: tuple[tuple[str, tuple[v.Piece, ...]], ...]
    divergences: tuple[compare.DivergenceItem, ...]
    readiness: tuple[v.Token, ...] | None = None
    waterfall: views.Waterfall | None = None
    snapshots: tuple[views.RunSnapshot, ...] = ()
    sections: tuple[compare.SectionRow, ...] | None = None
    side_by_side: compare.SideBySide | None = None
    events: tuple[views.EventView, ...] = ()


_EXPLAIN = {
    "matched": "the replay made the same calls and ended the same way as the original",
    "diverged": "the replay did not follow the original: see the divergences",
    "refused": "the replay stopped before a call it may not make",
}


def _settings(result: ReplayResult, links: Links | None) -> views.Meta:
    inline = views.Inline
    approvals: list[views.Inline] = []
    for i, spec in enumerate(result.approvals):
        approvals += [views.text(", ")] if i else []
        approvals.append(views.code(spec))
    refusal = (
        (inline("badge", badge=views.Badge("refused", "st-error badge")), views.text(" "), views.marked(result.refusal))
        if result.refusal
        else (views.text("—"),)
    )
    replay_tid = result.replay_trace_id
    settings: list[tuple[str, tuple[views.Inline, ...]]] = [
        ("outcome", (inline("badge", badge=views.Badge(result.outcome, f"outcome {result.outcome}", "")),)),
        ("mode", (views.text(result.mode),)),
        ("from step", (views.text("—" if result.from_step is None else result.from_step),)),
        ("actor", (views.text(result.actor),)),
        ("reason", (views.marked(result.reason),) if result.reason else (views.text("—"),)),
        ("approvals", tuple(approvals) or (views.text("none"),)),
        ("refusal", refusal),
        (
            "original trace",
            (views.code(result.original_trace_id), views.text(" "), views.links_of(links, result.original_trace_id)),
        ),
        (
            "replay trace",
            (
                views.code(replay_tid or "—"),
                views.text(" "),
                *((views.links_of(links, replay_tid),) if replay_tid else ()),
            ),
        ),
    ]
    if result.schema_changes:
        changes: list[views.Inline] = []
        for i, c in enumerate(result.schema_changes):
            changes += [inline("br")] if i else []
            changes.append(
                views.text(f"{c.get('tool')} (step {c.get('step_index')}): {c.get('recorded')} → {c.get('current')}")
            )
        settings.append(("tool schema changes", tuple(changes)))
    return tuple(settings)


def replay_report(result: ReplayResult, original: Run, *, links: Links | None = None) -> str:
    """A replay as a self-contained HTML page: outcome, replay settings, divergences (the first highlighted),
    the diff's sections, and the original and the replay side by side, step by step, with their snapshots."""
    replayed = result.replay
    first = result.first_divergence
    common: dict[str, Any] = {
        "agent": original.agent,
        "outcome": result.outcome,
        "explain": _EXPLAIN.get(result.outcome, ""),
        "mode": result.mode,
        "settings": _settings(result, links),
        "original_meta": views.run_meta(original, links),
        "replay_meta": views.run_meta(replayed, links) if replayed is not None else None,
        "problems": views.problems([("original", original)] + ([("replay", replayed)] if replayed is not None else [])),
    }
    title = f"otel-replay · replay of {original.agent} · {result.original_trace_id}"
    if replayed is None:
        page = _ReplayPage(
            **common,
            divergences=compare.divergence_list(result.divergences, first, None, None, ""),
            readiness=v.json_tokens(result.readiness) if result.readiness is not None else None,
            waterfall=views.waterfall(original, label="original"),
            snapshots=views.run_snapshots(original),
        )
        return _page("replay.html.j2", title, replay=page)
    rows = views.align(original, replayed)
    views.note_tools(rows, result.diff)
    placed = views.place_divergences(rows, result.divergences)
    first_pos = placed.get(id(first)) if first is not None else None
    run_row = [d for d in result.divergences if placed.get(id(d)) is None]
    output = result.diff.sections.get("output") if result.diff is not None else None
    run_row_first = first is not None and first_pos is None
    sbs = compare.side_by_side(
        original,
        replayed,
        rows,
        first=first_pos,
        run_row_divergences=run_row,
        run_row_first=run_row_first,
        output_changed=bool(output and output.changed),
        labels=("original", "replay"),
    )
    page = _ReplayPage(
        **common,
        divergences=compare.divergence_list(
            result.divergences, first, placed, first_pos, compare.FIRST if run_row_first else "run-row"
        ),
        sections=compare.sections(result.diff),
        side_by_side=sbs,
        events=views.root_events(replayed),
    )
    return _page("replay.html.j2", title, has_first=first is not None, replay=page)


# ------------------------------------------------------------------------------------------------- diff


@dataclass(frozen=True, slots=True)
class _DiffPage:
    agents: tuple[str, str]
    outcome: str
    explain: str
    a_meta: views.Meta
    b_meta: views.Meta
    problems: tuple[tuple[str, tuple[v.Piece, ...]], ...]
    sections: tuple[compare.SectionRow, ...] | None
    side_by_side: compare.SideBySide


def diff_report(a: Run, b: Run, diff: RunDiff, *, links: Links | None = None) -> str:
    """Any two runs as a self-contained HTML page: the diff's sections and the runs side by side, step by step;
    the first tool call that differs (per the diff's ``tools`` section) is highlighted as the first divergence."""
    rows = views.align(a, b)
    flagged = views.note_tools(rows, diff)
    for pos in flagged:
        rows[pos].divergent = True
    first_pos = flagged[0] if flagged else None
    output = diff.sections.get("output")
    sbs = compare.side_by_side(
        a,
        b,
        rows,
        first=first_pos,
        run_row_divergences=(),
        run_row_first=False,
        output_changed=bool(output and output.changed),
        labels=("A", "B"),
    )
    page = _DiffPage(
        agents=(a.agent, b.agent),
        outcome="diverged" if diff.changed else "matched",
        explain=f"changed: {', '.join(diff.changed_sections) or 'no section'}",
        a_meta=views.run_meta(a, links),
        b_meta=views.run_meta(b, links),
        problems=views.problems([("A", a), ("B", b)]),
        sections=compare.sections(diff),
        side_by_side=sbs,
    )
    return _page(
        "diff.html.j2", f"otel-replay · diff {a.trace_id} → {b.trace_id}", has_first=first_pos is not None, diff=page
    )
