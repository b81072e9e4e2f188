"""Redaction holes, attacked through the public surface: secrets planted with decorated agents,
``orp.identity``, ``attach_file``, the real OpenAI / Anthropic / LangChain SDKs against the project's fake
servers, and spans of another instrumentation made with the OTel SDK tracer, then looked for in every byte
under the home (spool segments, chDB store files once the store is closed, the store's rows) and in the CLI's
output (``runs --json``, ``show --json``, ``case export``), in clear, percent-encoded and base64-encoded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import secrets
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import adv_redaction_agents as agents
import fork_server
import pytest
from cli_in_process import run_cli, runs_in_process
from leak_checks import masked_bytes

import otel_replay as orp
from otel_replay import semconv
from otel_replay.redaction import Redactor
from otel_replay.storage.store import Store

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = Path(orp.__file__).resolve().parents[1]
ALNUM = string.ascii_letters + string.digits


def _token(n: int) -> str:
    return "".join(secrets.choice(ALNUM) for _ in range(n))


def _openai_key() -> str:
    return "sk-proj-" + _token(40)


# ------------------------------------------------------------------------------------------------ helpers


def encoded_forms(secret: str) -> list[bytes]:
    """The secret as bytes in clear, percent-encoded, and base64 (standard and URL-safe) at any alignment."""
    raw = secret.encode()
    forms = [raw, quote(secret, safe="").encode(), quote(secret).encode()]
    for pad in (b"", b"x", b"xx"):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(pad + raw)
            core = text[4 if pad else 0 : -4]
            if len(core) >= 12:
                forms.append(core)
    return list(dict.fromkeys(forms))


def cli(
    home: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), str(HERE)]),
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        full.pop(name, None)
    full.update(env or {})
    if runs_in_process(args):  # the same main(), without a second of interpreter start-up
        return run_cli(args, env=full, cwd=cwd or HERE)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=180,
        cwd=cwd or HERE,
    )


def home_bytes(home: Path) -> dict[str, bytes]:
    """Every file under the home, and a dump of every row of the store (ingesting the spool first). The store
    is closed before the files are read."""
    orp.flush()
    with Store.open(home=home) as store:
        rows = store.client.query("SELECT * FROM otel_traces").result_rows
    blobs = {"store rows": "\n".join("\t".join(map(str, r)) for r in rows).encode()}
    for path in home.rglob("*"):
        if path.is_file():
            blobs[str(path.relative_to(home))] = path.read_bytes()
    return blobs


def cli_outputs(home: Path, trace_id: str, tmp: Path) -> dict[str, bytes]:
    """What a user sees of the run: ``runs --json``, ``show --json`` and an exported case file."""
    runs = cli(home, "runs", "--json")
    show = cli(home, "show", trace_id, "--json")
    case = tmp / "leak-check.case.json"
    export = cli(
        home, "case", "export", trace_id, "-o", str(case), "--force", "--app", "adv_redaction_agents:account_agent"
    )
    assert runs.returncode == 0 and show.returncode == 0 and export.returncode == 0, (
        runs.stderr + show.stderr + export.stderr
    )
    return {
        "runs --json": (runs.stdout + runs.stderr).encode(),
        "show --json": (show.stdout + show.stderr).encode(),
        "case export": case.read_bytes() + export.stdout.encode() + export.stderr.encode(),
    }


def assert_nowhere(secrets_: list[str], blobs: dict[str, bytes]) -> None:
    for secret in secrets_:
        for form in encoded_forms(secret):
            for where, blob in blobs.items():
                assert form not in blob, f"{secret[:10]}… ({form[:16]!r}…) found in {where}"


def trace_of(home: Path, agent: str) -> str:
    orp.flush()
    with Store.open(home=home) as store:
        (summary,) = store.runs(agent=agent, kind="original")
        return summary.trace_id


def load(home: Path, trace_id: str) -> Any:
    with Store.open(home=home) as store:
        return store.load_run(trace_id)


# ------------------------------------------------------------------------------------ 1. keyed content hashes

DICTIONARY = ["hunter2", "letmein", "dragon", "monkey", "sunshine", "trustno1", "iloveyou", "password1"]
PNG_HEADER = agents.PNG_HEADER
PADDING = "p" * 3000


def _digests(data: bytes) -> list[str]:
    return [hashlib.sha256(data).hexdigest(), hashlib.sha1(data).hexdigest(), hashlib.md5(data).hexdigest()]


def _candidates(guess: str) -> list[bytes]:
    """Every encoding the recorder hashes a PIN or password in (canonical JSON of the tool arguments, the
    retrieval query, the returned documents, a document's content, the model request) and the raw forms."""
    canonical = lambda v: json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # noqa: E731
    texts = [
        guess,
        canonical(guess),
        canonical({"padding": PADDING, "pin": guess}),
        canonical({"filters": {"padding": PADDING}, "query": guess}),
        canonical([{"content": guess, "id": "d1", "score": 1.0}]),
        canonical({"padding": PADDING, "prompt": guess}),
    ]
    return [t.encode() for t in texts] + [PNG_HEADER + guess.encode()]


def test_a_guessed_pin_or_password_is_not_confirmed_by_any_stored_hash(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_SNAPSHOT_MAX_BYTES", "2048")  # every payload holding them is over the cap
    orp.configure(home=home, exporter="spool", service_name="adv-pin")
    pin = f"{secrets.randbelow(10_000):04d}"
    word = secrets.choice(DICTIONARY)
    agents.pin_agent(PADDING, pin, word)
    trace_id = trace_of(home, "pin-agent")
    blobs = home_bytes(home)
    # (a four-digit PIN also turns up by chance in a keyed hash's hex or a truncation marker's size: masked first)
    assert_nowhere(
        [f'"{pin}"', f":{pin}", word], {k: masked_bytes(v) for k, v in blobs.items() if k != "redaction.key"}
    )

    # every hex or base64 digest anywhere under the home
    found: set[str] = set()
    for blob in blobs.values():
        found.update(m.decode() for m in re.findall(rb"(?<![0-9a-f])[0-9a-f]{32,64}(?![0-9a-f])", blob))
        for m in re.findall(rb"[A-Za-z0-9+/]{22,43}={0,2}", blob):
            try:
                found.add(base64.b64decode(m + b"=" * (-len(m) % 4)).hex())
            except ValueError:
                pass
    guesses = [f"{i:04d}" for i in range(10_000)] + DICTIONARY
    confirmed = [g for g in guesses for c in _candidates(g) for d in _digests(c) if d in found]
    assert confirmed == [], f"stored hashes confirm the guesses {confirmed[:5]}"

    # the hashes are there, keyed: with the key (and only with it) the guess is confirmed
    key = Redactor.for_home(home)
    run = load(home, trace_id)
    retrieval = next(s for s in run.steps if s.kind == "retrieval")
    assert retrieval.attributes[semconv.RETRIEVAL_QUERY_HASH] == key.content_hash(json.dumps(pin))
    tool = next(s for s in run.steps if s.kind == "tool")
    assert tool.attributes[semconv.TOOL_ARGS_HASH] == key.content_hash(_candidates(pin)[2])
    truncated = [s for st in run.steps for s in st.snapshot_list if s.truncated]
    assert truncated, "the planted payloads must have been over the cap"
    rows = blobs["store rows"].decode("utf-8", "replace")
    originals = re.findall(r'\\?"original_sha256\\?":\\?"?([^",\\]*)', rows)
    assert originals and all(o.startswith("hmac-sha256:") for o in originals), originals


def test_attachment_hash_is_keyed_and_its_bytes_are_not_kept(home: Path) -> None:
    pin = f"{secrets.randbelow(10_000):04d}"
    data = PNG_HEADER + pin.encode()

    @orp.agent("attach-pin")
    def attach() -> str:
        orp.attach_file(data, name="card.png")
        return "ok"

    attach()
    run = load(home, trace_of(home, "attach-pin"))
    (ref,) = run.snapshots["input"]["files"]
    assert ref["sha256"] == Redactor.for_home(home).content_hash(data) and ref["content_base64"] is None
    blobs = home_bytes(home)
    stored = b"".join(blobs.values())
    assert not any(d.encode() in stored for g in range(10_000) for d in _digests(PNG_HEADER + f"{g:04d}".encode())), (
        "a plain digest of the bytes was stored"
    )
    assert base64.b64encode(data) not in stored and data not in stored


# ------------------------------------------------------------------------------------ 1b. replay across keys


def test_a_case_recorded_under_one_key_replays_deterministically_under_another(home: Path, tmp_path: Path) -> None:
    agents.account_agent("acc-7")
    trace_id = trace_of(home, "account-agent")
    orp.flush()
    case = tmp_path / "account.case.json"
    exported = cli(
        home,
        "case",
        "export",
        trace_id,
        "-o",
        str(case),
        "--mode",
        "deterministic",
        "--expect",
        "no-divergence",
        "--expect",
        "tools",
    )
    assert exported.returncode == 0, exported.stderr
    assert "hmac-sha256:" in case.read_text()

    other = tmp_path / "ci-home"  # another installation: another key
    ran = cli(other, "case", "run", str(case), "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (other / "redaction.key").read_bytes() != (home / "redaction.key").read_bytes()
    report = json.loads(ran.stdout)
    assert report["cases"][0]["status"] == "passed" and report["cases"][0]["outcome"] == "matched"

    changed = cli(other, "case", "run", str(case), "--json", env={agents.VARIANT_ENV: "changed"})
    assert changed.returncode == 1, changed.stdout + changed.stderr
    (result,) = json.loads(changed.stdout)["cases"]
    assert result["status"] == "failed"
    assert result["first_divergence"]["kind"] == "arguments", result["first_divergence"]
    assert "lookup_account" in result["first_divergence"]["reason"]


# ------------------------------------------------------------------------------------------------- 2. streams


@pytest.fixture(scope="module")
def sdks() -> Iterator[None]:
    from otel_replay.instrumentation.anthropic import AnthropicInstrumentor
    from otel_replay.instrumentation.langchain import LangChainInstrumentor
    from otel_replay.instrumentation.openai import OpenAIInstrumentor

    instrumentors = [OpenAIInstrumentor(), AnthropicInstrumentor(), LangChainInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument()
    yield
    for instrumentor in instrumentors:
        instrumentor.uninstrument()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str, str]]:
    from fake_llm_servers import FakeLLMServer

    in_text, in_args = _openai_key(), _openai_key()
    with FakeLLMServer(tool_args={"city": "Paris", "note": f"use {in_args} here"}) as server:
        monkeypatch.setenv(agents.BASE_URL_ENV, f"http://127.0.0.1:{server.port}")
        yield server, in_text, in_args


def _joined_deltas(response: Any) -> list[str]:
    """Every stored delta channel of a recorded stream envelope, joined in order."""
    channels: dict[str, str] = {}
    for chunk in response.get("chunks") or []:
        for i, choice in enumerate(chunk.get("choices") or []):
            delta = choice.get("delta") or {}
            for key in ("content", "refusal"):
                channels[f"c{i}{key}"] = channels.get(f"c{i}{key}", "") + (delta.get(key) or "")
            for call in delta.get("tool_calls") or []:
                args = (call.get("function") or {}).get("arguments") or ""
                channels[f"t{i}"] = channels.get(f"t{i}", "") + args
        if str(chunk.get("type", "")).endswith(".delta"):
            channels[chunk["type"]] = channels.get(chunk["type"], "") + (chunk.get("delta") or "")
        delta = chunk.get("delta") if chunk.get("type") == "content_block_delta" else None
        for key in ("text", "partial_json"):
            if isinstance(delta, dict) and isinstance(delta.get(key), str):
                channels[f"{chunk.get('index')}{key}"] = channels.get(f"{chunk.get('index')}{key}", "") + delta[key]
    return [v for v in channels.values() if v]


@pytest.mark.parametrize(
    "agent", ["stream-openai-chat", "stream-openai-responses", "stream-anthropic", "stream-langchain"]
)
def test_a_secret_split_over_stream_deltas_is_never_stored(
    home: Path, sdks: None, fake: tuple[Any, str, str], agent: str, tmp_path: Path
) -> None:
    server, in_text, in_args = fake
    func = {
        "stream-openai-chat": agents.openai_chat_stream,
        "stream-openai-responses": agents.openai_responses_stream,
        "stream-anthropic": agents.anthropic_stream,
        "stream-langchain": agents.langchain_stream,
    }[agent]
    answer = func(f"my key is {in_text}")
    trace_id = trace_of(home, agent)
    run = load(home, trace_id)
    models = [s for s in run.steps if s.kind == "model"]
    assert models
    streamed = [
        s.snapshots["model"]["response"]
        for s in models
        if isinstance(s.snapshots["model"].get("response"), dict)
        and s.snapshots["model"]["response"].get("otel_replay.stream")
    ]
    if agent != "stream-langchain":  # LangChain keeps the merged message, not the chunk boundaries
        assert streamed and all(len(r["chunks"]) > 3 for r in streamed)
        joined = [text for r in streamed for text in _joined_deltas(r)]
        assert any("[REDACTED:openai_api_key" in text for text in joined), joined
        for text in joined:
            assert in_text not in text and in_args not in text
    assert_nowhere([in_text, in_args], home_bytes(home))

    served = server.count
    result = orp.replay(trace_id, mode="mock")
    assert result.outcome == "matched", result.divergences
    assert server.count == served, "a mock replay sent a request"
    assert_nowhere([in_text, in_args], home_bytes(home))
    assert answer


# ---------------------------------------------------------------------------------------- 3. binary files


def test_binary_attachments_are_scanned_or_kept_as_hash_size_and_type(home: Path, tmp_path: Path) -> None:
    key_in_binary, key_in_utf16, key_opted = _openai_key(), _openai_key(), _openai_key()
    clean = b"\x00\x01\x02 clean binary"
    secret_binary = PNG_HEADER + f"tEXt api {key_in_binary} end".encode()

    @orp.agent("attachments")
    def attach() -> str:
        orp.attach_file(secret_binary, name="photo.png")
        orp.attach_file(
            secret_binary.replace(key_in_binary.encode(), key_opted.encode()), name="opted.png", store_binary=True
        )
        orp.attach_file(("\ufeffnotes: " + key_in_utf16).encode("utf-16"), name="notes.txt")
        orp.attach_file(clean, name="clean.bin", store_binary=True)
        return "ok"

    attach()
    trace_id = trace_of(home, "attachments")
    files = {f["name"]: f for f in load(home, trace_id).snapshots["input"]["files"]}
    assert files["photo.png"]["content_base64"] is None and files["photo.png"]["content_text"] is None
    assert files["photo.png"]["size"] == len(secret_binary) and files["photo.png"]["media_type"] == "image/png"
    assert files["photo.png"]["sha256"].startswith("hmac-sha256:")
    assert files["opted.png"]["content_base64"] is None, "an opted-in binary holding a secret must not be kept"
    assert "[REDACTED:openai_api_key" in files["notes.txt"]["content_text"]
    assert base64.b64decode(files["clean.bin"]["content_base64"]) == clean
    assert_nowhere(
        [key_in_binary, key_in_utf16, key_opted], {**home_bytes(home), **cli_outputs(home, trace_id, tmp_path)}
    )


# ------------------------------------------------------------------------------- 4. what the redactor sees


def test_identity_names_approvals_parameters_and_span_attributes_are_redacted(home: Path, tmp_path: Path) -> None:
    tenant, role, session, name_key, param_key, attr_key, status_key = (_openai_key() for _ in range(7))
    approval = "ghp_" + _token(36)

    tool_name = f"lookup {name_key}"

    @orp.tool(tool_name, risk="read")
    def lookup(q: str) -> str:
        from opentelemetry import trace

        trace.get_current_span().set_attribute("app.note", f"looked up with {attr_key}")
        trace.get_current_span().set_attribute("app.api_key", "plainvalue42")
        return "found"

    @orp.model(provider="acme", model=f"acme {param_key}")
    def llm(prompt: str) -> dict[str, Any]:
        return {"text": "ok"}

    @orp.agent(f"agent {name_key}")
    def agent_with_names() -> str:
        orp.record_approval(approval, status=f"approved {status_key}", tool="notify_user")
        lookup("q")
        llm("hi")
        agents.notify_user("ada")
        return "done"

    with orp.identity(tenant=f"tenant {tenant}", role=f"role={role}", session=f"https://u:{session}@h/x"):
        agent_with_names()
    orp.flush()
    with Store.open(home=home) as store:
        (summary,) = store.runs(kind="original")
        trace_id = summary.trace_id
    blobs = home_bytes(home)
    assert_nowhere(
        [tenant, role, session, name_key, param_key, attr_key, status_key, approval, "plainvalue42"],
        {**blobs, **cli_outputs(home, trace_id, tmp_path)},
    )


OTHER_SCRIPT = r"""
import json, sys, os
import otel_replay as orp
from opentelemetry import trace
from opentelemetry.trace import Link, Status, StatusCode
s = json.loads(sys.argv[1])
orp.configure(exporter="spool")
tracer = trace.get_tracer("acme.http.client")
with tracer.start_as_current_span("GET /v1/items") as root:
    ctx = root.get_span_context()
with tracer.start_as_current_span(f"POST {s['name']}", links=[Link(ctx, {"peer.note": s["link"]})]) as span:
    span.set_attribute("http.request.header.authorization", ["Basic " + s["header"]])
    span.set_attribute("http.url", s["url"])
    span.set_attribute("db.statement", s["stmt"])
    span.set_attribute("app.query", s["pct"])
    span.set_attribute("app.blob", s["b64"])
    span.add_event("retry", {"note": s["event"]})
    span.set_status(Status(StatusCode.ERROR, s["status"]))
orp.flush()
logger = __import__("logging").getLogger("otel_replay")
logger.warning("store at %s refused", s["store"])
"""


def test_every_attribute_of_another_instrumentations_span_is_scrubbed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    planted = {
        "name": _openai_key(),
        "link": _openai_key(),
        "header": _token(32),
        "event": _openai_key(),
        "status": _openai_key(),
        "resource": _openai_key(),
        "url_pw": "pw" + _token(20),
        "stmt_pw": "hunter" + _token(12),
        "pct_key": _openai_key(),
        "b64_key": _openai_key(),
        "store_pw": "sp" + _token(18),
    }
    values = {
        "name": planted["name"],
        "link": f"peer {planted['link']}",
        "header": planted["header"],
        "event": f"retrying with {planted['event']}",
        "status": f"denied for {planted['status']}",
        "url": f"https://svc:{planted['url_pw']}@api.example.test/v1",
        "stmt": f"ALTER USER app PASSWORD='{planted['stmt_pw']}'",
        "pct": "key=" + quote(planted["pct_key"], safe=""),
        "b64": base64.b64encode(f"token {planted['b64_key']}".encode()).decode(),
        "store": f"http://default:{planted['store_pw']}@127.0.0.1:8123/db",
    }
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "OTEL_SERVICE_NAME": "acme",
        "OTEL_RESOURCE_ATTRIBUTES": f"deployment.token={planted['resource']},build.note=key {planted['resource']}",
        "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), str(HERE)]),
    }
    env.pop("OTEL_REPLAY_STORE", None)
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    out = subprocess.run(
        [sys.executable, "-c", OTHER_SCRIPT, json.dumps(values)], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "store at" in out.stderr, "the log line itself must still be written"
    spans = cli(home, "runs", "--json")
    with Store.open(home=home) as store:
        rows = store.client.query("SELECT SpanName, SpanAttributes, ResourceAttributes FROM otel_traces").result_rows
    assert len(rows) == 2 and any("REDACTED" in str(r) for r in rows), rows
    blobs = {**home_bytes(home), "stderr": out.stderr.encode(), "runs": spans.stdout.encode()}
    assert_nowhere([v for k, v in planted.items()], blobs)


def test_log_lines_and_error_lines_never_show_a_secret(
    home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path_key = _openai_key()
    missing = tmp_path / f"token={path_key}" / "report.pdf"

    @orp.agent("attach-missing")
    def attach_missing() -> str:
        orp.attach_file(missing)
        return "ok"

    with caplog.at_level(logging.WARNING, logger="otel_replay"):
        assert attach_missing() == "ok"
    text = "\n".join(r.getMessage() + "\n" + (r.exc_text or "") for r in caplog.records)
    assert "attachment" in text and path_key not in text, text
    formatted = "\n".join(logging.Formatter().format(r) for r in caplog.records)
    assert path_key not in formatted

    password = "pw" + _token(20)
    bad_env = cli(home, "runs", env={"OTEL_REPLAY_LOCK_TIMEOUT": f"password={password}"})
    bad_store = cli(home, "runs", "--store", f"http://default:{password}@127.0.0.1:9/db")
    for out in (bad_env, bad_store):
        assert out.returncode == 2 and out.stderr.startswith("error: "), out.stderr
        assert password not in out.stdout + out.stderr, out.stderr
    assert_nowhere([path_key], home_bytes(home))

    # The library's ValueError quotes the value to the caller whose environment holds it (the settings layer
    # sits below the redactor); what the CLI prints of it is scrubbed (bad_env above).
    monkeypatch.setenv("OTEL_REPLAY_SNAPSHOT_MAX_BYTES", f"sk-proj-{password}")
    with pytest.raises(ValueError, match="OTEL_REPLAY_SNAPSHOT_MAX_BYTES"):
        orp.configure(home=home, exporter="spool", service_name="adv-bad-limit")


_GET_LOGGER = re.compile(r"getLogger\(\s*(?P<arg>[^)]*?)\s*\)")


def _package_logger_names() -> set[str]:
    """Every logger name the package's source asks ``logging.getLogger`` for (each must be a string literal,
    so that this list is complete)."""
    names: set[str] = set()
    for path in sorted((PACKAGE_ROOT / "otel_replay").rglob("*.py")):
        for match in _GET_LOGGER.finditer(path.read_text(encoding="utf-8")):
            arg = match.group("arg")
            if path.parent.name == "redaction" and path.name == "logs.py" and arg == "name":
                continue  # install_log_scrubbing, walking LOGGER_NAMES
            literal = re.fullmatch(r"""(["'])(?P<name>[^"']+)\1""", arg)
            assert literal is not None, f"{path}: getLogger({arg}) does not name its logger; name it literally"
            names.add(literal.group("name"))
    return {n for n in names if n == "otel_replay" or n.startswith("otel_replay.")}


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter("%(name)s %(message)s").format(record))


def test_every_logger_of_the_package_is_scrubbed_before_a_parent_handler_sees_it() -> None:
    """Records of a child logger skip their parent's filters on their way to the parent's handlers: a handler on
    ``otel_replay`` (the CLI's, or a user's) sees what ``otel_replay.audit`` logs exactly as logged unless that
    logger scrubs it itself. Every logger named anywhere in the package does."""
    names = _package_logger_names()
    assert {"otel_replay", "otel_replay.audit", "otel_replay.store"} <= names, names
    password = "pw" + _token(20)
    url = f"http://default:{password}@db.example.test:8123/db"
    handler = _Lines()
    parent = logging.getLogger("otel_replay")
    parent.addHandler(handler)
    try:
        for name in sorted(names):
            logging.getLogger(name).warning("the store at %s refused the write", url)
    finally:
        parent.removeHandler(handler)
    assert [line.split(" ", 1)[0] for line in handler.lines] == sorted(names)
    for line in handler.lines:
        assert password not in line and "REDACTED" in line, line


def test_an_audit_journal_warning_reaches_the_cli_scrubbed(tmp_path: Path) -> None:
    """``otel-replay audit`` warns (from ``otel_replay.audit``) about a damaged journal line, naming the journal's
    path; a home folder whose name holds a credential does not show it on stderr."""
    password = "Pw" + _token(20)
    home = tmp_path / f"password={password}" / "home"
    journal = home / "audit" / "journal.jsonl"
    journal.parent.mkdir(parents=True, mode=0o700)
    journal.write_bytes(b"{not json\n")
    journal.chmod(0o600)
    out = cli(home, "audit")
    assert out.returncode == 0, out.stderr
    assert "warning: the audit journal" in out.stderr and "damaged line" in out.stderr, out.stderr
    assert password not in out.stdout + out.stderr, out.stderr


# ---------------------------------------------------------------------------------- 5. encoded secrets


def test_percent_encoded_and_base64_wrapped_secrets_are_found(home: Path, tmp_path: Path) -> None:
    pct_key, b64_key, form_pw, b64_pw = _openai_key(), _openai_key(), "pw" + _token(16), "pw" + _token(16)
    forms = [pct_key.replace("-", "%2D"), f"password={form_pw}"]

    @orp.tool("fetch_url", risk="read")
    def fetch_url(url: str, body: str, header: str) -> str:
        return f"fetched {url}"

    @orp.agent("encoded")
    def encoded() -> str:
        fetch_url(
            f"https://api.example.test/v1?key={pct_key.replace('-', '%2D')}&password%3D{form_pw}",
            body="config=" + base64.b64encode(f"OPENAI_API_KEY={b64_key}".encode()).decode(),
            header=base64.urlsafe_b64encode(f"password={b64_pw}".encode()).decode(),
        )
        return "ok"

    encoded()
    trace_id = trace_of(home, "encoded")
    (tool,) = [s for s in load(home, trace_id).steps if s.kind == "tool"]
    arguments = tool.snapshots["tool"]["arguments"]
    assert arguments["url"].startswith("https://api.example.test/v1?key=[REDACTED:openai_api_key.percent:")
    assert arguments["body"].startswith("config=[REDACTED:")
    assert_nowhere(
        [pct_key, b64_key, form_pw, b64_pw, *forms], {**home_bytes(home), **cli_outputs(home, trace_id, tmp_path)}
    )
