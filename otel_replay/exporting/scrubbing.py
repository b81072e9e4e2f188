"""The one scrubbing step every span passes before it leaves through otel-replay's exporter.

otel-replay redacts the values it records when it encodes them, but a span carries more than snapshots: its
name (built from agent, tool and model names), identity and approval attributes, model parameters, whatever
the application sets on an otel-replay span, and every attribute, event, link and resource attribute of the
spans other instrumentations (HTTP clients, databases, frameworks) export through otel-replay's provider.
:func:`scrub_span` looks at all of it once per span, in the processor (see :mod:`.setup`), so nothing reaches
the spool, the store, the Collector or a replay's tap unscrubbed, whatever kind of span it is.

Cost: the strings of a span are tested with the redactor's substring pre-check; a span without anything
suspicious is passed on as it is (no copy). Snapshot payloads of otel-replay's own spans are skipped: they
were redacted as whole JSON trees when encoded, and their bytes must stay as hashed.

This module must never raise into the export path and never let a span through that it failed to scrub.
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Link, Status

from .. import semconv
from ..redaction import Redactor
from ..semconv import TRACER_NAME as TRACER_NAME  # re-exported: defined in the convention since it moved there

KNOWN_KEYS: Final[frozenset[str]] = frozenset(
    value for name, value in vars(semconv).items() if name.isupper() and isinstance(value, str) and "." in value
)
"""Attribute keys of the semantic convention: judged by their values only, never by their name
(``otel_replay.session.id`` holds a conversation id, not a session secret)."""

_SNAPSHOT_PREFIX: Final = semconv.snapshot_event_name(semconv.SnapshotKind.INPUT).rsplit(".", 1)[0] + "."
_PAYLOAD_SKIP: Final = frozenset({semconv.SNAPSHOT_PAYLOAD})
_NO_SKIP: Final[frozenset[str]] = frozenset()


def _resource(resource: Resource, redactor: Redactor, cache: dict[int, tuple[Resource, Resource]]) -> Resource:
    held = cache.get(id(resource))
    if held is not None and held[0] is resource:
        return held[1]
    clean, _ = redactor.scrub_attributes(resource.attributes, "resource", known_keys=KNOWN_KEYS)
    scrubbed = resource if clean is None else Resource(clean, resource.schema_url)
    if len(cache) > 64:
        cache.clear()
    cache[id(resource)] = (resource, scrubbed)
    return scrubbed


def _collect(attributes: Any, strings: list[str], redactor: Redactor, skip: frozenset[str]) -> bool:
    """Add the string values of ``attributes`` to ``strings``; True when a key names a secret."""
    return redactor.collect_strings(attributes, strings, known_keys=KNOWN_KEYS, skip_keys=skip)


def _suspicious(span: ReadableSpan, ours: bool, redactor: Redactor) -> bool:
    """Whether anything in ``span`` (resource apart) may need scrubbing: a secret key name, or the redactor's
    substring pre-check over all its strings at once."""
    strings = [span.name]
    if _collect(span.attributes or {}, strings, redactor, _NO_SKIP):
        return True
    for event in span.events:
        name = event.name
        strings.append(name)
        skip = _PAYLOAD_SKIP if ours and name.startswith(_SNAPSHOT_PREFIX) else _NO_SKIP
        if _collect(event.attributes or {}, strings, redactor, skip):
            return True
    for link in span.links:
        if _collect(link.attributes or {}, strings, redactor, _NO_SKIP):
            return True
    if span.status.description:
        strings.append(span.status.description)
    return not redactor.clean_strings(strings)


def scrub_span(
    span: ReadableSpan, redactor: Redactor, resources: dict[int, tuple[Resource, Resource]] | None = None
) -> ReadableSpan:
    """``span`` itself when nothing in it needs scrubbing, else a copy with every secret replaced: in its name,
    attributes, event names and attributes, link attributes, status description and resource attributes.

    ``resources`` caches scrubbed resources (most spans of a process share one). Raises only on an internal
    failure, which the caller must treat as "do not export this span"."""
    ours = span.instrumentation_scope is not None and span.instrumentation_scope.name == TRACER_NAME
    resource: Resource | None = span.resource  # typed Resource, but None on a span made without one
    if resource is not None:
        scrubbed = _resource(resource, redactor, resources if resources is not None else {})
        if scrubbed is resource and not _suspicious(span, ours, redactor):
            return span  # the common case: one pre-check over every string of the span, no copy
    elif not _suspicious(span, ours, redactor):
        return span
    changed = False

    name, n = redactor.scrub_text(span.name, "span.name")
    changed |= bool(n)

    attributes: Any = span.attributes or {}
    clean, n = redactor.scrub_attributes(attributes, "span.attributes", known_keys=KNOWN_KEYS)
    if clean is not None:
        attributes, changed = clean, True

    events = list(span.events)
    for i, event in enumerate(events):
        skip = _PAYLOAD_SKIP if ours and event.name.startswith(_SNAPSHOT_PREFIX) else _NO_SKIP
        event_name, n1 = redactor.scrub_text(event.name, "span.events.name")
        clean, _ = redactor.scrub_attributes(
            event.attributes or {}, f"span.events.{event_name}", known_keys=KNOWN_KEYS, skip_keys=skip
        )
        if n1 or clean is not None:
            events[i] = Event(event_name, clean if clean is not None else event.attributes, event.timestamp, limit=None)
            changed = True

    links = list(span.links)
    for i, link in enumerate(links):
        clean, _ = redactor.scrub_attributes(link.attributes or {}, "span.links", known_keys=KNOWN_KEYS)
        if clean is not None:
            links[i] = Link(link.context, clean)
            changed = True

    status = span.status
    if status.description:
        description, n = redactor.scrub_text(status.description, "span.status")
        if n:
            status, changed = Status(status.status_code, description), True

    if resource is not None and scrubbed is not resource:
        resource, changed = scrubbed, True

    if not changed:
        return span
    return ReadableSpan(
        name=name,
        context=span.context,
        parent=span.parent,
        resource=resource,
        attributes=attributes,
        events=events,
        links=links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
