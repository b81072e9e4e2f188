"""Forwarding one model request to its upstream and recording the exchange: the part of the recording proxy
that ``otel-replay serve --then-live`` shares (the calls after a replay's divergence go to the real API).

Why it exists: both forward a request's body and headers unchanged (authorization passed through, never
recorded), relay the answer as it arrives (a stream event by event), and record the exchange as a model step of
the run current in their context, with the observed tool steps before it (:mod:`otel_replay.wire.recorded`).

What it must never do: record a header, change what it forwards, or let a recording failure fail a request.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from ..recording import end_call
from ..streams import redact_deltas
from .endpoints import Endpoint, EventParser, ToolCall, asked, envelope
from .httpd import Handler, json_or_none, safely
from .recorded import begin_model, observe

_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


class UpstreamError(Exception):
    """The upstream answered with an error status: recorded as the step's error (status and body)."""


@dataclass(frozen=True)
class Upstream:
    """Where one provider's requests go: ``scheme://host:port`` and the base path."""

    scheme: str
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str, option: str) -> Upstream:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{option} must be an http:// or https:// URL, got {url!r}")
        if parts.username or parts.password:
            raise ValueError(f"{option} must not carry credentials in its URL (send them as the client does)")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    def connect(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=600)
        return http.client.HTTPConnection(self.host, self.port, timeout=600)


class _Connections(threading.local):
    """One keep-alive connection per upstream and handler thread."""

    def __init__(self) -> None:
        self.open: dict[Upstream, http.client.HTTPConnection] = {}


class Forwarder:
    """Forwards requests to ``upstreams`` (by provider) and records each exchange in the current context."""

    def __init__(self, name: str, upstreams: Mapping[str, Upstream]) -> None:
        self.name = name
        self.upstreams = dict(upstreams)
        self._connections = _Connections()

    def exchange(
        self,
        handler: Handler,
        endpoint: Endpoint,
        body: bytes,
        request: dict[str, Any],
        pending: dict[str, ToolCall],
        lock: threading.Lock,
    ) -> None:
        """Forward one request, relay its answer, record both (``pending``: the tool calls earlier answers of
        the run asked for, whose results may come back in this request; this answer's calls are added)."""
        upstream = self.upstreams.get(endpoint.provider)
        if upstream is None:
            handler.fail(502, f"no --{endpoint.provider}-upstream was given: {endpoint.path} cannot be forwarded")
            return
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
        begun: list[Any] = []

        def record() -> None:  # while the upstream works on the request: it costs the client no time
            if not begun:
                observe(self.name, endpoint, request, pending, lock)
                begun.append(begin_model(self.name, endpoint, request))

        try:
            response = self._forward(upstream, endpoint, headers, body, record)
        except OSError as exc:
            record()
            end_call(begun[0], exc=exc)
            handler.fail(502, f"the {endpoint.provider} upstream could not be reached: {type(exc).__name__}: {exc}")
            return
        call = begun[0]
        with response:
            status, reason = response.status, response.reason
            relayed = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
            streamed = "text/event-stream" in (response.getheader("content-type") or "")
            if streamed and 200 <= status < 300:
                answer = self._relay_stream(handler, endpoint, response, status, reason, relayed, call)
            else:
                payload = response.read()
                handler.answer(status, reason, relayed, payload)
                answer = json_or_none(payload)
                if not 200 <= status < 300:
                    end_call(call, exc=UpstreamError(f"HTTP {status}: {payload[:2000].decode(errors='replace')}"))
                    return
                end_call(call, result=answer)
        calls = asked(endpoint, answer)
        with lock:
            pending.update({c.call_id: c for c in calls})

    def _relay_stream(
        self,
        handler: Handler,
        endpoint: Endpoint,
        response: http.client.HTTPResponse,
        status: int,
        reason: str,
        relayed: list[tuple[str, str]],
        call: Any,
    ) -> Any:
        """Relay a stream as it arrives (chunked to the client), parse its events, record them as the step's
        answer when it ends; a stream cut short is recorded as incomplete."""
        handler.start_stream(status, reason, relayed)
        parser, chunks, done, complete = EventParser(), [], False, True
        try:
            while True:
                data = response.read1(65536)
                if not data:
                    break
                handler.stream(data)
                for _event, text in parser.feed(data):
                    if text.strip() == "[DONE]":
                        done = True
                        continue
                    decoded = json_or_none(text.encode())
                    if decoded is not None:
                        chunks.append(decoded)
            handler.end_stream()
        except (OSError, ValueError):
            complete = False
        if call is not None:
            redactor = call.step.run.rt.redactor
            safely(self.name, "redact the stream", redact_deltas, chunks, endpoint.delta_slots, redactor)
        answer = envelope(endpoint, chunks, complete=complete, done=done)
        end_call(call, result=answer)
        return answer

    def _forward(
        self,
        upstream: Upstream,
        endpoint: Endpoint,
        headers: dict[str, str],
        body: bytes,
        meanwhile: Callable[[], None],
    ) -> http.client.HTTPResponse:
        """The upstream's response to the request (a kept-alive connection, opened again once if it was
        closed meanwhile); ``meanwhile`` runs once the request is sent, before the response is read."""
        path = upstream.path + endpoint.suffix
        sent = {**headers, "Host": upstream.host if upstream.port in (80, 443) else f"{upstream.host}:{upstream.port}"}
        sent["Content-Length"] = str(len(body))
        for attempt in (1, 2):
            connection = self._connections.open.get(upstream)
            if connection is None:
                connection = self._connections.open[upstream] = upstream.connect()
            try:
                connection.request("POST", path, body=body, headers=sent)
                meanwhile()
                return connection.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                connection.close()
                self._connections.open.pop(upstream, None)
                if attempt == 2:
                    raise
        raise OSError("unreachable")  # pragma: no cover - the loop returns or raises
