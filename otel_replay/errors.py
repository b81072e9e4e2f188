"""One exception hierarchy for everything a user calls directly (store, CLI, replay).

Messages say what happened and what to do next, in one line, so the CLI can print them as they are.
The telemetry path (recording, exporting) never raises these into the host program.
"""

from __future__ import annotations


class OtelReplayError(Exception):
    """Base class of every error otel-replay raises on purpose."""


class StoreError(OtelReplayError):
    """The store cannot be opened, read or written."""


class StoreBusyError(StoreError):
    """Another process holds the embedded store."""


class StoreUnavailableError(StoreError):
    """The store's server cannot be reached or refused the connection."""


class ReplayRefused(OtelReplayError):
    """The replay cannot start, or was stopped before a call it may not make (CLI exit code 2).

    Also importable from :mod:`otel_replay.replay.engine` and as ``otel_replay.ReplayRefused``."""


class AgentCodeUnavailable(ReplayRefused):
    """The agent's code cannot be run as it stands: its entrypoint's module does not import (a syntax error, a
    missing dependency, an error at import) or does not define the entrypoint. The CLI exits 125, the code
    ``git bisect run`` skips a commit with: the code at this revision cannot be tested."""

    exit_code = 125


class TraceNotFoundError(OtelReplayError):
    """No run with that trace id is in the store."""


class InvalidTraceIdError(OtelReplayError, ValueError):
    """A trace id is not 32 hexadecimal characters."""


class ToolNotRecorded(OtelReplayError, LookupError):
    """Raised into a replayed agent (a replay given a policy, see :mod:`otel_replay.replay.matching.tape`) at a
    tool call the recording holds no answer for: the call was refused and not executed. An ordinary exception, so the
    agent may handle it as it handles a failing tool."""
