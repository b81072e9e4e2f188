"""The search of a bisect, as pure logic: given candidates ordered from the first after the good revision to the
bad one, and a test that says of one candidate ``good``, ``bad`` or ``skip``, find the first bad candidate in
as few tests as a binary search needs.

Why it exists: the revisions a bisect walks (commits, prompt files, models) and the way a step is tested (a
worktree, a replay in a child process) vary; the search is the same, and is tested on its own.

The rules, as ``git bisect`` has them, with the endpoints checked only where the answer depends on them:

- the good revision is taken as good and the bad one (the last candidate) as bad while the search narrows the
  range between the last known good and the first known bad candidate, testing the middle one;
- a candidate that cannot be tested (``skip``) is put aside, and the untested candidate nearest the middle is
  tried instead; when every candidate left in the range was skipped, the answer is ambiguous: the first bad
  candidate is one of them or the first known bad one;
- when the answer would be the bad revision itself, it is tested (it may not be bad); when it would be the first
  candidate, the good revision is tested (it may not be good). So ``n`` candidates take at most
  ``ceil(log2 n)`` tests, one more when the answer is at an end, plus the skips.

It must never test a candidate twice or call a candidate bad that no test said was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

Verdict = Literal["good", "bad", "skip"]
GOOD_REVISION: Final = -1
"""The index the good revision is tested under (the candidates are 0 … n-1, the bad revision n-1)."""


@dataclass
class SearchOutcome:
    """What the search found."""

    verdicts: dict[int, Verdict] = field(default_factory=dict)
    """Each tested index (:data:`GOOD_REVISION` for the good revision) → its verdict, in test order."""
    first_bad: int | None = None
    """The first bad candidate, or None (the bad revision is not bad, or the good one is not good)."""
    last_good: int | None = None
    """The last good candidate before it (:data:`GOOD_REVISION` for the good revision), or None."""
    ambiguous: tuple[int, ...] = ()
    """When skips leave the answer open: the candidates that may be the first bad one (skipped ones, then the
    first known bad one); ``first_bad`` is then the first known bad one."""
    problem: str | None = None
    """``bad_not_bad`` or ``good_not_good`` when an end was tested and is not what it was said to be."""


def search(count: int, test: Callable[[int], Verdict]) -> SearchOutcome:
    """Find the first bad of ``count`` candidates (the last is the bad revision) with ``test``."""
    if count < 1:
        raise ValueError("a bisect needs at least one candidate after the good revision")
    outcome = SearchOutcome()

    def tried(index: int) -> Verdict:
        verdict = test(index)
        outcome.verdicts[index] = verdict
        return verdict

    low, high = GOOD_REVISION, count - 1  # low: known (taken as) good; high: known (taken as) bad
    skipped: set[int] = set()
    while high - low > 1:
        index = _nearest_untested(low, high, skipped)
        if index is None:
            outcome.ambiguous = (*sorted(i for i in skipped if low < i < high), high)
            break
        verdict = tried(index)
        if verdict == "good":
            low = index
        elif verdict == "bad":
            high = index
        else:
            skipped.add(index)
    if high == count - 1 and high not in outcome.verdicts and not outcome.ambiguous:
        verdict = tried(high)  # the answer is the bad revision: is it bad?
        if verdict == "good":
            outcome.problem = "bad_not_bad"
            return outcome
        if verdict == "skip":
            outcome.ambiguous = (high,)
    if low == GOOD_REVISION and GOOD_REVISION not in outcome.verdicts:
        verdict = tried(GOOD_REVISION)  # the answer is the first candidate: is the good revision good?
        if verdict == "bad":
            outcome.problem = "good_not_good"
            return outcome
    outcome.first_bad, outcome.last_good = high, low
    return outcome


def _nearest_untested(low: int, high: int, skipped: set[int]) -> int | None:
    """The candidate strictly between ``low`` and ``high`` nearest their middle that was not skipped."""
    middle = (low + high) // 2
    for offset in range(high - low):
        for index in (middle - offset, middle + offset) if offset else (middle,):
            if low < index < high and index not in skipped:
                return index
    return None
