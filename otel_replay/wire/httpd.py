"""The HTTP side the wire commands share: a threaded server on one address, and a request handler that reads a
model request, hands it to its owner, and answers (a JSON body, a chunked event stream, or an error).

Why it exists: the recording proxy and the replay server serve the same three endpoints to the same clients;
only what they do with a request differs (:meth:`Owner.exchange`).

What it must never do: answer a bad request with a traceback (one JSON error in the providers' shape and one
line on stderr), or read more of a body than its ``Content-Length`` says (at most :data:`MAX_BODY`).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Protocol

from .endpoints import ENDPOINTS, Endpoint, endpoint_for

log = logging.getLogger("otel_replay")

MAX_BODY: Final = 64 << 20
"""Bytes a request body may hold."""


class Owner(Protocol):
    """What a wire command does with a request."""

    name: str
    """How its lines on stderr begin (``otel-replay proxy``)."""

    def exchange(self, handler: Handler, endpoint: Endpoint, body: bytes, request: dict[str, Any]) -> None: ...

    def warn(self, line: str) -> None: ...


class _Threading(ThreadingHTTPServer):
    daemon_threads = True
    owner: Owner

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed outside a request (a client that went away between two requests): no
        traceback; one line for anything but a reset."""
        error = sys.exc_info()[1]
        if not isinstance(error, (ConnectionError, TimeoutError)):
            self.owner.warn(f"{self.owner.name}: a connection failed: {type(error).__name__}: {error}")


class Server:
    """A threaded HTTP server for ``owner`` on ``host:port`` (port 0: any free one)."""

    def __init__(self, owner: Owner, host: str, port: int) -> None:
        class Bound(Handler):
            pass

        Bound.owner = owner
        self.httpd = _Threading((host, port), Bound)
        self.httpd.owner = owner

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def serve(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Handler(BaseHTTPRequestHandler):
    """One connection of a client: its requests, one at a time."""

    owner: Owner
    protocol_version = "HTTP/1.1"
    server_version = "otel-replay"
    disable_nagle_algorithm = True  # headers, body and each stream event go out as written: no 40 ms ACK wait

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return  # one line per failure instead (fail)

    def do_POST(self) -> None:
        try:
            endpoint = endpoint_for(self.path)
            if endpoint is None:
                self.fail(404, f"no such endpoint: POST {self.path[:200]} (served: {served()})")
                return
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit() or int(length) > MAX_BODY:
                self.fail(411 if length is None else 413, "the request needs a Content-Length of at most 64 MiB")
                return
            body = self.rfile.read(int(length))
            request = json_or_none(body)
            if not isinstance(request, dict):
                self.fail(400, f"the body of POST {endpoint.path} is not a JSON object")
                return
            self.owner.exchange(self, endpoint, body, request)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # one line, never a traceback
            log.debug("%s: request failed", self.owner.name, exc_info=True)
            self.fail(500, f"{self.owner.name} failed: {type(exc).__name__}: {exc}")

    def do_GET(self) -> None:
        self.fail(405, f"only POST is served ({served()})")

    def do_PUT(self) -> None:
        self.do_GET()

    def do_DELETE(self) -> None:
        self.do_GET()

    def do_PATCH(self) -> None:
        self.do_GET()

    # ------------------------------------------------------------------------------------------- answers

    def fail(self, status: int, message: str, **extra: Any) -> None:
        """An error answer in the providers' shape (``extra`` added to its ``error`` object, where the SDKs hand
        it to the caller), and one line on stderr."""
        self.owner.warn(f"{self.owner.name}: {status}: {message}")
        error_type = "otel_replay_divergence" if status == 409 else "otel_replay_error"
        payload = json.dumps({"error": {"type": error_type, "message": message, **extra}}).encode()
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


def served() -> str:
    return ", ".join(f"POST {path}" for path in ENDPOINTS)


def json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def safely(name: str, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, or None (logged) when it raises: recording never fails a request."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        log.warning("%s: could not %s", name, what, exc_info=True)
        return None
