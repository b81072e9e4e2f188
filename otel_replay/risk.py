"""The risk a tool is treated with: as declared, or guessed from its name when undeclared.

Why it exists: the recorder (:func:`otel_replay.tool`) and the readers of other GenAI instrumentations
(:mod:`otel_replay.dialects`) must agree on which tools may send, delete, write, pay or run commands, and the
replay guard refuses those outside an approved live replay. One rule in one leaf module serves both, so a
reader of stored runs needs neither the recorder nor the OpenTelemetry SDK to classify a tool.

What it must never do: import anything of otel_replay beyond the standard library (it sits below recording
and dialects), or lower a risk a tool declared.
"""

from __future__ import annotations

import functools
import re
from typing import Final, Literal, TypeAlias, cast

__all__ = ["RISK_LEVELS", "RiskLevel", "checked_risk", "effective_risk", "step_risk"]

RiskLevel: TypeAlias = Literal["read", "write", "high"]
"""The risks a tool can declare (``otel_replay.tool(risk=...)``): ``read`` is replayed live, ``write`` and
``high`` never run again without a fresh approval. The values of :class:`otel_replay.semconv.Risk`."""

RISK_LEVELS: Final[tuple[RiskLevel, ...]] = ("read", "write", "high")
"""The values of :data:`RiskLevel`, in the order of their danger."""


def checked_risk(risk: object) -> RiskLevel:
    """``risk`` when it is one of :data:`RISK_LEVELS` (a :class:`~otel_replay.semconv.Risk` member counts as its
    value); ``ValueError`` naming the levels otherwise."""
    if isinstance(risk, str) and risk in RISK_LEVELS:
        return risk
    levels = ", ".join(f"{level!r}" for level in RISK_LEVELS)
    raise ValueError(f"risk must be one of {levels}, got {risk!r}")


def step_risk(kind: str, risk: str | None) -> str | None:
    """The risk a recorded or replayed tool-call step of ``kind`` carries, given its ``otel_replay.tool.risk``
    attribute: that attribute, except that a handoff (a framework's routing tool) declaring none is ``read``."""
    return "read" if risk is None and kind == "handoff" else risk


class _UndeclaredRisk(str):
    """The default ``risk="read"`` of :func:`otel_replay.tool`, told apart from an explicit ``risk="read"``."""


DEFAULT_RISK: Final = cast(RiskLevel, _UndeclaredRisk("read"))

# The word sets are data: one line per group of related words (kept out of the formatter's one-word lines).
# fmt: off
_HIGH_RISK_WORDS: Final = frozenset({
    "send", "email", "mail", "sms", "message", "notify", "post", "publish", "tweet",
    "delete", "remove", "drop", "destroy", "purge", "erase", "wipe", "truncate",
    "pay", "payment", "charge", "refund", "transfer", "wire", "withdraw", "payout",
    "exec", "execute", "shell", "command", "cmd", "subprocess", "bash", "sudo", "eval",
    "write", "overwrite", "rm", "rmdir", "unlink", "kill",
    "book", "reserve", "buy", "purchase", "checkout", "cancel",
})
"""Words of a tool name that make an undeclared tool ``high``."""

_HIGH_RISK_VERBS: Final = frozenset({
    "send", "mail", "email", "post", "publish", "notify", "tweet",
    "delete", "remove", "drop", "destroy", "purge", "erase", "wipe", "truncate",
    "pay", "charge", "refund", "transfer", "wire", "withdraw",
    "exec", "execute", "write", "overwrite", "rm", "kill",
    "book", "reserve", "buy", "purchase", "cancel",
})
"""Actions that also count written together with their object, in one word (``sendemail``, ``dropdb``)."""

_JOINED_OBJECTS: Final = frozenset({
    "email", "mail", "sms", "message", "msg", "text", "notification", "tweet", "post",
    "file", "dir", "folder", "path", "table", "db", "database", "row", "record", "rf", "all", "everything",
    "user", "account", "customer", "invoice", "payment", "card", "money", "funds", "order", "cmd", "command",
    "shell", "script", "process", "key", "bucket", "repo", "branch",
    "flight", "hotel", "room", "ticket", "seat", "trip", "subscription", "item", "cart",
})
"""Objects a high-risk action may be joined with (each also with a plural ``s``)."""
# fmt: on


def _high_risk_word(word: str) -> bool:
    """True for a high-risk word (``send``), that word after ``re`` (``resend``), or a high-risk action joined
    with an object (``sendemail``, ``rmrf``, ``writefile``, ``resendinvoice``)."""
    if word in _HIGH_RISK_WORDS:
        return True
    for verb in _HIGH_RISK_VERBS:
        if word.startswith(verb):
            rest = word[len(verb) :]
            if (
                rest in _JOINED_OBJECTS
                or rest in _HIGH_RISK_WORDS
                or (rest.endswith("s") and rest[:-1] in _JOINED_OBJECTS)
            ):
                return True
    return len(word) > 3 and word.startswith("re") and _high_risk_word(word[2:])


@functools.lru_cache(maxsize=4096)
def _name_risk(name: str) -> str:
    words = {w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)}
    return "high" if any(_high_risk_word(w) for w in words) else "read"


def effective_risk(name: str, declared: str | None) -> str:
    """The risk a tool is treated with: as declared, or ``high`` when undeclared and its name says it sends
    messages, deletes, writes, pays or transfers, books or buys, or runs commands (also joined, ``sendemail``, or after
    ``re``, ``resend_invoice``; see docs/replay.md); else ``read``."""
    if declared is not None and not isinstance(declared, _UndeclaredRisk):
        return str(declared)
    return _name_risk(str(name))
