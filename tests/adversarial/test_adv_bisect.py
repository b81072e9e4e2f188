"""A repository a stranger wrote, bisected: commit subjects and an author that carry terminal escape sequences
(an OSC window title, a screen clear, colours, a bidi override) and a revision that reads as an option. The
terminal output and the HTML report show each control character as its visible stand-in, the revision is
refused with one line before git sees it as an option, and nothing of the repository runs outside a step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bisect_repo import AGENT, BAD_PROMPT, GOOD_PROMPT, _git, record

HOSTILE = "Fix \x1b]0;pwned\x07 billing \x1b[2J\x1b[31mred\x1b[0m invoice\u202egnp.exe"


def test_a_stranger_s_commit_subjects_never_drive_the_terminal(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "agent.py").write_text(AGENT.format(system=GOOD_PROMPT, temperature=0.0, extra=""))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "good")
    good = _git(repo, "rev-parse", "HEAD")
    trace_id = record(repo)
    (repo / "agent.py").write_text(AGENT.format(system=BAD_PROMPT, temperature=0.0, extra=""))
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=Eve \x1b[5mblink", "commit", "-q", "-m", HOSTILE)
    page = tmp_path / "bisect.html"
    cli = [sys.executable, "-m", "otel_replay.cli", "bisect"]
    done = subprocess.run(
        [*cli, "--good", good, "--bad", "main", "--trace", trace_id, "--html", str(page)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "first bad: " in done.stdout and "billing" in done.stdout
    for shown in (done.stdout, done.stderr, page.read_text(encoding="utf-8")):
        assert not any(c in shown for c in "\x1b\x07\u202e"), shown[:2000]
    assert "\u241b]0;pwned" in done.stdout  # shown, as its stand-in
    refused = subprocess.run(
        [*cli, "--good", "--output=/tmp/x", "--bad", "main", "--trace", trace_id],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and "is not a revision" in refused.stderr and "Traceback" not in refused.stderr
