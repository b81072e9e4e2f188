"""The span scrubbing step reads the attributes of a span, its events and its links through the OTel SDK's
mappings: what an application adds to otel-replay's own spans (attributes set after the start, events, a secret
key name) and what other instrumentations export through the same provider is scrubbed before anything reaches
the spool or the store."""

from __future__ import annotations

import secrets
import string
from pathlib import Path

from opentelemetry import trace

import otel_replay as orp
from otel_replay import Store


def _key() -> str:
    return "sk-proj-" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(40))


def _everything_under(home: Path) -> bytes:
    """Every file under the home and every row of the store (the spool ingested first), as one blob."""
    orp.flush()
    with Store.open(home=home) as store:
        rows = store.client.query("SELECT * FROM otel_traces").result_rows
    blob = "\n".join("\t".join(map(str, row)) for row in rows).encode()
    return blob + b"".join(path.read_bytes() for path in sorted(home.rglob("*")) if path.is_file())


def test_what_an_application_adds_to_recorded_spans_is_scrubbed(home: Path) -> None:
    planted = {name: _key() for name in ("later", "event", "snapshot_extra", "run_event", "other", "other_event")}
    password = "hunter2-" + secrets.token_hex(8)

    @orp.tool("lookup", risk="read")
    def lookup(q: str) -> str:
        span = trace.get_current_span()  # otel-replay's tool step span
        span.set_attributes({"app.later": f"with {planted['later']}", "app.count": 3})
        span.add_event("app.retry", {"note": f"retried with {planted['event']}", "app.password": password})
        # an event named like a snapshot: only its payload attribute is left to the recorder's own redaction
        span.add_event("otel_replay.snapshot.extra", {"otel_replay.snapshot.note": planted["snapshot_extra"]})
        return "found"

    @orp.agent("scrub-mappings")
    def agent() -> str:
        trace.get_current_span().add_event("app.note", {"text": planted["run_event"]})  # the run's root span
        with trace.get_tracer("acme.client").start_as_current_span("GET /items") as other:
            other.set_attribute("http.url", f"https://api.example/items?key={planted['other']}")
            other.add_event("retry", {"note": planted["other_event"]})
        return lookup("q")

    assert agent() == "found"
    blob = _everything_under(home)
    assert b"scrub-mappings" in blob  # the run was recorded and stored
    for name, secret in planted.items():
        assert secret.encode() not in blob, f"the {name} secret reached the spool or the store"
    assert password.encode() not in blob, "the value under a secret key name reached the spool or the store"
