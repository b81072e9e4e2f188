"""HTML reports of a run, a replay and a diff, read as a user reads them (no browser: see test_report_browser).

Runs are recorded for real into a module-wide store and replayed with the replay engine; the pages are parsed
with the standard library's HTML parser, so the assertions are about elements, attributes and visible text.
``record_scenarios`` is shared with the browser tests.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import replay_agents as ra

import otel_replay as orp
from otel_replay import semconv
from otel_replay.replay.diff import SECTIONS, diff_runs
from otel_replay.replay.engine import ReplayResult
from otel_replay.report import (
    OTEL_REPLAY_GRAFANA_URL,
    OTEL_REPLAY_JAEGER_URL,
    Links,
    ReportWriteError,
    diff_report,
    replay_report,
    run_report,
    write_report,
)
from otel_replay.runs import Run
from otel_replay.storage.store import Store

HOSTILE = '</script><script>alert("pwned")</script><img src=x onerror=alert(1)>'
OPENAI_KEY = "sk-proj-" + "R3p0" * 10
API_KEY = "sk-proj-" + "K9z8" * 10
PASSWORD = "correct-horse-battery-report"
CARD = "4111 1111 1111 1111"
PLANTED = (OPENAI_KEY, API_KEY, PASSWORD, CARD, "4111111111111111")
JAEGER = "http://jaeger.example.test:16686"
GRAFANA = "https://grafana.example.test"


# ---------------------------------------------------------------------------------------- the agents


@orp.model("pricer", provider="scripted", model="scripted-2")
def pricer(prompt: str) -> dict[str, Any]:
    return {"text": f"priced: {prompt[:40]}", "usage": {"input_tokens": 120, "output_tokens": 30, "cost_usd": 0.00125}}


@orp.tool("charge_card", risk="write")
def charge_card(card: str, *, password: str) -> dict[str, Any]:
    raise PermissionError(f"card declined {HOSTILE}")


@orp.agent("report-agent")
def report_agent(question: str, *, api_key: str) -> dict[str, Any]:
    """Steps: 0 pricer (model, priced), 1 charge_card (tool, fails), 2 inner-agent (agent), 3 lookup_order
    (tool inside it), 4 pricer (model)."""
    plan = pricer(question)
    try:
        charge_card(CARD, password=PASSWORD)
    except PermissionError:
        pass
    order = ra.inner_agent("A1")
    final = pricer(f"final {plan['text']}")
    return {"answer": final["text"], "order": order}


@orp.tool("payout", risk="write")
def payout(account: str, amount: int) -> dict[str, Any]:
    return {"account": account, "paid": amount}


@orp.agent("payout-agent")
def payout_agent(account: str) -> dict[str, Any]:
    """Steps: 0 pricer (model), 1 payout (write tool: a live replay needs an approval for it)."""
    pricer(f"pay {account}")
    return payout(account, 5)


@orp.tool("<script>alert(8)</script>", risk="read")
def hostile_tool(text: str) -> str:
    return text


@orp.agent("<img src=x onerror=alert(7)>")
def hostile_agent(text: str) -> str:
    return hostile_tool(text)


# ---------------------------------------------------------------------------------------- recordings


@dataclass(frozen=True)
class Scenarios:
    """Recorded runs and replays the report tests render."""

    run: Run
    """report-agent: priced model steps, a failing tool, a nested agent, secrets and hostile text."""
    hostile: Run
    """An agent and a tool whose names are HTML."""
    payout: Run
    """payout-agent: a model step, then a write tool."""
    flex: Run
    """flex-agent, the original every replay below replays."""
    matched: ReplayResult
    """mock replay of the unchanged agent."""
    changed: ReplayResult
    """mock replay with changed agent code (``flex_agent_variant``: another prompt, first divergence at step 1)."""
    changed_args: ReplayResult
    """mock replay with changed tool arguments (lookup_order at step 2)."""
    skipped: ReplayResult
    """mock replay of an agent that no longer calls lookup_order (step 2 missing)."""
    dry: ReplayResult
    """dry replay (no run recorded)."""
    refused: ReplayResult
    """live replay of payout-agent without the approval its write tool needs."""


@contextmanager
def recording_home(base: Path) -> Iterator[Path]:
    """``OTEL_REPLAY_HOME`` at ``base/home`` for the block, no store URL or OTLP endpoint inherited."""
    home = base / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in (
            "OTEL_REPLAY_STORE",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_REPLAY_SNAPSHOT_MAX_BYTES",
            OTEL_REPLAY_JAEGER_URL,
            OTEL_REPLAY_GRAFANA_URL,
        ):
            mp.delenv(name, raising=False)
        yield home


def record_scenarios(home: Path) -> Scenarios:
    """Record the runs and replay them (one store, opened once)."""
    orp.configure(home=home, exporter="spool")
    ra.FLEX.update(ra.FLEX_DEFAULTS)
    report_agent(f"refund my order? {HOSTILE} my key is {OPENAI_KEY}", api_key=API_KEY)
    hostile_agent(HOSTILE)
    ra.flex_agent("refund order A1")
    payout_agent("acc-7")
    orp.flush()
    with Store.open() as store:
        ids = {s.agent: s.trace_id for s in store.runs(kind="original", limit=100)}
        flex = ids["flex-agent"]
        try:
            matched = orp.replay(flex, mode="mock", store=store)
            changed = orp.replay(
                flex,
                mode="mock",
                entrypoint="replay_agents:flex_agent_variant",
                store=store,
                actor="reviewer",
                reason="prompt v2 <check>",
            )
            ra.FLEX["order"] = "Z9"
            changed_args = orp.replay(flex, mode="mock", store=store)
            ra.FLEX.update(ra.FLEX_DEFAULTS)
            ra.FLEX["skip_lookup"] = True
            skipped = orp.replay(flex, mode="mock", store=store)
        finally:
            ra.FLEX.update(ra.FLEX_DEFAULTS)
        dry = orp.replay(flex, mode="dry", store=store)
        refused = orp.replay(ids["payout-agent"], mode="live", reason="check the payout", store=store)
        return Scenarios(
            run=store.load_run(ids["report-agent"]),
            hostile=store.load_run(ids["<img src=x onerror=alert(7)>"]),
            flex=store.load_run(flex),
            matched=matched,
            changed=changed,
            changed_args=changed_args,
            skipped=skipped,
            dry=dry,
            refused=refused,
            payout=store.load_run(ids["payout-agent"]),
        )


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenarios]:
    with recording_home(tmp_path_factory.mktemp("report")) as home:
        yield record_scenarios(home)


# --------------------------------------------------------------------------------------- HTML reading


class Node:
    """An element of a parsed page."""

    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag = tag
        self.attrs = attrs
        self.parent = parent
        self.children: list[Node | str] = []

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def text(self) -> str:
        """The text a user reads (entities decoded), whitespace collapsed."""
        parts: list[str] = []

        def walk(node: Node) -> None:
            for child in node.children:
                if isinstance(child, str):
                    parts.append(child)
                elif child.tag not in ("script", "style"):
                    walk(child)

        walk(self)
        return re.sub(r"\s+", " ", "".join(parts)).strip()

    def iter(self) -> Iterator[Node]:
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.iter()

    def all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Node]:
        return [
            n
            for n in self.iter()
            if (tag is None or n.tag == tag)
            and (cls is None or cls in n.classes)
            and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def one(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Node:
        found = self.all(tag, cls, **attrs)
        assert len(found) == 1, f"expected one <{tag} class={cls} {attrs}>, found {len(found)}"
        return found[0]


_VOID = {"meta", "br", "img", "input", "link", "hr", "wbr", "source", "col", "area", "base", "embed"}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in _VOID:
            self.cur = node

    def handle_endtag(self, tag: str) -> None:
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None and node.parent is not None, f"unbalanced </{tag}>"
        self.cur = node.parent

    def handle_data(self, data: str) -> None:
        self.cur.children.append(data)


def parse(page: str) -> Node:
    builder = _Builder()
    builder.feed(page)
    builder.close()
    assert builder.cur is builder.root, "unclosed elements"
    return builder.root


def step_row(doc: Node, index: int) -> Node:
    return doc.one("details", data_step_index=str(index))


def run_snapshot(doc: Node, kind: str) -> Node:
    """The run-level snapshot of ``kind`` (in the run snapshots section, not under a step)."""
    (found,) = [
        snap for box in doc.all("details", cls="snapd") for snap in box.all(cls="snap", data_snapshot_kind=kind)
    ]
    return found


def row_cells(row: Node) -> dict[str, str]:
    summary = row.all("summary")[0]
    return {c: summary.one(cls=c).text() for c in ("c-name", "c-status", "c-ms", "c-cost", "c-tok")}


def ms(value: float) -> str:
    return f"{value:,.3f} ms" if value < 1 else f"{value:,.1f} ms"


def assert_self_contained(page: str, allowed_hrefs: tuple[str, ...] = ()) -> None:
    doc = parse(page)
    lowered = page.lower()
    for needle in ("<script src", "<link", "@import", "url(http", "<iframe", "<img", "<object", "<embed"):
        assert needle not in lowered, needle
    ids = [node.attrs["id"] for node in doc.iter() if "id" in node.attrs]
    assert len(ids) == len(set(ids)), "ids are unique"
    for node in doc.iter():
        assert "src" not in node.attrs, (node.tag, node.attrs)
        href = node.attrs.get("href")
        if href is not None:
            assert href.startswith("#") or href.startswith(allowed_hrefs), href
            assert not href.startswith("#") or href[1:] in ids, f"{href} points nowhere"
        assert "url(" not in node.attrs.get("style", "")
    assert "url(" not in doc.one("style").text()
    csp = doc.one("meta", http_equiv="Content-Security-Policy").attrs["content"]
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
    assert [s.attrs for s in doc.all("script")] == [{}], "one inline script of the report's own"


# ------------------------------------------------------------------------------------------ run page


def test_run_report_header(sc: Scenarios) -> None:
    run = sc.run
    doc = parse(run_report(run))
    meta = {dt.text(): dd.text() for dt, dd in zip(doc.all("dt"), doc.all("dd"))}
    assert meta["agent"] == "report-agent"
    assert meta["trace id"] == run.trace_id and meta["run id"] == run.run_id
    assert meta["status"] == "ok" and meta["kind"] == "original"
    assert meta["started at"].startswith(run.summary.started_at.strftime("%Y-%m-%d %H:%M:%S"))
    assert meta["duration"] == ms(run.summary.duration_ms)
    assert meta["cost"] == "$0.0025"
    assert meta["tokens in / out"] == "240 / 60"
    assert meta["entrypoint"] == "test_report:report_agent" and meta["convention"] == semconv.SCHEMA_VERSION
    assert doc.one(cls="top").one(cls="outcome").text() == "ok"
    assert doc.one("title").text().endswith(run.trace_id)


def test_run_report_waterfall_has_every_step_with_latency_cost_and_tokens(sc: Scenarios) -> None:
    run = sc.run
    doc = parse(run_report(run))
    assert [s.name for s in run.steps] == ["pricer", "charge_card", "inner-agent", "lookup_order", "pricer"]
    rows = doc.all("details", cls="step")
    assert [int(r.attrs["data-step-index"]) for r in rows] == [s.index for s in run.steps]
    for step in run.steps:
        cells = row_cells(step_row(doc, step.index))
        assert cells["c-name"] == f"#{step.index} {step.kind} {step.name}" + (" risk write" if step.index == 1 else "")
        assert cells["c-ms"] == ms(step.duration_ms)
        assert cells["c-status"] == step.status
        if step.kind == "model":
            assert (cells["c-cost"], cells["c-tok"]) == ("$0.00125", "120 / 30")
        else:
            assert (cells["c-cost"], cells["c-tok"]) == ("—", "—")
    # the failing tool is marked as an error, its error shown when the row opens
    failed = step_row(doc, 1)
    assert "is-error" in failed.classes and failed.one(cls="st-error").text() == "error"
    assert failed.one(cls="error-box").text().startswith("PermissionError: card declined")
    # nesting: the tool inside the nested agent is indented one level deeper
    assert step_row(doc, 3).one(cls="c-name").attrs["style"] == "--depth:1"
    assert step_row(doc, 2).one(cls="c-name").attrs["style"] == "--depth:0"


def test_waterfall_bars_sit_where_the_steps_ran(sc: Scenarios) -> None:
    run = sc.run
    doc = parse(run_report(run))
    bars = []
    for step in run.steps:
        style = step_row(doc, step.index).one(cls="bar").attrs["style"]
        left, width = (float(v) for v in re.fullmatch(r"left:([\d.]+)%;width:([\d.]+)%", style).groups())
        assert left >= 0 and left + width <= 100.001
        bars.append((left, width))
    lefts = [b[0] for b in bars]
    assert lefts == sorted(lefts), "steps start in index order"
    inner, nested = bars[2], bars[3]
    assert inner[0] <= nested[0] and nested[0] + nested[1] <= inner[0] + inner[1] + 0.5


def test_snapshots_of_each_step_and_of_the_run_are_in_the_page(sc: Scenarios) -> None:
    run = sc.run
    doc = parse(run_report(run))
    for step in run.steps:
        row = step_row(doc, step.index)
        kinds = [n.attrs["data-snapshot-kind"] for n in row.all(cls="snap")]
        assert kinds == [s.kind for s in sorted(step.snapshot_list, key=lambda s: s.seq)]
    tool = step_row(doc, 3).one(cls="snap")
    assert '"order_id": "A1"' in tool.one("pre").text() and '"status": "delivered"' in tool.one("pre").text()
    run_snaps = [
        snap.attrs["data-snapshot-kind"] for box in doc.all("details", cls="snapd") for snap in box.all(cls="snap")
    ]
    assert run_snaps == [s.kind for s in sorted(run.snapshot_list, key=lambda s: s.seq)]
    assert {"input", "output"} <= set(run_snaps)


def test_redacted_values_are_marked_and_planted_secrets_never_appear(sc: Scenarios) -> None:
    page = run_report(sc.run)
    for secret in PLANTED:
        assert secret not in page
    doc = parse(page)
    marked = doc.all("span", cls="redacted")
    assert all("Redacted when recorded" in m.attrs["title"] and "never stored" in m.attrs["title"] for m in marked)
    # the password keyword argument and the card of the tool call are markers with a fingerprint
    tool_json = step_row(doc, 1).one(cls="snap").one("pre")
    args = list(tool_json.all("span", cls="redacted"))
    assert len(args) == 2 and all(re.fullmatch(r"redacted · hmac-sha256:[0-9a-f]{16}", m.text()) for m in args)
    assert sorted(m.attrs["title"].split("(found at ")[1].split(")")[0] for m in args) == [
        "tool.args.card",
        "tool.args.password",
    ]
    # the API key argument of the run, and the key inside the question (inline marker)
    input_snap = run_snapshot(doc, "input")
    texts = [m.text() for m in input_snap.all("span", cls="redacted")]
    assert any(t.startswith("redacted · hmac-sha256:") for t in texts)
    assert any(re.fullmatch(r"\[REDACTED:openai_api_key:hmac-sha256:[0-9a-f]{16}\]", t) for t in texts)
    assert input_snap.one(cls="b-redacted").text().endswith("redacted")


def test_hostile_payloads_render_as_text(sc: Scenarios) -> None:
    for page in (run_report(sc.run), run_report(sc.hostile)):
        assert HOSTILE not in page and "<script>alert(8)" not in page
        assert page.count("<script") == 1 and "<img" not in page  # only the report's own script
        assert_self_contained(page)
    doc = parse(run_report(sc.run))
    question = run_snapshot(doc, "input").one("pre").text()
    assert HOSTILE.replace('"', '\\"') in question  # shown as the JSON text it is
    hostile = parse(run_report(sc.hostile))
    assert hostile.one("h1").text() == "run · <img src=x onerror=alert(7)>"
    assert step_row(hostile, 0).one(cls="name").text() == "<script>alert(8)</script>"


def test_links_only_when_configured(sc: Scenarios, monkeypatch: pytest.MonkeyPatch) -> None:
    run = sc.run
    for page in (run_report(run), run_report(run, links=Links()), run_report(run, links=Links.from_env())):
        assert not parse(page).all("a", cls="ext")
        assert 'href="http' not in page and "Jaeger" not in page and "Grafana" not in page
    monkeypatch.setenv(OTEL_REPLAY_JAEGER_URL, JAEGER + "/")
    monkeypatch.setenv(OTEL_REPLAY_GRAFANA_URL, GRAFANA + "//")
    links = Links.from_env()
    assert links == Links(jaeger_url=JAEGER, grafana_url=GRAFANA)
    page = run_report(run, links=links)
    anchors = {a.text(): a.attrs["href"] for a in parse(page).all("a", cls="ext")}
    assert anchors == {
        "Jaeger": f"{JAEGER}/trace/{run.trace_id}",
        "Grafana": f"{GRAFANA}/d/otel-replay-run/otel-replay-run?var-trace_id={run.trace_id}",
    }
    assert_self_contained(page, allowed_hrefs=(JAEGER, GRAFANA))
    only_jaeger = Links(jaeger_url=JAEGER)
    assert [label for label, _ in only_jaeger.for_trace(run.trace_id)] == ["Jaeger"]


def test_links_leave_out_the_credentials_of_the_url(sc: Scenarios, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Grafana URL with ``user:password@`` links without them: a report is a file anyone may be sent."""
    monkeypatch.setenv(OTEL_REPLAY_GRAFANA_URL, "https://admin:Gr4fana-pass@grafana.example.test:3000/")
    page = run_report(sc.run, links=Links.from_env())
    assert "Gr4fana-pass" not in page and "admin" not in page
    assert f"https://grafana.example.test:3000/d/otel-replay-run/otel-replay-run?var-trace_id={sc.run.trace_id}" in page


@pytest.mark.parametrize(
    "value",
    ["javascript:alert(1)", "ftp://jaeger.example.test", "jaeger:16686", "  ", 'http://x" onmouseover="alert(1)'],
)
def test_links_ignore_values_that_are_not_http_urls(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OTEL_REPLAY_JAEGER_URL, value)
    monkeypatch.setenv(OTEL_REPLAY_GRAFANA_URL, value)
    assert Links.from_env() == Links()
    if value.strip():
        with pytest.raises(ValueError, match="http"):
            Links(jaeger_url=value)


# ---------------------------------------------------------------------------------------- replay page


def sbs_rows(doc: Node) -> list[Node]:
    return [r for r in doc.all("div", cls="sbs-row") if "run-row" not in r.classes]


def test_replay_with_changed_code_highlights_the_first_divergence(sc: Scenarios) -> None:
    result = sc.changed
    first = result.first_divergence
    assert result.outcome == "diverged" and (first.step_index, first.kind) == (1, "request")
    page = replay_report(result, sc.flex)
    assert_self_contained(page)
    doc = parse(page)
    assert doc.one(cls="top").one(cls="outcome").text() == "diverged"
    highlighted = doc.one(id="first-divergence")
    assert {"sbs-row", "divergence", "first-divergence"} <= highlighted.classes
    assert highlighted.attrs["data-a-index"] == "1" and highlighted.attrs["data-b-index"] == "1"
    assert "model 'planner' was called with different request" in highlighted.one(cls="notes").text()
    assert len(doc.all(cls="first-divergence")) == 1
    divergent = {r.attrs.get("data-a-index") for r in doc.all(cls="divergence")}
    assert divergent == {str(d.step_index) if d.step_index is not None else None for d in result.divergences}
    # every step of both runs is in the side-by-side view, in order
    rows = sbs_rows(doc)
    assert [r.attrs.get("data-a-index") for r in rows] == [str(s.index) for s in sc.flex.steps]
    assert [r.attrs.get("data-b-index") for r in rows] == [str(s.index) for s in result.replay.steps]
    listed = doc.one("ol", cls="divergences")
    assert listed.one("li", cls="first").one("a").attrs["href"] == "#first-divergence"
    assert first.reason in listed.text()


def test_replay_header_shows_mode_outcome_actor_reason_and_sections(sc: Scenarios) -> None:
    result = sc.changed
    doc = parse(replay_report(result, sc.flex))
    meta = {dt.text(): dd.text() for dt, dd in zip(doc.all("dt"), doc.all("dd"))}
    assert meta["mode"] == "mock" and meta["outcome"] == "diverged"
    assert meta["actor"] == "reviewer" and meta["reason"] == "prompt v2 <check>"
    assert meta["approvals"] == "none" and meta["refusal"] == "—"
    assert meta["original trace"] == sc.flex.trace_id and meta["replay trace"] == result.replay_trace_id
    linked = parse(replay_report(result, sc.flex, links=Links(jaeger_url=JAEGER)))
    assert {a.attrs["href"] for a in linked.all("a", cls="ext")} == {
        f"{JAEGER}/trace/{sc.flex.trace_id}",
        f"{JAEGER}/trace/{result.replay_trace_id}",
    }
    kinds = [dd.text() for dt, dd in zip(doc.all("dt"), doc.all("dd")) if dt.text() == "kind"]
    assert kinds == ["original", f"replay of {sc.flex.trace_id}"]
    sections = {r.attrs["data-section"]: r for r in doc.all("tr", cls="section")}
    assert list(sections) == list(SECTIONS)
    for name, section in result.diff.sections.items():
        row = sections[name]
        assert ("changed" in row.classes) == section.changed
        assert section.summary in row.text()


def test_matched_replay_has_no_divergence(sc: Scenarios) -> None:
    result = sc.matched
    assert result.outcome == "matched"
    doc = parse(replay_report(result, sc.flex))
    assert doc.one(cls="top").one(cls="outcome").text() == "matched"
    assert not doc.all(cls="divergence") and not doc.all(id="first-divergence")
    rows = sbs_rows(doc)
    assert len(rows) == len(sc.flex.steps) and all("same" in r.classes for r in rows)
    assert not doc.all("ol", cls="divergences") and "no divergences" in doc.text()


def test_missing_call_is_a_row_with_only_the_original_side(sc: Scenarios) -> None:
    result = sc.skipped
    page = replay_report(result, sc.flex)
    assert_self_contained(page)
    doc = parse(page)
    missing = doc.one(id="first-divergence")
    assert "missing" in missing.classes and missing.attrs["data-a-index"] == "2"
    assert "data-b-index" not in missing.attrs
    assert missing.one(cls="empty").text() == "no call"
    assert "tool call lookup_order removed" in missing.one(cls="notes").text()


def test_refused_replay_is_marked_and_says_why(sc: Scenarios) -> None:
    result = sc.refused
    assert result.outcome == "refused" and result.refusal
    page = replay_report(result, sc.payout)
    assert_self_contained(page)
    doc = parse(page)
    assert doc.one(cls="top").one(cls="outcome").text() == "refused"
    meta = {dt.text(): dd.text() for dt, dd in zip(doc.all("dt"), doc.all("dd"))}
    assert meta["refusal"] == f"refused {result.refusal}"
    assert meta["mode"] == "live" and meta["reason"] == "check the payout"
    # Refused before the agent started (the recorded write tool had no approval): no replay run to set beside
    # the original, whose steps the page shows with the approval divergence listed.
    assert result.refused_before_start and result.replay is None
    assert result.first_divergence is not None and result.first_divergence.step_index == 1
    assert "approval" in doc.text() and "--approve" in doc.text()


def test_dry_replay_shows_the_original_and_its_readiness(sc: Scenarios) -> None:
    result = sc.dry
    assert result.replay is None
    page = replay_report(result, sc.flex)
    assert_self_contained(page)
    doc = parse(page)
    assert doc.one(cls="top").one(cls="outcome").text() == result.outcome
    assert [int(r.attrs["data-step-index"]) for r in doc.all("details", cls="step")] == [s.index for s in sc.flex.steps]
    assert '"integrity"' in doc.text()


# ------------------------------------------------------------------------------------------ diff page


def test_diff_report_highlights_the_first_tool_call_that_differs(sc: Scenarios) -> None:
    replayed = sc.changed_args.replay
    diff = diff_runs(sc.flex, replayed)
    assert diff.sections["tools"].changed
    page = diff_report(sc.flex, replayed, diff)
    assert_self_contained(page)
    doc = parse(page)
    assert doc.one(cls="top").one(cls="outcome").text() == "diverged"
    first = doc.one(id="first-divergence")
    assert {"divergence", "first-divergence"} <= first.classes
    assert (first.attrs["data-a-index"], first.attrs["data-b-index"]) == ("2", "2")
    assert "tool call lookup_order changed: args_hash" in first.one(cls="notes").text()
    assert {r.attrs["data-section"] for r in doc.all("tr", cls="changed")} == set(diff.changed_sections)


def test_diff_of_identical_runs_has_no_divergence(sc: Scenarios) -> None:
    page = diff_report(sc.flex, sc.flex, diff_runs(sc.flex, sc.flex))
    doc = parse(page)
    assert doc.one(cls="top").one(cls="outcome").text() == "matched"
    assert not doc.all(cls="divergence")


def test_diff_of_two_different_agents_pairs_nothing_it_should_not(sc: Scenarios) -> None:
    doc = parse(diff_report(sc.flex, sc.run, diff_runs(sc.flex, sc.run)))
    rows = sbs_rows(doc)
    assert sorted(int(r.attrs["data-a-index"]) for r in rows if "data-a-index" in r.attrs) == [
        s.index for s in sc.flex.steps
    ]
    assert sorted(int(r.attrs["data-b-index"]) for r in rows if "data-b-index" in r.attrs) == [
        s.index for s in sc.run.steps
    ]
    assert len(doc.all(cls="first-divergence")) == 1
    for row in rows:
        if "same" in row.classes or "changed" in row.classes:
            a, b = (row.one(cls=side).one(cls="name").text() for side in ("a", "b"))
            assert a == b


# -------------------------------------------------------------------------------------------- writing


def test_write_report_writes_utf8_atomically(sc: Scenarios, tmp_path: Path) -> None:
    target = tmp_path / "run.html"
    target.write_text("old report", encoding="utf-8")
    page = run_report(sc.run)
    written = write_report(str(target), page)
    assert written == target and target.read_bytes() == page.encode("utf-8")
    assert "—" in target.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.html"], "no temporary file left behind"


def test_write_report_keeps_the_old_file_when_the_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "run.html"
    target.write_text("old report", encoding="utf-8")

    def refuse(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match=r"cannot write the report to .*run\.html: No space left on device"):
        write_report(target, "<p>new</p>")
    assert target.read_text(encoding="utf-8") == "old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.html"]


def test_write_report_on_an_unwritable_path_raises_one_clear_oserror(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    cases = {
        tmp_path / "missing" / "run.html": "missing does not exist",
        tmp_path: "it is a folder",
        blocker / "run.html": "a-file is not a folder",
    }
    for path, message in cases.items():
        with pytest.raises(OSError, match=message) as caught:
            write_report(path, "<p></p>")
        assert isinstance(caught.value, ReportWriteError)
        assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(OSError, match="Permission denied"):
            write_report(locked / "run.html", "<p></p>")
