"""How many examples a property test draws: its usual number under the ``ci`` profile, more under ``fuzz``.

A test that sets its own ``max_examples`` (sized to what one example costs) writes ``max_examples=examples(N)``:
N in CI, N times :func:`factor` under ``make fuzz``. Tests that set none get the profile's number (100 in CI).
"""

from __future__ import annotations

from hypothesis import settings

BASE = 100
"""Hypothesis's default ``max_examples``, which the ``ci`` profile keeps."""


def factor() -> int:
    """How many times its usual number of examples a test draws under the loaded profile (``fuzz``: 10)."""
    return max(1, settings.default.max_examples // BASE)


def examples(usual: int) -> int:
    """``usual`` examples, scaled by :func:`factor`; read when the test module is imported (after the profile
    given on the command line is loaded)."""
    return usual * factor()
