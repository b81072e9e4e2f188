"""Self-contained HTML reports of a run, a replay and a diff: one file to attach to a ticket or a review.

:func:`run_report`, :func:`replay_report` and :func:`diff_report` turn runs read from the store into one HTML
page each: a header (agent, trace and run ids, status, duration, cost and tokens), a waterfall timeline of the
steps (nesting, start offset and duration, status, latency, cost, tokens), every snapshot pretty-printed under
its step, and for a replay or a diff the two runs side by side, aligned step by step, with the diff's sections,
the divergences and the first divergence highlighted. :func:`write_report` writes a page atomically.

The package is split by job: :mod:`.values` and :mod:`.views` / :mod:`.compare` build the view model (plain
data) from runs, replays and diffs; :mod:`.render` renders it through the Jinja2 templates in ``templates/``
(files of this package, autoescape on); :mod:`.links` and :mod:`.writing` hold the trace links and the file
writing.

What a report must never do:

* fetch anything: styles and the small script are inline, nothing has an external ``src`` or ``href`` but the
  optional links to Jaeger and Grafana, and the page carries a Content-Security-Policy that forbids every
  fetch (the script is allowed by its hash, so no other script can run);
* show a value unescaped: every name, id and payload read from a trace is untrusted text, and reaches the
  page only through the templates' autoescape;
* show more than the store holds: a redacted value stays a marker (shown as such), nothing is looked up again.

The content works without JavaScript (steps and snapshots open with ``<details>``); the script only adds
expand / collapse buttons, scrolls to the first divergence and opens both sides of a compared step together.
"""

from __future__ import annotations

from .links import GRAFANA_RUN_DASHBOARD_UID, OTEL_REPLAY_GRAFANA_URL, OTEL_REPLAY_JAEGER_URL, Links
from .render import diff_report, replay_report, run_report
from .writing import ReportWriteError, write_report

__all__ = [
    "GRAFANA_RUN_DASHBOARD_UID",
    "OTEL_REPLAY_GRAFANA_URL",
    "OTEL_REPLAY_JAEGER_URL",
    "Links",
    "ReportWriteError",
    "diff_report",
    "replay_report",
    "run_report",
    "write_report",
]
