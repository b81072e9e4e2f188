"""An agent and a span planter for tests/adversarial/test_adv_recorded_answers.py: recorded answers that are hostile.

:func:`plant_text` re-emits a recorded run as a new trace with the OTel SDK, straight into the store's spool (a
span anyone could send to the Collector), with the stored text of its snapshot payloads and its span attributes
edited as raw text: a secret in clear or behind JSON escapes, a key given twice, a forged keyed hash.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from adv_code_agents import plant

import otel_replay as orp
from otel_replay.records import SpanRecord

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
    """Send the spans of a recorded run again as a new trace into ``home``'s spool (:func:`adv_code_agents.plant`),
    ``payload(kind, text)`` returning a replacement for a snapshot's stored payload text, ``span_attributes(span)``
    attributes set on each span. Returns the new trace id."""
    return plant(home, spans, payload_text=payload, span_attributes=span_attributes)
