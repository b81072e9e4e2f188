"""Self-contained HTML reports of a run, a replay and a diff: one file to attach to a ticket or a review.

:func:`run_report`, :func:`replay_report` and :func:`diff_report` turn runs read from the store into one HTML
page each: a header (agent, trace and run ids, status, duration, cost and tokens), a waterfall timeline of the
steps (nesting, start offset and duration, status, latency, cost, tokens), every snapshot pretty-printed under
its step, and for a replay or a diff the two runs side by side, aligned step by step, with the diff's sections,
the divergences and the first divergence highlighted. :func:`write_report` writes a page atomically.

What a report must never do:

* fetch anything: styles and the small script are inline, nothing has an external ``src`` or ``href`` but the
  optional links to Jaeger and Grafana, and the page carries a Content-Security-Policy that forbids every
  fetch (the script is allowed by its hash, so no other script can run);
* show a value unescaped: every name, id and payload read from a trace is untrusted text;
* show more than the store holds: a redacted value stays a marker (shown as such), nothing is looked up again.

The content works without JavaScript (steps and snapshots open with ``<details>``); the script only adds
expand / collapse buttons, scrolls to the first divergence and opens both sides of a compared step together.
"""

from __future__ import annotations

import base64
import datetime as _dt
import difflib
import hashlib
import json
import logging
import os
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape as _html_escape
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlsplit

from . import semconv
from .errors import OtelReplayError
from .records import stored_int
from .replay.diff import RunDiff
from .replay.engine import ReplayResult
from .replay.hashing import steps_agree
from .replay.session import Divergence
from .runs import Run, Snapshot, Step, find_root
from .snapshots import REDACTED_TAG, TRUNCATED_TAG

__all__ = [
    "GRAFANA_RUN_DASHBOARD_UID",
    "OTEL_REPLAY_GRAFANA_URL",
    "OTEL_REPLAY_JAEGER_URL",
    "Links",
    "ReportWriteError",
    "diff_report",
    "replay_report",
    "run_report",
    "write_report",
]

_log = logging.getLogger("otel_replay")

OTEL_REPLAY_JAEGER_URL: Final = "OTEL_REPLAY_JAEGER_URL"
"""Environment variable: base URL of the Jaeger UI as the browser sees it (e.g. ``http://localhost:16686``);
reports link each trace to ``{url}/trace/{trace id}``."""

OTEL_REPLAY_GRAFANA_URL: Final = "OTEL_REPLAY_GRAFANA_URL"
"""Environment variable: base URL of Grafana (e.g. ``http://localhost:3000``); reports link each trace to the
run dashboard (uid :data:`GRAFANA_RUN_DASHBOARD_UID`, variable ``trace_id``)."""

GRAFANA_RUN_DASHBOARD_UID: Final = "otel-replay-run"
"""Uid (and slug) of the one-run dashboard in ``dashboards/otel-replay-run.json``."""

_MAX_PAYLOAD_CHARS: Final = 200_000
"""Characters of one snapshot shown in a report; the rest is left out with a note (``show --json`` has all)."""

_MIN_BAR_PERCENT: Final = 0.4
"""Narrowest waterfall bar, so a step far shorter than its run is still visible."""

_INLINE_MARKER: Final = re.compile(r"\[REDACTED:[A-Za-z0-9_.\-]+(?::(?:hmac-sha256:[0-9a-f]{16}|error))?\]")
"""The inline form of a redaction (``[REDACTED:<rule>:<fingerprint>]``, ``[REDACTED:error]``) in a string."""

_REDACTED_TITLE: Final = ("Redacted when recorded: a secret was replaced by a keyed fingerprint{where}. The "
                          "original value was never stored and cannot be shown. Equal fingerprints mean equal "
                          "secrets on this installation.")


class ReportWriteError(OtelReplayError, OSError):
    """A report file cannot be written (the folder is missing or not writable, or the path is a folder)."""


# ------------------------------------------------------------------------------------------------ links


def _base_url(value: str | None) -> str | None:
    """``value`` without trailing slashes when it is an http(s) URL with a host, else None."""
    if value is None:
        return None
    text = value.strip().rstrip("/")
    if not text:
        return None
    try:
        parts = urlsplit(text)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc or any(c in text for c in "\"'<> \t\n"):
        return None
    return text


@dataclass(frozen=True)
class Links:
    """Where a report links each trace: the Jaeger UI and the Grafana run dashboard, when configured."""

    jaeger_url: str | None = None
    """Base URL of the Jaeger UI (``http(s)://…``), or None for no Jaeger link."""
    grafana_url: str | None = None
    """Base URL of Grafana (``http(s)://…``), or None for no Grafana link."""

    def __post_init__(self) -> None:
        for name in ("jaeger_url", "grafana_url"):
            value = getattr(self, name)
            if value is None:
                continue
            base = _base_url(value)
            if base is None:
                raise ValueError(f"{name} must be an http(s) URL such as http://localhost:16686, got {value!r}")
            object.__setattr__(self, name, base)

    @classmethod
    def from_env(cls) -> Links:
        """Links from ``OTEL_REPLAY_JAEGER_URL`` and ``OTEL_REPLAY_GRAFANA_URL``; unset, empty or non-http(s)
        values give no link (a value that is not an http(s) URL is logged and ignored)."""
        found: dict[str, str | None] = {}
        for field_name, env in (("jaeger_url", OTEL_REPLAY_JAEGER_URL), ("grafana_url", OTEL_REPLAY_GRAFANA_URL)):
            raw = os.environ.get(env)
            base = _base_url(raw)
            if raw and raw.strip() and base is None:
                _log.warning("%s=%r is not an http(s) URL; reports will not link there", env, raw)
            found[field_name] = base
        return cls(**found)

    def for_trace(self, trace_id: str) -> list[tuple[str, str]]:
        """(label, href) of each configured link to ``trace_id``: Jaeger's trace view, Grafana's run dashboard."""
        tid = quote(trace_id, safe="")
        out: list[tuple[str, str]] = []
        if self.jaeger_url:
            out.append(("Jaeger", f"{self.jaeger_url}/trace/{tid}"))
        if self.grafana_url:
            uid = GRAFANA_RUN_DASHBOARD_UID
            out.append(("Grafana", f"{self.grafana_url}/d/{uid}/{uid}?var-trace_id={tid}"))
        return out


# ----------------------------------------------------------------------------------------------- writing


def write_report(path: str | os.PathLike[str], html: str) -> Path:
    """Write ``html`` to ``path`` (UTF-8) atomically: a temporary file in the same folder, then ``os.replace``.

    Returns the path written. Raises :class:`ReportWriteError` (an ``OSError``) with a one-line message when
    the folder is missing or not writable or the path is a folder; a file already at ``path`` is left as it
    was on failure.
    """
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise ReportWriteError(f"cannot write the report to {target}: it is a folder; give a file name such as "
                               f"{target / 'report.html'}")
    if not folder.is_dir():
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise ReportWriteError(f"cannot write the report to {target}: {folder} {problem}")
    tmp = folder / f".{target.name}.{uuid.uuid4().hex[:12]}.tmp"
    data = html.encode("utf-8")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        reason = exc.strerror or str(exc)
        raise ReportWriteError(f"cannot write the report to {target}: {reason}") from None
    return target


# ---------------------------------------------------------------------------------------------- values


def _esc(value: Any) -> str:
    return _html_escape("" if value is None else str(value), quote=True)


def _is_redaction(value: dict[str, Any]) -> bool:
    return REDACTED_TAG in value and len(value) <= 2 and set(value) <= {REDACTED_TAG, "scope"}


def _marker_html(fingerprint: Any, scope: Any) -> str:
    where = f" (found at {scope})" if scope else ""
    title = _REDACTED_TITLE.format(where=where)
    return f'<span class="redacted" title="{_esc(title)}">redacted · {_esc(fingerprint)}</span>'


def _text_html(text: str) -> str:
    """Escaped ``text`` with its inline redaction markers marked."""
    out: list[str] = []
    pos = 0
    for m in _INLINE_MARKER.finditer(text):
        out.append(_esc(text[pos:m.start()]))
        inner = m.group(0)[len("[REDACTED:"):-1]
        rule, _, fingerprint = inner.partition(":")
        where = f" by the {rule} rule" if fingerprint else ""
        title = _REDACTED_TITLE.format(where=where)
        out.append(f'<span class="redacted" title="{_esc(title)}">{_esc(m.group(0))}</span>')
        pos = m.end()
    out.append(_esc(text[pos:]))
    return "".join(out)


class _JsonHtml:
    """Pretty-printed JSON as HTML: escaped, redaction and truncation markers marked, cut at a budget."""

    def __init__(self, budget: int = _MAX_PAYLOAD_CHARS) -> None:
        self.parts: list[str] = []
        self.left = budget
        self.cut = False

    def render(self, value: Any) -> str:
        self._value(value, 0)
        if self.cut:
            self.parts.append('\n<span class="cut">… the rest of this payload is not shown here; '
                              '<code>otel-replay show TRACE_ID --json</code> prints all of it</span>')
        return "".join(self.parts)

    def _emit(self, piece: str, cost: int) -> bool:
        if self.cut:
            return False
        if cost > self.left:
            self.cut = True
            return False
        self.left -= cost
        self.parts.append(piece)
        return True

    def _value(self, value: Any, depth: int) -> None:
        if self.cut:
            return
        pad = "  " * (depth + 1)
        if isinstance(value, dict):
            if _is_redaction(value):
                self._emit(_marker_html(value.get(REDACTED_TAG), value.get("scope")), 40)
                return
            if value.get(TRUNCATED_TAG) is True:
                text = json.dumps(value, ensure_ascii=False)
                title = "Truncated when recorded: the payload was larger than the snapshot size cap."
                self._emit(f'<span class="truncated" title="{_esc(title)}">{_esc(text)}</span>', len(text))
                return
            if not value:
                self._emit("{}", 2)
                return
            self._emit("{", 1)
            for i, (key, item) in enumerate(value.items()):
                key_text = json.dumps(str(key), ensure_ascii=False)
                if not self._emit(f"\n{pad}<span class=\"k\">{_text_html(key_text)}</span>: ", len(key_text) + 4):
                    return
                self._value(item, depth + 1)
                if i < len(value) - 1:
                    self._emit(",", 1)
            self._emit(f"\n{'  ' * depth}}}", depth * 2 + 2)
        elif isinstance(value, list):
            if not value:
                self._emit("[]", 2)
                return
            self._emit("[", 1)
            for i, item in enumerate(value):
                if not self._emit(f"\n{pad}", len(pad) + 1):
                    return
                self._value(item, depth + 1)
                if i < len(value) - 1:
                    self._emit(",", 1)
            self._emit(f"\n{'  ' * depth}]", depth * 2 + 2)
        elif isinstance(value, str):
            text = json.dumps(value, ensure_ascii=False)
            self._emit(f'<span class="s">{_text_html(text)}</span>', len(text))
        else:
            try:
                text = json.dumps(value, ensure_ascii=False)
            except (TypeError, ValueError):
                text = repr(value)
            self._emit(f'<span class="n">{_esc(text)}</span>', len(text))


def _json_html(value: Any) -> str:
    return _JsonHtml().render(value)


def _preview(value: Any, limit: int = 110) -> str:
    """One line of a payload for a summary (escaped; markers shown by their JSON text)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        text = repr(value)
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return _text_html(text)


def _contains_redaction(value: Any) -> bool:
    if isinstance(value, dict):
        return _is_redaction(value) or any(_contains_redaction(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_redaction(v) for v in value)
    return isinstance(value, str) and _INLINE_MARKER.search(value) is not None


# ------------------------------------------------------------------------------------------------ numbers


def _float(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _ms(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms:,.3f} ms" if abs(ms) < 1 else f"{ms:,.1f} ms"


def _usd(value: float | None) -> str:
    if value is None:
        return "—"
    if value == 0:
        return "$0"
    text = f"{value:,.6f}".rstrip("0").rstrip(".")
    return f"${text}" if text not in ("0", "-0") else f"${value:.2e}"


def _tokens(tokens_in: int | None, tokens_out: int | None) -> str:
    if tokens_in is None and tokens_out is None:
        return "—"
    return f"{'—' if tokens_in is None else f'{tokens_in:,}'} / {'—' if tokens_out is None else f'{tokens_out:,}'}"


def _step_cost(step: Step) -> float | None:
    return _float(step.attributes.get(semconv.MODEL_COST_USD))


def _step_tokens(step: Step) -> tuple[int | None, int | None]:
    return (stored_int(step.attributes.get(semconv.GEN_AI_USAGE_INPUT_TOKENS)),
            stored_int(step.attributes.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS)))


def _run_usage(run: Run) -> tuple[float | None, int | None, int | None]:
    """Cost and input / output tokens of a run: the root's totals, else the sum over its model steps."""
    def summed(values: Iterable[Any]) -> Any:
        present = [v for v in values if v is not None]
        return sum(present) if present else None

    cost = _float(run.attributes.get(semconv.RUN_COST_USD))
    tokens_in = stored_int(run.attributes.get(semconv.RUN_INPUT_TOKENS))
    tokens_out = stored_int(run.attributes.get(semconv.RUN_OUTPUT_TOKENS))
    models = [s for s in run.steps if s.kind == semconv.StepKind.MODEL.value]
    if cost is None:
        cost = summed(_step_cost(s) for s in models)
    if tokens_in is None:
        tokens_in = summed(_step_tokens(s)[0] for s in models)
    if tokens_out is None:
        tokens_out = summed(_step_tokens(s)[1] for s in models)
    return cost, tokens_in, tokens_out


def _when(moment: _dt.datetime) -> str:
    return moment.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


# ------------------------------------------------------------------------------------------------ timeline


@dataclass(frozen=True)
class _Timeline:
    """Where a run's steps sit in time (start and length of the run) and how deep each is nested."""

    start_ns: int
    span_ns: int
    depth: dict[str, int]

    @classmethod
    def of(cls, run: Run) -> _Timeline:
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


# ------------------------------------------------------------------------------------------------ pieces


def _badge(text: str, cls: str, title: str | None = None) -> str:
    tip = f' title="{_esc(title)}"' if title else ""
    return f'<span class="badge {cls}"{tip}>{_esc(text)}</span>'


def _status(status: str) -> str:
    return _badge(status, "st-error" if status == "error" else "st-ok")


def _snapshot_html(snap: Snapshot) -> str:
    flags = [f"seq {snap.seq}", f"{snap.size:,} B"]
    badges = []
    if snap.redactions or _contains_redaction(snap.payload):
        count = f"{snap.redactions} redacted" if snap.redactions else "redacted"
        badges.append(_badge(count, "b-redacted", "Values in this snapshot were redacted when it was recorded."))
    if snap.truncated:
        badges.append(_badge("truncated", "b-warn", "Larger than the snapshot size cap: only a marker was kept."))
    if not snap.intact:
        badges.append(_badge("damaged", "b-error", "A chunk is missing or the payload does not match its sha256."))
    return (f'<div class="snap" data-snapshot-kind="{_esc(snap.kind)}"><div class="snap-head">'
            f'<span class="snap-kind">{_esc(snap.kind)}</span> <span class="muted">{_esc(" · ".join(flags))}</span> '
            f'{" ".join(badges)}</div><pre class="json">{_json_html(snap.payload)}</pre></div>')


def _error_html(error: dict[str, str] | None) -> str:
    if not error:
        return ""
    kind = error.get("type") or "error"
    return (f'<div class="error-box"><strong>{_esc(kind)}</strong>'
            f'{": " + _text_html(error.get("message") or "") if error.get("message") else ""}</div>')


def _attrs_html(attributes: dict[str, str]) -> str:
    if not attributes:
        return ""
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_text_html(str(v))}</td></tr>"
                   for k, v in sorted(attributes.items()))
    return (f'<details class="attrs"><summary>span attributes ({len(attributes)})</summary>'
            f'<table class="kv">{rows}</table></details>')


def _events_html(events: Sequence[Any]) -> str:
    if not events:
        return ""
    items = "".join(f'<li><span class="ev-name">{_esc(e.name)}</span> '
                    f'<pre class="json inline">{_json_html(dict(e.attributes))}</pre></li>' for e in events)
    return f'<details class="events"><summary>events ({len(events)})</summary><ul class="ev">{items}</ul></details>'


def _step_label(step: Step, depth: int) -> str:
    extra = []
    if step.attempt > 1:
        extra.append(_badge(f"attempt {step.attempt}", "b-warn"))
    risk = step.attributes.get(semconv.TOOL_RISK)
    if risk and risk != semconv.Risk.READ.value:
        extra.append(_badge(f"risk {risk}", "b-risk"))
    approval = step.attributes.get(semconv.APPROVAL_STATUS)
    if approval:
        extra.append(_badge(f"approval {approval}", "b-risk"))
    served = step.attributes.get(semconv.REPLAY_SERVED)
    if served:
        extra.append(_badge(served, f"b-served served-{_esc(served)}", "How the replay answered this call."))
    return (f'<span class="c-name" style="--depth:{depth}"><span class="idx">#{step.index}</span> '
            f'<span class="kind k-{_esc(step.kind)}">{_esc(step.kind)}</span> <span class="name">{_esc(step.name)}'
            f'</span> {" ".join(extra)}</span>')


def _step_html(step: Step, timeline: _Timeline, *, side: str = "") -> str:
    """One expandable waterfall row of a step: label, bar, status, latency, cost, tokens; its snapshots."""
    left, width = timeline.bar(step)
    cost = _step_cost(step)
    tokens_in, tokens_out = _step_tokens(step)
    depth = timeline.depth.get(step.span_id, 0)
    status_cls = " is-error" if step.status == "error" else ""
    snaps = "".join(_snapshot_html(s) for s in sorted(step.snapshot_list, key=lambda s: s.seq))
    body = (_error_html(step.error) + (snaps or '<p class="muted">no snapshots recorded for this step</p>')
            + _events_html(step.events) + _attrs_html(step.attributes))
    title = f"starts at +{(step.start_ns - timeline.start_ns) / 1e6:,.3f} ms, lasts {step.duration_ms:,.3f} ms"
    side_attr = f' data-side="{side}"' if side else ""
    return (f'<details class="step k-{_esc(step.kind)}{status_cls}" data-step-index="{step.index}"{side_attr}>'
            f'<summary>{_step_label(step, depth)}'
            f'<span class="c-bar"><span class="track"><span class="bar k-{_esc(step.kind)}{status_cls}" '
            f'style="left:{left}%;width:{width}%" title="{_esc(title)}"></span></span></span>'
            f'<span class="c-status">{_status(step.status)}</span>'
            f'<span class="c-ms num">{_ms(step.duration_ms)}</span>'
            f'<span class="c-cost num">{_usd(cost)}</span>'
            f'<span class="c-tok num">{_tokens(tokens_in, tokens_out)}</span>'
            f'</summary><div class="step-body">{body}</div></details>')


_COLUMNS: Final = ('<span class="c-name">step</span><span class="c-bar">timeline</span>'
                   '<span class="c-status">status</span><span class="c-ms num">latency</span>'
                   '<span class="c-cost num">cost</span><span class="c-tok num" title="input / output tokens">'
                   'tokens</span>')


def _axis(timeline: _Timeline) -> str:
    total = timeline.span_ns / 1e6
    ticks = "".join(f'<span class="tick" style="left:{p}%">{_esc(_ms(total * p / 100) if p else "0 ms")}</span>'
                    for p in (0, 25, 50, 75, 100))
    return f'<span class="c-bar"><span class="axis">{ticks}</span></span>'


def _waterfall(run: Run, *, label: str = "") -> str:
    timeline = _Timeline.of(run)
    cost, tokens_in, tokens_out = _run_usage(run)
    rows = "".join(f'<div class="wf-row">{_step_html(step, timeline)}</div>' for step in run.steps)
    if not run.steps:
        rows = '<p class="muted">this run recorded no steps</p>'
    root = (f'<div class="wf-row wf-root"><div class="line"><span class="c-name"><span class="kind k-agent">run</span> '
            f'<span class="name">{_esc(run.agent)}</span></span><span class="c-bar"><span class="track">'
            f'<span class="bar k-run{" is-error" if run.status == "error" else ""}" style="left:0%;width:100%">'
            f'</span></span></span><span class="c-status">{_status(run.status)}</span>'
            f'<span class="c-ms num">{_ms(run.summary.duration_ms)}</span><span class="c-cost num">{_usd(cost)}</span>'
            f'<span class="c-tok num">{_tokens(tokens_in, tokens_out)}</span></div></div>')
    head = f'<div class="wf-head line">{_COLUMNS}</div><div class="wf-axis line"><span class="c-name"></span>' \
           f'{_axis(timeline)}</div>'
    run_attr = f' data-run="{_esc(label)}"' if label else ""
    return f'<div class="waterfall"{run_attr}>{head}{root}{rows}</div>'


def _run_snapshots(run: Run, *, open_kinds: Sequence[str] = ()) -> str:
    snaps = sorted(run.snapshot_list, key=lambda s: s.seq)
    if not snaps:
        return '<p class="muted">no run-level snapshots recorded</p>'
    items = []
    for snap in snaps:
        opened = " open" if snap.kind in open_kinds else ""
        items.append(f'<details class="snapd"{opened}><summary><span class="snap-kind">{_esc(snap.kind)}</span> '
                     f'<span class="preview">{_preview(snap.payload)}</span></summary>{_snapshot_html(snap)}</details>')
    return "".join(items)


def _link_list(links: Links | None, trace_id: str) -> str:
    if links is None:
        return ""
    anchors = [f'<a class="ext" href="{_esc(href)}" target="_blank" rel="noopener noreferrer">{_esc(label)}</a>'
               for label, href in links.for_trace(trace_id)]
    return f'<span class="links">{" ".join(anchors)}</span>' if anchors else ""


def _meta(pairs: Sequence[tuple[str, str]]) -> str:
    """A grid of label / value; values are HTML already (callers escape)."""
    return '<dl class="meta">' + "".join(f"<dt>{_esc(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def _run_meta(run: Run, links: Links | None) -> list[tuple[str, str]]:
    cost, tokens_in, tokens_out = _run_usage(run)
    kind = _esc(run.summary.kind)
    if run.summary.replay_of:
        kind += f' of <code>{_esc(run.summary.replay_of)}</code>'
    pairs = [
        ("agent", f"<strong>{_esc(run.agent)}</strong>"),
        ("trace id", f"<code>{_esc(run.trace_id)}</code> {_link_list(links, run.trace_id)}"),
        ("run id", f"<code>{_esc(run.run_id)}</code>"),
        ("status", _status(run.status)),
        ("kind", kind),
        ("started at", _esc(_when(run.summary.started_at))),
        ("duration", _esc(_ms(run.summary.duration_ms))),
        ("cost", _esc(_usd(cost))),
        ("tokens in / out", _esc(_tokens(tokens_in, tokens_out))),
        ("steps", _esc(len(run.steps))),
        ("entrypoint", f"<code>{_esc(run.entrypoint or '—')}</code>"),
        ("convention", _esc(run.schema_version or "—")),
    ]
    if run.dialect != "otel_replay":
        pairs.append(("recorded by", _esc(run.dialect)))
    return pairs


def _problems(runs: Sequence[tuple[str, Run]]) -> str:
    items = [f"<li>{_esc(label + ': ' if label else '')}{_text_html(p)}</li>" for label, run in runs
             for p in run.problems]
    if not items:
        return ""
    return f'<div class="warn-box"><strong>integrity problems</strong><ul>{"".join(items)}</ul></div>'


def _root_events(run: Run) -> str:
    root = find_root(run.spans)
    if root is None:
        return ""
    return _events_html([e for e in root.events if not e.name.startswith(semconv.SNAPSHOT_EVENT_PREFIX)])


# --------------------------------------------------------------------------------------------- alignment


@dataclass
class _Row:
    """One line of the side-by-side view: a step of run a, of run b, or both."""

    a: Step | None
    b: Step | None
    relation: str = "same"
    """``same``, ``changed`` (same call, different hashes or status), ``replaced`` (another call at this
    place), ``missing`` (only in a) or ``extra`` (only in b)."""
    notes: list[str] | None = None
    divergences: list[Divergence] | None = None
    divergent: bool = False


_HASH_KEYS: Final = (semconv.TOOL_ARGS_HASH, semconv.TOOL_RESULT_HASH, semconv.MODEL_REQUEST_HASH,
                     semconv.MODEL_RESPONSE_HASH, semconv.RETRIEVAL_ARGS_HASH, semconv.RETRIEVAL_RESULTS_HASH,
                     semconv.APPROVAL_STATUS)


def _align(a: Run, b: Run) -> list[_Row]:
    """Steps of ``a`` and ``b`` paired by kind and name in order (difflib), extra and missing calls alone."""
    keys_a = [(s.kind, s.name) for s in a.steps]
    keys_b = [(s.kind, s.name) for s in b.steps]
    if keys_a == keys_b:
        opcodes: list[tuple[str, int, int, int, int]] = [("equal", 0, len(keys_a), 0, len(keys_b))]
    else:
        opcodes = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes()
    rows: list[_Row] = []
    for op, i1, i2, j1, j2 in opcodes:
        xs, ys = list(a.steps[i1:i2]), list(b.steps[j1:j2])
        if op == "equal":
            for x, y in zip(xs, ys):
                differs = x.status != y.status or any(not steps_agree(x, y, k) for k in _HASH_KEYS)
                rows.append(_Row(x, y, "changed" if differs else "same"))
        elif op == "replace":
            for i in range(max(len(xs), len(ys))):
                x = xs[i] if i < len(xs) else None
                y = ys[i] if i < len(ys) else None
                rows.append(_Row(x, y, "replaced" if x and y else ("missing" if x else "extra")))
        elif op == "delete":
            rows.extend(_Row(x, None, "missing") for x in xs)
        else:
            rows.extend(_Row(None, y, "extra") for y in ys)
    return rows


def _note_tools(rows: list[_Row], diff: RunDiff | None) -> list[int]:
    """Annotate rows with the tools section's added / removed / changed calls; positions of those rows."""
    if diff is None or "tools" not in diff.sections:
        return []
    details = diff.sections["tools"].details
    by_a = {r.a.index: i for i, r in enumerate(rows) if r.a is not None}
    by_b = {r.b.index: i for i, r in enumerate(rows) if r.b is not None}
    flagged: list[int] = []

    def note(pos: int | None, text: str) -> None:
        if pos is None:
            return
        rows[pos].notes = [*(rows[pos].notes or []), text]
        flagged.append(pos)

    for entry in details.get("changed", []):
        fields = "/".join(entry.get("fields", {}))
        note(by_a.get(entry.get("a_index")), f"tool call {entry.get('name')} changed: {fields}")
    for entry in details.get("removed", []):
        note(by_a.get(entry.get("a_index")), f"tool call {entry.get('name')} removed")
    for entry in details.get("added", []):
        note(by_b.get(entry.get("b_index")), f"tool call {entry.get('name')} added")
    return sorted(set(flagged))


def _place_divergences(rows: list[_Row], divergences: Sequence[Divergence]) -> dict[int, int | None]:
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
            rows[pos].divergences = [*(rows[pos].divergences or []), d]
            rows[pos].divergent = True
    return placed


_RELATION: Final = {
    "same": ("=", "the same call in both runs"),
    "changed": ("≠", "the same call, with different arguments, result or status"),
    "replaced": ("⇄", "a different call at this place"),
    "missing": ("−", "only in the left run: the right run did not make this call"),
    "extra": ("+", "only in the right run: the left run did not make this call"),
}


def _side(step: Step | None, timeline: _Timeline, side: str) -> str:
    if step is None:
        return f'<div class="side {side} empty"><span class="muted">no call</span></div>'
    return f'<div class="side {side}">{_step_html(step, timeline, side=side)}</div>'


def _divergence_text(d: Divergence) -> str:
    where = f"step {d.step_index}" if d.step_index is not None else "run"
    extra = ""
    if d.expected or d.actual:
        extra = (f' <span class="muted">expected <code>{_esc(_short(d.expected))}</code>, got '
                 f'<code>{_esc(_short(d.actual))}</code></span>')
    return (f'<span class="dv-where">{_esc(where)}</span> <span class="badge b-dv">{_esc(d.kind)}</span> '
            f'{_text_html(d.reason)}{extra}')


def _short(value: str | None) -> str:
    if value is None:
        return "—"
    return value if len(value) <= 20 else value[:16] + "…"


def _sbs(a: Run, b: Run, rows: list[_Row], *, first: int | None, run_row_divergences: Sequence[Divergence],
         run_row_first: bool, output_changed: bool, labels: tuple[str, str]) -> str:
    """The two runs side by side, one line per aligned step, then a line for the runs themselves."""
    ta, tb = _Timeline.of(a), _Timeline.of(b)
    lines = []
    for pos, row in enumerate(rows):
        symbol, meaning = _RELATION[row.relation]
        classes = ["sbs-row", row.relation]
        if row.divergent:
            classes.append("divergence")
        row_id = f"row-{pos}"
        if first == pos:
            classes.append("first-divergence")
            row_id = "first-divergence"
        attrs = [f'id="{row_id}"', f'class="{" ".join(classes)}"']
        if row.a is not None:
            attrs.append(f'data-a-index="{row.a.index}"')
        if row.b is not None:
            attrs.append(f'data-b-index="{row.b.index}"')
        notes = [_divergence_text(d) for d in row.divergences or []]
        notes += [_esc(n) for n in row.notes or []]
        notes_html = (f'<div class="notes">{"<br>".join(notes)}</div>' if notes else "")
        lines.append(f'<div {" ".join(attrs)}>{_side(row.a, ta, "a")}'
                     f'<div class="mid" title="{_esc(meaning)}">{symbol}</div>{_side(row.b, tb, "b")}'
                     f'{notes_html}</div>')
    # the runs themselves: status, totals and run-level snapshots (input, output, …)
    classes = ["sbs-row", "run-row", "changed" if output_changed else "same"]
    if run_row_divergences:
        classes.append("divergence")
    row_id = "first-divergence" if run_row_first else "run-row"
    if run_row_first:
        classes.append("first-divergence")
    notes = "<br>".join(_divergence_text(d) for d in run_row_divergences)
    notes_html = f'<div class="notes">{notes}</div>' if notes else ""
    lines.append(f'<div id="{row_id}" class="{" ".join(classes)}">{_run_side(a, "a")}'
                 f'<div class="mid" title="the runs themselves">{"≠" if output_changed else "="}</div>'
                 f'{_run_side(b, "b")}{notes_html}</div>')
    head = (f'<div class="sbs-head"><div class="side a"><strong>{_esc(labels[0])}</strong> '
            f'<code>{_esc(a.trace_id)}</code></div><div class="mid"></div><div class="side b">'
            f'<strong>{_esc(labels[1])}</strong> <code>{_esc(b.trace_id)}</code></div></div>'
            f'<div class="sbs-cols"><div class="side a line">{_COLUMNS}</div><div class="mid"></div>'
            f'<div class="side b line">{_COLUMNS}</div></div>')
    return f'<div class="sbs">{head}{"".join(lines)}</div>'


def _run_side(run: Run, side: str) -> str:
    cost, tokens_in, tokens_out = _run_usage(run)
    return (f'<div class="side {side}"><details class="step run-step" data-side="{side}"><summary>'
            f'<span class="c-name"><span class="kind k-agent">run</span> <span class="name">{_esc(run.agent)}'
            f'</span> <span class="muted">input, output and other run-level snapshots</span></span>'
            f'<span class="c-bar"></span><span class="c-status">{_status(run.status)}</span>'
            f'<span class="c-ms num">{_ms(run.summary.duration_ms)}</span><span class="c-cost num">{_usd(cost)}'
            f'</span><span class="c-tok num">{_tokens(tokens_in, tokens_out)}</span></summary>'
            f'<div class="step-body">{_error_html(_run_error(run))}{_run_snapshots(run)}</div></details></div>')


def _run_error(run: Run) -> dict[str, str] | None:
    output = run.snapshots.get(semconv.SnapshotKind.OUTPUT.value)
    error = output.get("error") if isinstance(output, dict) else None
    if isinstance(error, dict) and (error.get("type") or error.get("message")):
        return {"type": str(error.get("type") or ""), "message": str(error.get("message") or "")}
    return None


def _sections(diff: RunDiff | None) -> str:
    if diff is None:
        return '<p class="muted">no diff: the replay recorded no run to compare with the original</p>'
    rows = []
    for name, section in diff.sections.items():
        mark = _badge("changed", "b-changed") if section.changed else _badge("unchanged", "b-same")
        details = section.to_dict().get("details") or {}
        rows.append(f'<tr class="section {"changed" if section.changed else "same"}" data-section="{_esc(name)}">'
                    f'<th>{_esc(name)}</th><td>{mark}</td><td>{_text_html(section.summary)}'
                    f'<details class="section-details"><summary>details</summary><pre class="json">'
                    f'{_json_html(details)}</pre></details></td></tr>')
    return f'<table class="sections"><thead><tr><th>section</th><th></th><th>summary</th></tr></thead>' \
           f'<tbody>{"".join(rows)}</tbody></table>'


def _divergence_list(divergences: Sequence[Divergence], first: Divergence | None,
                     placed: dict[int, int | None] | None, first_pos: int | None, run_row_id: str) -> str:
    """The divergences in step order, each linked to its row of the side-by-side view (when there is one)."""
    if not divergences:
        return '<p class="muted">no divergences</p>'
    items = []
    ordered = sorted(divergences, key=lambda d: (d.step_index is None, d.step_index or 0))
    for d in ordered:
        is_first = d is first
        link = ""
        if placed is not None:
            pos = placed.get(id(d))
            anchor = run_row_id if pos is None else ("first-divergence" if pos == first_pos else f"row-{pos}")
            link = f'<a href="#{anchor}">{"first divergence · " if is_first else ""}go to row</a> '
        elif is_first:
            link = "first divergence · "
        cls = ' class="first"' if is_first else ""
        items.append(f"<li{cls}>{link}{_divergence_text(d)}</li>")
    return f'<ol class="divergences">{"".join(items)}</ol>'


# --------------------------------------------------------------------------------------------- the page


_CSS: Final = """
:root{--fg:#1d2433;--muted:#667085;--line:#e4e7ec;--bg:#fff;--panel:#f8f9fb;--ok:#067647;--okbg:#dcfae6;
--err:#b42318;--errbg:#fee4e2;--warn:#b54708;--warnbg:#fef0c7;--model:#7f56d9;--tool:#1570ef;--retrieval:#0e9384;
--agent:#98a2b3;--dv:#fde2e1;--dv1:#fbb4ae;--changed:#fffaeb}
*{box-sizing:border-box}
[hidden]{display:none!important}
body{margin:0;font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:var(--fg);
background:var(--bg)}
main{padding:16px 24px 48px;max-width:1800px;margin:0 auto}
h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:28px 0 8px;border-bottom:1px solid var(--line);
padding-bottom:4px}
code,pre,.num,.json{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
code{font-size:12px;word-break:break-all}
.muted{color:var(--muted)}
.top{display:flex;align-items:center;gap:12px;flex-wrap:wrap}
.outcome{font-size:14px;font-weight:700;padding:4px 12px;border-radius:999px;text-transform:uppercase;
letter-spacing:.04em}
.outcome.matched,.outcome.ok{background:var(--okbg);color:var(--ok)}
.outcome.diverged,.outcome.error{background:var(--errbg);color:var(--err)}
.outcome.refused{background:var(--warnbg);color:var(--warn)}
.toolbar{margin-left:auto;display:flex;gap:6px}
.toolbar button{font:inherit;padding:3px 10px;border:1px solid var(--line);background:var(--panel);
border-radius:6px;cursor:pointer}
.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:10px 0;padding:10px 14px;
background:var(--panel);border:1px solid var(--line);border-radius:8px}
.meta dt{color:var(--muted)}.meta dd{margin:0}
.metas{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px}
.metas h3{margin:8px 0 0;font-size:13px}
.links a{margin-left:8px}
a.ext{color:var(--tool)}
.badge{display:inline-block;padding:0 6px;border-radius:4px;font-size:11px;line-height:17px;white-space:nowrap;
background:#f2f4f7;color:#344054}
.st-ok{background:var(--okbg);color:var(--ok)}.st-error{background:var(--errbg);color:var(--err);font-weight:700}
.b-warn{background:var(--warnbg);color:var(--warn)}.b-error{background:var(--errbg);color:var(--err)}
.b-risk{background:#fdf2fa;color:#c11574}.b-redacted{background:#f4ebff;color:#6941c6}
.b-changed{background:var(--errbg);color:var(--err)}.b-same{background:var(--okbg);color:var(--ok)}
.b-dv{background:var(--err);color:#fff}.b-served{background:#eff8ff;color:#175cd3}
.served-executed{background:var(--warnbg);color:var(--warn)}.served-refused{background:var(--errbg);color:var(--err)}
.line,details.step>summary,.wf-root .line{display:grid;
grid-template-columns:minmax(200px,2.2fr) minmax(160px,3fr) 58px 84px 84px 96px;gap:8px;align-items:center}
.wf-head,.sbs-cols .line{color:var(--muted);font-size:11px;text-transform:uppercase;letter-spacing:.03em}
.num{text-align:right;font-size:12px;white-space:nowrap}
.waterfall{border:1px solid var(--line);border-radius:8px;padding:6px 10px}
.wf-row{border-top:1px solid var(--line)}
.wf-axis{height:18px}
.axis{position:relative;display:block;height:16px}
.tick{position:absolute;top:0;transform:translateX(-50%);font-size:10px;color:var(--muted);white-space:nowrap}
.tick:first-child{transform:none}.tick:last-child{transform:translateX(-100%)}
details.step>summary{list-style:none;cursor:pointer;padding:4px 0}
details.step>summary::-webkit-details-marker{display:none}
details.step>summary:hover{background:#f5f8ff}
.c-name{padding-left:calc(var(--depth,0) * 18px);overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
details.step>summary .c-name::before{content:"▸";display:inline-block;width:12px;color:var(--muted)}
details.step[open]>summary .c-name::before{content:"▾"}
.idx{color:var(--muted);font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.kind{font-size:11px;padding:0 5px;border-radius:3px;color:#fff;background:var(--agent)}
.kind.k-model{background:var(--model)}.kind.k-tool{background:var(--tool)}
.kind.k-retrieval{background:var(--retrieval)}
.name{font-weight:600}
.track{position:relative;display:block;height:12px;background:#f2f4f7;border-radius:3px}
.bar{position:absolute;top:0;height:12px;border-radius:3px;background:var(--agent);min-width:2px}
.bar.k-model{background:var(--model)}.bar.k-tool{background:var(--tool)}.bar.k-retrieval{background:var(--retrieval)}
.bar.k-run{background:#d0d5dd}.bar.is-error{background:var(--err)!important}
details.step.is-error>summary{box-shadow:inset 3px 0 0 var(--err)}
.step-body{padding:6px 10px 10px 28px;background:var(--panel);border-top:1px dashed var(--line)}
.snap{margin:6px 0}.snap-head{margin-bottom:2px}
.snap-kind{font-weight:700;color:#344054}
pre.json{margin:0;padding:8px 10px;background:#fff;border:1px solid var(--line);border-radius:6px;
white-space:pre-wrap;word-break:break-word;font-size:12px;max-height:480px;overflow:auto}
pre.json.inline{display:inline-block;vertical-align:top;padding:2px 6px;max-height:200px}
.k{color:#175cd3}.s{color:#027a48}.n{color:#b54708}
.redacted{background:#6941c6;color:#fff;border-radius:3px;padding:0 4px;font-weight:600;cursor:help;
outline:1px dashed #6941c6;outline-offset:1px}
.truncated{background:var(--warnbg);color:var(--warn);border-radius:3px;padding:0 4px}
.cut{color:var(--warn);font-style:italic}
.error-box{margin:6px 0;padding:6px 10px;border-left:3px solid var(--err);background:var(--errbg);color:var(--err)}
.warn-box{margin:10px 0;padding:6px 12px;border-left:3px solid var(--warn);background:var(--warnbg)}
.warn-box ul{margin:4px 0;padding-left:18px}
table.kv{border-collapse:collapse;font-size:12px;margin-top:4px}
table.kv th{text-align:left;font-weight:400;color:var(--muted);padding:1px 10px 1px 0;vertical-align:top;
white-space:nowrap}
table.kv td{font-family:ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
details.attrs,details.events{margin-top:6px}details.attrs>summary,details.events>summary{cursor:pointer;
color:var(--muted)}
ul.ev{margin:4px 0;padding-left:18px}.ev-name{font-weight:600}
details.snapd{border:1px solid var(--line);border-radius:6px;margin:6px 0;padding:4px 10px;background:#fff}
details.snapd>summary{cursor:pointer}
.preview{color:var(--muted);font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.sbs{border:1px solid var(--line);border-radius:8px;overflow-x:auto}
.sbs-head,.sbs-cols,.sbs-row{display:grid;grid-template-columns:minmax(560px,1fr) 28px minmax(560px,1fr);
align-items:start}
.sbs-head{background:var(--panel);padding:6px 8px}
.sbs-cols{padding:2px 8px}
.sbs-row{border-top:1px solid var(--line);padding:0 8px}
.sbs-row .mid{text-align:center;font-weight:700;padding-top:4px;color:var(--muted);cursor:help}
.sbs-row .side.empty{padding:4px 0 4px 14px;font-style:italic}
.sbs .line,.sbs details.step>summary{grid-template-columns:minmax(150px,1.7fr) minmax(90px,1.3fr) 50px 76px 70px 80px}
.sbs-row.changed{background:var(--changed)}
.sbs-row.missing .side.b,.sbs-row.extra .side.a{
background:repeating-linear-gradient(135deg,#fff,#fff 6px,#f9fafb 6px,#f9fafb 12px)}
.sbs-row.replaced{background:#fef6ee}
.sbs-row.divergence{background:var(--dv);box-shadow:inset 4px 0 0 var(--err)}
.sbs-row.first-divergence{background:var(--dv1);box-shadow:inset 6px 0 0 var(--err),0 0 0 2px var(--err);
position:relative;z-index:1}
.sbs-row.first-divergence .mid{color:var(--err)}
.notes{grid-column:1/-1;padding:2px 6px 6px 18px;font-size:12px}
.run-row{border-top:2px solid var(--line)}
ol.divergences{margin:4px 0;padding-left:22px}
ol.divergences li{margin:3px 0}ol.divergences li.first{font-weight:600}
.dv-where{font-family:ui-monospace,Menlo,Consolas,monospace}
table.sections{border-collapse:collapse;width:100%}
table.sections th,table.sections td{text-align:left;padding:5px 8px;border-top:1px solid var(--line);
vertical-align:top}
table.sections tr.changed th{color:var(--err)}
table.sections th:first-child{width:110px}table.sections td:nth-child(2){width:100px}
details.section-details>summary{cursor:pointer;color:var(--muted);font-size:12px}
footer{margin-top:32px;color:var(--muted);font-size:11px}
@media print{.toolbar{display:none}}
"""

_JS: Final = """
(function(){
  var bar = document.getElementById('toolbar');
  if (bar) { bar.hidden = false; }
  function setAll(open){
    document.querySelectorAll('details.step, details.snapd').forEach(function(d){ d.open = open; });
  }
  var ex = document.getElementById('expand-all'), co = document.getElementById('collapse-all');
  if (ex) { ex.addEventListener('click', function(){ setAll(true); }); }
  if (co) { co.addEventListener('click', function(){ setAll(false); }); }
  var first = document.getElementById('first-divergence'), go = document.getElementById('goto-first');
  if (first && go) {
    go.hidden = false;
    go.addEventListener('click', function(){ first.scrollIntoView({block: 'center'}); });
  }
  if (first && !window.location.hash) { first.scrollIntoView({block: 'center'}); }
  document.querySelectorAll('.sbs-row').forEach(function(row){
    var pair = row.querySelectorAll(':scope > .side > details.step');
    pair.forEach(function(d){
      d.addEventListener('toggle', function(){
        pair.forEach(function(o){ if (o !== d && o.open !== d.open) { o.open = d.open; } });
      });
    });
  });
})();
"""

_JS_HASH: Final = base64.b64encode(hashlib.sha256(_JS.encode("utf-8")).digest()).decode("ascii")
_CSP: Final = (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{_JS_HASH}'; "
               "base-uri 'none'; form-action 'none'")


def _page(title: str, top: str, body: str, *, has_first: bool = False) -> str:
    from . import __version__ as version

    goto = '<button type="button" id="goto-first" hidden>first divergence</button>' if has_first else ""
    toolbar = (f'<div class="toolbar" id="toolbar" hidden>{goto}'
               '<button type="button" id="expand-all">expand all</button>'
               '<button type="button" id="collapse-all">collapse all</button></div>')
    generated = _when(_dt.datetime.now(tz=_dt.timezone.utc))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head>\n<body><main>"
        f'<div class="top">{top}{toolbar}</div>{body}'
        f'<footer>otel-replay {_esc(version)} · generated {_esc(generated)} · self-contained: this page loads '
        "nothing from the network</footer></main>\n"
        f"<script>{_JS}</script></body></html>\n"
    )


def _outcome_badge(outcome: str, title: str) -> str:
    return f'<span class="outcome {_esc(outcome)}" title="{_esc(title)}">{_esc(outcome)}</span>'


# ------------------------------------------------------------------------------------------- public API


def run_report(run: Run, *, links: Links | None = None) -> str:
    """One run as a self-contained HTML page: header, waterfall of the steps with their snapshots, run-level
    snapshots and events. ``links`` adds links to the trace in Jaeger / Grafana (see :meth:`Links.from_env`)."""
    top = (f'<h1>run · {_esc(run.agent)}</h1>'
           + _outcome_badge(run.status, "how the run ended (the root span status)"))
    body = (_meta(_run_meta(run, links)) + _problems([("", run)])
            + f"<h2>Steps</h2>{_waterfall(run)}"
            + f"<h2>Run snapshots</h2>{_run_snapshots(run, open_kinds=('output',))}{_root_events(run)}")
    return _page(f"otel-replay · run {run.agent} · {run.trace_id}", top, body)


def replay_report(result: ReplayResult, original: Run, *, links: Links | None = None) -> str:
    """A replay as a self-contained HTML page: outcome, replay settings, divergences (the first highlighted),
    the diff's sections, and the original and the replay side by side, step by step, with their snapshots."""
    replayed = result.replay
    first = result.first_divergence
    settings = [
        ("outcome", _outcome_badge(result.outcome, "")),
        ("mode", _esc(result.mode)),
        ("from step", _esc("—" if result.from_step is None else result.from_step)),
        ("actor", _esc(result.actor)),
        ("reason", _text_html(result.reason) if result.reason else "—"),
        ("approvals", ", ".join(f"<code>{_esc(a)}</code>" for a in result.approvals) or "none"),
        ("refusal", f'<span class="st-error badge">refused</span> {_text_html(result.refusal)}'
         if result.refusal else "—"),
        ("original trace", f"<code>{_esc(result.original_trace_id)}</code> "
                           f"{_link_list(links, result.original_trace_id)}"),
        ("replay trace", f"<code>{_esc(result.replay_trace_id or '—')}</code> "
                         f"{_link_list(links, result.replay_trace_id) if result.replay_trace_id else ''}"),
    ]
    if result.schema_changes:
        settings.append(("tool schema changes", "<br>".join(
            f"{_esc(c.get('tool'))} (step {_esc(c.get('step_index'))}): {_esc(c.get('recorded'))} → "
            f"{_esc(c.get('current'))}" for c in result.schema_changes)))
    metas = (f'<div class="metas"><div><h3>replay</h3>{_meta(settings)}</div>'
             f'<div><h3>original</h3>{_meta(_run_meta(original, links))}</div>')
    if replayed is not None:
        metas += f'<div><h3>replay run</h3>{_meta(_run_meta(replayed, links))}</div>'
    metas += "</div>"
    explain = {"matched": "the replay made the same calls and ended the same way as the original",
               "diverged": "the replay did not follow the original: see the divergences",
               "refused": "the replay stopped before a call it may not make"}.get(result.outcome, "")
    top = f"<h1>replay · {_esc(original.agent)}</h1>{_outcome_badge(result.outcome, explain)}"
    problems = _problems([("original", original)] + ([("replay", replayed)] if replayed is not None else []))
    if replayed is None:
        readiness = (f"<h2>Readiness</h2><pre class=\"json\">{_json_html(result.readiness)}</pre>"
                     if result.readiness is not None else "")
        body = (metas + problems
                + f"<h2>Divergences</h2>{_divergence_list(result.divergences, first, None, None, '')}"
                + readiness
                + '<h2>Steps of the original</h2><p class="muted">this replay recorded no run to compare '
                  f'({_esc(result.mode)} mode)</p>{_waterfall(original, label="original")}'
                + f"<h2>Run snapshots of the original</h2>{_run_snapshots(original)}")
        return _page(f"otel-replay · replay of {original.agent} · {result.original_trace_id}", top, body)
    rows = _align(original, replayed)
    _note_tools(rows, result.diff)
    placed = _place_divergences(rows, result.divergences)
    first_pos = placed.get(id(first)) if first is not None else None
    run_row = [d for d in result.divergences if placed.get(id(d)) is None]
    output = result.diff.sections.get("output") if result.diff is not None else None
    run_row_first = first is not None and first_pos is None
    sbs = _sbs(original, replayed, rows, first=first_pos, run_row_divergences=run_row, run_row_first=run_row_first,
               output_changed=bool(output and output.changed), labels=("original", "replay"))
    listed = _divergence_list(result.divergences, first, placed, first_pos,
                              "first-divergence" if run_row_first else "run-row")
    body = (metas + problems
            + f"<h2>Divergences</h2>{listed}"
            + f"<h2>Diff</h2>{_sections(result.diff)}"
            + f'<h2>Original | replay, step by step</h2>{_legend()}{sbs}'
            + "<h2>Replay events</h2>" + (_root_events(replayed) or '<p class="muted">none</p>'))
    return _page(f"otel-replay · replay of {original.agent} · {result.original_trace_id}", top, body,
                 has_first=first is not None)


def diff_report(a: Run, b: Run, diff: RunDiff, *, links: Links | None = None) -> str:
    """Any two runs as a self-contained HTML page: the diff's sections and the runs side by side, step by step;
    the first tool call that differs (per the diff's ``tools`` section) is highlighted as the first divergence."""
    rows = _align(a, b)
    flagged = _note_tools(rows, diff)
    for pos in flagged:
        rows[pos].divergent = True
    first_pos = flagged[0] if flagged else None
    output = diff.sections.get("output")
    sbs = _sbs(a, b, rows, first=first_pos, run_row_divergences=(), run_row_first=False,
               output_changed=bool(output and output.changed), labels=("A", "B"))
    outcome = "diverged" if diff.changed else "matched"
    changed = ", ".join(diff.changed_sections) or "no section"
    top = (f"<h1>diff · {_esc(a.agent)}{' → ' + _esc(b.agent) if b.agent != a.agent else ''}</h1>"
           + _outcome_badge(outcome, f"changed: {changed}"))
    metas = (f'<div class="metas"><div><h3>A (reference)</h3>{_meta(_run_meta(a, links))}</div>'
             f'<div><h3>B (compared with A)</h3>{_meta(_run_meta(b, links))}</div></div>')
    body = (metas + _problems([("A", a), ("B", b)])
            + f"<h2>Diff</h2>{_sections(diff)}"
            + f"<h2>A | B, step by step</h2>{_legend()}{sbs}")
    return _page(f"otel-replay · diff {a.trace_id} → {b.trace_id}", top, body, has_first=first_pos is not None)


def _legend() -> str:
    items = " ".join(f'<span class="badge" title="{_esc(meaning)}">{_esc(symbol)} {_esc(name)}</span>'
                     for name, (symbol, meaning) in _RELATION.items())
    return f'<p class="muted">steps paired by kind and name, in order: {items}</p>'
