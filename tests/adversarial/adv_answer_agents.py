"""An agent and a span planter for tests/adversarial/test_adv_recorded_answers.py: recorded answers that are hostile.

:func:`plant_text` re-emits a recorded run as a new trace with the OTel SDK, straight into the store's spool (a
span anyone could send to the Collector), with the stored text of its snapshot payloads and its span attributes
edited as raw text: a secret in clear or behind JSON escapes, a key given twice, a forged keyed hash.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, set_span_in_context

import otel_replay as orp
from otel_replay import semconv
from otel_replay.exporting.spool import SpoolExporter
from otel_replay.records import SpanRecord
from otel_replay.snapshots import sha256_hex

NOTE = "shipped on monday"
"""What the tool returned when the run was recorded (the planter puts its hostile text in its place)."""
REPLY = "your order is on its way"
"""What the model answered when the run was recorded."""


@orp.tool("lookup_note", risk="read")
def lookup_note(ticket: int) -> dict[str, Any]:
    """A read tool: the ticket's note."""
    return {"ticket": ticket, "note": NOTE}


@orp.model("summarise", provider="fake", model="fake-1")
def summarise(note: str) -> dict[str, Any]:
    """A model call: a reply to the customer."""
    return {"text": REPLY, "usage": {"input_tokens": 5, "output_tokens": 3}}


@orp.agent("answer-agent")
def answer_agent(ticket: int) -> str:
    """Looks the ticket up, asks the model for a reply, and returns both (so the answers reach the output)."""
    found = lookup_note(ticket)
    reply = summarise(str(found.get("note")))
    return f"{found.get('note')} | {reply.get('text')}"


def plant_text(
    home: Path,
    spans: list[SpanRecord],
    *,
    payload: Callable[[str, str], str | None],
    span_attributes: Callable[[SpanRecord], Mapping[str, str]] | None = None,
) -> str:
    """Send the spans of a recorded run again as a new trace, with the OTel SDK, into ``home``'s spool.

    ``payload(kind, text)`` may return a replacement for a snapshot's stored payload text (any text: the
    snapshot's plain sha256 is recomputed, so it reads as intact); ``span_attributes(span)`` are set on each
    span. Returns the new trace id."""
    provider = TracerProvider(resource=Resource.create({"service.name": "planted"}))
    provider.add_span_processor(SimpleSpanProcessor(SpoolExporter(home / "spool")))
    tracer = provider.get_tracer("planter")
    made: dict[str, Any] = {}
    ordered = sorted(spans, key=lambda s: (s.timestamp_ns, 0 if not s.parent_span_id else 1))
    pending = list(ordered)
    while pending:
        span = next(s for s in pending if not s.parent_span_id or s.parent_span_id in made)
        pending.remove(span)
        attributes = dict(span.span_attributes)
        if span_attributes is not None:
            attributes.update(span_attributes(span))
        parent = made.get(span.parent_span_id)
        new = tracer.start_span(
            span.span_name,
            context=set_span_in_context(parent) if parent is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=span.timestamp_ns,
        )
        for event in span.events:
            attrs = dict(event.attributes)
            text = attrs.get(semconv.SNAPSHOT_PAYLOAD)
            if text is not None and event.name.startswith(semconv.SNAPSHOT_EVENT_PREFIX):
                changed = payload(event.name.removeprefix(semconv.SNAPSHOT_EVENT_PREFIX), text)
                if changed is not None:
                    attrs[semconv.SNAPSHOT_PAYLOAD] = changed
                    attrs[semconv.SNAPSHOT_SHA256] = sha256_hex(changed)
                    attrs[semconv.SNAPSHOT_SIZE] = str(len(changed.encode()))
            new.add_event(event.name, attrs, timestamp=event.timestamp_ns)
        made[span.span_id] = new
    for span in ordered:
        made[span.span_id].end(end_time=span.timestamp_ns + span.duration_ns)
    provider.shutdown()
    root = next(s for s in ordered if not s.parent_span_id)
    return f"{made[root.span_id].get_span_context().trace_id:032x}"
