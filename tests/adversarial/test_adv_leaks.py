"""Leaks left: a secret inside ``bytes`` that are not UTF-8, and a store URL whose password holds an unencoded
``/``, ``#``, ``?`` or ``@``. Each is planted through the public surface (a decorated agent, ``--store``,
``OTEL_REPLAY_STORE``, ``configure(store=...)``, ``Store.open``) and looked for as a stranger would: in every file
under the home (spool segments read before anything ingests them, the store's files and rows, the audit
journal), in ``show --json``, an exported case file, the ``--html`` reports of ``show`` and ``replay``, the
CLI's stdout and stderr, and the log lines of the package; in clear, percent-encoded and base64-encoded at every
alignment.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import string
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import adv_leak_agents as agents
import fork_server
import pytest
from cli_in_process import run_cli, runs_in_process

import otel_replay as orp
from otel_replay.errors import StoreError
from otel_replay.redaction import Redactor
from otel_replay.snapshots import from_jsonable
from otel_replay.storage.store import Store

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = Path(orp.__file__).resolve().parents[1]
ALNUM = string.ascii_letters + string.digits


def _token(n: int) -> str:
    return "".join(secrets.choice(ALNUM) for _ in range(n))


def _openai_key() -> str:
    return "sk-proj-" + _token(40)


# ------------------------------------------------------------------------------------------------ helpers


def encoded_forms(secret: bytes) -> list[bytes]:
    """The secret in clear, percent-encoded, and base64 (standard and URL-safe) at any alignment."""
    text = secret.decode("latin-1")
    forms = [secret, quote(text, safe="").encode(), quote(text).encode()]
    for pad in (b"", b"x", b"xx"):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(pad + secret)
            core = encoded[4 if pad else 0 : -4]
            if len(core) >= 12:
                forms.append(core)
    return list(dict.fromkeys(forms))


def assert_nowhere(needles: list[bytes], blobs: dict[str, bytes]) -> None:
    for needle in needles:
        for form in encoded_forms(needle):
            for where, blob in blobs.items():
                assert form not in blob, f"{needle[:12]!r}… ({form[:16]!r}…) found in {where}"


def cli(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), str(HERE)]),
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        full.pop(name, None)
    full.update(env or {})
    if runs_in_process(args) and "OTEL_REPLAY_STORE" not in (env or {}):
        return run_cli(args, env=full, cwd=HERE)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=180,
        cwd=HERE,
    )


def files_under(home: Path) -> dict[str, bytes]:
    """Every file under the home but the key, as it is on disk now."""
    return {
        str(path.relative_to(home)): path.read_bytes()
        for path in sorted(home.rglob("*"))
        if path.is_file() and path.name != "redaction.key"
    }


def store_rows(home: Path) -> dict[str, bytes]:
    """Every row of the home's store (the spool ingested first), then every file under the home (the store is
    closed first)."""
    orp.flush()
    with Store.open(home=home) as store:
        rows = store.client.query("SELECT * FROM otel_traces").result_rows
    return {"store rows": "\n".join("\t".join(map(str, r)) for r in rows).encode(), **files_under(home)}


def trace_of(home: Path, agent: str) -> str:
    orp.flush()
    with Store.open(home=home) as store:
        (summary,) = store.runs(agent=agent, kind="original")
        return summary.trace_id


# ------------------------------------------------------------------------------------- 1. secrets in bytes

CLEAN_BINARY = b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01clean binary bytes\x80\x81\xc3"


def test_a_secret_in_bytes_after_non_utf8_bytes_is_never_stored(home: Path, tmp_path: Path) -> None:
    """``b"\\xff\\xfe" + b"sk-..."`` (and a key as UTF-16 text after a NUL) passed as a tool argument, returned by
    a tool, given as the run's input and attached as a file: no byte of the home, no output of ``show --json``,
    ``case export``, ``show --html`` or ``replay --html`` holds the key; the stored value is the usual marker
    (the key's keyed fingerprint); binary without a secret still comes back byte for byte, and a mock replay
    of the run matches."""
    key, key16 = _openai_key(), _openai_key()
    blob = b"\xff\xfe" + key.encode()
    blob16 = b"\x00\xff" + key16.encode("utf-16-le")
    assert len(blob) % 2 == 0  # the attachment reads as UTF-16 text behind its byte-order mark
    needles = [
        key.encode(),
        key16.encode(),
        key16.encode("utf-16-le"),
        blob.decode("utf-16").encode("utf-8"),  # the key read as UTF-16 text
        json.dumps(blob.decode("utf-16")).encode(),  # ... and as JSON escapes
    ]

    result = agents.bytes_agent(blob, blob16, CLEAN_BINARY)
    assert result == {"ok": True, "clean_back": True, "clean_size": len(CLEAN_BINARY)}
    orp.flush()
    spool = files_under(home)  # the sealed segments, before a store ingests them
    assert any(name.startswith("spool") for name in spool), sorted(spool)
    assert_nowhere(needles, spool)

    trace_id = trace_of(home, "bytes-agent")
    with Store.open(home=home) as store:
        run = store.load_run(trace_id)
    fingerprint = Redactor.for_home(home).fingerprint
    tools = [s for s in run.steps if s.kind == "tool"]
    assert [s.snapshots["tool"]["arguments"] for s in tools[:2]] == [
        {"blob": {"$redacted": fingerprint(key), "scope": "tool.args.blob"}, "name": "keys.bin"},
        {"blob": {"$redacted": fingerprint(key16), "scope": "tool.args.blob"}, "name": "keys16.bin"},
    ]
    assert tools[2].snapshots["tool"]["result"] == {"$redacted": fingerprint(key), "scope": "tool.result"}
    assert from_jsonable(tools[3].snapshots["tool"]["result"]) == CLEAN_BINARY  # kept, byte for byte
    assert from_jsonable(tools[3].snapshots["tool"]["arguments"]) == {"blob": CLEAN_BINARY}
    (attached,) = run.snapshots["input"]["files"]
    assert attached["content_text"] is None and attached["content_base64"] is None, attached
    assert attached["size"] == len(blob) and attached["sha256"].startswith("hmac-sha256:")

    show = cli(home, "show", trace_id, "--json")
    html = tmp_path / "show.html"
    show_html = cli(home, "show", trace_id, "--html", str(html))
    case = tmp_path / "bytes.case.json"
    export = cli(home, "case", "export", trace_id, "-o", str(case), "--app", "adv_leak_agents:bytes_agent")
    replay_html = tmp_path / "replay.html"
    replay = cli(home, "replay", trace_id, "--mode", "mock", "--json", "--html", str(replay_html))
    for out in (show, show_html, export, replay):
        assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(replay.stdout)["outcome"] == "matched", replay.stdout
    assert "$redacted" in show.stdout
    assert_nowhere(
        needles,
        {
            **store_rows(home),
            "show --json": (show.stdout + show.stderr).encode(),
            "show --html": html.read_bytes() + show_html.stdout.encode() + show_html.stderr.encode(),
            "case export": case.read_bytes() + export.stdout.encode() + export.stderr.encode(),
            "replay --html": replay_html.read_bytes() + replay.stdout.encode() + replay.stderr.encode(),
        },
    )


# ------------------------------------------------------------------------ 2. store URLs with a malformed password

SPECIAL = ["/", "#", "?", "@"]


def _password(char: str) -> tuple[str, list[bytes]]:
    """A password with ``char`` unencoded in the middle, and what must never be shown of it: the whole password
    and each half (the pieces a parser that splits at ``char`` would quote)."""
    head, tail = "Zq93" + _token(8), "Pw" + _token(10)
    return f"{head}{char}{tail}", [f"{head}{char}{tail}".encode(), head.encode(), tail.encode()]


def _store_url(password: str) -> str:
    return f"http://default:{password}@127.0.0.1:9/otel"  # nothing listens on port 9 (discard)


@pytest.mark.parametrize("char", SPECIAL, ids=["slash", "hash", "question", "at"])
def test_a_store_url_password_with_a_special_character_is_never_shown(home: Path, char: str) -> None:
    """``runs``, ``audit`` and ``db init`` with the URL given as ``--store`` or as ``OTEL_REPLAY_STORE``: each
    fails with one ``error:`` line that shows the URL masked, no traceback, exit 2; nothing under the home holds
    the password afterwards."""
    password, needles = _password(char)
    url = _store_url(password)
    outputs: dict[str, bytes] = {}
    for command in (["runs"], ["audit"], ["db", "init"]):
        for how, args, env in (
            ("--store", [*command, "--store", url], None),
            ("OTEL_REPLAY_STORE", command, {"OTEL_REPLAY_STORE": url}),
        ):
            out = cli(home, *args, env=env)
            where = f"{' '.join(command)} ({how})"
            assert out.returncode == 2, f"{where}: {out.stdout}{out.stderr}"
            lines = out.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), f"{where}: {out.stderr}"
            assert "Traceback" not in out.stdout + out.stderr
            assert "127.0.0.1:9/otel" in lines[0], f"{where}: the line should still say which store: {lines[0]}"
            if char != "@":  # an '@' in the password leaves the URL readable: it is tried, and refused
                assert "percent-encode" in lines[0], f"{where}: {lines[0]}"
            outputs[where] = (out.stdout + out.stderr).encode()
    assert_nowhere(needles, {**outputs, **files_under(home)})


@pytest.mark.parametrize("char", SPECIAL, ids=["slash", "hash", "question", "at"])
def test_a_malformed_store_url_reaches_no_error_log_line_or_spool_segment(
    home: Path, char: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same URLs given to ``Store.open``, to ``configure(exporter="clickhouse", store=...)`` (the direct
    exporter: its log lines, and the spool segments it writes when the server is down) and, as a value, to a
    decorated tool that fails quoting it (the run's input, arguments and exception in the spool, the store and
    ``show --json``)."""
    password, needles = _password(char)
    url = _store_url(password)
    caplog.set_level(logging.DEBUG, logger="otel_replay")
    texts: dict[str, bytes] = {}

    with pytest.raises(StoreError) as opened:
        Store.open(url, home=home)
    texts["Store.open error"] = str(opened.value).encode()
    assert "127.0.0.1:9/otel" in str(opened.value)

    monkeypatch.setenv("OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS", "0")  # no retry: down is spooled at once
    try:
        if char == "@":  # a readable URL: the exporter is set up, fails to insert, logs and spools
            orp.configure(home=home, exporter="clickhouse", store=url, service_name="adv-leaks-direct")
            assert agents.dsn_agent(url) == "store down"
            orp.flush()
            assert "spooling to" in caplog.text, caplog.text
        else:  # refused at setup, with the URL masked
            with pytest.raises(ValueError, match="percent-encode") as refused:
                orp.configure(home=home, exporter="clickhouse", store=url, service_name="adv-leaks-direct")
            texts["configure error"] = str(refused.value).encode()
    finally:
        orp.configure(home=home, exporter="spool", service_name="adv-leaks-spool")
    assert agents.dsn_agent(url) == "store down"
    orp.flush()
    segments = files_under(home)
    assert any(name.startswith("spool") for name in segments), sorted(segments)
    texts["log lines"] = "\n".join(logging.Formatter().format(r) for r in caplog.records).encode()
    assert_nowhere(needles, {**texts, **segments})

    trace_ids = []
    with Store.open(home=home) as store:
        trace_ids = [r.trace_id for r in store.runs(agent="dsn-agent", kind="original")]
        (run, *_) = [store.load_run(t) for t in trace_ids]
    assert len(trace_ids) == (2 if char == "@" else 1)
    tool = next(s for s in run.steps if s.kind == "tool")
    dsn: Any = tool.snapshots["tool"]["arguments"]["dsn"]
    assert dsn.startswith("http://default:[REDACTED:url_credentials:") and dsn.endswith("@127.0.0.1:9/otel"), dsn
    shows = {f"show --json {t}": cli(home, "show", t, "--json") for t in trace_ids}
    assert all(out.returncode == 0 for out in shows.values())
    assert_nowhere(needles, {**store_rows(home), **{k: (o.stdout + o.stderr).encode() for k, o in shows.items()}})
