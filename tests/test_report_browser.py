"""HTML reports in a real headless Chromium: no console error, no request but the file itself, every step
visible, the first divergence highlighted and scrolled into view, snapshots and redaction markers shown when a
step opens, and the page usable with JavaScript off.

Chromium comes from ``OTEL_REPLAY_CHROMIUM``, else ``chromium`` / ``chromium-browser`` on the PATH, else
``/usr/bin/chromium``; without it the module is skipped, or fails when ``OTEL_REPLAY_REQUIRE_BROWSER=1`` (as in
CI). Without the ``playwright`` package (of the ``[test]`` extra) it fails. Full-page screenshots are kept in
``OTEL_REPLAY_ARTIFACTS`` (default ``<repo>/test-artifacts/``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api
from test_report import PLANTED, Scenarios, record_scenarios, recording_home

from otel_replay.replay.diff import diff_runs
from otel_replay.report import diff_report, replay_report, run_report, write_report

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_ENV = "OTEL_REPLAY_CHROMIUM"
ARTIFACTS_ENV = "OTEL_REPLAY_ARTIFACTS"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 800}


def find_chromium() -> str | None:
    """The Chromium executable to drive: ``$OTEL_REPLAY_CHROMIUM``, the PATH, then ``/usr/bin/chromium``."""
    configured = os.environ.get(CHROMIUM_ENV)
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    for candidate in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


CHROMIUM = find_chromium()
if CHROMIUM is None:
    missing = (
        f"no Chromium to run the browser tests: set {CHROMIUM_ENV} (now {os.environ.get(CHROMIUM_ENV)!r}) "
        "or install chromium (scripts/ensure-chromium)"
    )
    if os.environ.get("OTEL_REPLAY_REQUIRE_BROWSER") == "1":
        pytest.fail(missing, pytrace=False)
    pytest.skip(missing, allow_module_level=True)


def artifacts_dir() -> Path:
    path = Path(os.environ.get(ARTIFACTS_ENV) or REPO / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Pages:
    """Report files written for the module, and the scenarios they show."""

    sc: Scenarios
    run: Path
    replay: Path
    diff: Path


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    base = tmp_path_factory.mktemp("report-browser")
    with recording_home(base) as home:
        sc = record_scenarios(home)
    out = base / "reports"
    out.mkdir()
    diffed = sc.changed_args.replay
    yield Pages(
        sc=sc,
        run=write_report(out / "run.html", run_report(sc.run)),
        replay=write_report(out / "replay.html", replay_report(sc.changed, sc.flex)),
        diff=write_report(out / "diff.html", diff_report(sc.flex, diffed, diff_runs(sc.flex, diffed))),
    )


@dataclass
class Opened:
    """A report open in a page, with what the page logged and requested."""

    page: Any
    url: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def assert_quiet(self) -> None:
        assert self.errors == [], self.errors
        assert self.requests == [self.url], "the report fetched something besides itself"


@contextmanager
def opened(browser: Any, path: Path, *, javascript: bool = True) -> Iterator[Opened]:
    """``path`` loaded from its file:// URL in a fresh context, console errors and requests collected."""
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=javascript)
    page = context.new_page()
    url = path.resolve().as_uri()
    seen = Opened(page=page, url=url)
    page.on("console", lambda msg: seen.errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: seen.errors.append(f"page error: {exc}"))
    page.on("request", lambda request: seen.requests.append(request.url))
    try:
        page.goto(url, wait_until="load")
        yield seen
    finally:
        context.close()


def screenshot(page: Any, name: str) -> Path:
    path = artifacts_dir() / name
    page.screenshot(path=str(path), full_page=True)
    assert path.is_file() and path.stat().st_size > 10_000, f"empty screenshot {path}"
    return path


def background(locator: Any) -> str:
    return locator.evaluate("el => getComputedStyle(el).backgroundColor")


def in_viewport(locator: Any) -> bool:
    return locator.evaluate(
        "el => { const r = el.getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0; }"
    )


# --------------------------------------------------------------------------------------------- tests


def test_run_report(browser: Any, pages: Pages) -> None:
    run = pages.sc.run
    with opened(browser, pages.run) as seen:
        page = seen.page
        rows = page.locator("details.step[data-step-index]")
        assert rows.count() == len(run.steps)
        for step in run.steps:
            row = page.locator(f'details.step[data-step-index="{step.index}"]')
            assert row.locator("> summary").is_visible()
            assert step.name in row.locator("> summary .name").inner_text()
        # the failed tool is visibly an error: a red bar and an error badge
        failed = page.locator('details.step[data-step-index="1"]')
        assert failed.locator(".st-error").is_visible()
        ok_bar = background(page.locator('details.step[data-step-index="3"] .bar'))
        assert background(failed.locator(".bar")) not in (ok_bar, "rgba(0, 0, 0, 0)")
        # closed, its snapshot is hidden; opened, the arguments and their redaction markers show
        snapshot = failed.locator(".snap pre")
        assert not snapshot.is_visible()
        failed.locator("> summary").click()
        assert snapshot.is_visible() and '"arguments"' in snapshot.inner_text()
        marker = failed.locator(".snap .redacted").first
        assert marker.is_visible() and marker.inner_text().startswith("redacted · hmac-sha256:")
        assert background(marker) != background(snapshot)
        assert "Redacted when recorded" in (marker.get_attribute("title") or "")
        page.click("#expand-all")
        assert page.locator("details.step[open]").count() == len(run.steps)
        body = page.locator("body").inner_text()
        assert all(secret not in body for secret in PLANTED)
        screenshot(page, "report-run.png")
        seen.assert_quiet()


def test_run_report_without_javascript(browser: Any, pages: Pages) -> None:
    with opened(browser, pages.run, javascript=False) as seen:
        page = seen.page
        assert page.locator("#toolbar").count() == 1 and not page.locator("#toolbar").is_visible()
        row = page.locator('details.step[data-step-index="0"]')
        assert row.is_visible()
        row.locator("> summary").click()
        assert row.locator(".snap pre").is_visible()
        assert '"prompt"' in row.locator(".snap pre").inner_text()
        seen.assert_quiet()


def test_replay_report_highlights_and_scrolls_to_the_first_divergence(browser: Any, pages: Pages) -> None:
    result = pages.sc.changed
    with opened(browser, pages.replay) as seen:
        page = seen.page
        assert page.locator(".top .outcome").inner_text().lower() == "diverged"
        rows = page.locator(".sbs-row:not(.run-row)")
        assert rows.count() == len(pages.sc.flex.steps)
        for i in range(rows.count()):
            assert rows.nth(i).is_visible()
        first = page.locator("#first-divergence")
        assert first.get_attribute("data-a-index") == str(result.first_divergence.step_index)
        page.wait_for_function(
            "() => { const r = document.getElementById('first-divergence')"
            ".getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }",
            timeout=5000,
        )
        assert in_viewport(first) and page.evaluate("window.scrollY") > 0
        normal = page.locator(".sbs-row.same").first
        assert background(first) != background(normal)
        # opening one side of a compared step opens the other side too
        first.locator(".side.a > details.step > summary").click()
        assert first.locator(".side.b > details.step").evaluate("d => d.open")
        assert first.locator(".side.b .snap pre").first.is_visible()
        screenshot(page, "report-replay.png")
        seen.assert_quiet()


def test_diff_report(browser: Any, pages: Pages) -> None:
    with opened(browser, pages.diff) as seen:
        page = seen.page
        first = page.locator("#first-divergence")
        assert first.is_visible() and in_viewport(first)
        assert (first.get_attribute("data-a-index"), first.get_attribute("data-b-index")) == ("2", "2")
        assert background(first) != background(page.locator(".sbs-row.same").first)
        assert page.locator('tr.section[data-section="tools"] .b-changed').is_visible()
        screenshot(page, "report-diff.png")
        seen.assert_quiet()


# ------------------------------------------------------------------------------------------------- lab


@pytest.fixture(scope="module")
def lab_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    """The HTML report of a lab over the demo's runs: each run replayed unchanged and with a new system prompt."""
    from test_lab_report import NEW_PROMPT, lab_of

    from otel_replay.demo.agent import run_demo
    from otel_replay.lab.html import write_lab_html
    from otel_replay.lab.scoring import BUILTIN_SCORERS, pair_result
    from otel_replay.replay.engine import replay
    from otel_replay.storage.store import Store

    base = tmp_path_factory.mktemp("lab-browser")
    with recording_home(base) as home:
        import otel_replay as orp

        orp.configure(home=home, exporter="spool")
        run_demo()
        orp.flush()
        with Store.open() as store:
            pairs = []
            for summary in sorted(store.runs(kind="original", limit=10), key=lambda s: s.started_at):
                original = store.load_run(summary.trace_id)
                for entrypoint in (None, NEW_PROMPT):
                    result = replay(summary.trace_id, mode="deterministic", store=store, entrypoint=entrypoint)
                    pairs.append(pair_result(original, result, scorers=BUILTIN_SCORERS))
    lab = lab_of(pairs, ["diverged > 0", "cost_p50 > +10%"], scorers=BUILTIN_SCORERS)
    yield write_lab_html(lab, base / "lab.html"), lab


def test_lab_report(browser: Any, lab_page: tuple[Path, Any]) -> None:
    path, lab = lab_page
    with opened(browser, path) as seen:
        page = seen.page
        rows = page.locator("#runs tbody tr")
        assert rows.count() == len(lab.pairs) == 6
        assert page.locator('#summary td[data-total="diverged"]').inner_text() == "3"
        assert page.locator('#scorers tr[data-scorer="output_equal"]').is_visible()
        assert "support_llm" in page.locator("#divergences").inner_text()
        assert page.locator("#gates tr.held").count() == 1 and page.locator("#gates tr.passed").count() == 1
        # every run links to its replay-vs-original diff in the same file
        diverged = next(i for i, p in enumerate(lab.pairs) if p.outcome == "diverged")
        link = page.locator(f'#runs tr[data-run="{diverged}"] a.diff-link')
        link.click()
        target = page.locator(f"#run-{diverged}")
        page.wait_for_function(
            f"() => {{ const r = document.getElementById('run-{diverged}')"
            ".getBoundingClientRect(); return r.top > -2 && r.top < innerHeight / 2; }",
            timeout=5000,
        )
        assert page.evaluate("window.location.hash") == f"#run-{diverged}"
        assert target.locator('tr.section[data-section="output"]').is_visible()
        assert target.locator("ol.divergences li.first .b-dv").inner_text() == "request"
        worst = page.locator("#worst a").first
        assert (worst.get_attribute("href") or "").startswith("#run-")
        screenshot(page, "report-lab.png")
        seen.assert_quiet()


@pytest.fixture(scope="module")
def command_lab_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The HTML report ``otel-replay lab --html`` writes, over the demo's runs with a new system prompt."""
    import subprocess
    import sys

    from otel_replay.demo.agent import run_demo

    base = tmp_path_factory.mktemp("lab-command-browser")
    with recording_home(base) as home:
        import otel_replay as orp

        orp.configure(home=home, exporter="spool")
        run_demo()
        orp.flush()
        prompt = base / "system.txt"
        prompt.write_text("You are a terse support agent.", encoding="utf-8")
        page = base / "lab.html"
        out = subprocess.run(
            [
                *(sys.executable, "-m", "otel_replay.cli", "lab", "--workers", "1"),
                *("--prompt-file", f"system={prompt}", "--fail-if", "diverged > 0", "--html", str(page)),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "OTEL_REPLAY_HOME": str(home)},
            timeout=300,
            cwd=base,
        )
    assert out.returncode == 1, out.stderr  # the gate held: every run diverged
    yield page


def test_lab_report_written_by_the_command(browser: Any, command_lab_page: Path) -> None:
    with opened(browser, command_lab_page) as seen:
        page = seen.page
        assert page.locator("#runs tbody tr").count() == 3
        assert page.locator('#summary td[data-total="diverged"]').inner_text() == "3"
        assert page.locator("#gates tr.held").count() == 1
        page.locator('#runs tr[data-run="0"] a.diff-link').click()
        assert page.evaluate("window.location.hash") == "#run-0"
        assert page.locator("#run-0 ol.divergences li.first .b-dv").inner_text() == "request"
        seen.assert_quiet()
