"""Counts in words for people: ``1 run``, ``2 runs``, ``1 step``, ``0 replays``.

Every count the CLI prints (and every count in a message it shows) goes through :func:`plural`, so no
line reads ``1 run(s)`` or ``1 steps``.

This module must never import anything of the package: it is a leaf that every layer may use.
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``count`` and ``noun``, the noun in its plural form unless ``count`` is exactly 1.

    ``plural_form`` names an irregular plural; by default English's regular rules apply (``entry`` →
    ``entries``, ``match`` → ``matches``, ``run`` → ``runs``)."""
    if count == 1:
        return f"{count} {noun}"
    if plural_form is None:
        if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u", ""):
            plural_form = noun[:-1] + "ies"
        elif noun.endswith(("s", "x", "ch", "sh")):
            plural_form = noun + "es"
        else:
            plural_form = noun + "s"
    return f"{count} {plural_form}"
