"""What the tests that run ``python -m pytest`` in a child process (the pytest plugin's tests, and the
adversarial ones that collect hostile case files) pass to it besides their own arguments.

The installed pytest plugins that have nothing to do with case files stay out of those runs: LangSmith's and
Hypothesis's plugins load about 2.4 s of CPU into every pytest process (xdist workers included) and take no
part in collecting or running a case. otel-replay's plugin is still found through its entry point, next to
xdist's, anyio's and pytest-cov's, as a user's pytest finds it.
"""

from __future__ import annotations

from typing import Final

UNRELATED_PLUGINS: Final = ("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest")
"""``-p no:NAME`` for each unrelated plugin: insert after ``python -m pytest``."""
