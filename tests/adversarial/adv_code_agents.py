"""Agents and a span planter for tests/adversarial/test_adv_code.py: recorded data that names code.

The "spoof" classes below encode exactly as a value of ``subprocess.Popen``, ``io.FileIO``, ``os.system`` or
``builtins.eval`` would (``{"$type": "dataclass", "class": "subprocess:Popen", "fields": {...}}``), with fields
that create a marker file if anything ever calls the named class with them. Recording them through the real
decorators puts those tags in a stored run, and from there into a case file, as an attacker would.

:func:`plant` re-emits a recorded run as a new trace with the OTel SDK, straight into the store's spool, with
attributes and snapshot payloads changed: a span anyone could send to the Collector.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from os import system as run_shell  # noqa: F401 - a trusted module that imports a dangerous function
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context
from pydantic import BaseModel

import otel_replay as orp
from otel_replay import semconv
from otel_replay.exporting.spool import SpoolExporter
from otel_replay.records import SpanRecord
from otel_replay.snapshots import sha256_hex

MARKER_ENV = "ADV_CODE_MARKERS"
"""Folder in which the hostile payloads would create their marker files."""


def markers() -> Path:
    """The marker folder of the current test."""
    return Path(os.environ[MARKER_ENV])


def created() -> list[str]:
    """Names of the marker files that exist (anything here means recorded data ran code)."""
    folder = markers()
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _spoof(cls: type, module: str, qualname: str) -> type:
    cls.__module__, cls.__qualname__, cls.__name__ = module, qualname, qualname.rpartition(".")[2]
    return cls


@dataclasses.dataclass
class _Popen:
    args: list[str]


@dataclasses.dataclass
class _FileIO:
    file: str
    mode: str


@dataclasses.dataclass
class _System:
    command: str


@dataclasses.dataclass
class _Eval:
    source: str


class _PydanticPopen(BaseModel):
    args: list[str]


PopenSpoof = _spoof(_Popen, "subprocess", "Popen")
FileIOSpoof = _spoof(_FileIO, "io", "FileIO")
SystemSpoof = _spoof(_System, "os", "system")
EvalSpoof = _spoof(_Eval, "builtins", "eval")
PydanticPopenSpoof = _spoof(_PydanticPopen, "subprocess", "Popen")


def hostile_values(folder: Path) -> dict[str, Any]:
    """Values whose recorded form names a dangerous class with arguments that would create a marker file."""
    return {
        "popen": PopenSpoof(args=["touch", str(folder / "popen")]),
        "fileio": FileIOSpoof(file=str(folder / "fileio"), mode="w"),
        "system": SystemSpoof(command=f"touch {folder / 'system'}"),
        "eval": EvalSpoof(source=f"open({str(folder / 'eval')!r}, 'w')"),
        "pydantic_popen": PydanticPopenSpoof(args=["touch", str(folder / "pydantic_popen")]),
    }


def _kinds(value: Any) -> Any:
    """What the agent reports about the values it was handed (plain data, the same at record and replay)."""
    if isinstance(value, dict):
        return {k: type(v).__name__ for k, v in sorted(value.items())}
    return type(value).__name__


@orp.tool("fetch_attachment", risk="read")
def fetch_attachment(name: str) -> dict[str, Any]:
    """A tool whose result carries the hostile values."""
    return hostile_values(markers())


@orp.model("planner", provider="scripted", model="scripted-1")
def planner(prompt: str) -> Any:
    """A model whose answer carries one."""
    return {"text": "ok", "object": FileIOSpoof(file=str(markers() / "model_fileio"), mode="w")}


@orp.agent("adv-hostile-values")
def hostile_agent(question: str, payload: Any = None) -> dict[str, Any]:
    """An agent handed hostile values in its input, a tool result and a model answer."""
    result = fetch_attachment(question)
    answer = planner(question)
    return {"tool": _kinds(result), "model": _kinds(answer), "input": _kinds(payload)}


@dataclasses.dataclass
class Ticket:
    """A user's own dataclass; registered by the test that needs it rebuilt."""

    id: int
    title: str


class Order(BaseModel):
    """A user's own pydantic model; registered by the test that needs it rebuilt."""

    number: str
    cents: int


class Unregistered(BaseModel):
    """A user's model nobody registers: a replay hands it back as a dict."""

    note: str


@orp.tool("read_ticket", risk="read")
def read_ticket(number: int) -> dict[str, Any]:
    """A tool returning user types."""
    return {
        "ticket": Ticket(id=number, title="printer on fire"),
        "order": Order(number="A1", cents=1500),
        "other": Unregistered(note="n"),
    }


@orp.agent("adv-user-types")
def user_types_agent(number: int) -> dict[str, Any]:
    """Reports which types the tool's values came back as (twice, so the replay meets the unregistered type
    in two steps but notes it once)."""
    first = read_ticket(number)
    second = read_ticket(number + 1)
    return {"first": _kinds(first), "second": _kinds(second)}


class ProjectError(Exception):
    """An exception class of the project's own code (this module is under the project folder)."""


@orp.tool("flaky", risk="read")
def flaky(error: type[Exception]) -> str:
    """Raises ``error``."""
    raise error("try again")


@orp.agent("adv-errors")
def error_agent(error_name: str) -> str:
    """Calls a tool that raises, and reports the class of what it caught."""
    error = ERRORS[error_name]
    try:
        flaky(error)
    except Exception as exc:  # noqa: BLE001 - the class is the answer
        return type(exc).__name__
    return "no error"


@orp.tool("echo_tool", risk="read")
def echo_tool(text: str) -> str:
    """A harmless tool (its recorded function is what the replay-tool test replaces)."""
    return text


@orp.agent("adv-echo")
def echo(text: str) -> str:
    """A harmless agent (its recorded entrypoint is what the entrypoint tests replace)."""
    return echo_tool(text)


ERRORS: dict[str, type[Exception]] = {}
"""Exception classes :func:`error_agent` can raise, filled by the tests."""


# ------------------------------------------------------------------------------------------ planting


def plant(
    home: Path,
    spans: list[SpanRecord],
    *,
    root_attributes: Mapping[str, str] | None = None,
    span_attributes: Callable[[SpanRecord], Mapping[str, str]] | None = None,
    payload: Callable[[str, dict[str, Any]], dict[str, Any] | None] | None = None,
    payload_text: Callable[[str, str], str | None] | None = None,
    shift_ns: int = 0,
) -> str:
    """Send the spans of a recorded run again as a new trace, with the OTel SDK, into ``home``'s spool.

    ``root_attributes`` are set on the root span; ``span_attributes(span)`` are set on each span; ``payload(kind,
    decoded)`` may return a replacement for a snapshot payload, ``payload_text(kind, stored_text)`` a replacement
    for its stored text (any text: a key given twice, escapes); either way its sha256 and size are recomputed, so
    the snapshot reads as intact. ``shift_ns`` moves every timestamp. Returns the new trace id."""
    exporter = SpoolExporter(home / "spool")
    provider = TracerProvider(resource=Resource.create({"service.name": "planted"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("planter")
    made: dict[str, Any] = {}
    ordered = sorted(spans, key=lambda s: (s.timestamp_ns, 0 if not s.parent_span_id else 1))
    pending = list(ordered)
    while pending:
        span = next(s for s in pending if not s.parent_span_id or s.parent_span_id in made)
        pending.remove(span)
        attributes = dict(span.span_attributes)
        if not span.parent_span_id:
            attributes.update(root_attributes or {})
        if span_attributes is not None:
            attributes.update(span_attributes(span))
        parent = made.get(span.parent_span_id)
        context = set_span_in_context(parent) if parent is not None else None
        new = tracer.start_span(
            span.span_name,
            context=context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=span.timestamp_ns + shift_ns,
        )
        for event in span.events:
            attrs = dict(event.attributes)
            text = attrs.get(semconv.SNAPSHOT_PAYLOAD)
            if text is not None and event.name.startswith(semconv.SNAPSHOT_EVENT_PREFIX):
                kind = event.name.removeprefix(semconv.SNAPSHOT_EVENT_PREFIX)
                body = None
                if payload is not None:
                    changed = payload(kind, json.loads(text))
                    if changed is not None:
                        body = json.dumps(changed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                if payload_text is not None:
                    body = payload_text(kind, body if body is not None else text)
                if body is not None:
                    attrs[semconv.SNAPSHOT_PAYLOAD] = body
                    attrs[semconv.SNAPSHOT_SHA256] = sha256_hex(body)
                    attrs[semconv.SNAPSHOT_SIZE] = str(len(body.encode()))
            new.add_event(event.name, attrs, timestamp=event.timestamp_ns + shift_ns)
        if span.status_code in ("Error", "STATUS_CODE_ERROR"):
            new.set_status(Status(StatusCode.ERROR, span.status_message))
        made[span.span_id] = new
    for span in ordered:
        made[span.span_id].end(end_time=span.timestamp_ns + span.duration_ns + shift_ns)
    provider.shutdown()
    root = next(s for s in ordered if not s.parent_span_id)
    return f"{made[root.span_id].get_span_context().trace_id:032x}"
