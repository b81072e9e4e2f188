"""Local fakes of the OpenAI and Anthropic HTTP APIs, for the SDK demos, tests and benchmarks that drive the real SDKs.

One ``http.server`` in a thread on 127.0.0.1 serves ``/v1/chat/completions``, ``/v1/responses`` and
``/v1/messages`` in the real JSON and SSE wire formats, and counts every request it receives, so a test can
prove that a replay sent none. Answers are scripted and deterministic (fixed ids and timestamps):

* a request that offers tools and has no tool result yet gets a call of the first tool offered (``get_weather``
  when the tool list names none) with the arguments ``{"city": "Paris"}`` (other arguments with
  ``FakeLLMServer(tool_args=...)``, per tool name with ``tool_args_for={name: args}``);
* a request whose conversation holds a tool result gets a final text that quotes it;
* a chat completion whose first user text holds a key of ``chat_texts`` gets the text scripted for it, turn
  by turn (``chat_texts={key: [first answer, second answer, ...]}``: a code agent's code blobs, say);
* anything else gets ``echo: <last user text>``;
* the model ``missing-model`` gets HTTP 404 with the API's error body;
* a model whose name starts with ``terse-`` (:data:`TERSE_PREFIX`, e.g. ``terse-gpt``) never asks for a tool
  and answers ``terse: <first word of the last user text>`` in every API: a what-if model that answers
  differently (a shorter final text, no tool call), so a replay lab's ``output_equal`` and
  ``tool_sequence_equal`` scores regress against runs recorded with any other model.

Ids, ``created`` and ``system_fingerprint`` are fixed by default. ``FakeLLMServer(volatile_ids=True)`` makes
them change with every request, as the real APIs do (random ids, a ``created`` that counts up), so a test can
prove that a replay does not mistake a new id for a change.

Each API's answer in its wire format (JSON bodies and server-sent events) is in :mod:`.fake_wire`, whose
``_WireFormats`` is the server's base class.

It must never reach the network or depend on anything but the standard library.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .fake_wire import TERSE_PREFIX as TERSE_PREFIX  # re-exported: otel_replay.demo.fake_llm.TERSE_PREFIX
from .fake_wire import _WireFormats

TOOL_NAME = "get_weather"
TOOL_ARGS = {"city": "Paris"}
CREATED = 1_767_225_600
MISSING_MODEL = "missing-model"
"""A model name the fake answers with HTTP 404, as both APIs do for an unknown model."""


class FakeLLMServer(_WireFormats):
    """A scripted OpenAI + Anthropic API on ``http://127.0.0.1:{port}``; ``requests`` lists what it received."""

    def __init__(
        self,
        *,
        tool_args: dict[str, Any] | None = None,
        tool_args_for: dict[str, dict[str, Any]] | None = None,
        volatile_ids: bool = False,
    ) -> None:
        self.tool_args = dict(TOOL_ARGS if tool_args is None else tool_args)
        """The arguments of the scripted tool call (streamed in pieces, like every text)."""
        self.tool_args_for = {name: dict(args) for name, args in (tool_args_for or {}).items()}
        """Arguments per tool name; a tool not named here gets :attr:`tool_args`."""
        self.volatile_ids = volatile_ids
        self.chat_texts: dict[str, list[str]] = {}
        """Chat-completion answers scripted per key found in the first user text, one per assistant turn."""
        """Whether ids, ``created`` and ``system_fingerprint`` change with every request."""
        self._serial = itertools.count(1)
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
                path = self.path.split("?")[0]
                if body.get("model") == MISSING_MODEL:
                    self._send(
                        404,
                        {
                            "type": "error",
                            "error": {
                                "message": f"The model `{MISSING_MODEL}` does not exist",
                                "type": "not_found_error",
                                "code": "model_not_found",
                            },
                        },
                    )
                elif path.endswith("/chat/completions"):
                    server._chat(self, body)
                elif path.endswith("/responses"):
                    server._responses(self, body)
                elif path.endswith("/messages"):
                    server._messages(self, body)
                else:
                    self._send(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, frames: list[tuple[str | None, Any]]) -> None:
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
    def anthropic_url(self) -> str:
        """``base_url`` for ``Anthropic(...)``."""
        return f"http://127.0.0.1:{self.port}"

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

    def _id(self, fixed: str) -> str:
        """``fixed`` (e.g. ``chatcmpl-fake-1``), or with ``volatile_ids`` its prefix and a fresh random part."""
        if not self.volatile_ids:
            return fixed
        prefix = fixed.split("fake")[0]
        return f"{prefix}{secrets.token_hex(12)}"

    def _created(self) -> int:
        return CREATED + next(self._serial) if self.volatile_ids else CREATED

    def _call(self, tools: Any, name_of: Any) -> tuple[str, dict[str, Any]]:
        """The scripted tool call: the first tool offered (by ``name_of(tool)``) and its arguments."""
        name = TOOL_NAME
        if isinstance(tools, list) and tools:
            try:
                name = str(name_of(tools[0]) or TOOL_NAME)
            except (AttributeError, KeyError, TypeError):
                name = TOOL_NAME
        return name, self.tool_args_for.get(name, self.tool_args)
