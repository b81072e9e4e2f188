"""A real git repository in a temp folder whose history holds an agent's twenty commits, for the bisect tests and
benchmark: the agent (``agent.py``: a ``@orp.model`` chat function, a read tool, the system prompt and the
temperature as module constants) is recorded at the first commit; later commits change harmless things, the
prompt (the break, at :data:`BREAK`), add a commit that does not import (:data:`NO_IMPORT`, fixed by the next
one) and change the model's temperature.

``make_repo(path, commits=20)`` builds it and returns the commits' hashes, oldest first; ``record(path)`` runs
the agent at the checked-out commit and returns the recorded run's trace id.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

AGENT = '''\
import otel_replay as orp

SYSTEM = {system!r}
TEMPERATURE = {temperature!r}
{extra}

@orp.model(provider="fake", model="fake-1")
def chat(messages, temperature=0.0, model="fake-1"):
    """A deterministic stand-in for a model: the answer depends on the messages, and a model named ``*-3`` (or
    later) answers nothing useful."""
    text = " ".join(m["content"] for m in messages)
    answer = "no answer" if model[-1:].isdigit() and int(model[-1]) >= 3 else f"answer ({{len(text)}} chars)"
    return {{"text": answer, "usage": {{"input_tokens": len(text), "output_tokens": 3}}}}


@orp.tool(risk="read")
def lookup_order(order_id):
    return {{"order_id": order_id, "status": "delivered"}}


@orp.agent
def support(question: str) -> str:
    order = lookup_order("A-17")
    messages = [
        {{"role": "system", "content": SYSTEM}},
        {{"role": "user", "content": f"{{question}} (order {{order['status']}})"}},
    ]
    return chat(messages, temperature=TEMPERATURE)["text"]
'''
GOOD_PROMPT = "You are a support agent."
BAD_PROMPT = "You are a terse support agent."
BREAK = 11
"""The 1-based number of the commit that changes the prompt (the first bad one)."""
NO_IMPORT = 15
"""The 1-based number of the commit whose agent does not import (the next commit fixes it)."""
TEMPERATURE_CHANGE = 17


def _git(path: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {"GIT_AUTHOR_NAME": "Ada Dev", "GIT_AUTHOR_EMAIL": "ada@example.com"}
    env |= {"GIT_COMMITTER_NAME": "Ada Dev", "GIT_COMMITTER_EMAIL": "ada@example.com"}
    done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def make_repo(
    path: Path,
    commits: int = 20,
    *,
    break_at: int = BREAK,
    no_import: int | None = NO_IMPORT,
    temperature_at: int | None = TEMPERATURE_CHANGE,
) -> list[str]:
    """The repository at ``path`` with ``commits`` commits (1-based numbers: the first is the recorded one)."""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    hashes = []
    for number in range(1, commits + 1):
        system = BAD_PROMPT if number >= break_at else GOOD_PROMPT
        temperature = 0.7 if temperature_at is not None and number >= temperature_at else 0.0
        extra = "import module_that_is_not_installed  # noqa" if number == no_import else ""
        (path / "agent.py").write_text(AGENT.format(system=system, temperature=temperature, extra=extra))
        (path / "NOTES.md").write_text("".join(f"- change {n}\n" for n in range(1, number + 1)))
        if number == break_at:
            subject = "Make the support prompt terse"
        elif number == no_import:
            subject = "Start using a module this machine lacks"
        elif number == (no_import or 0) + 1:
            subject = "Drop the missing module again"
        elif number == temperature_at:
            subject = "Raise the temperature"
        else:
            subject = f"Harmless change {number}"
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "-m", subject)
        hashes.append(_git(path, "rev-parse", "HEAD"))
    return hashes


def record(path: Path, question: str = "Where is my order?") -> str:
    """Run the agent at the commit checked out in ``path``; the recorded run's trace id."""
    code = (
        f"import agent, otel_replay, otel_replay.exporting.setup as s;agent.support({question!r}); otel_replay.flush()"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    runs = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "runs", "--json", "--kind", "original", "--limit", "1"],
        cwd=path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    import json

    return str(json.loads(runs.stdout)[0]["trace_id"])
