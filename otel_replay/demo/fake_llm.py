"""The local fake of the OpenAI chat completions API that ``otel-replay demo --sdk openai`` runs against.

One ``http.server`` in a thread on 127.0.0.1 serves ``/v1/chat/completions`` in the real JSON and SSE wire
formats, and counts every request it receives (so a replay can be seen to send none). Answers are scripted and
deterministic (fixed ids and timestamps):

* a request that offers tools and has no tool result yet gets a call of the first tool offered (``get_weather``
  when the tool list names none) with the arguments ``{"city": "Paris"}``;
* a request whose conversation holds a tool result gets a final text that quotes it;
* anything else gets ``echo: <last user text>``;
* a model whose name starts with ``terse-`` (:data:`TERSE_PREFIX`, e.g. ``terse-gpt``) never asks for a tool
  and answers ``terse: <first word of the last user text>``: a what-if model that answers differently (a
  shorter final text, no tool call), so a replay lab's ``output_equal`` and ``tool_sequence_equal`` scores
  regress against runs recorded with any other model.

The answers' wire format is in :mod:`.fake_wire`, whose ``ChatWire`` is the server's base class. The test
suite's server (more APIs, error answers, changing ids) is built on this one and is not part of the package.

It must never reach the network or depend on anything but the standard library.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .fake_wire import TERSE_PREFIX as TERSE_PREFIX  # re-exported: otel_replay.demo.fake_llm.TERSE_PREFIX
from .fake_wire import ChatWire

TOOL_NAME = "get_weather"
TOOL_ARGS = {"city": "Paris"}
CREATED = 1_767_225_600


class FakeLLMServer(ChatWire):
    """A scripted OpenAI chat completions API on ``http://127.0.0.1:{port}``; ``requests`` lists what it received.

    A server built on it answers more paths by overriding :meth:`route`, and changes its ids, timestamps and
    tool calls by overriding :meth:`make_id`, :meth:`created_at` and :meth:`tool_call`."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed ACK

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append((self.path, body))
                server.route(self, self.path.split("?")[0], body)

            def send_json(self, status: int, payload: Any) -> None:
                """Answer with ``payload`` as one JSON body."""
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def send_events(self, frames: list[tuple[str | None, Any]]) -> None:
                """Answer with ``frames`` (event name or None, data) as server-sent events."""
                out = []
                for event, data in frames:
                    text = data if isinstance(data, str) else json.dumps(data)
                    out.append((f"event: {event}\n" if event else "") + f"data: {text}\n\n")
                blob = "".join(out).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(blob)))
                self.end_headers()
                self.wfile.write(blob)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------------------------------- api

    @property
    def openai_url(self) -> str:
        """``base_url`` for ``OpenAI(...)``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def count(self) -> int:
        """Requests received so far."""
        with self._lock:
            return len(self.requests)

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --------------------------------------------------------------------------------------- scripts

    def route(self, h: Any, path: str, body: dict[str, Any]) -> None:
        """Answer one request for ``path`` on handler ``h``: chat completions, else HTTP 404."""
        if path.endswith("/chat/completions"):
            self.answer_chat(h, body)
        else:
            h.send_json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    def make_id(self, fixed: str) -> str:
        """The id an answer carries: ``fixed`` (e.g. ``chatcmpl-fake-1``)."""
        return fixed

    def created_at(self) -> int:
        """The ``created`` time an answer carries."""
        return CREATED

    def tool_call(self, tools: Any, name_of: Any) -> tuple[str, dict[str, Any]]:
        """The scripted tool call: the first tool offered (by ``name_of(tool)``) and its arguments."""
        name = TOOL_NAME
        if isinstance(tools, list) and tools:
            try:
                name = str(name_of(tools[0]) or TOOL_NAME)
            except (AttributeError, KeyError, TypeError):
                name = TOOL_NAME
        return name, dict(TOOL_ARGS)
