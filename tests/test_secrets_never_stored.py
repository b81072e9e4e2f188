"""Planted secrets never reach the spool, the store or the CLI's output, in any form the redactor knows."""

from __future__ import annotations

import json
import os
import secrets
import string
import sys
from pathlib import Path

import fork_server
import pytest

import otel_replay as orp
from otel_replay.storage.store import Store


def _token(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
OPENAI = "sk-proj-" + _token(ALNUM, 40)
ANTHROPIC = "sk-ant-api03-" + _token(ALNUM, 40)
AWS = "AKIA" + _token(string.ascii_uppercase + string.digits, 16)
GITHUB = "ghp_" + _token(ALNUM, 36)
BEARER = _token(ALNUM, 32)
PASSWORD = "correct-horse-" + _token(string.ascii_lowercase, 12)
COOKIE = "sessionid=" + _token(ALNUM, 24)
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiJ1c2VyLTEyMyJ9." + _token(ALNUM + "_-", 43)
CARD = "4111 1111 1111 1111"
PEM_BODY = _token(ALNUM, 64)
PEM = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----"

PLANTED = [OPENAI, ANTHROPIC, AWS, GITHUB, BEARER, PASSWORD, COOKIE, JWT, PEM_BODY, "4111111111111111", CARD]


@orp.tool("call_api", risk="write")
def call_api(url: str, headers: dict, body: dict) -> dict:
    return {"status": 200, "echo_token": headers["Authorization"], "note": f"used key {OPENAI}"}


@orp.model(provider="openai", model="gpt-test")
def chat(messages: list[dict], api_key: str) -> dict:
    return {"text": f"your card {CARD} is on file", "usage": {"input_tokens": 5, "output_tokens": 2}}


@orp.agent("leaky", config={"model": "gpt-test", "openai_api_key": OPENAI, "db": {"password": PASSWORD}})
def leaky(question: str, *, credentials: dict) -> str:
    orp.record_context(system_rules=f"never print {ANTHROPIC}", memory={"aws_access_key_id": AWS})
    orp.record_state({"cookie": COOKIE, "jwt": JWT})
    call_api(
        "https://api.example.test",
        {"Authorization": f"Bearer {BEARER}", "X-Other": "fine"},
        {"github_token": GITHUB, "pem": PEM},
    )
    chat([{"role": "user", "content": f"my key is {OPENAI} and card {CARD}"}], api_key=ANTHROPIC)
    orp.attach_file(f"id_rsa contents:\n{PEM}\n".encode(), name="id_rsa.txt")
    raise PermissionError(f"token {GITHUB} rejected for {question}")


def _assert_clean(blob: bytes, where: str) -> None:
    for secret in PLANTED:
        assert secret.encode() not in blob, f"{secret[:12]}… leaked into {where}"


def test_planted_secrets_never_reach_spool_store_or_cli(home: Path) -> None:
    orp.configure(home=home, exporter="spool")
    with pytest.raises(PermissionError):
        leaky("q?", credentials={"password": PASSWORD, "token": GITHUB, "nested": {"Authorization": BEARER}})
    orp.flush()

    spool_bytes = b"".join(p.read_bytes() for p in (home / "spool").rglob("*") if p.is_file())
    assert spool_bytes, "the run should be in the spool before ingest"
    _assert_clean(spool_bytes, "the spool")

    with Store.open() as store:
        (summary,) = store.runs()
        rows = store.client.query("SELECT * FROM otel_traces")
        dump = "\n".join("\t".join(map(str, r)) for r in rows.result_rows).encode()
        run = store.load_run(summary.trace_id)
    _assert_clean(dump, "the store's rows")
    assert b"$redacted" in dump or b"REDACTED" in dump
    assert summary.status == "error"
    shown = json.dumps(run.to_dict()).encode()
    _assert_clean(shown, "Run.to_dict()")
    assert sum(s.redactions for s in run.timeline) >= 8

    for path in home.rglob("*"):
        if path.is_file():
            _assert_clean(path.read_bytes(), str(path.relative_to(home)))

    env = {**os.environ, "OTEL_REPLAY_HOME": str(home)}
    env.pop("OTEL_REPLAY_STORE", None)
    for args in (["runs", "--json"], ["show", summary.trace_id, "--json"], ["show", summary.trace_id]):
        out = fork_server.run(
            [sys.executable, "-m", "otel_replay.cli", *args], capture_output=True, env=env, timeout=120
        )
        assert out.returncode == 0, out.stderr
        _assert_clean(out.stdout + out.stderr, f"`otel-replay {' '.join(args)}`")
