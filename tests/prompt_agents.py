"""A code agent with a long system prompt, and the same agent after one line of its prompt changed.

The prompt is 200 lines (about 9 KB, the size of smolagents' code-agent prompt); line 120 holds an OpenAI key
(redacted when recorded and when replayed) and, in the changed prompt, a terminal escape sequence.
"""

from __future__ import annotations

from typing import Any

import otel_replay as orp

OPENAI_KEY = "sk-proj-" + "Zq93" * 10
"""A secret in the prompt (``Zq93``: characters a keyed hash cannot hold, see tests/leak_checks.py)."""

CHANGED_LINE = 120
RECORDED_SENTENCE = "Always answer in a python code block and end it with final_answer()."
REPLAYED_SENTENCE = "Never import os; print \x1b]0;pwned\x07 nothing else."


def system_prompt(sentence: str) -> str:
    lines = [f"Rule {i}: think step by step, then go on to rule {i + 1}." for i in range(200)]
    lines[CHANGED_LINE - 1] = f"Rule {CHANGED_LINE - 1}: authenticate with {OPENAI_KEY} when asked."
    lines[CHANGED_LINE] = f"Rule {CHANGED_LINE}: {sentence}"
    return "\n".join(lines)


@orp.model("coder", provider="scripted", model="scripted-1")
def coder(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"text": f"```python\nfinal_answer({messages[-1]['content']!r})\n```", "usage": {"input_tokens": 9}}


def _run(task: str, sentence: str) -> dict[str, Any]:
    messages = [{"role": "system", "content": system_prompt(sentence)}, {"role": "user", "content": task}]
    return {"answer": coder(messages)["text"]}


@orp.agent("code-agent")
def code_agent(task: str) -> dict[str, Any]:
    """Steps: 0 coder (model)."""
    return _run(task, RECORDED_SENTENCE)


@orp.agent("code-agent")
def code_agent_variant(task: str) -> dict[str, Any]:
    """The same agent after line 120 of its system prompt changed (replayed with ``--app``)."""
    return _run(task, REPLAYED_SENTENCE)
