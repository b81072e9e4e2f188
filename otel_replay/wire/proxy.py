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

import http.client
import json
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import urlsplit

from .. import semconv
from ..recording import begin_model_call, begin_tool_call, end_call
from ..streams import redact_deltas
from .endpoints import Endpoint, EventParser, asked, endpoint_for, envelope, returned
from .runs import WireRun, WireRuns

log = logging.getLogger("otel_replay")

INSTRUMENTATION: Final = "wire"
"""``otel_replay.step.instrumentation`` of the steps the wire commands record."""
MAX_BODY: Final = 64 << 20
"""Bytes a request body may hold."""
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


class Proxy:
    """The recording proxy: :meth:`serve` until :meth:`stop`."""

    def __init__(
        self,
        upstreams: Mapping[str, Upstream],
        runs: WireRuns,
        *,
        host: str = "127.0.0.1",
        port: int = 8788,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.upstreams = dict(upstreams)
        self.runs = runs
        self._warn = warn or (lambda line: print(line, file=sys.stderr, flush=True))
        self._connections = _Connections()
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def serve(self) -> None:
        self.server.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------------------------------- exchanges

    def exchange(self, handler: _Handler, endpoint: Endpoint, body: bytes, request: dict[str, Any]) -> None:
        """Forward one request, relay its answer, record both in the request's run."""
        upstream = self.upstreams.get(endpoint.provider)
        if upstream is None:
            option = f"--{endpoint.provider}-upstream"
            handler.fail(502, f"no {option} was given: the proxy cannot forward {endpoint.path}")
            return
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
        run = self.runs.enter({k.lower(): v for k, v in handler.headers.items()})
        try:
            run.context.copy().run(self._recorded, handler, endpoint, upstream, headers, body, request, run)
        finally:
            self.runs.leave(run)

    def _recorded(
        self,
        handler: _Handler,
        endpoint: Endpoint,
        upstream: Upstream,
        headers: dict[str, str],
        body: bytes,
        request: dict[str, Any],
        run: WireRun,
    ) -> None:
        self._observed(endpoint, request, run)
        model = request.get("model")
        call = _safely(
            "begin the model step",
            begin_model_call,
            endpoint.step,
            request,
            provider=endpoint.provider,
            model=model if isinstance(model, str) else None,
            instrumentation=INSTRUMENTATION,
        )
        try:
            response = self._forward(upstream, endpoint, headers, body)
        except OSError as exc:
            end_call(call, exc=exc)
            handler.fail(502, f"the {endpoint.provider} upstream could not be reached: {type(exc).__name__}: {exc}")
            return
        with response:
            status, reason = response.status, response.reason
            relayed = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
            streamed = "text/event-stream" in (response.getheader("content-type") or "")
            if streamed and 200 <= status < 300:
                answer = self._relay_stream(handler, endpoint, response, status, reason, relayed, call)
            else:
                payload = response.read()
                handler.answer(status, reason, relayed, payload)
                answer = _json(payload)
                if not 200 <= status < 300:
                    end_call(call, exc=UpstreamError(f"HTTP {status}: {payload[:2000].decode(errors='replace')}"))
                    return
                end_call(call, result=answer)
        calls = asked(endpoint, answer)
        with run.lock:
            run.pending.update({c.call_id: c for c in calls})

    def _relay_stream(
        self,
        handler: _Handler,
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
                    decoded = _json(text.encode())
                    if decoded is not None:
                        chunks.append(decoded)
            handler.end_stream()
        except (OSError, ValueError):
            complete = False
        if call is not None:
            redactor = call.step.run.rt.redactor
            _safely("redact the stream", redact_deltas, chunks, endpoint.delta_slots, redactor)
        answer = envelope(endpoint, chunks, complete=complete, done=done)
        end_call(call, result=answer)
        return answer

    def _forward(
        self, upstream: Upstream, endpoint: Endpoint, headers: dict[str, str], body: bytes
    ) -> http.client.HTTPResponse:
        """The upstream's response to the request (a kept-alive connection, opened again once if it was
        closed meanwhile)."""
        path = upstream.path + endpoint.suffix
        sent = {**headers, "Host": upstream.host if upstream.port in (80, 443) else f"{upstream.host}:{upstream.port}"}
        sent["Content-Length"] = str(len(body))
        for attempt in (1, 2):
            connection = self._connections.open.get(upstream)
            if connection is None:
                connection = self._connections.open[upstream] = upstream.connect()
            try:
                connection.request("POST", path, body=body, headers=sent)
                return connection.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                connection.close()
                self._connections.open.pop(upstream, None)
                if attempt == 2:
                    raise
        raise OSError("unreachable")  # pragma: no cover - the loop returns or raises

    def _observed(self, endpoint: Endpoint, request: dict[str, Any], run: WireRun) -> None:
        """Tool steps for the calls of the run's earlier answers whose results this request sends back."""
        results = returned(endpoint, request)
        with run.lock:
            answered = [(c, results[c.call_id]) for c in run.pending.values() if c.call_id in results]
            for done, _ in answered:
                del run.pending[done.call_id]
        for tool, result in answered:
            arguments = tool.arguments if isinstance(tool.arguments, dict) else {"arguments": tool.arguments}
            step = _safely(
                "begin an observed tool step", begin_tool_call, tool.name, arguments, instrumentation=INSTRUMENTATION
            )
            if step is not None:
                _safely("mark the step", step.step.span.set_attribute, semconv.TOOL_OBSERVED, True)
            end_call(step, result=result)


class _Handler(BaseHTTPRequestHandler):
    """One connection of a client: its requests, one at a time."""

    owner: Proxy
    protocol_version = "HTTP/1.1"
    server_version = "otel-replay-proxy"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return  # one line per failure instead (fail)

    def do_POST(self) -> None:
        try:
            endpoint = endpoint_for(self.path)
            if endpoint is None:
                self.fail(404, f"no such endpoint: POST {self.path[:200]} (the proxy serves {_served()})")
                return
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit() or int(length) > MAX_BODY:
                self.fail(411 if length is None else 413, "the request needs a Content-Length of at most 64 MiB")
                return
            body = self.rfile.read(int(length))
            request = _json(body)
            if not isinstance(request, dict):
                self.fail(400, f"the body of POST {endpoint.path} is not a JSON object")
                return
            self.owner.exchange(self, endpoint, body, request)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # one line, never a traceback
            log.debug("otel-replay proxy: request failed", exc_info=True)
            self.fail(500, f"the proxy failed: {type(exc).__name__}: {exc}")

    def do_GET(self) -> None:
        self.fail(405, f"the proxy serves POST only ({_served()})")

    def do_PUT(self) -> None:
        self.do_GET()

    def do_DELETE(self) -> None:
        self.do_GET()

    def do_PATCH(self) -> None:
        self.do_GET()

    # ------------------------------------------------------------------------------------------- answers

    def fail(self, status: int, message: str) -> None:
        """An error answer in the providers' shape, and one line on stderr."""
        self.owner._warn(f"otel-replay proxy: {status}: {message}")
        payload = json.dumps({"error": {"type": "otel_replay_proxy_error", "message": message}}).encode()
        try:
            self.answer(status, None, [("Content-Type", "application/json")], payload)
        except OSError:
            self.close_connection = True

    def answer(self, status: int, reason: str | None, headers: list[tuple[str, str]], payload: bytes) -> None:
        self.send_response(status, reason)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def start_stream(self, status: int, reason: str | None, headers: list[tuple[str, str]]) -> None:
        self.send_response(status, reason)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def stream(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _served() -> str:
    from .endpoints import ENDPOINTS

    return ", ".join(f"POST {path}" for path in ENDPOINTS)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _safely(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, or None (logged) when it raises: recording never fails a request."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        log.warning("otel-replay proxy: could not %s", what, exc_info=True)
        return None


__all__ = ["INSTRUMENTATION", "Proxy", "Upstream", "UpstreamError"]
