"""The replay scopes narrower and wider than one whole run: one recorded tool call run again against the current
code (``tool``, the code found by ``toolcode``), and a whole conversation of recorded runs replayed in order
(``tool`` too, :func:`replay_session`).

Each scope builds on the engine (:mod:`otel_replay.replay.engine`) and its rules; it must never bypass them: no
scope runs code the entrypoint rule does not trust, calls a tool without the approvals a whole-run replay would
need, or runs the agent outside the side-effect guard. Nothing below the scopes imports them.
"""

from .conversation import SessionReplayResult, replay_session
from .tool import ToolReplayResult, replay_tool

__all__ = ["SessionReplayResult", "ToolReplayResult", "replay_session", "replay_tool"]
