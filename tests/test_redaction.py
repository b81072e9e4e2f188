"""Redaction: secrets planted in every shape and place never survive, innocent values always do."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from fake_clock import FakeClock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from leak_checks import without_keyed_hashes
from property_budget import examples

from otel_replay.redaction import (
    DEFAULT_PATTERNS,
    DEFAULT_SAFE_KEYS,
    DEFAULT_SECRET_KEY_WORDS,
    KEY_FILE_NAME,
    RedactionConfig,
    Redactor,
    keyfile,
)
from otel_replay.snapshots import canonical_json

# ------------------------------------------------------------------------------------------ fake secrets


def _b64url(data: dict[str, Any] | bytes) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _luhn_complete(prefix: str) -> str:
    """``prefix`` plus the check digit that makes it pass Luhn."""
    for check in "0123456789":
        digits = prefix + check
        total = 0
        for i, ch in enumerate(reversed(digits)):
            d = int(ch) * (2 if i % 2 else 1)
            total += d - 9 if d > 9 else d
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


OPENAI = "sk-proj-" + "A1b2" * 10
OPENAI_LEGACY = "sk-" + "Zq9X" * 12
ANTHROPIC = "sk-ant-api03-" + "Qw3E" * 20 + "-AA"
AWS_ID = "AKIA" + "IOSFODNN7EXAMP9Q"
AWS_STS = "ASIA" + "Y3FJQ2KJ4N5P6R7T"
GITHUB = "ghp_" + "R4nd0mT0k3n" * 3 + "abc"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0" + "_" + "x9Y8z7" * 10
SLACK = "xoxb-" + "123456789012-" + "1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE = "AIza" + "SyD-" + "9tSrke72PouQMnMX" + "7Q0wX_zb9Yvf3Nq"
STRIPE = "sk_live_" + "51HqLyjWDarjtT1zdp7dc" + "Kx9"
JWT = ".".join(
    [
        _b64url({"alg": "HS256", "typ": "JWT"}),
        _b64url({"sub": "1234567890", "name": "Ada", "iat": 1516239022}),
        _b64url(os.urandom(32)),
    ]
)
BEARER_TOKEN = "tk_" + "9f8e7d6c5b4a" * 3
BASIC_CRED = base64.b64encode(b"admin:correct-horse-battery").decode()
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + "q1W2e3R4t5Y6" * 6
PEM = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY[:64]}\n{PEM_BODY[64:]}\n-----END PRIVATE KEY-----\n"
CARD = _luhn_complete("411111111111111")  # 16 digits, Visa test range
CARD_MC = _luhn_complete("555555555555444")
CARD_SPACED = " ".join(CARD_MC[i : i + 4] for i in range(0, 16, 4))
DB_PASSWORD = "Pg-s3cr3t-" + "77"
PLAIN_PASSWORD = "hunter2-but-longer"

SHAPED = {
    "openai_api_key": OPENAI,
    "anthropic_api_key": ANTHROPIC,
    "aws_access_key_id": AWS_ID,
    "github_token": GITHUB,
    "slack_token": SLACK,
    "google_api_key": GOOGLE,
    "stripe_key": STRIPE,
    "jwt": JWT,
    "private_key": PEM.strip(),
    "card_number": CARD,
}
"""Secrets whose whole value is recognised by shape alone, by the rule that must catch them."""

ALL_SECRET_FRAGMENTS = [
    OPENAI,
    OPENAI_LEGACY,
    ANTHROPIC,
    AWS_ID,
    AWS_STS,
    GITHUB,
    GITHUB_PAT,
    SLACK,
    GOOGLE,
    STRIPE,
    JWT,
    BEARER_TOKEN,
    BASIC_CRED,
    PEM_BODY[:40],
    PEM_BODY[64:100],
    CARD,
    CARD_MC,
    CARD_SPACED,
    DB_PASSWORD,
    PLAIN_PASSWORD,
]


@pytest.fixture
def redactor(tmp_path: Path) -> Redactor:
    return Redactor.for_home(tmp_path / "home")


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _assert_clean(value: Any, secrets: list[str] = ALL_SECRET_FRAGMENTS) -> None:
    text = _dump(value)
    for secret in secrets:
        assert secret not in text, f"secret leaked: {secret[:12]}…"
        if len(secret) >= 12:  # not even a recognisable piece of it
            assert secret[2:-2] not in text


def _find_markers(value: Any) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    if isinstance(value, dict):
        if "$redacted" in value:
            found.append(value)
        for v in value.values():
            found.extend(_find_markers(v))
    elif isinstance(value, list):
        for v in value:
            found.extend(_find_markers(v))
    return found


# ------------------------------------------------------------------------------------- planted secrets


def _realistic_payload() -> dict[str, Any]:
    return {
        "input": {"question": f"Why does my key {OPENAI} fail?", "attachments": [{"name": "id_rsa", "text": PEM}]},
        "config": {
            "model": "gpt-4o",
            "api_key": OPENAI_LEGACY,
            "anthropicApiKey": ANTHROPIC,
            "max_tokens": 512,
            "aws": {
                "AWS_ACCESS_KEY_ID": AWS_ID,
                "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "region": "eu-west-1",
            },
        },
        "tool": {
            "args": {
                "url": f"https://api.example.com/v1/orders?key={GOOGLE}",
                "headers": {
                    "Authorization": f"Bearer {BEARER_TOKEN}",
                    "X-Api-Key": "k-123",
                    "Cookie": "sid=abcdef; theme=dark",
                    "Accept": "application/json",
                },
                "dsn": f"postgres://app:{DB_PASSWORD}@db.internal:5432/orders",
                "payment": {"card": CARD_SPACED, "amount_eur": 89.0},
            }
        },
        "model": {
            "messages": [
                {"role": "system", "content": "You are a support agent."},
                {"role": "user", "content": f"my github token is {GITHUB} and slack {SLACK}, pat {GITHUB_PAT}"},
                {
                    "role": "assistant",
                    "content": f"Use Authorization: Basic {BASIC_CRED} and password={PLAIN_PASSWORD}",
                },
                {"role": "tool", "content": json.dumps({"jwt": JWT, "sts": AWS_STS, "stripe": STRIPE})},
            ],
            "usage": {"input_tokens": 120, "output_tokens": 33},
        },
        "exception": f"ValueError: login failed for {{'user': 'ada', 'password': '{PLAIN_PASSWORD}'}} card {CARD}",
        "numbers": [int(CARD), 42],
    }


def test_planted_secrets_of_every_shape_never_survive(redactor: Redactor) -> None:
    payload = _realistic_payload()
    original = json.dumps(payload, sort_keys=True)
    redacted, count = redactor.redact(payload, "run")
    _assert_clean(redacted)
    assert count >= 20
    assert json.dumps(payload, sort_keys=True) == original, "input must not be mutated"
    # the non-secret context is still there
    text = _dump(redacted)
    for kept in (
        "gpt-4o",
        "eu-west-1",
        "You are a support agent.",
        "application/json",
        "db.internal:5432",
        "Why does my key",
        "dark" if False else "application/json",
    ):
        assert kept in text
    assert redacted["config"]["max_tokens"] == 512
    assert redacted["model"]["usage"] == {"input_tokens": 120, "output_tokens": 33}
    assert redacted["numbers"][1] == 42


def test_markers_carry_the_scope_where_the_secret_was(redactor: Redactor) -> None:
    redacted, _ = redactor.redact(_realistic_payload(), "tool.args")
    auth = redacted["tool"]["args"]["headers"]["Authorization"]
    assert set(auth) == {"$redacted", "scope"}
    assert auth["scope"] == "tool.args.tool.args.headers.Authorization"
    assert auth["$redacted"].startswith("hmac-sha256:") and len(auth["$redacted"]) == len("hmac-sha256:") + 16
    assert redacted["config"]["aws"]["aws_secret_access_key"]["scope"] == "tool.args.config.aws.aws_secret_access_key"
    assert redacted["numbers"][0]["scope"] == "tool.args.numbers[0]"
    scopes = {m["scope"] for m in _find_markers(redacted)}
    assert "tool.args.config.api_key" in scopes and "tool.args.tool.args.payment.card" in scopes


def test_secret_key_values_are_masked_whatever_their_type(redactor: Redactor) -> None:
    value = {
        "credentials": {"user": "ada", "pass": "x"},
        "password": 123456,
        "token": ["a", "b"],
        "secret": None,
        "api_key": "",
        "refresh_token": True,
    }
    redacted, count = redactor.redact(value, "cfg")
    assert redacted["credentials"] == {
        "$redacted": redactor.marker({"user": "ada", "pass": "x"}, "x")["$redacted"],
        "scope": "cfg.credentials",
    }
    # (the keyed hashes are random hex, which holds "ada" or "123456" now and then: look outside them)
    assert redacted["password"]["scope"] == "cfg.password" and set(redacted["password"]) == {"$redacted", "scope"}
    shown = without_keyed_hashes(_dump(redacted))
    assert "ada" not in shown and "123456" not in shown
    assert redacted["token"]["scope"] == "cfg.token"
    # nothing to hide: null, empty and booleans stay as they are
    assert redacted["secret"] is None and redacted["api_key"] == "" and redacted["refresh_token"] is True
    assert count == 3


@pytest.mark.parametrize("rule", sorted(SHAPED))
def test_whole_value_secrets_become_markers_and_are_classified(redactor: Redactor, rule: str) -> None:
    secret = SHAPED[rule]
    assert redactor.classify(secret) == rule
    assert redactor.classify(f"  {secret}\n") == rule
    redacted, count = redactor.redact({"note": secret}, "input")
    assert count == 1
    assert redacted["note"]["scope"] == "input.note"
    assert secret not in _dump(redacted)


@pytest.mark.parametrize("rule", sorted(SHAPED))
def test_secrets_inside_text_are_scrubbed_inline(redactor: Redactor, rule: str) -> None:
    secret = SHAPED[rule]
    text = f"before {secret} after"
    scrubbed, count = redactor.scrub_text(text, "exception.message")
    assert count == 1
    assert scrubbed.startswith("before [REDACTED:") and scrubbed.endswith("] after")
    assert f"[REDACTED:{rule}:hmac-sha256:" in scrubbed
    assert secret not in scrubbed
    assert redactor.classify(text) is None


def test_bearer_basic_url_and_assignments_in_free_text(redactor: Redactor) -> None:
    text = (
        f"GET / HTTP/1.1\r\nAuthorization: Basic {BASIC_CRED}\r\nProxy-Authorization: Bearer {BEARER_TOKEN}\r\n"
        f"curl -H 'Authorization: Bearer {BEARER_TOKEN}' postgres://app:{DB_PASSWORD}@db/x "
        f"PASSWORD={PLAIN_PASSWORD} {{'client_secret': '{PLAIN_PASSWORD}z'}} \"api_key\": \"plain-key-value\""
    )
    scrubbed, count = redactor.scrub_text(text, "log")
    for secret in (BASIC_CRED, BEARER_TOKEN, DB_PASSWORD, PLAIN_PASSWORD, "plain-key-value"):
        assert secret not in scrubbed
    assert count == 7
    assert "Authorization: Basic [REDACTED:authorization_header:" in scrubbed
    assert "postgres://app:[REDACTED:url_credentials:" in scrubbed
    assert redactor.classify(f"Bearer {BEARER_TOKEN}") == "bearer"


@pytest.mark.parametrize("char", ["/", "#", "?", "@"])
def test_a_url_password_holding_a_special_character_is_masked_to_the_last_at(redactor: Redactor, char: str) -> None:
    password = f"Zq93{char}Pw-s3cr3t"
    for text in (
        f"cannot reach http://default:{password}@db.example.test:8123/otel: refused",
        f'{{"dsn": "https://default:{password}@db.example.test/otel", "mail": "ops@example.test"}}',
    ):
        scrubbed, count = redactor.scrub_text(text, "log")
        assert count == 1 and "Zq93" not in scrubbed and "Pw-s3cr3t" not in scrubbed, scrubbed
        assert "://default:[REDACTED:url_credentials:" in scrubbed and "@db.example.test" in scrubbed
    assert redactor.scrub_text("see http://localhost:8080/docs or mail ops@example.test", "log")[1] == 0


def test_bytes_that_are_not_utf8_are_masked_when_their_readable_runs_hold_a_secret(redactor: Redactor) -> None:
    """``to_jsonable`` stores such bytes as base64: what a secret shows in them is judged before."""
    from otel_replay.snapshots import from_jsonable, to_jsonable

    secret_after_bom = b"\xff\xfe" + OPENAI.encode()
    secret_utf16 = b"\x00\x80" + OPENAI.encode("utf-16-le") + b"\xff"
    two_secrets = b"\xff" + OPENAI.encode() + b"\x00\x00" + AWS_ID.encode()
    clean = b"\x89PNG\r\n\x1a\n\xff\xfe\x00 plain binary header \x80"
    value = {"a": secret_after_bom, "b": [secret_utf16], "c": two_secrets, "d": clean}
    tree = to_jsonable(value)
    assert tree["a"] == {"$type": "bytes", "base64": base64.b64encode(secret_after_bom).decode()}  # as before
    assert not redactor.is_clean(tree)
    redacted, count = redactor.redact(tree, "tool.args")
    assert count == 3
    assert redacted["a"] == {"$redacted": redactor.fingerprint(OPENAI), "scope": "tool.args.a"}
    assert redacted["b"] == [{"$redacted": redactor.fingerprint(OPENAI), "scope": "tool.args.b[0]"}]
    assert redacted["c"] == {"$redacted": redactor.fingerprint(two_secrets), "scope": "tool.args.c"}
    assert from_jsonable(redacted["d"]) == clean  # binary without a secret is kept byte for byte
    assert redactor.is_clean(to_jsonable({"d": clean}))
    # the same bytes as a base64 run inside text
    text = "blob=" + base64.b64encode(secret_after_bom).decode()
    scrubbed, n = redactor.scrub_text(text, "log")
    assert n == 1 and scrubbed.startswith("blob=[REDACTED:openai_api_key.base64:"), scrubbed


def test_scrubbing_is_idempotent(redactor: Redactor) -> None:
    once, n1 = redactor.scrub_text(f"a {OPENAI} b {CARD} c password={PLAIN_PASSWORD}", "s")
    twice, n2 = redactor.scrub_text(once, "s")
    assert n1 == 3 and n2 == 0 and twice == once
    tree, _ = redactor.redact({"k": OPENAI, "t": f"x {JWT}"}, "s")
    again, n = redactor.redact(tree, "s")
    assert again == tree and n == 0


def test_secrets_in_dict_keys_are_scrubbed(redactor: Redactor) -> None:
    redacted, count = redactor.redact({OPENAI: {"owner": "ada"}}, "s")
    assert count == 1 and OPENAI not in _dump(redacted)
    (key,) = redacted
    assert key.startswith("[REDACTED:openai_api_key:") and redacted[key] == {"owner": "ada"}


# --------------------------------------------------------------------------------------- fingerprints


def test_equal_secrets_give_equal_fingerprints_and_keys_differ_per_installation(tmp_path: Path) -> None:
    a = Redactor.for_home(tmp_path / "a")
    a_again = Redactor.for_home(tmp_path / "a")
    b = Redactor.for_home(tmp_path / "b")
    assert a.fingerprint(OPENAI) == a_again.fingerprint(OPENAI) == a.fingerprint(OPENAI.encode())
    assert a.fingerprint(OPENAI) != a.fingerprint(OPENAI_LEGACY)
    assert a.fingerprint(OPENAI) != b.fingerprint(OPENAI)
    # the same secret found in different places compares equal
    t1, _ = a.redact({"headers": {"Authorization": f"Bearer {BEARER_TOKEN}"}}, "tool")
    t2, _ = a.scrub_text(f"retrying with Bearer {BEARER_TOKEN}", "log")
    fp = t1["headers"]["Authorization"]["$redacted"]
    assert fp == a.fingerprint(BEARER_TOKEN) and fp in t2
    # a card compares equal however it is written
    assert a.redact(int(CARD), "n")[0]["$redacted"] == a.redact(CARD, "s")[0]["$redacted"]
    assert a.marker(OPENAI, "x.y") == {"$redacted": a.fingerprint(OPENAI), "scope": "x.y"}


def test_key_file_is_private_and_reused(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "home"
    first = Redactor.for_home(home)
    path = home / KEY_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    content = path.read_bytes()
    assert len(bytes.fromhex(content.decode().strip())) == 32
    second = Redactor.for_home(home)
    assert path.read_bytes() == content
    assert first.fingerprint("x") == second.fingerprint("x")
    assert [p.name for p in home.iterdir()] == [KEY_FILE_NAME], "no temporary files left behind"


def test_loose_key_file_is_tightened(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    Redactor.for_home(tmp_path)
    path = tmp_path / KEY_FILE_NAME
    os.chmod(path, 0o644)
    Redactor.for_home(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "tightened" in caplog.text


def test_malformed_key_file_is_refused_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(keyfile, "time", clock)
    (tmp_path / KEY_FILE_NAME).write_text("not a key")
    os.chmod(tmp_path / KEY_FILE_NAME, 0o600)
    with pytest.raises(ValueError, match=r"redaction key .* is not a hex-encoded key"):
        Redactor.for_home(tmp_path)
    assert clock.slept == []  # no writer can still be mid-way through text that is not hex digits


def test_a_key_file_still_being_written_is_waited_for_then_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where hard links are missing, a key is created in place: a reader may see a prefix of its hex digits."""
    key = "ab" * 32
    path = tmp_path / KEY_FILE_NAME
    path.write_text(key[:10])
    os.chmod(path, 0o600)
    clock = FakeClock()

    def writer_finishes(seconds: float) -> None:
        FakeClock.sleep(clock, seconds)
        path.write_text(key + "\n")

    monkeypatch.setattr(keyfile, "time", clock)
    monkeypatch.setattr(clock, "sleep", writer_finishes)
    assert Redactor.for_home(tmp_path).fingerprint("same") == Redactor(key=bytes.fromhex(key)).fingerprint("same")
    assert len(clock.slept) == 1


def test_a_key_file_that_stays_a_prefix_is_refused_after_two_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(keyfile, "time", clock)
    (tmp_path / KEY_FILE_NAME).write_text("abcdef")
    os.chmod(tmp_path / KEY_FILE_NAME, 0o600)
    with pytest.raises(ValueError, match="is not a hex-encoded key"):
        Redactor.for_home(tmp_path)
    assert 2.0 <= sum(clock.slept) <= 2.02


def _fingerprint_in_child(home: str, queue: Any) -> None:
    queue.put(Redactor.for_home(Path(home)).fingerprint("same"))


def test_concurrent_first_use_agrees_on_one_key(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_fingerprint_in_child, args=(str(tmp_path / "h"), queue)) for _ in range(6)]
    for p in procs:
        p.start()
    results = {queue.get(timeout=30) for _ in procs}
    for p in procs:
        p.join(timeout=30)
    assert len(results) == 1
    assert results == {Redactor.for_home(tmp_path / "h").fingerprint("same")}


def test_short_key_is_refused() -> None:
    with pytest.raises(ValueError):
        Redactor(key=b"short")


# ---------------------------------------------------------------------------------------- key names


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apikey",
        "apiKey",
        "API_KEY",
        "x-api-key",
        "X-Api-Key",
        "OPENAI_API_KEY",
        "password",
        "Passwd",
        "PGPASSWORD",
        "db_password",
        "secret",
        "client_secret",
        "clientSecret",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "x-auth-token",
        "authorization",
        "Proxy-Authorization",
        "cookie",
        "Set-Cookie",
        "private_key",
        "privateKey",
        "credentials",
        "credential",
        "session_id",
        "sessionId",
        "SESSION_SECRET",
        "aws_secret_access_key",
        "bot_token",
        "auth",
        "auth_token",
        "bearer_token",
        "api_token",
        "session_token",
        "api_tokens",
        "session_tokens",
    ],
)
def test_secret_keys(redactor: Redactor, key: str) -> None:
    assert redactor.is_secret_key(key)
    redacted, count = redactor.redact({"outer": [{key: "value-123"}]}, "s")
    assert count == 1 and "value-123" not in _dump(redacted)


@pytest.mark.parametrize(
    "key",
    [
        "max_tokens",
        "maxTokens",
        "input_tokens",
        "output_tokens",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "token_count",
        "tokenizer",
        "num_tokens",
        "tokens",
        "token_type",
        "max_token",
        "password_min_length",
        "secret_name",
        "author",
        "keyboard",
        "monkey",
        "key",
        "session",
        "model",
        "role",
        "tenant",
        "gen_ai.usage.input_tokens",
        "input_token_details",
        "output_token_details",
        "prompt_tokens_details",
        "cost_usd",
    ],
)
def test_safe_keys(redactor: Redactor, key: str) -> None:
    assert not redactor.is_secret_key(key)
    value = {key: 4096, "nested": {key: "cl100k_base"}}
    assert redactor.redact(value, "s") == (value, 0)


# ---------------------------------------------------------------------------------- innocent values

INNOCENT = [
    "order ORD-2024-000123",
    "ORD-4111111111111112",
    "order 1234567890123",
    "2026-01-01T10:20:30.123456Z",
    "1718100000000",
    "550e8400-e29b-41d4-a716-446655440000",
    "+44 20 7946 0958",
    "+1 (555) 123-4567",
    "9fceb02d0ae598e95dc970b74767f19372d61af8",
    "A token is the unit a model reads; each token costs money.",
    "Pass the token budget to the tokenizer.",
    "4111 1111 1111 1112",
    "4111111111111112",
    "The bearer of this letter is a friend.",
    "desk-organizer-with-long-descriptive-slug",
    "risk-assessment-for-the-quarter",
    "tracking 1Z999AA10123456784",
    "sku KT-200 x3 at 89.00 EUR",
    "version 1.2.3, build 20240611-000123",
    "https://example.com/docs/api?page=2",
    "key: value, keys: many",
    "see section 3.14159265358979323846",
    "IBAN-less invoice 2024061100123",
]


@pytest.mark.parametrize("text", INNOCENT)
def test_innocent_values_survive(redactor: Redactor, text: str) -> None:
    assert redactor.scrub_text(text, "s") == (text, 0)
    assert redactor.classify(text) is None
    value = {"note": text, "list": [text, 1718100000000, 1718100000000123456, 3.5, None, True]}
    assert redactor.redact(value, "s") == (value, 0)


def test_redact_returns_a_new_tree_and_never_mutates(redactor: Redactor) -> None:
    value = {"a": [1, {"b": "c"}], "t": (1, 2)}
    out, n = redactor.redact(value, "s")
    assert n == 0 and out == value and out is not value and out["a"] is not value["a"]
    out["a"][1]["b"] = "changed"
    assert value["a"][1]["b"] == "c"
    secret_in = {"a": [{"password": "p"}], "b": f"x {OPENAI}"}
    snapshot = json.dumps(secret_in)
    redactor.redact(secret_in, "s")
    assert json.dumps(secret_in) == snapshot


# ------------------------------------------------------------------------------------------ config


def test_config_adds_key_words_and_patterns(tmp_path: Path) -> None:
    config = RedactionConfig(
        extra_key_words=("pin", "employee_number"),
        extra_patterns={"acme_key": r"acme_[a-z0-9]{12}", "ticket": r"TKT-(?P<secret>\d{6})"},
    )
    r = Redactor.for_home(tmp_path, config)
    assert r.is_secret_key("PIN") and r.is_secret_key("employeeNumber") and r.is_secret_key("pin_code")
    out, n = r.redact({"pin": 1234, "note": "use acme_abcdef123456 for TKT-123456"}, "s")
    assert n == 3
    assert out["pin"]["scope"] == "s.pin"
    assert "acme_abcdef123456" not in out["note"] and "123456" not in without_keyed_hashes(out["note"])
    assert "TKT-[REDACTED:ticket:" in out["note"] and "[REDACTED:acme_key:" in out["note"]
    assert r.classify("acme_abcdef123456") == "acme_key"


def test_config_removes_rules(tmp_path: Path) -> None:
    config = RedactionConfig(disabled_patterns=("card_number", "jwt"), disabled_key_words=("session_id", "cookie"))
    r = Redactor.for_home(tmp_path, config)
    value = {"card": CARD, "note": JWT, "session_id": "abc", "cookie": "x=1", "n": int(CARD)}
    assert r.redact(value, "s") == (value, 0)
    assert r.redact({"api_key": "x"}, "s")[1] == 1, "other rules still apply"
    assert r.scrub_text(OPENAI, "s")[1] == 1


def test_config_allow_lists(tmp_path: Path) -> None:
    placeholder = "sk-" + "x" * 24
    config = RedactionConfig(
        allowed_values=(placeholder, "changeme"),
        allowed_value_patterns=(r"AKIA[0-9A-Z]{12}TEST",),
        safe_keys=("auth_mode", "publicToken"),
    )
    r = Redactor.for_home(tmp_path, config)
    fake_aws = "AKIA" + "ABCDEFGH1234" + "TEST"
    value = {"key": placeholder, "password": "changeme", "aws": fake_aws, "auth_mode": "oauth", "public_token": "pk-1"}
    assert r.redact(value, "s") == (value, 0)
    assert r.scrub_text(f"x {placeholder} {OPENAI}", "s")[1] == 1
    assert not r.is_secret_key("PUBLIC_TOKEN") and r.is_secret_key("token")
    assert set(DEFAULT_SAFE_KEYS) <= {"_".join(k.split("_")) for k in DEFAULT_SAFE_KEYS}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"extra_patterns": {"bad": "("}},
        {"extra_patterns": {"empty": "a*"}},
        {"extra_patterns": {"anchored": "^abc$"}},
        {"extra_patterns": {"jwt": "abc"}},
        {"extra_patterns": {"1bad name": "abc"}},
        {"disabled_patterns": ("no_such_rule",)},
        {"disabled_key_words": ("not_a_default",)},
        {"allowed_value_patterns": ("[",)},
        {"extra_key_words": "pin"},
        {"extra_key_words": ("",)},
        {"safe_keys": (3,)},
    ],
)
def test_invalid_config_raises_at_setup(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RedactionConfig(**kwargs)


def test_config_is_frozen_and_every_default_rule_is_documented() -> None:
    config = RedactionConfig()
    with pytest.raises(AttributeError):
        config.safe_keys = ("x",)  # type: ignore[misc]
    doc = (Path(__file__).resolve().parents[1] / "docs" / "redaction.md").read_text()
    for name in DEFAULT_PATTERNS:
        assert f"`{name}`" in doc, f"docs/redaction.md does not describe rule {name}"


# ------------------------------------------------------------------------------------------ robustness


class _Exploding:
    def __str__(self) -> str:
        raise RuntimeError("boom")


def test_redact_never_raises_and_masks_on_failure(redactor: Redactor) -> None:
    out, n = redactor.redact({"x": _Exploding()}, "s")
    assert n == 1 and out == {"$redacted": "error", "scope": "s"}
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    out, n = redactor.redact(cyclic, "s")
    assert out == {"$redacted": "error", "scope": "s"}
    # odd but harmless types are handled
    out, n = redactor.redact({1: OPENAI, "b": b"raw " + OPENAI.encode(), "s": {1, 2}}, "s")
    assert OPENAI not in repr(out) and n == 2


_FILLER = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


PLANTED = [(s, s) for s in SHAPED.values()] + [
    (OPENAI_LEGACY, OPENAI_LEGACY),
    (AWS_STS, AWS_STS),
    (GITHUB_PAT, GITHUB_PAT),
    (CARD_SPACED, CARD_SPACED),
    (f"Bearer {BEARER_TOKEN}", BEARER_TOKEN),
    (f"Authorization: Basic {BASIC_CRED}", BASIC_CRED),
    (f"password={PLAIN_PASSWORD}", PLAIN_PASSWORD),
    (f"mysql://root:{DB_PASSWORD}@localhost", DB_PASSWORD),
]
"""(what is planted in random text, what must not appear afterwards)."""


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefix=_FILLER,
    suffix=_FILLER,
    planted=st.sampled_from(PLANTED),
    shape=st.sampled_from(["text", "list", "nested", "key"]),
)
def test_property_never_raises_never_leaks(
    tmp_path_factory: pytest.TempPathFactory, prefix: str, suffix: str, planted: tuple[str, str], shape: str
) -> None:
    r = _shared_redactor(tmp_path_factory)
    plant, secret = planted
    text = f"{prefix} {plant} {suffix}"
    value: Any = {"text": text, "list": [prefix, text], "nested": {"a": {"b": [text]}}, "key": {text: prefix}}[shape]
    out, n = r.redact(value, "p")
    assert n >= 1
    assert secret not in json.dumps(out, ensure_ascii=False)
    scrubbed, m = r.scrub_text(text, "p")
    assert m >= 1 and secret not in scrubbed


@settings(max_examples=examples(300), deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4),
        max_leaves=20,
    )
)
def test_property_arbitrary_trees_never_raise(tmp_path_factory: pytest.TempPathFactory, value: Any) -> None:
    r = _shared_redactor(tmp_path_factory)
    out, n = r.redact(value, "p")
    assert isinstance(n, int) and n >= 0
    json.dumps(out, allow_nan=True)  # still JSON-able


_REDACTORS: dict[str, Redactor] = {}


def _shared_redactor(factory: pytest.TempPathFactory) -> Redactor:
    if "r" not in _REDACTORS:
        _REDACTORS["r"] = Redactor.for_home(factory.mktemp("prop"))
    return _REDACTORS["r"]


# ------------------------------------------------------------------------------------------ performance


def test_no_secret_path_is_fast(redactor: Redactor, capsys: pytest.CaptureFixture[str]) -> None:
    payload = {
        "query": "refund status for order 1042",
        "filters": {"region": "eu-west-1", "status": ["open", "pending"]},
        "top_k": 5,
        "options": {"temperature": 0.2, "retries": 3, "trace": True},
        "items": [
            {
                "id": f"item-{i}",
                "sku": f"KT-{i:03d}",
                "qty": i,
                "price_eur": 9.5 * i,
                "note": "handle with care, fragile goods",
            }
            for i in range(8)
        ],
        "created_at": "2026-01-01T10:20:30Z",
        "customer": {"name": "Ada Lovelace", "email": "ada@example.com"},
    }
    size = len(json.dumps(payload))
    assert 900 <= size <= 1400
    assert redactor.redact(payload, "tool.args") == (payload, 0)
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        redactor.redact(payload, "tool.args")
    per_call = (time.perf_counter() - start) / n * 1e6
    text = json.dumps(payload, separators=(",", ":"), sort_keys=True)
    start = time.perf_counter()
    for _ in range(n):
        redactor.suspects(text)
    per_check = (time.perf_counter() - start) / n * 1e6
    with capsys.disabled():
        print(
            f"\nredact() of a {size}-byte dict without secrets: {per_call:.1f} µs/call; "
            f"suspects() on its JSON: {per_check:.1f} µs/call"
        )


# --------------------------------------------------------------------------------- the pre-check is sound

_KEY_WORDS = st.sampled_from(DEFAULT_SECRET_KEY_WORDS)
_FRAGMENT = st.one_of(
    st.sampled_from([s for s, _ in PLANTED]),
    _KEY_WORDS,
    _KEY_WORDS.map(str.upper),
    _KEY_WORDS.map(lambda w: w.replace("_", "-").title()),
    st.sampled_from(
        [
            "=",
            ": ",
            '":"',
            "://",
            "@",
            "Bearer ",
            "Basic ",
            "-----BEGIN ",
            "eyJ",
            "sk-",
            "AKIA",
            "ghp_",
            "xoxb-",
            "4111 1111 1111 1111",
            "prompt_tokens",
            "max_tokens",
            "token_count",
        ]
    ),
    st.text(max_size=16),
)
_TEXT = st.lists(_FRAGMENT, max_size=6).map("".join)
_LONG_TEXT = st.tuples(_TEXT, st.text(min_size=260, max_size=400), _TEXT).map("".join)
_KEY = st.one_of(_KEY_WORDS, st.text(max_size=10), st.sampled_from(["prompt_tokens", "apiKey", "X-Api-Key"]))
_TREE = st.recursive(
    st.one_of(_TEXT, _LONG_TEXT, st.integers(), st.none()),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_KEY, kids, max_size=3),
    max_leaves=8,
)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=_TREE)
def test_the_pre_check_never_passes_a_payload_a_rule_would_match(
    tmp_path_factory: pytest.TempPathFactory, tree: Any
) -> None:
    """Recording skips redaction when ``suspects()`` says the payload's JSON cannot hold a secret, so a False
    there must be right: wherever a rule's own pattern matches a string, or a secret key holds a value,
    ``suspects`` flags the payload (checked with the key words on, and with only the value shapes)."""
    for r in (_shared_redactor(tmp_path_factory), _shapes_only_redactor(tmp_path_factory)):
        if _a_rule_matches(r, tree):
            assert r.suspects(canonical_json(tree)), tree


def _a_rule_matches(r: Redactor, tree: Any) -> bool:
    """The oracle: the rules' regular expressions and the key-name rule, without any pre-check."""
    if isinstance(tree, str):  # (``secret_assignment`` is ``<secret key word>=…``: none without key words)
        return any(rule.pattern.search(tree) for rule in r._rules if rule.name != "secret_assignment" or r._key_hints)
    if isinstance(tree, list):
        return any(_a_rule_matches(r, v) for v in tree)
    if isinstance(tree, dict):
        return any(
            (r.is_secret_key(k) and v not in (None, "", [], {})) or _a_rule_matches(r, k) or _a_rule_matches(r, v)
            for k, v in tree.items()
        )
    return False


def _shapes_only_redactor(factory: pytest.TempPathFactory) -> Redactor:
    """No secret key words at all: the value-shape hints alone decide the pre-check."""
    if "shapes" not in _REDACTORS:
        config = RedactionConfig(disabled_key_words=DEFAULT_SECRET_KEY_WORDS)
        _REDACTORS["shapes"] = Redactor.for_home(factory.mktemp("shapes"), config)
    return _REDACTORS["shapes"]
