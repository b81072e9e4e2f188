"""``otel_replay.bisect.search``: over every count of candidates up to 64 and every position of the first bad one,
the search finds it in at most ``ceil(log2 n)`` tests (one more when it is at an end, where an end revision is
checked); with skipped candidates it never tests one twice, never calls an untested candidate bad, and names the
skipped ones that leave the answer open; ends that are not what they were said to be are reported."""

from __future__ import annotations

import math
import random

import pytest

from otel_replay.bisect.search import GOOD_REVISION, search


@pytest.mark.parametrize("count", range(1, 65))
def test_the_first_bad_candidate_in_log2_tests(count: int) -> None:
    for first in range(count):
        tested: list[int] = []

        def test(index: int, first: int = first, tested: list[int] = tested) -> str:
            tested.append(index)
            return "bad" if index >= first else "good"

        outcome = search(count, test)  # type: ignore[arg-type]
        assert (outcome.first_bad, outcome.last_good, outcome.problem) == (first, first - 1, None)
        ends = (first == count - 1) + (first == 0)
        assert len(tested) == len(set(tested)) <= math.ceil(math.log2(count)) + ends, (count, first, tested)


def test_skipped_candidates_are_stepped_around_or_named() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        count = rng.randint(1, 40)
        first = rng.randrange(count)
        skips = set(rng.sample(range(count), rng.randint(0, count // 2)))
        tested: list[int] = []

        def test(index: int, first: int = first, skips: set[int] = skips, tested: list[int] = tested) -> str:
            tested.append(index)
            return "skip" if index in skips else "bad" if index >= first else "good"

        outcome = search(count, test)  # type: ignore[arg-type]
        assert len(tested) == len(set(tested))
        assert outcome.first_bad is not None and outcome.verdicts.get(outcome.first_bad) != "good"
        if outcome.ambiguous:
            assert first in outcome.ambiguous and outcome.first_bad == outcome.ambiguous[-1]
            assert all(outcome.verdicts.get(i) == "skip" for i in outcome.ambiguous[:-1])
        else:
            assert outcome.first_bad == first
        skipped = sum(1 for i in tested if i in skips)
        assert len(tested) <= math.ceil(math.log2(count)) + 2 + skipped


def test_ends_that_are_not_what_they_were_said_to_be() -> None:
    assert search(8, lambda i: "good").problem == "bad_not_bad"
    outcome = search(8, lambda i: "bad")
    assert outcome.problem == "good_not_good" and outcome.verdicts[GOOD_REVISION] == "bad"
    with pytest.raises(ValueError):
        search(0, lambda i: "good")


@pytest.mark.parametrize(
    ("ambiguous", "found", "interrupted", "badge"),
    [(False, True, False, "found"), (True, True, False, "ambiguous"), (False, False, True, "interrupted")],
)
def test_the_page_badge_says_what_the_bisect_answered(
    ambiguous: bool, found: bool, interrupted: bool, badge: str
) -> None:
    """The page's badge is the bisect's answer, never a replay's outcome (``diverged``)."""
    from otel_replay.bisect.html import render_bisect
    from otel_replay.bisect.revisions import Revision
    from otel_replay.bisect.run import BisectResult

    good, one, two = (Revision(id=f"{c * 40}", label=f"{c * 7} commit {c}") for c in "abc")
    result = BisectResult(
        bisect_id="b1", axis="git", target="trace", targets=["t"], mode="mock", good=good, bad=two, candidates=2,
        steps=[], first_bad=two if found else None, last_good=good if found else None, found=found,
        ambiguous=[one, two] if ambiguous else [], interrupted=interrupted, history=[good, one, two],
    )  # fmt: skip
    page = render_bisect(result)
    shown = page.split("</h1>", 1)[1].split("</span>", 1)[0]
    assert shown.endswith(f">{badge}") and "diverged" not in shown.rsplit(">", 1)[1]
