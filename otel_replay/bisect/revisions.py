"""What a bisect walks: the commits between a good and a bad revision of a git repository (each checked out into a
temporary worktree of its own), the versions of one prompt kept as files in a folder, or an ordered list of
models.

Why it exists: the search (:mod:`otel_replay.bisect.search`) only sees candidate indexes; this module turns them
into something a step can run at (a folder and an import path, a prompt text, a model name) and into what the
result shows (a commit's hash, subject, author and date; a file's name; a model).

What it must never do: touch the user's working tree, index, stash, branch or ``HEAD`` (a commit is checked out
with ``git worktree add --detach`` into a temporary folder, removed again by :meth:`Worktrees.close`), run git
with a revision that could be read as an option, or leave a worktree behind when it can remove it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..errors import OtelReplayError

GIT_TIMEOUT_S: Final = 120
_SEP: Final = "\x1f"


class BisectInputError(OtelReplayError):
    """A revision, folder or list a bisect cannot walk (the CLI exits 2)."""


@dataclass(frozen=True)
class Revision:
    """One candidate: a commit, a prompt file or a model."""

    id: str
    """The commit's full hash, the prompt file's name, or the model."""
    label: str
    """How the result names it: the short hash and subject, the file name, the model."""
    subject: str | None = None
    author: str | None = None
    date: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"id": self.id, "label": self.label, "subject": self.subject, "author": self.author, "date": self.date}


# ------------------------------------------------------------------------------------------------- git


def git(repo: Path, *args: str) -> str:
    """The output of ``git -C repo ARGS`` (stripped); :class:`BisectInputError` with git's own message when it
    fails."""
    if shutil.which("git") is None:
        raise BisectInputError("git is not on the PATH: a bisect over commits needs it")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # never another repository's
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, env=env
        )
    except subprocess.TimeoutExpired:
        raise BisectInputError(f"git {args[0]} took over {GIT_TIMEOUT_S} s in {repo}") from None
    if done.returncode != 0:
        message = " ".join((done.stderr or done.stdout).split())[:300] or f"exit {done.returncode}"
        raise BisectInputError(f"git {args[0]} failed in {repo}: {message}")
    return done.stdout.strip()


def repository_root(path: Path) -> Path:
    """The top folder of the git work tree holding ``path``."""
    if not path.is_dir():
        raise BisectInputError(f"--repo {path} is not a folder")
    try:
        return Path(git(path, "rev-parse", "--show-toplevel"))
    except BisectInputError:
        raise BisectInputError(f"{path} is not inside a git repository (give --repo PATH)") from None


def resolve(repo: Path, revision: str) -> str:
    """The full hash of the commit ``revision`` names."""
    if not revision or revision.startswith("-") or any(c.isspace() or c in "\0:" for c in revision):
        raise BisectInputError(f"{revision[:80]!r} is not a revision (a commit hash, branch or tag)")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}")
    except BisectInputError:
        raise BisectInputError(f"{revision[:80]!r} names no commit in {repo}") from None


def commits_between(repo: Path, good: str, bad: str) -> list[Revision]:
    """The commits after ``good`` up to ``bad`` (both full hashes), oldest first, along the first-parent
    history (a merge is one step, as ``git bisect --first-parent`` walks it)."""
    if good == bad:
        raise BisectInputError("--good and --bad name the same commit: there is nothing between them")
    try:
        git(repo, "merge-base", "--is-ancestor", good, bad)
    except BisectInputError:
        raise BisectInputError(
            f"--good {good[:12]} is not an ancestor of --bad {bad[:12]}: give a good revision older than the bad one"
        ) from None
    listed = git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}")
    hashes = [h for h in listed.splitlines() if h]
    if not hashes or hashes[-1] != bad:
        raise BisectInputError(f"--bad {bad[:12]} is not on the first-parent history after --good {good[:12]}")
    return [describe(repo, h) for h in hashes]


def describe(repo: Path, commit: str) -> Revision:
    """A commit as the result shows it."""
    out = git(repo, "show", "-s", f"--format=%H{_SEP}%s{_SEP}%an <%ae>{_SEP}%aI", commit)
    full, subject, author, date = [*out.split(_SEP), "", "", "", ""][:4]
    return Revision(id=full, label=f"{full[:10]} {subject}", subject=subject, author=author, date=date)


class Worktrees:
    """Temporary ``git worktree``s of one repository, each at one commit, all removed by :meth:`close` (called
    on success, on error and on SIGINT by the bisect)."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.base = Path(tempfile.mkdtemp(prefix="otel-replay-bisect-"))
        self._made: list[Path] = []

    def add(self, commit: str) -> Path:
        """A new worktree of ``commit`` (detached: no branch is made or moved)."""
        path = self.base / f"wt-{len(self._made)}-{commit[:12]}"
        self._made.append(path)
        git(self.repo, "worktree", "add", "--detach", "--quiet", str(path), commit)
        return path

    def remove(self, path: Path) -> None:
        """Remove one worktree, also one left locked by a ``git worktree add`` that was interrupted."""
        try:
            git(self.repo, "worktree", "remove", "--force", "--force", str(path))
        except BisectInputError:
            try:
                git(self.repo, "worktree", "unlock", str(path))  # then prune forgets it
            except BisectInputError:
                pass
            shutil.rmtree(path, ignore_errors=True)
        if path in self._made:
            self._made.remove(path)

    def close(self) -> None:
        """Remove every worktree still there, and the temporary folder; prune git's records of them."""
        for path in list(self._made):
            self.remove(path)
        shutil.rmtree(self.base, ignore_errors=True)
        try:
            git(self.repo, "worktree", "prune")
        except BisectInputError:
            pass


# ------------------------------------------------------------------------------------------ prompts and models

PROMPT_MAX_BYTES: Final = 4 << 20


def prompt_versions(folder: Path) -> list[Revision]:
    """The regular files of ``folder``, ordered by name (hidden files left out)."""
    if not folder.is_dir():
        raise BisectInputError(f"--prompt-file folder {folder} is not a folder")
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if len(files) < 2:
        raise BisectInputError(f"--prompt-file folder {folder} holds {len(files)} file(s): a bisect needs two or more")
    return [Revision(id=p.name, label=p.name) for p in files]


def read_prompt(folder: Path, name: str) -> str:
    path = folder / name
    if path.stat().st_size > PROMPT_MAX_BYTES:
        raise BisectInputError(f"prompt file {path} is over {PROMPT_MAX_BYTES >> 20} MiB (a prompt, not a data set)")
    return path.read_text(encoding="utf-8")


def model_versions(text: str) -> list[Revision]:
    """``A,B,C`` as an ordered list of models (the first good, the last bad)."""
    models = [m.strip() for m in text.split(",") if m.strip()]
    if len(models) < 2 or len(set(models)) != len(models):
        raise BisectInputError("--model takes two or more different models, oldest first: --model A,B,C")
    return [Revision(id=m, label=m) for m in models]
