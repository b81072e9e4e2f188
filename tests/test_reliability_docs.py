"""docs/reliability.md names the test behind every promise: each named test file and test must exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r"`(?:tests/)?(test_\w+\.py)?(?:::(test_\w+))?")


def test_every_test_named_in_reliability_md_exists() -> None:
    text = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    named: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        current: str | None = None
        for match in re.finditer(r"`([^`]+)`", line):
            token = match.group(1)
            found = REFERENCE.match(f"`{token}")
            if found is None or not (found.group(1) or found.group(2)):
                continue
            current = found.group(1) or current
            if current is not None:
                named.append((current, found.group(2)))
    assert len(named) > 40
    missing = []
    for file, test in named:
        path = ROOT / "tests" / file
        if not path.is_file():
            missing.append(file)
        elif test is not None and not re.search(rf"^(async )?def {test}\(", path.read_text(encoding="utf-8"), re.M):
            missing.append(f"{file}::{test}")
    assert not missing, missing
    for script in re.findall(r"`python (benchmarks/\w+\.py)", text) + re.findall(r"`(benchmarks/\w+\.py)`", text):
        assert (ROOT / script).is_file(), script
