"""The report's view model: what each part of a page shows, built from runs, replays and diffs.

A view is plain data (frozen dataclasses of strings, numbers and :mod:`.values` tokens) that the templates in
``templates/`` turn into HTML. Must never produce HTML or read anything but the runs, the replay result and
the diff it is given: no store, no network, no lookup of a redacted value.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .. import semconv
from ..replay.diff import RunDiff
from ..replay.matching.hashing import steps_agree
from ..replay.session import Divergence
from ..runs import Run, Snapshot, Step, find_root
from . import values as v
from .links import Links

_MIN_BAR_PERCENT: Final = 0.4
"""Narrowest waterfall bar, so a step far shorter than its run is still visible."""


# ------------------------------------------------------------------------------------------- small parts


@dataclass(frozen=True, slots=True)
class Badge:
    """A small label: ``cls`` is its full class list (``badge st-ok``), ``title`` its tooltip."""

    text: str
    cls: str
    title: str | None = None


def badge(text: str, cls: str, title: str | None = None) -> Badge:
    """A ``badge`` with extra classes ``cls``."""
    return Badge(text, f"badge {cls}", title)


def status_badge(status: str) -> Badge:
    """The badge of a run's or step's status (``ok`` / ``error``)."""
    return badge(status, "st-error" if status == "error" else "st-ok")


@dataclass(frozen=True, slots=True)
class Inline:
    """One piece of a value cell: ``text``, ``strong``, ``code``, ``marked`` (text with inline markers),
    ``badge``, ``links`` (to the trace in Jaeger / Grafana) or ``br``."""

    kind: str
    text: str = ""
    pieces: tuple[v.Piece, ...] = ()
    badge: Badge | None = None
    links: tuple[tuple[str, str], ...] = ()


def text(value: Any) -> Inline:
    """Plain text (``None`` shows as nothing)."""
    return Inline("text", "" if value is None else str(value))


def code(value: Any) -> Inline:
    """Monospaced text."""
    return Inline("code", "" if value is None else str(value))


def marked(value: str) -> Inline:
    """Text with its inline redaction markers marked."""
    return Inline("marked", pieces=v.pieces(value))


def links_of(links: Links | None, trace_id: str) -> Inline:
    """The configured links to ``trace_id`` (nothing shown when there are none)."""
    return Inline("links", links=tuple(links.for_trace(trace_id)) if links is not None else ())


Meta = tuple[tuple[str, tuple[Inline, ...]], ...]
"""Label / value rows of a header grid."""


@dataclass(frozen=True, slots=True)
class ErrorView:
    """An error box: the exception type and its (already redacted) message."""

    kind: str
    message: tuple[v.Piece, ...] | None


def error_view(error: dict[str, str] | None) -> ErrorView | None:
    """The error box of a step or run error, or None."""
    if not error:
        return None
    message = error.get("message")
    return ErrorView(error.get("type") or "error", v.pieces(message) if message else None)


# ------------------------------------------------------------------------------------------------ timeline


@dataclass(frozen=True)
class Timeline:
    """Where a run's steps sit in time (start and length of the run) and how deep each is nested."""

    start_ns: int
    span_ns: int
    depth: dict[str, int]

    @classmethod
    def of(cls, run: Run) -> Timeline:
        """The timeline of ``run``: from its root's start (or first step) to its last end."""
        root = find_root(run.spans)
        starts = [s.start_ns for s in run.steps]
        ends = [s.start_ns + s.duration_ns for s in run.steps]
        start = root.timestamp_ns if root is not None else min(starts, default=0)
        end = max([*ends, start + (root.duration_ns if root is not None else 0)], default=start)
        if starts:
            start = min(start, min(starts))
        depth: dict[str, int] = {}
        by_span = {s.span_id: s for s in run.steps}
        for step in run.steps:  # a parent starts first, so it has the lower index and is seen first
            parent = by_span.get(step.parent_span_id)
            depth[step.span_id] = min(depth.get(parent.span_id, 0) + 1, 12) if parent is not None else 0
        return cls(start_ns=start, span_ns=max(end - start, 1), depth=depth)

    def bar(self, step: Step) -> tuple[float, float]:
        """Left offset and width of the step's bar, in percent of the run."""
        left = max(0.0, (step.start_ns - self.start_ns) / self.span_ns * 100)
        width = max(step.duration_ns / self.span_ns * 100, _MIN_BAR_PERCENT)
        left = min(left, 100 - _MIN_BAR_PERCENT)
        return round(left, 3), round(min(width, 100 - left), 3)

    def ticks(self) -> tuple[tuple[int, str], ...]:
        """The axis labels: (percent, duration) at 0, 25, 50, 75 and 100 %."""
        total = self.span_ns / 1e6
        return tuple((p, v.ms(total * p / 100) if p else "0 ms") for p in (0, 25, 50, 75, 100))


# ------------------------------------------------------------------------------------------ steps, snapshots


@dataclass(frozen=True, slots=True)
class SnapshotView:
    """One snapshot: kind, ``seq · size``, badges (redacted, truncated, damaged), the payload's tokens."""

    kind: str
    flags: str
    badges: tuple[Badge, ...]
    payload: tuple[v.Token, ...]


def snapshot_view(snap: Snapshot) -> SnapshotView:
    """The view of one snapshot."""
    badges = []
    if snap.redactions or v.contains_redaction(snap.payload):
        count = f"{snap.redactions} redacted" if snap.redactions else "redacted"
        badges.append(badge(count, "b-redacted", "Values in this snapshot were redacted when it was recorded."))
    if snap.truncated:
        badges.append(badge("truncated", "b-warn", "Larger than the snapshot size cap: only a marker was kept."))
    if not snap.intact:
        badges.append(badge("damaged", "b-error", "A chunk is missing or the payload does not match its sha256."))
    return SnapshotView(snap.kind, f"seq {snap.seq} · {snap.size:,} B", tuple(badges), v.json_tokens(snap.payload))


@dataclass(frozen=True, slots=True)
class EventView:
    """A span event: its name and attributes."""

    name: str
    attributes: tuple[v.Token, ...]


def events_view(events: Sequence[Any]) -> tuple[EventView, ...]:
    """The views of span events."""
    return tuple(EventView(e.name, v.json_tokens(dict(e.attributes))) for e in events)


@dataclass(frozen=True, slots=True)
class Usage:
    """Status and totals of a step or run: the status badge and the latency, cost and tokens columns."""

    status: Badge
    ms: str
    cost: str
    tokens: str


@dataclass(frozen=True, slots=True)
class StepView:
    """One expandable waterfall row of a step: label, bar, status, latency, cost, tokens; its snapshots."""

    index: int
    kind: str
    name: str
    depth: int
    is_error: bool
    badges: tuple[Badge, ...]
    left: float
    width: float
    bar_title: str
    usage: Usage
    error: ErrorView | None
    snapshots: tuple[SnapshotView, ...]
    events: tuple[EventView, ...]
    attributes: tuple[tuple[str, tuple[v.Piece, ...]], ...]
    side: str = ""


def _step_badges(step: Step) -> tuple[Badge, ...]:
    extra = []
    if step.attempt > 1:
        extra.append(badge(f"attempt {step.attempt}", "b-warn"))
    risk = step.attributes.get(semconv.TOOL_RISK)
    if risk and risk != semconv.Risk.READ.value:
        extra.append(badge(f"risk {risk}", "b-risk"))
    approval = step.attributes.get(semconv.APPROVAL_STATUS)
    if approval:
        extra.append(badge(f"approval {approval}", "b-risk"))
    served = step.attributes.get(semconv.REPLAY_SERVED)
    if served:
        extra.append(badge(served, f"b-served served-{served}", "How the replay answered this call."))
    return tuple(extra)


def step_view(step: Step, timeline: Timeline, *, side: str = "") -> StepView:
    """The waterfall row of ``step`` placed on ``timeline``."""
    left, width = timeline.bar(step)
    title = f"starts at +{(step.start_ns - timeline.start_ns) / 1e6:,.3f} ms, lasts {step.duration_ms:,.3f} ms"
    return StepView(
        index=step.index,
        kind=step.kind,
        name=step.name,
        depth=timeline.depth.get(step.span_id, 0),
        is_error=step.status == "error",
        badges=_step_badges(step),
        left=left,
        width=width,
        bar_title=title,
        usage=Usage(
            status_badge(step.status), v.ms(step.duration_ms), v.usd(v.step_cost(step)), v.tokens(*v.step_tokens(step))
        ),
        error=error_view(step.error),
        snapshots=tuple(snapshot_view(s) for s in sorted(step.snapshot_list, key=lambda s: s.seq)),
        events=events_view(step.events),
        attributes=tuple((k, v.pieces(str(value))) for k, value in sorted(step.attributes.items())),
        side=side,
    )


def run_usage(run: Run) -> Usage:
    """Status, duration, cost and tokens of a whole run."""
    cost, tokens_in, tokens_out = v.run_usage(run)
    return Usage(status_badge(run.status), v.ms(run.summary.duration_ms), v.usd(cost), v.tokens(tokens_in, tokens_out))


@dataclass(frozen=True, slots=True)
class Waterfall:
    """A run's steps on its time axis, the run itself as the first row."""

    label: str
    agent: str
    is_error: bool
    usage: Usage
    ticks: tuple[tuple[int, str], ...]
    steps: tuple[StepView, ...]


def waterfall(run: Run, *, label: str = "") -> Waterfall:
    """The waterfall of ``run`` (``label`` names it in a ``data-run`` attribute)."""
    timeline = Timeline.of(run)
    return Waterfall(
        label,
        run.agent,
        run.status == "error",
        run_usage(run),
        timeline.ticks(),
        tuple(step_view(step, timeline) for step in run.steps),
    )


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """A run-level snapshot as a collapsible item with a one-line preview."""

    snapshot: SnapshotView
    preview: tuple[v.Piece, ...]
    opened: bool


def run_snapshots(run: Run, *, open_kinds: Sequence[str] = ()) -> tuple[RunSnapshot, ...]:
    """The run-level snapshots in order; those of ``open_kinds`` shown open."""
    return tuple(
        RunSnapshot(snapshot_view(s), v.preview(s.payload), s.kind in open_kinds)
        for s in sorted(run.snapshot_list, key=lambda s: s.seq)
    )


def root_events(run: Run) -> tuple[EventView, ...]:
    """The root span's events other than snapshots."""
    root = find_root(run.spans)
    if root is None:
        return ()
    return events_view([e for e in root.events if not e.name.startswith(semconv.SNAPSHOT_EVENT_PREFIX)])


def run_meta(run: Run, links: Links | None) -> Meta:
    """The header grid of a run."""
    cost, tokens_in, tokens_out = v.run_usage(run)
    kind: tuple[Inline, ...] = (text(run.summary.kind),)
    if run.summary.replay_of:
        kind += (text(" of "), code(run.summary.replay_of))
    pairs: list[tuple[str, tuple[Inline, ...]]] = [
        ("agent", (Inline("strong", run.agent),)),
        ("trace id", (code(run.trace_id), text(" "), links_of(links, run.trace_id))),
        ("run id", (code(run.run_id),)),
        ("status", (Inline("badge", badge=status_badge(run.status)),)),
        ("kind", kind),
        ("started at", (text(v.when(run.summary.started_at)),)),
        ("duration", (text(v.ms(run.summary.duration_ms)),)),
        ("cost", (text(v.usd(cost)),)),
        ("tokens in / out", (text(v.tokens(tokens_in, tokens_out)),)),
        ("steps", (text(len(run.steps)),)),
        ("entrypoint", (code(run.entrypoint or "—"),)),
        ("convention", (text(run.schema_version or "—"),)),
    ]
    if run.dialect != "otel_replay":
        pairs.append(("recorded by", (text(run.dialect),)))
    return tuple(pairs)


def problems(runs: Sequence[tuple[str, Run]]) -> tuple[tuple[str, tuple[v.Piece, ...]], ...]:
    """The integrity problems of the runs, each with the label of its run (``original: …``)."""
    return tuple((f"{label}: " if label else "", v.pieces(p)) for label, run in runs for p in run.problems)


# --------------------------------------------------------------------------------------------- alignment


@dataclass
class Row:
    """One line of the side-by-side view while it is built: a step of run a, of run b, or both."""

    a: Step | None
    b: Step | None
    relation: str = "same"
    """``same``, ``changed`` (same call, different hashes or status), ``replaced`` (another call at this
    place), ``missing`` (only in a) or ``extra`` (only in b)."""
    notes: list[str] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    divergent: bool = False


_HASH_KEYS: Final = (
    semconv.TOOL_ARGS_HASH,
    semconv.TOOL_RESULT_HASH,
    semconv.MODEL_REQUEST_HASH,
    semconv.MODEL_RESPONSE_HASH,
    semconv.RETRIEVAL_ARGS_HASH,
    semconv.RETRIEVAL_RESULTS_HASH,
    semconv.APPROVAL_STATUS,
)

RELATIONS: Final = {
    "same": ("=", "the same call in both runs"),
    "changed": ("≠", "the same call, with different arguments, result or status"),
    "replaced": ("⇄", "a different call at this place"),
    "missing": ("−", "only in the left run: the right run did not make this call"),
    "extra": ("+", "only in the right run: the left run did not make this call"),
}
"""Relation of an aligned row → (symbol, meaning); also the legend of the side-by-side view."""


def align(a: Run, b: Run) -> list[Row]:
    """Steps of ``a`` and ``b`` paired by kind and name in order (difflib), extra and missing calls alone."""
    keys_a = [(s.kind, s.name) for s in a.steps]
    keys_b = [(s.kind, s.name) for s in b.steps]
    if keys_a == keys_b:
        opcodes: Sequence[tuple[str, int, int, int, int]] = [("equal", 0, len(keys_a), 0, len(keys_b))]
    else:
        opcodes = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes()
    rows: list[Row] = []
    for op, i1, i2, j1, j2 in opcodes:
        xs, ys = list(a.steps[i1:i2]), list(b.steps[j1:j2])
        if op == "equal":
            for x, y in zip(xs, ys, strict=True):
                differs = x.status != y.status or any(not steps_agree(x, y, k) for k in _HASH_KEYS)
                rows.append(Row(x, y, "changed" if differs else "same"))
        elif op == "replace":
            for i in range(max(len(xs), len(ys))):
                left = xs[i] if i < len(xs) else None
                right = ys[i] if i < len(ys) else None
                rows.append(Row(left, right, "replaced" if left and right else ("missing" if left else "extra")))
        elif op == "delete":
            rows.extend(Row(x, None, "missing") for x in xs)
        else:
            rows.extend(Row(None, y, "extra") for y in ys)
    return rows


def note_tools(rows: list[Row], diff: RunDiff | None) -> list[int]:
    """Annotate rows with the tools section's added / removed / changed calls; positions of those rows."""
    if diff is None or "tools" not in diff.sections:
        return []
    details = diff.sections["tools"].details
    by_a = {r.a.index: i for i, r in enumerate(rows) if r.a is not None}
    by_b = {r.b.index: i for i, r in enumerate(rows) if r.b is not None}
    flagged: list[int] = []

    def note(pos: int | None, line: str) -> None:
        if pos is None:
            return
        rows[pos].notes.append(line)
        flagged.append(pos)

    for entry in details.get("changed", []):
        fields = "/".join(entry.get("fields", {}))
        note(by_a.get(entry.get("a_index")), f"tool call {entry.get('name')} changed: {fields}")
    for entry in details.get("removed", []):
        note(by_a.get(entry.get("a_index")), f"tool call {entry.get('name')} removed")
    for entry in details.get("added", []):
        note(by_b.get(entry.get("b_index")), f"tool call {entry.get('name')} added")
    return sorted(set(flagged))


def place_divergences(rows: list[Row], divergences: Sequence[Divergence]) -> dict[int, int | None]:
    """Attach each divergence to the row of its original step (the run row when it has none): id → row."""
    by_a = {r.a.index: i for i, r in enumerate(rows) if r.a is not None}
    placed: dict[int, int | None] = {}
    for d in divergences:
        pos: int | None = None
        if d.step_index is not None:
            pos = by_a.get(d.step_index)
            if pos is None:
                later = [i for index, i in by_a.items() if index >= d.step_index]
                pos = min(later) if later else None
        placed[id(d)] = pos
        if pos is not None:
            rows[pos].divergences.append(d)
            rows[pos].divergent = True
    return placed
