"""Public behaviour that no other test reached: ``dir(otel_replay)``, the replayed raw response of an OpenAI
``with_raw_response`` call, the reprs that must never show a secret, ``otel-replay db init`` on the embedded
store, and a redacted value copied or pickled by the agent during a replay.

Runs are recorded with the real decorators and SDKs (against the local fake server) into the ``home``
fixture's store and replayed in mock mode; commands run in process through typer's CliRunner.
"""

from __future__ import annotations

import copy
import http.server
import json
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import otel_replay as orp
from otel_replay.cli import app
from otel_replay.storage.store import Store

RUNNER = CliRunner()
KEY = "sk-test-" + "3" * 32
MODEL = "gpt-4o-mini"
BASE_URL = ""
"""The fake server's URL; the agents read it at call time."""
SEEN: list[dict[str, Any]] = []
"""What the agents below saw, one entry per call (recording, then replay)."""


def _run_cli(*args: str) -> Any:
    return RUNNER.invoke(app, list(args), env={"COLUMNS": "200"})


def _recorded(agent: str) -> Any:
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent=agent, kind="original")
        return store.load_run(summary.trace_id)


# ------------------------------------------------------------------------------------------- dir()


def test_dir_lists_the_lazy_public_names_before_they_are_loaded() -> None:
    code = (
        "import json, sys, otel_replay\n"
        "names = dir(otel_replay)\n"
        "print(json.dumps({'names': names, 'recording': 'otel_replay.recording' in sys.modules}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OTEL_REPLAY_STORE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stdout)
    expected = {"agent", "tool", "configure", "instrument", "replay", "replay_tool", "diff", "Store", "Redactor"}
    assert expected <= set(said["names"]), sorted(expected - set(said["names"]))
    assert said["recording"] is False  # listing the names loaded none of them
    assert said["names"] == sorted(said["names"])
    for name in expected:
        assert getattr(orp, name) is not None


# -------------------------------------------------------------------------------- raw response


@pytest.fixture
def server() -> Iterator[Any]:
    """The fake OpenAI server; the agents point at it."""
    from fake_llm_servers import FakeLLMServer

    from otel_replay.instrumentation.openai import OpenAIInstrumentor

    global BASE_URL
    instrumentor = OpenAIInstrumentor()
    was = instrumentor.is_instrumented_by_opentelemetry
    if not was:
        instrumentor.instrument()
    SEEN.clear()
    try:
        with FakeLLMServer() as fake:
            BASE_URL = fake.openai_url
            yield fake
    finally:
        if not was:
            instrumentor.uninstrument()


@orp.agent("raw-body-agent")
def raw_body_agent(question: str) -> str:
    """Reads the raw response of a ``with_raw_response`` call the ways SDK users do."""
    import openai

    client = openai.OpenAI(base_url=BASE_URL, api_key=KEY, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": question}]
    )
    http_response = raw.http_response  # the SDK's httpx response: json() and read() live there
    SEEN.append(
        {
            "status": http_response.status_code,
            "content": json.loads(raw.content),
            "text": json.loads(raw.text),
            "json": http_response.json(),
            "read": json.loads(http_response.read()),
            "http_text": json.loads(http_response.text),
            "parsed": raw.parse().choices[0].message.content,
        }
    )
    return str(raw.parse().choices[0].message.content)


def test_a_replayed_raw_response_reads_like_the_recorded_one(home: Path, server: Any) -> None:
    assert raw_body_agent("hello") == "echo: hello"
    assert server.count == 1
    run = _recorded("raw-body-agent")
    result = orp.replay(run.trace_id, mode="mock")
    assert result.outcome == "matched", result.divergences
    assert server.count == 1  # the replay sent nothing
    recorded, replayed = SEEN
    assert recorded["parsed"] == replayed["parsed"] == "echo: hello"
    assert replayed["status"] == recorded["status"] == 200
    body = recorded["json"]
    assert body["choices"][0]["message"]["content"] == "echo: hello"
    assert recorded["content"] == recorded["read"] == recorded["http_text"] == body
    for key in ("content", "text", "json", "read", "http_text"):
        assert replayed[key] == body, key


# ------------------------------------------------------------------------------ reprs and db init


def test_the_redactor_repr_never_shows_its_key(home: Path) -> None:
    planted = b"planted-redaction-key-0123456789"
    text = repr(orp.Redactor(key=planted))
    assert text.startswith("Redactor(") and "key=<hidden>" in text
    assert planted.decode() not in text and planted.hex() not in text
    installed = orp.Redactor.for_home(home)
    key_file = (home / "redaction.key").read_bytes()
    text = repr(installed)
    assert key_file.strip().decode(errors="replace") not in text and key_file.hex() not in text


def test_db_init_on_the_embedded_store_says_where_the_schema_is(home: Path) -> None:
    out = _run_cli("db", "init")
    assert out.exit_code == 0, out.output
    (line,) = out.stdout.splitlines()
    with Store.open() as store:
        assert line == f"schema ready in {store.describe()}"
        assert repr(store) == f"Store({store.describe()})"
        assert f"({store.database}.{store.table})" in line
        assert store.runs() == []
    again = _run_cli("db", "init")  # creating the schema twice is fine
    assert again.exit_code == 0 and again.stdout == out.stdout


class _NoClickHouse(http.server.BaseHTTPRequestHandler):
    """Answers every request as a ClickHouse server refusing the user."""

    body = b"Code: 516. DB::Exception: admin: Authentication failed. (AUTHENTICATION_FAILED)\n"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(403)
        self.send_header("X-ClickHouse-Exception-Code", "516")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


def test_db_init_on_a_server_never_prints_the_password(home: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoClickHouse)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        out = _run_cli("db", "init", "--store", f"http://admin:pw-planted-9@127.0.0.1:{server.server_address[1]}/otel")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert out.exit_code == 2
    assert "pw-planted-9" not in out.output and "pw-planted-9" not in out.stderr
    assert out.stderr.startswith("error: cannot reach the ClickHouse store at http://admin:")
    assert not [p for p in home.rglob("*") if p.is_file() and b"pw-planted-9" in p.read_bytes()]


# ------------------------------------------------------------------------------ redacted values


@orp.agent("redacted-copy-agent")
def redacted_copy_agent(settings: dict[str, str]) -> str:
    """Copies and pickles its settings (as frameworks do with their inputs) and passes the key on."""
    copied = copy.deepcopy(settings)
    pickled = pickle.loads(pickle.dumps(settings["api_key"]))
    SEEN.append(
        {
            "same": [copied["api_key"] == settings["api_key"], pickled == settings["api_key"]],
            "markers": [
                (type(v).__name__, getattr(v, "fingerprint", None), getattr(v, "scope", None))
                for v in (settings["api_key"], copied["api_key"], pickled)
            ],
        }
    )
    return pickled


def test_a_redacted_value_survives_deepcopy_and_pickle_in_a_replay(home: Path) -> None:
    SEEN.clear()
    secret = "sk-live-" + "7" * 40
    assert redacted_copy_agent({"api_key": secret, "region": "eu"}) == secret
    run = _recorded("redacted-copy-agent")
    result = orp.replay(run.trace_id, mode="mock")
    assert result.outcome == "matched", result.divergences
    recorded, replayed = SEEN
    assert recorded["markers"] == [("str", None, None)] * 3
    assert replayed["same"] == [True, True]
    original, copied, pickled = replayed["markers"]
    assert original[0] == "RedactedValue" and original[1] and original[2]
    assert copied == original and pickled == original
