"""The skips a checked run may have (``tests/skip_check.py``): every other skipped test fails the run.

Each entry is ``(pattern, reason)``: ``pattern`` is a regular expression searched in the skip's message (what the
test passed to ``pytest.skip`` or ``skipif``), ``reason`` says why that skip is not a hole in the suite. Only what
the machine decides belongs here (the kernel, the operating system, the Python version) or a mode the run chose;
never a package of the ``[test]`` extra (a missing one fails the modules that import it) and never a file of the
repository.
"""

from __future__ import annotations

from typing import Final

ALLOWED: Final[tuple[tuple[str, str], ...]] = (
    (
        r"^the failing writer finds files via /proc$",
        "the store-unavailable fault tests find the writer's open files in /proc, which only Linux has",
    ),
    (
        r"^Node\.js \(node and npm\) is not on this machine$",
        "the TypeScript agents of tests/any_language/ run on the machine's Node.js, which make test installs where "
        "it can (root with apt-get); CI requires it (OTEL_REPLAY_REQUIRE_NODE=1)",
    ),
    (r"^needs os\.fork$", "a fork while a lock is held can only be tested where os.fork exists (not on Windows)"),
    (
        r"^tomllib is in the standard library from Python 3\.11 on$",
        "Python 3.10 is supported and has no tomllib; the [test] extra adds no TOML reader for one test",
    ),
    (
        r"^every command runs as a subprocess in this run$",
        "the run turned the fork server off (OTEL_REPLAY_TEST_FORKSERVER=0) or measures coverage: there is no fork "
        "to check",
    ),
)
