"""Readable request diffs: a changed long text (a system prompt, a message's content) is diffed line by line.

The CLI tests record one run of ``prompt_agents.code_agent`` (a 200-line system prompt holding a secret) in a
module home, then replay it deterministically with the agent whose prompt changed in one line, as a user
runs the command (a process of its own); the text, ``--json`` and ``--html`` outputs are read. The other tests
call :func:`otel_replay.replay.matching.sentdiff.request_diff` on the request shapes the SDKs send.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import fork_server
import jsonschema
import prompt_agents as pa
import pytest
from cli_in_process import run_cli, runs_in_process
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

import otel_replay as orp
from otel_replay.replay.matching.divergence import Divergence
from otel_replay.replay.matching.sentdiff import request_diff, text_lines

TESTS_DIR = Path(__file__).resolve().parent
LONGEST_LINE = 300
RECORDED = pa.RECORDED_SENTENCE
REPLAYED_SHOWN = pa.REPLAYED_SENTENCE.replace("\x1b", "\u241b").replace("\x07", "\u2407")
"""The changed sentence as the terminal and the HTML report show it: its control characters as their visible
stand-ins."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A home with one recorded run of the code agent."""
    home = tmp_path_factory.mktemp("prompt-diff") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        mp.delenv("OTEL_REPLAY_STORE", raising=False)
        orp.configure(home=home, exporter="spool")
        pa.code_agent("sum the numbers in data.csv")
        orp.flush()
        world: dict[str, Any] = {"home": home, "env": {"OTEL_REPLAY_HOME": str(home)}}
        out = cli(world, "runs", "--json", "--kind", "original")
        assert out.returncode == 0, out.stderr
        (run,) = json.loads(out.stdout)
        world["trace_id"] = run["trace_id"]
        yield world


def cli(world: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **world["env"],
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
        "OTEL_REPLAY_TRUSTED_MODULES": "prompt_agents",
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    if runs_in_process(args):
        return run_cli(args, env=env, cwd=world["home"].parent)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=world["home"].parent,
    )


def replay_changed(world: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    out = cli(
        world,
        "replay",
        world["trace_id"],
        "--mode",
        "deterministic",
        "--app",
        "prompt_agents:code_agent_variant",
        *extra,
    )
    assert out.returncode == 1, (out.stdout, out.stderr)
    return out


def assert_no_secret(text: str) -> None:
    assert pa.OPENAI_KEY not in text and "Zq93Zq93" not in text


def test_the_cli_shows_the_changed_prompt_line_with_context(world: dict[str, Any], tmp_path: Path) -> None:
    page_path = tmp_path / "replay.html"
    out = replay_changed(world, "--html", str(page_path))
    lines = out.stdout.splitlines()
    assert "first divergence at step 0" in out.stdout
    assert max(len(line) for line in lines) <= LONGEST_LINE, max(lines, key=len)[:400]
    assert "  === messages[0].content (system): 200 lines recorded, 200 lines in the replay" in lines
    assert f"  -Rule {pa.CHANGED_LINE}: {RECORDED}" in lines
    assert f"  +Rule {pa.CHANGED_LINE}: {REPLAYED_SHOWN}" in lines
    # a few lines of context around the change, not the 200 lines of the prompt
    assert f"   Rule {pa.CHANGED_LINE + 3}: think step by step, then go on to rule {pa.CHANGED_LINE + 4}." in lines
    assert not any(f"Rule {pa.CHANGED_LINE + 4}:" in line for line in lines)
    assert not any(line.lstrip(" -+").startswith("Rule 10:") for line in lines)
    # the secret next to the change stays a redaction marker; the escape sequence never reaches the terminal
    assert_no_secret(out.stdout)
    assert any(line.startswith(f"   Rule {pa.CHANGED_LINE - 1}: authenticate with [REDACTED:") for line in lines)
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    # the HTML report holds the same lines, styled as removed and added, the marker marked
    page = page_path.read_text(encoding="utf-8")
    assert_no_secret(page)
    diff = DiffLines()
    diff.feed(page)
    assert ("dl-text", "=== messages[0].content (system): 200 lines recorded, 200 lines in the replay") in diff.lines
    assert ("dl-del", f"-Rule {pa.CHANGED_LINE}: {RECORDED}") in diff.lines
    assert ("dl-add", f"+Rule {pa.CHANGED_LINE}: {REPLAYED_SHOWN}") in diff.lines  # control characters shown
    assert "\x1b" not in page and "\x07" not in page  # the page, printed with cat, cannot drive the terminal
    assert diff.redacted and all(text.startswith("[REDACTED:") for text in diff.redacted)


def test_json_gives_the_text_diff_of_the_prompt(world: dict[str, Any]) -> None:
    out = replay_changed(world, "--json")
    assert_no_secret(out.stdout)
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout  # escaped as \u001b in the JSON text
    first = json.loads(out.stdout)["first_divergence"]
    assert first["kind"] == "request" and first["step_index"] == 0
    assert max(len(line) for line in first["diff"].split("\n")) <= LONGEST_LINE
    (text,) = first["text_diffs"]
    assert {k: text[k] for k in ("path", "role", "recorded_lines", "replayed_lines")} == {
        "path": "messages[0].content",
        "role": "system",
        "recorded_lines": 200,
        "replayed_lines": 200,
    }
    lines = text["diff"].split("\n")
    assert lines[0] == f"@@ -{pa.CHANGED_LINE - 2},7 +{pa.CHANGED_LINE - 2},7 @@"
    assert [line for line in lines if line[:1] in "-+"] == [
        f"-Rule {pa.CHANGED_LINE}: {RECORDED}",
        f"+Rule {pa.CHANGED_LINE}: {pa.REPLAYED_SENTENCE}",
    ]
    assert text["diff"] in first["diff"]


class DiffLines(HTMLParser):
    """The lines of every ``pre.diff`` of a page as ``(class, text)``, and the texts of the redaction markers
    in them."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[str, str]] = []
        self.redacted: list[str] = []
        self._depth = 0  # inside a pre.diff: 1 + open spans
        self._in_marker = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = dict(attrs).get("class") or ""
        if tag == "pre" and "diff" in cls.split():
            self._depth = 1
        elif tag == "span" and self._depth == 1:
            self.lines.append((cls, ""))
            self._depth = 2
        elif tag == "span" and self._depth == 2:
            self._in_marker = "redacted" in cls.split()
            self.redacted.append("") if self._in_marker else None

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._depth = 0
        elif tag == "span" and self._in_marker:
            self._in_marker = False
        elif tag == "span" and self._depth == 2:
            self._depth = 1

    def handle_data(self, data: str) -> None:
        if self._depth == 2:
            cls, text = self.lines[-1]
            self.lines[-1] = (cls, text + data)
            if self._in_marker:
                self.redacted[-1] += data


# ------------------------------------------------------------------------------- request shapes

PROMPT = "\n".join(f"Step {i}: read the task, plan, then act on step {i}." for i in range(150))
CHANGED = PROMPT.replace("Step 70: read the task", "Step 70: reread the task")


def _changed_lines(diff: str) -> list[str]:
    return [line for line in diff.split("\n") if line[:1] in "-+" and not line.startswith(("---", "+++"))]


def test_openai_content_parts_are_diffed_as_their_text() -> None:
    def request(text: str) -> dict[str, Any]:
        parts = [{"type": "text", "text": text}]
        return {
            "model": "gpt-4o",
            "messages": [{"role": "system", "content": parts}, {"role": "user", "content": "hi"}],
        }

    diff, (text,) = request_diff(request(PROMPT), request(CHANGED), "recorded step 3")
    assert (text.path, text.role, text.title) == ("messages[0].content[0].text", "system", text.path + " (system)")
    assert _changed_lines(text.diff) == [
        "-Step 70: read the task, plan, then act on step 70.",
        "+Step 70: reread the task, plan, then act on step 70.",
    ]
    assert diff is not None and diff.startswith("--- recorded step 3\n+++ replay\n=== messages[0].content[0].text")


def test_anthropic_system_blocks_and_a_tool_description() -> None:
    def request(system: str, description: str) -> dict[str, Any]:
        return {
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "search", "description": description, "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": "hi"}],
        }

    described = "Search the web. " * 20
    _, texts = request_diff(request(PROMPT, described), request(CHANGED, described + "Never search twice."), "r")
    assert [(t.path, t.role) for t in texts] == [("system[0].text", None), ("tools[0].description", None)]
    assert _changed_lines(texts[1].diff) == ["+Never search twice."]  # a sentence more: one line more


def test_a_prompt_that_became_content_parts_shows_the_structure_and_the_text_change() -> None:
    recorded = {"messages": [{"role": "system", "content": PROMPT}]}
    replayed = {"messages": [{"role": "system", "content": [{"type": "text", "text": CHANGED}]}]}
    diff, (text,) = request_diff(recorded, replayed, "r")
    assert text.path == "messages[0].content" and len(_changed_lines(text.diff)) == 2
    assert diff is not None and '+          "type": "text"' in diff  # the JSON part: a string became a list


def test_an_inserted_message_does_not_pair_the_messages_after_it_with_their_neighbours() -> None:
    first = {"role": "system", "content": PROMPT}
    later = {"role": "user", "content": "Summarise this.\n" + "A long document line.\n" * 30}
    recorded = {"messages": [first, later]}
    replayed = {"messages": [first, {"role": "user", "content": "context follows"}, later]}
    diff, texts = request_diff(recorded, replayed, "r")
    assert texts == ()  # nothing long changed: one short message more
    assert diff is not None and _changed_lines(diff) == [
        '+      "content": "context follows",',
        '+      "role": "user"',
        "+    },",
        "+    {",
    ]
    assert '       "content": "Summarise this.… (unchanged, 676 characters)",' in diff.split("\n")
    assert max(len(line) for line in diff.split("\n")) <= 120  # unchanged long texts show as start and length


def test_a_long_line_is_split_at_sentences_and_wrapped_without_losing_a_character() -> None:
    line = " ".join(f"Sentence {i} says something about the task at hand." for i in range(60))
    blob = "x" * 700 + " " + "y" * 50
    for text in (line, blob, "a\rb\x0bc\x1c", "", "one. two!  three?   " * 30):
        pieces = text_lines(text)
        assert "".join(pieces) == text  # the spaces at a cut stay at the end of their piece
        assert all(len(p) <= 160 for p in pieces)
    assert len(text_lines(line)) == 60 and text_lines(blob) == ["x" * 100] * 6 + ["x" * 100 + " " + "y" * 50]
    assert text_lines(PROMPT) == PROMPT.split("\n")
    assert text_lines("a\r\nb\x0bc") == ["a\r", "b\x0bc"]  # only \n ends a line
    changed = line.replace("Sentence 30 says", "Sentence 30 now says")
    _, (text,) = request_diff({"prompt": line}, {"prompt": changed}, "r")
    assert _changed_lines(text.diff) == [
        "-Sentence 30 says something about the task at hand. ",
        "+Sentence 30 now says something about the task at hand. ",
    ]


def test_a_redaction_marker_stays_a_marker() -> None:
    marker = {"$redacted": "hmac-sha256:ab12", "scope": "model.request.api_key"}
    recorded = {"api_key": marker, "prompt": PROMPT}
    replayed = {"api_key": marker, "prompt": CHANGED}
    diff, (text,) = request_diff(recorded, replayed, "r")
    assert diff is not None and '"$redacted": "hmac-sha256:ab12"' not in text.diff
    inline = "Use [REDACTED:openai_api_key:hmac-sha256:cd34] to call the API.\n"
    _, (text,) = request_diff(
        {"prompt": inline + PROMPT}, {"prompt": inline + CHANGED.replace("Step 1:", "Step one:")}, "r"
    )
    assert " Use [REDACTED:openai_api_key:hmac-sha256:cd34] to call the API." in text.diff.split("\n")


def test_a_divergence_with_text_diffs_keeps_its_keys_and_fits_the_lab_schema() -> None:
    schema = json.loads((TESTS_DIR.parent / "docs" / "lab.schema.json").read_text(encoding="utf-8"))
    diff, texts = request_diff({"prompt": PROMPT}, {"prompt": CHANGED}, "recorded step 0")
    document = Divergence(step_index=0, kind="request", reason="r", diff=diff, text_diffs=texts).to_dict()
    assert list(document) == ["step_index", "kind", "reason", "expected", "actual", "diff", "text_diffs"]
    assert document["text_diffs"] == [
        {"path": "prompt", "role": None, "recorded_lines": 150, "replayed_lines": 150, "diff": texts[0].diff}
    ]
    jsonschema.Draft202012Validator(schema["$defs"]["divergence"]).validate(document)
    assert Divergence(step_index=None, kind="output", reason="r").to_dict()["text_diffs"] == []


_TEXTS = st.text(alphabet=st.sampled_from("ab .!?\n\t\x1b\r"), max_size=600) | st.text(max_size=400)


@settings(max_examples=examples(150))
@given(recorded=_TEXTS, replayed=_TEXTS)
def test_text_lines_keep_every_character_and_bound_the_lines(recorded: str, replayed: str) -> None:
    for text in (recorded, replayed):
        pieces = text_lines(text)
        assert "".join(pieces) == text.replace("\n", "") and len(pieces) >= text.count("\n") + 1
        assert all(len(p) <= 160 for p in pieces)
    diff, texts = request_diff(
        {"messages": [{"role": "system", "content": recorded}]},
        {"messages": [{"role": "system", "content": replayed}]},
        "r",
    )
    assert (diff is None) == (recorded == replayed)
    for text in texts:
        assert all(len(line) <= 161 for line in text.diff.split("\n") if not line.startswith("@@"))
