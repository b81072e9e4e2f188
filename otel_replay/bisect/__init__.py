"""Bisect: the commit, prompt version or model that first breaks a recorded run, found by replaying it.

One module per job: ``search`` (the search, pure logic), ``revisions`` (commits and their worktrees, prompt
files, models), ``step`` (one step, run in a child process at one revision), ``run`` (the bisect: the search
driving the steps; :func:`bisect` and :class:`BisectResult`), ``html`` (the report page). ``docs/bisect.md``
has the recipes.
"""

from __future__ import annotations

from .revisions import BisectInputError, Revision
from .run import BisectResult, Step, bisect

__all__ = ["BisectInputError", "BisectResult", "Revision", "Step", "bisect"]
