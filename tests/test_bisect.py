"""``otel-replay bisect`` on a real git repository (``bisect_repo``: an agent's twenty commits, recorded at the
first; a harmless change, the prompt change that breaks the run at commit 11, a commit that does not import at 15
fixed at 16, a temperature change at 17), run as users run it.

It finds commit 11 for a case and for a trace, in at most ``ceil(log2 19)`` replays plus the skips, with the
boundary's divergence (the prompt's diff), the skipped commit named, the replays stored and listed by ``runs
--bisect ID``, the user's working tree, index, branch and stash untouched (uncommitted changes present), and no
worktree left after success, a wrong end (exit 1) or SIGINT (exit 130). The HTML report is checked in the real
browser. ``--prompt-file`` and ``--model`` bisect what is not in commits; a cohort bisect runs on the lab's
workers; ``replay`` and ``case run`` exit 125 where the code does not import, so ``git bisect run`` works with
them directly.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from bisect_repo import BAD_PROMPT, BREAK, GOOD_PROMPT, NO_IMPORT, _git, make_repo, record

WAIT = 300
CLI = [sys.executable, "-m", "otel_replay.cli"]


@pytest.fixture
def repo(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The repository with the run recorded at its first commit, a case exported from it, and the user's own
    uncommitted work (a changed tracked file, an untracked one, a stash) on ``main``."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    path = tmp_path / "repo"
    hashes = make_repo(path)
    _git(path, "checkout", "-q", hashes[0])
    trace_id = record(path)
    _git(path, "checkout", "-q", "main")
    case = tmp_path / "support.case.json"
    exported = subprocess.run(
        [*CLI, "case", "export", trace_id, "-o", str(case)], capture_output=True, text=True, timeout=WAIT
    )
    assert exported.returncode == 0, exported.stderr
    (path / "NOTES.md").write_text("stashed work\n")
    _git(path, "stash", "-q")
    (path / "NOTES.md").write_text("work in progress\n")
    (path / "scratch.txt").write_text("untracked\n")
    return {"path": path, "hashes": hashes, "trace": trace_id, "case": case, "tmp": tmp_path / "tmp"}


def _state(path: Path) -> tuple[str, ...]:
    """What the user has: HEAD, branch, status, index, stash, worktrees, the changed file."""
    return (
        _git(path, "rev-parse", "HEAD"),
        _git(path, "symbolic-ref", "HEAD"),
        _git(path, "status", "--porcelain"),
        _git(path, "diff", "--cached"),
        _git(path, "stash", "list"),
        _git(path, "worktree", "list", "--porcelain"),
        (path / "NOTES.md").read_text(),
    )


def _bisect(repo: dict[str, Any], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "bisect", *args], cwd=cwd or repo["path"], capture_output=True, text=True, timeout=WAIT
    )


def _no_worktrees_left(repo: dict[str, Any], before: tuple[str, ...]) -> None:
    assert _state(repo["path"]) == before
    assert list(repo["tmp"].glob("otel-replay-bisect-*")) == []
    assert len(_git(repo["path"], "worktree", "list").splitlines()) == 1


SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "bisect.schema.json").read_text())


def _valid(document: dict[str, Any]) -> dict[str, Any]:
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    return document


def _checked(repo: dict[str, Any], result: dict[str, Any]) -> None:
    _valid(result)
    hashes = repo["hashes"]
    assert result["found"] is True and result["problem"] is None
    assert result["first_bad"]["id"] == hashes[BREAK - 1]
    assert result["first_bad"]["subject"] == "Make the support prompt terse"
    assert result["first_bad"]["author"] == "Ada Dev <ada@example.com>" and result["first_bad"]["date"]
    assert result["last_good"]["id"] == hashes[BREAK - 2]
    assert result["candidates"] == 19 and result["good"]["id"] == hashes[0] and result["bad"]["id"] == hashes[-1]
    skipped = [s["id"] for s in result["skipped"]]
    assert skipped == [hashes[NO_IMPORT - 1]]  # the search's second pick: it cannot be tested, its neighbour is
    assert result["replays"] <= math.ceil(math.log2(19)) + len(skipped)
    tried = {s["revision"]["id"]: s["verdict"] for s in result["steps"]}
    assert tried[hashes[BREAK - 1]] == "bad" and tried[hashes[BREAK - 2]] == "good"
    assert all(tried[h] == "bad" for h in hashes[BREAK - 1 :] if h in tried and h != hashes[NO_IMPORT - 1])
    first = result["first_divergence"]
    assert (first["kind"], first["step_index"]) == ("request", 1), first
    assert (
        f'-      "content": "{GOOD_PROMPT}"' in first["diff"] and f'+      "content": "{BAD_PROMPT}"' in first["diff"]
    )


def test_a_case_bisect_finds_the_commit_that_broke_it(repo: dict[str, Any], tmp_path: Path) -> None:
    before = _state(repo["path"])
    html = tmp_path / "bisect.html"
    done = _bisect(
        repo, "--good", repo["hashes"][0], "--bad", "main", "--case", str(repo["case"]), "--json", "--html", str(html)
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    _checked(repo, result)
    assert result["target"] == "case" and result["axis"] == "git"
    assert "No module named 'module_that_is_not_installed'" in next(
        s["why"] for s in result["steps"] if s["verdict"] == "skip"
    )
    _no_worktrees_left(repo, before)
    listed = subprocess.run(
        [*CLI, "runs", "--bisect", result["bisect_id"], "--json"], capture_output=True, text=True, timeout=WAIT
    )
    tested = [s for s in result["steps"] if s["verdict"] != "skip"]
    assert sorted(r["trace_id"] for r in json.loads(listed.stdout)) == sorted(
        s["replays"][0]["replay_trace_id"] for s in tested
    )
    page = html.read_text()  # the page itself is checked in the browser by test_bisect_browser.py
    assert repo["hashes"][BREAK - 1] in page and "Make the support prompt terse" in page


def test_a_worktree_left_locked_by_an_interrupted_add_is_removed(repo: dict[str, Any]) -> None:
    from otel_replay.bisect.revisions import Worktrees

    trees = Worktrees(repo["path"])
    locked = trees.base / "wt-locked"
    trees._made.append(locked)
    _git(repo["path"], "worktree", "add", "--detach", "--lock", "--quiet", str(locked), repo["hashes"][3])
    trees.add(repo["hashes"][5])
    trees.close()
    assert len(_git(repo["path"], "worktree", "list").splitlines()) == 1 and not trees.base.exists()


def test_a_trace_bisect_stores_its_replays_under_the_bisect_id(repo: dict[str, Any]) -> None:
    before = _state(repo["path"])
    done = _bisect(repo, "--good", repo["hashes"][0], "--bad", repo["hashes"][-1], "--trace", repo["trace"], "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    _checked(repo, result)
    _no_worktrees_left(repo, before)
    listed = subprocess.run(
        [*CLI, "runs", "--bisect", result["bisect_id"], "--json"], capture_output=True, text=True, timeout=WAIT
    )
    replays = json.loads(listed.stdout)
    tested = [s for s in result["steps"] if s["verdict"] != "skip"]
    assert sorted(r["trace_id"] for r in replays) == sorted(s["replays"][0]["replay_trace_id"] for s in tested)
    assert {r["replay_of"] for r in replays} == {repo["trace"]}
    audit = json.loads(subprocess.run([*CLI, "audit", "--json"], capture_output=True, text=True, timeout=WAIT).stdout)
    reasons = {row["replay_trace_id"]: row["reason"] for row in audit}
    assert all(f"bisect {result['bisect_id']} at " in reasons[r["trace_id"]] for r in replays)
    # the human output names the commit and the diff
    done = _bisect(repo, "--good", repo["hashes"][0], "--bad", repo["hashes"][-1], "--trace", repo["trace"])
    assert done.returncode == 0 and "first bad: " in done.stdout and "Make the support prompt terse" in done.stdout


def test_ends_that_are_not_what_they_were_said_to_be_exit_1(repo: dict[str, Any]) -> None:
    before = _state(repo["path"])
    hashes = repo["hashes"]
    done = _bisect(repo, "--good", hashes[0], "--bad", hashes[4], "--case", str(repo["case"]), "--json")
    assert done.returncode == 1, done.stderr
    result = _valid(json.loads(done.stdout))
    assert (result["found"], result["problem"]) == (False, "bad_not_bad")
    assert "is not bad" in result["message"]
    done = _bisect(repo, "--good", hashes[BREAK], "--bad", hashes[-1], "--case", str(repo["case"]))
    assert done.returncode == 1 and "is not good: its replays fail" in done.stderr, done.stderr
    _no_worktrees_left(repo, before)
    for args, needle in (
        (["--good", hashes[-1], "--bad", hashes[0]], "is not an ancestor"),
        (["--good", "--upload-pack=x", "--bad", "main"], "is not a revision"),
        (["--good", hashes[0], "--bad", "main"], "give one of --case"),
        (["--good", hashes[0], "--bad", "no-such-branch"], "names no commit"),
    ):
        target = [] if "give one" in needle else ["--case", str(repo["case"])]
        done = _bisect(repo, *args, *target)
        assert done.returncode == 2 and needle in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
    _no_worktrees_left(repo, before)


def test_sigint_removes_the_worktrees_and_reports_the_steps_so_far(repo: dict[str, Any]) -> None:
    before = _state(repo["path"])
    process = subprocess.Popen(
        [*CLI, "bisect", "--good", repo["hashes"][0], "--bad", "main", "--trace", repo["trace"], "--json"],
        cwd=repo["path"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    first = process.stderr.readline()  # the first step's line: the second step is under way
    assert first.strip().startswith("good "), first
    deadline = time.monotonic() + WAIT  # the second worktree exists once the second step started
    while len(list(repo["tmp"].glob("otel-replay-bisect-*/wt-*"))) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 130, err
    result = _valid(json.loads(out))
    assert result["interrupted"] is True and result["first_bad"] is None and len(result["steps"]) >= 1
    _no_worktrees_left(repo, before)


def test_prompt_files_and_models_are_bisected_too(repo: dict[str, Any], tmp_path: Path) -> None:
    """Changes that live outside the commits: the versions of the system prompt in a folder (by name), and models
    (the third and later answer nothing useful), each step replaying the run with the override and real
    model calls (``whatif``: the agent's own ``@orp.model`` function)."""
    _git(repo["path"], "stash", "-q")
    _git(repo["path"], "checkout", "-q", repo["hashes"][0])
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    for name, text in (("v1.txt", GOOD_PROMPT), ("v2.txt", GOOD_PROMPT), ("v3.txt", BAD_PROMPT), ("v4.txt", "Hi.")):
        (prompts / name).write_text(text)
    done = _bisect(repo, "--trace", repo["trace"], "--prompt-file", f"system={prompts}", "--json")
    assert done.returncode == 2 and "give a reason" in done.stderr
    done = _bisect(repo, "--trace", repo["trace"], "--prompt-file", f"system={prompts}", "--mode", "mock")
    assert done.returncode == 2 and "--mode mock cannot be used" in done.stderr, done.stderr
    done = _bisect(
        repo, "--trace", repo["trace"], "--prompt-file", f"system={prompts}", "--reason", "prompt trial", "--json"
    )
    assert done.returncode == 0, done.stderr
    result = _valid(json.loads(done.stdout))
    assert (result["axis"], result["mode"], result["first_bad"]["id"], result["last_good"]["id"]) == (
        "prompt",
        "whatif",
        "v3.txt",
        "v2.txt",
    )
    models = "fake-1,fake-2,fake-3,fake-4,fake-5"
    done = _bisect(repo, "--trace", repo["trace"], "--model", models, "--reason", "model trial", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["axis"], result["first_bad"]["id"], result["last_good"]["id"]) == ("model", "fake-3", "fake-2")
    assert result["first_divergence"]["kind"] == "output"
    done = _bisect(repo, "--case", str(repo["case"]), "--model", models, "--reason", "x")
    assert done.returncode == 2 and "use --trace or --cohort" in done.stderr


def test_a_cohort_bisect_runs_on_the_lab_workers(repo: dict[str, Any]) -> None:
    before = _state(repo["path"])
    done = _bisect(
        repo,
        "--good",
        repo["hashes"][0],
        "--bad",
        "main",
        "--cohort",
        "agent=support",
        "--workers",
        "2",
        "--fail-if",
        "diverged > 0",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    result = _valid(json.loads(done.stdout))
    assert result["target"] == "cohort" and result["first_bad"]["id"] == repo["hashes"][BREAK - 1]
    bad = next(s for s in result["steps"] if s["revision"]["id"] == repo["hashes"][BREAK - 1])
    assert "gate held: diverged > 0" in bad["why"]
    _no_worktrees_left(repo, before)


def test_replay_and_case_run_work_with_git_bisect_run(repo: dict[str, Any]) -> None:
    """Exit 0 good, 1 bad, 125 cannot test: ``git bisect run`` drives ``case run`` and ``replay`` directly."""
    path, hashes = repo["path"], repo["hashes"]
    _git(path, "stash", "-q")
    _git(path, "checkout", "-q", hashes[NO_IMPORT - 1])
    assert subprocess.run([*CLI, "case", "run", str(repo["case"])], cwd=path, timeout=WAIT).returncode == 125
    replayed = subprocess.run([*CLI, "replay", repo["trace"], "--mode", "deterministic"], cwd=path, timeout=WAIT)
    assert replayed.returncode == 125
    _git(path, "checkout", "-q", "main")
    _git(path, "bisect", "start", hashes[-1], hashes[0])
    ran = subprocess.run(
        ["git", "-C", str(path), "bisect", "run", *CLI, "case", "run", str(repo["case"])],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert f"{hashes[BREAK - 1]} is the first bad commit" in ran.stdout, ran.stdout + ran.stderr
    _git(path, "bisect", "reset")
