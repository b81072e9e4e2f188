"""The HTML report as rendered from the package's Jinja2 templates: hostile values planted in a recorded run
reach the page as text (autoescape, in element text and in attributes), the templates and the page's script
come from the installed package (never from the current folder), and a wheel carries them.

Runs are recorded for real with the decorators into a module home (the step's span attributes set through
the OpenTelemetry API, as any instrumentation could), replayed with the engine, and the pages are parsed with
the standard library's HTML parser.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import fork_server
import pytest
import tomllib
from opentelemetry import trace

import otel_replay as orp
from otel_replay import semconv
from otel_replay.replay.diff import diff_runs
from otel_replay.replay.engine import ReplayResult
from otel_replay.report import diff_report, replay_report, run_report
from otel_replay.runs import Run
from otel_replay.storage.store import Store
from otel_replay.terminal import clean

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "otel_replay" / "report" / "templates"

TEMPLATE_SYNTAX = "{{ 7*7 }}{% if true %}IF{% endif %}{# c #}"
MARKUP = '</pre></script><script>alert("x")</script><img src=x onerror=alert(1)>'
QUOTES = "\"' onmouseover=alert(2) x=\"y'"
BIDI = "invoice\u202egnp.exe"
TERMINAL = "\x1b[31mred\x1b[0m\x1b]0;title\x07"
AGENT = f"agent {TEMPLATE_SYNTAX} {MARKUP}"
TOOL = f"tool{QUOTES}<b>bold</b>"
ATTRIBUTE = '"><img src=x onerror=alert(3)>'
RESULT = f"{MARKUP} {QUOTES} {BIDI} {TERMINAL} {TEMPLATE_SYNTAX}"
OWN_TAGS = {
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "main",
    "div",
    "h1",
    "h2",
    "h3",
    "span",
    "button",
    "dl",
    "dt",
    "dd",
    "code",
    "strong",
    "p",
    "details",
    "summary",
    "pre",
    "ul",
    "ol",
    "li",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "br",
    "a",
    "footer",
    "script",
}
OWN_ATTRIBUTES = {
    "lang",
    "charset",
    "http-equiv",
    "content",
    "name",
    "class",
    "id",
    "hidden",
    "type",
    "title",
    "style",
    "open",
    "href",
    "target",
    "rel",
    "data-step-index",
    "data-side",
    "data-run",
    "data-snapshot-kind",
    "data-section",
    "data-a-index",
    "data-b-index",
}


@orp.tool(TOOL, risk="read")
def hostile_tool(text: str) -> str:
    span = trace.get_current_span()
    span.set_attribute(semconv.REPLAY_SERVED, ATTRIBUTE)
    span.set_attribute("hostile." + ATTRIBUTE, RESULT)
    return f"{text} {RESULT}"


@orp.tool("failing", risk="read")
def failing_tool() -> None:
    raise ValueError(f"failed: {MARKUP} {BIDI}")


@orp.agent(AGENT)
def hostile_agent(question: str) -> dict[str, Any]:
    answer = hostile_tool(question)
    orp.record_state({RESULT: MARKUP}, transition=TEMPLATE_SYNTAX)
    try:
        failing_tool()
    except ValueError:
        pass
    return {"answer": answer, TEMPLATE_SYNTAX: [QUOTES, BIDI]}


@dataclass(frozen=True)
class Pages:
    run: Run
    replay: ReplayResult
    pages: dict[str, str]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    home = tmp_path_factory.mktemp("report-templates") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(name, raising=False)
        orp.configure(home=home, exporter="spool")
        hostile_agent(f"question {MARKUP}")
        orp.flush()
        with Store.open() as store:
            (summary,) = store.runs(kind="original", limit=10)
            run = store.load_run(summary.trace_id)
            replayed = orp.replay(summary.trace_id, mode="mock", store=store)
        assert replayed.replay is not None
        yield Pages(
            run=run,
            replay=replayed,
            pages={
                "run": run_report(run),
                "replay": replay_report(replayed, run),
                "diff": diff_report(run, replayed.replay, diff_runs(run, replayed.replay)),
            },
        )


class _Page(HTMLParser):
    """Elements (tag, attributes) and text of a page; text inside <script> and <style> kept apart."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.texts: list[str] = []
        self.scripts: list[str] = []
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        if tag in ("script", "style"):
            self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if self._in and self._in[-1] == "script":
            self.scripts.append(data)
        elif not self._in:
            self.texts.append(data)


def parse(page: str) -> _Page:
    parsed = _Page()
    parsed.feed(page)
    parsed.close()
    return parsed


@pytest.mark.parametrize("kind", ["run", "replay", "diff"])
def test_hostile_values_stay_text_in_every_page(pages: Pages, kind: str) -> None:
    page = pages.pages[kind]
    parsed = parse(page)
    tags = {tag for tag, _ in parsed.elements}
    assert tags <= OWN_TAGS, tags - OWN_TAGS  # no <img>, <b> or other element from the data
    names = {name for _, attrs in parsed.elements for name in attrs}
    assert names <= OWN_ATTRIBUTES, names - OWN_ATTRIBUTES  # no onerror / onmouseover from the data
    assert [tag for tag, _ in parsed.elements].count("script") == 1 and len(parsed.scripts) == 1
    assert "alert" not in parsed.scripts[0]
    text = "".join(parsed.texts)
    assert TOOL in text  # the tool name is shown as the text it is
    assert "{{ 7*7 }}" in text and "IF{% endif %}" in text  # data is never evaluated as a template
    # the served attribute of the step went into a class list: escaped there, one attribute value
    served = [attrs["class"] for _, attrs in parsed.elements if "b-served" in attrs.get("class", "")]
    assert f"badge b-served served-{ATTRIBUTE}" in served, served


def test_stored_text_is_shown_as_stored(pages: Pages) -> None:
    """Stored text is shown as the JSON text the store holds, with each terminal control and bidi character as
    the visible stand-in the terminal shows (a page printed with ``cat`` cannot drive the terminal, and an
    override cannot reorder the text a reader sees)."""
    text = "".join(parse(pages.pages["run"]).texts)
    assert f"run · {AGENT}" in text
    assert clean(json.dumps(RESULT, ensure_ascii=False)[1:-1]) in text
    assert f"failed: {MARKUP} {clean(BIDI)}" in text  # the tool's error message in its error box
    assert clean(BIDI) != BIDI and "\u202e" not in "".join(pages.pages.values())


def test_the_script_is_the_package_file_and_the_policy_allows_only_it(pages: Pages) -> None:
    js = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    for page in pages.pages.values():
        (script,) = parse(page).scripts
        assert script == js.removesuffix("\n")
        digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
        (policy,) = [
            a["content"]
            for tag, a in parse(page).elements
            if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy"
        ]
        assert f"script-src 'sha256-{digest}';" in policy and "default-src 'none';" in policy


def test_templates_come_from_the_package_not_the_current_folder(pages: Pages, tmp_path: Path) -> None:
    """A folder holding look-alike templates is the current folder of `show --html`: the page is the package's."""
    planted = "PLANTED-TEMPLATE-MARKER"
    for folder in (
        tmp_path / "templates",
        tmp_path / "report" / "templates",
        tmp_path / "otel_replay" / "report" / "templates",
    ):
        folder.mkdir(parents=True)
        for name in ("page.html.j2", "run.html.j2", "macros.html.j2", "report.js", "report.css"):
            (folder / name).write_text(f"{planted} {{{{ 7*7 }}}}", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG")}
    env["OTEL_REPLAY_HOME"] = os.environ["OTEL_REPLAY_HOME"]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    out = fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", "show", pages.run.trace_id, "--html", "page.html"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert planted not in page
    assert page.startswith("<!DOCTYPE html>") and "self-contained: this page loads nothing from the network" in page
    assert parse(page).scripts == parse(pages.pages["run"]).scripts


def test_a_wheel_carries_every_template_file() -> None:
    """The package-data patterns of pyproject.toml name every file of the templates folder."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["otel_replay"]
    files = sorted(p.relative_to(ROOT / "otel_replay").as_posix() for p in TEMPLATES.rglob("*") if p.is_file())
    assert {"report/templates/page.html.j2", "report/templates/report.js", "report/templates/report.css"} <= set(files)
    missing = [f for f in files if "__pycache__" not in f and not any(fnmatch(f, p) for p in patterns)]
    assert not missing, f"not in [tool.setuptools.package-data]: {missing}"
