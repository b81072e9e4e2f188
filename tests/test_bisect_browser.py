"""The bisect's HTML report in the real browser, as the other reports are checked: a bisect of the twenty-commit
repository (``bisect_repo``) run through the Python API, its page loaded from its file:// URL: the answer (the
first bad commit, its author, the last good one, the boundary's diff with the prompt change), the search in the
order tried with each verdict, the history with every candidate; no console error, no request but the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bisect_repo import BAD_PROMPT, BREAK, NO_IMPORT, _git, make_repo, record
from test_report_browser import browser, opened, screenshot  # noqa: F401 - the browser fixture

from otel_replay.bisect import bisect
from otel_replay.bisect.html import render_bisect


def test_the_bisect_report(browser: Any, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    path = tmp_path / "repo"
    hashes = make_repo(path)
    _git(path, "checkout", "-q", hashes[0])
    trace_id = record(path)
    _git(path, "checkout", "-q", "main")
    monkeypatch.chdir(path)
    result = bisect(good=hashes[0], bad="main", traces=[trace_id])
    page_file = tmp_path / "bisect.html"
    page_file.write_text(render_bisect(result))
    with opened(browser, page_file) as seen:
        page = seen.page
        assert page.locator("h1 + .outcome").inner_text().lower() == "found"  # the answer, not a replay's outcome
        answer = page.locator("#first-bad").inner_text()
        assert hashes[BREAK - 1] in answer and "Make the support prompt terse" in answer and "Ada Dev" in answer
        assert hashes[BREAK - 2] in answer
        assert BAD_PROMPT in page.locator("#boundary-diff .dl-add").all_inner_texts()[0]
        rows = page.locator("#path tbody tr")
        assert rows.count() == len(result.steps)
        assert page.locator('#path tr[data-verdict="skip"]').count() == 1
        assert hashes[NO_IMPORT - 1][:10] in page.locator('#path tr[data-verdict="skip"]').inner_text()
        assert page.locator("#history tbody tr").count() == 20
        assert page.locator(f'#history tr[data-revision="{hashes[BREAK - 1]}"].held').count() == 1
        screenshot(page, "report-bisect.png")
        seen.assert_quiet()
