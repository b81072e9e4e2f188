"""The recording proxy (``otel-replay proxy``): an agent in any language points its model client at it, and
each exchange is forwarded to the real API unchanged and recorded as a model step.

Why it exists: most agents are not Python agents whose SDK otel-replay instruments; what they share is the
wire. The proxy serves ``POST /v1/chat/completions``, ``/v1/responses`` (forwarded to ``--openai-upstream``)
and ``/v1/messages`` (``--anthropic-upstream``), streaming and not. It forwards each request's body and headers
(authorization included: passed through, never recorded) and relays the answer as it arrives (a stream event by
event), then records the exchange as a model step of the request's run (:mod:`otel_replay.wire.runs`), with
the redaction and keyed hashes of any recording. The tool calls an answer asked for, once a later request of
the run sends their results back, become tool steps marked ``observed``: they ran in the agent, and no replay
executes or answers them.

What it must never do: record a header, change what it forwards, let a recording failure fail a request, or
answer a bad request with a traceback (one JSON error and one line on stderr).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .endpoints import Endpoint
from .forward import Forwarder, Upstream, UpstreamError
from .httpd import Handler, Server, stderr_line
from .recorded import INSTRUMENTATION
from .runs import WireRuns


class Proxy:
    """The recording proxy: :meth:`serve` until :meth:`stop`."""

    name = "otel-replay proxy"

    def __init__(
        self,
        upstreams: Mapping[str, Upstream],
        runs: WireRuns,
        *,
        host: str = "127.0.0.1",
        port: int = 8788,
        warn: Callable[[str], None] = stderr_line,
    ) -> None:
        self.runs = runs
        self.warn = warn
        self.forwarder = Forwarder(self.name, upstreams)
        self.server = Server(self, host, port)
        self.url = self.server.url

    def serve(self) -> None:
        self.server.serve()

    def stop(self) -> None:
        self.server.stop()

    def exchange(self, handler: Handler, endpoint: Endpoint, body: bytes, request: dict[str, Any]) -> None:
        """Forward one request and record it in its run (:mod:`otel_replay.wire.runs`)."""
        if endpoint.provider not in self.forwarder.upstreams:
            handler.fail(502, f"no --{endpoint.provider}-upstream was given: {endpoint.path} cannot be forwarded")
            return
        run = self.runs.enter({k.lower(): v for k, v in handler.headers.items()})
        try:
            run.context.copy().run(self.forwarder.exchange, handler, endpoint, body, request, run.pending, run.lock)
        finally:
            self.runs.leave(run)


__all__ = ["INSTRUMENTATION", "Proxy", "Upstream", "UpstreamError"]
