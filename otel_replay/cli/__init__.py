"""The ``otel-replay`` command: a thin shell over the library.

Each command parses its arguments, calls the library, and prints either rich text for people or, with
``--json``, one JSON document on stdout. Errors are one line on stderr (``error: …``) and exit code 2,
never a traceback (``OTEL_REPLAY_DEBUG=1`` shows one). Exit code 1 is kept for "completed, but the answer
is negative" (a replay that diverged).

The app and the helpers every command shares are in ``app``; each command group is a module of its own
(``listing``, ``demoing``, ``replaying``, ``lab``, ``inspecting``, ``case``, ``db``) that registers its commands on the
app when imported, which this package does. It must never import the store, the SDK, Rich or the engine at
module level: ``otel-replay --help`` loads only this package, typer and the leaf modules.
"""

from __future__ import annotations

# isort: off
# The modules register their commands in this order, the order `otel-replay --help` lists them in.
from . import listing, demoing, replaying, lab, bisecting, inspecting, case, db, wire

# isort: on
from .app import EXIT_ERROR, app, case_app, db_app, fail, main, version
from .bisecting import bisect_command
from .case import CaseModeChoice, ExpectChoice, case_export_command, case_run_command
from .db import db_init_command
from .demoing import DemoSdk, demo_command
from .inspecting import audit_command, diff_command
from .lab import lab_command
from .listing import KindFilter, StatusFilter, render_run, runs_command, show_command
from .outcome import agent_error_line
from .replaying import ModeChoice, ToolModeChoice, replay_command, replay_session_command, replay_tool_command
from .wire import mcp_proxy_command, mcp_serve_command, proxy_command, serve_command

__all__ = [
    "EXIT_ERROR",
    "CaseModeChoice",
    "DemoSdk",
    "ExpectChoice",
    "KindFilter",
    "ModeChoice",
    "StatusFilter",
    "ToolModeChoice",
    "agent_error_line",
    "app",
    "audit_command",
    "bisect_command",
    "bisecting",
    "case",
    "case_app",
    "case_export_command",
    "case_run_command",
    "db",
    "db_app",
    "db_init_command",
    "demo_command",
    "demoing",
    "diff_command",
    "fail",
    "inspecting",
    "lab",
    "lab_command",
    "listing",
    "main",
    "mcp_proxy_command",
    "mcp_serve_command",
    "proxy_command",
    "render_run",
    "replay_command",
    "replay_session_command",
    "replay_tool_command",
    "replaying",
    "runs_command",
    "serve_command",
    "show_command",
    "version",
    "wire",
]
