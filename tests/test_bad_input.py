"""Bad input of every kind: each gets one clear error or is stored safely; none crashes, corrupts or leaks.

Hostile OTLP protobuf (random bytes, structurally valid but hostile requests, 10 MiB values, nesting deeper than
Python's recursion limit, invalid UTF-8, NUL bytes, ids of the wrong length, times past 2262) goes through the
one OTLP → row mapping and into a real embedded store, which afterwards still answers and still holds the
earlier runs unchanged. Random bytes in spool segments never stop an ingest. Generated and mutated OTLP JSON
and case files are a :class:`CaseError` or a case that runs; path-looking case files and names never read or
write where they should not. Runs recorded with unknown convention versions show but do not replay or export.
Hostile trace ids and generated command lines through the CLI are one ``error:`` line, exit 2, no traceback,
and leave the store as it was. Secret-shaped strings inside prose, and secrets that do not look like secrets
(under secret key names, in URLs, headers, tokens, key blocks), never reach the spool, the store, the CLI's
output or a case file; lookalikes the rules promise to keep are kept. Hostile values handed to recorded agents
and tools never change what the agent returns or raises.

Examples come from the run's seed (printed; ``--hypothesis-seed`` draws them again, tests/conftest.py), so each CI
run tries new inputs and a failing one can be rerun on a laptop. The hand-written corpus
of case files is in ``tests/corpus/bad_input`` (``expected.json`` names the error each must give); the 10 MiB
and deeply nested inputs are generated here.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import math
import os
import random
import string
import subprocess
import sys
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest import mock

import case_agents as ca
import fork_server
import pytest
from cli_in_process import loggers_restored
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from property_budget import examples

import otel_replay as orp
from otel_replay import cli as cli_module
from otel_replay import semconv
from otel_replay.cases import CaseError, case_document, dumps_case, load_case, parse_case, run_case
from otel_replay.exporting.rows import (
    INSERT_COLUMNS,
    any_value_to_string,
    record_from_query_row,
    records_from_request,
    rows_from_request,
)
from otel_replay.exporting.setup import runtime
from otel_replay.exporting.spool import SEGMENT_MAGIC, encode_record, sealed_segments
from otel_replay.otlp_json import OtlpJsonError, from_otlp_json
from otel_replay.recording.encoding import CUT_MARGIN
from otel_replay.records import SpanRecord
from otel_replay.storage.store import Store
from otel_replay.testing import capture

TESTS_DIR = Path(__file__).resolve().parent
CORPUS = TESTS_DIR / "corpus" / "bad_input"
MIB = 1024 * 1024
I64 = 1 << 63
U64 = (1 << 64) - 1
API_KEY = "sk-live-" + "Bq47" * 8

FUZZ = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))
"""Every property test: examples from the run's seed (tests/conftest.py), no example database, no wall-clock
deadline."""


def fuzz(usual: int) -> settings:
    """:data:`FUZZ` with this many examples (sized so the whole file runs in about a minute on two cores), more
    under ``make fuzz`` (tests/property_budget.py)."""
    return settings(FUZZ, max_examples=examples(usual))


SQLISH = [
    "' OR 1=1 --",
    "'; DROP TABLE otel_traces; --",
    "x') UNION SELECT * FROM system.users --",
    "{trace_id:String}",
    "`otel_traces`",
    "\\'; SELECT 1; --",
    "%s%s%s",
    "${jndi:ldap://x}",
]


# ------------------------------------------------------------------------------------------------ helpers


@dataclass(frozen=True)
class Cli:
    """What one in-process ``otel-replay`` invocation did."""

    code: int | str
    out: str
    err: str

    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def cli(*args: str) -> Cli:
    """Run ``otel-replay ARGS`` in this process, as the console script does (``main``), capturing output."""
    out, err = io.StringIO(), io.StringIO()
    code: int | str
    with (
        loggers_restored(),
        mock.patch.object(sys, "argv", ["otel-replay", *args]),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            cli_module.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException as exc:  # noqa: BLE001 - a crash is what the tests look for
            code = f"crashed: {type(exc).__name__}"
            err.write("Traceback (in-process)\n" + "".join(traceback.format_exception(exc)))
    return Cli(code, out.getvalue(), err.getvalue())


def assert_one_error_line(result: Cli, *needles: str) -> None:
    assert result.code == 2, (result.code, result.out[-2000:], result.err[-2000:])
    lines = result.error_lines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err[-3000:]
    assert "Traceback" not in result.out + result.err
    for needle in needles:
        assert needle in lines[0], lines[0]


def store_state(store: Store) -> list[tuple[Any, ...]]:
    """Every row of the traces table, reduced to what a change of any column would change."""
    rows = store.client.query(
        "SELECT TraceId, SpanId, toUnixTimestamp64Nano(Timestamp), cityHash64(SpanName, SpanAttributes, "
        "ResourceAttributes, StatusCode, StatusMessage, Duration), cityHash64(Events.Name, Events.Attributes), "
        "cityHash64(Links.TraceId, Links.Attributes) FROM otel_traces ORDER BY TraceId, SpanId, 3"
    ).result_rows
    return [tuple(row) for row in rows]


def records_of(function: Callable[[], Any], home: Path) -> tuple[Any, list[SpanRecord]]:
    """Call ``function`` while recording in memory; its outcome (value or exception) and the spans as the
    store would hold them."""
    with capture(home=home) as recorded:
        try:
            outcome: Any = function()
        except Exception as exc:  # noqa: BLE001 - the outcome is compared by the caller
            outcome = exc
        records = recorded.records()
    return outcome, records


def everything(records: list[SpanRecord]) -> str:
    """All text of the records: names, attribute keys and values, events, links, status."""
    parts: list[str] = []
    for r in records:
        parts += [r.span_name, r.status_message, r.trace_state, r.scope_name, r.scope_version, r.service_name]
        for mapping in (
            r.span_attributes,
            r.resource_attributes,
            *(e.attributes for e in r.events),
            *(x.attributes for x in r.links),
        ):
            for key, value in mapping.items():
                parts += [key, value]
        parts += [e.name for e in r.events]
    return "\n".join(parts)


def write_segment(path: Path, payloads: list[bytes]) -> Path:
    path.write_bytes(SEGMENT_MAGIC + b"".join(encode_record(p) for p in payloads))
    return path


# ------------------------------------------------------------------------------------- OTLP request model

# A request is described by plain data (so hypothesis can shrink it) and built into a protobuf message in
# place: protobuf copies nested messages by serialising them, which refuses values nested past its limit.

KEYS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "\x00", "k\x00ey", "service.name", *SQLISH, "otel_replay.run.id", "a" * 300]),
)
HOSTILE_STRINGS = [
    "",
    "\x00",
    "a\x00b",
    "\x00" * 64,
    "\u2028\u2029",
    "</script>",
    "\\u003c",
    "[\\u003c]",
    "\ufeff",
    "\U0001f600" * 10,
    "\r\n",
    *SQLISH,
]
SCALARS = st.one_of(
    st.text(max_size=40).map(lambda s: ("s", s)),
    st.sampled_from(HOSTILE_STRINGS).map(lambda s: ("s", s)),
    st.integers(-I64, I64 - 1).map(lambda i: ("i", i)),
    st.booleans().map(lambda b: ("b", b)),
    st.floats().map(lambda d: ("d", d)),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 5e-324, 1e308]).map(lambda d: ("d", d)),
    st.binary(max_size=40).map(lambda b: ("y", b)),  # invalid UTF-8 welcome: bytes values are bytes
    st.just(("n", None)),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda v: ("a", v)),
        st.lists(st.tuples(KEYS, inner), max_size=4).map(lambda v: ("k", v)),
    ),
    max_leaves=12,
)
ATTRIBUTES = st.lists(st.tuples(KEYS, VALUES), max_size=6)


def ids(size: int) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(min_size=size, max_size=size), st.just(b""), st.just(b"\x00" * size), st.binary(max_size=size + 4)
    )


TIMES = st.one_of(st.integers(0, U64), st.sampled_from([0, 1, I64 - 1, I64, U64, 1_700_000_000_000_000_000]))
SPANS = st.fixed_dictionaries(
    {
        "trace_id": ids(16),
        "span_id": ids(8),
        "parent_span_id": ids(8),
        "name": st.text(max_size=20) | KEYS,
        "trace_state": st.text(max_size=10),
        "kind": st.integers(-(1 << 31), (1 << 31) - 1),
        "start": TIMES,
        "end": TIMES,
        "attributes": ATTRIBUTES,
        "events": st.lists(st.tuples(TIMES, st.text(max_size=10), ATTRIBUTES), max_size=3),
        "links": st.lists(st.tuples(ids(16), ids(8), st.text(max_size=5), ATTRIBUTES), max_size=2),
        "code": st.integers(-(1 << 31), (1 << 31) - 1),
        "message": st.text(max_size=20),
    }
)
REQUESTS = st.lists(
    st.tuples(
        ATTRIBUTES,
        st.lists(
            st.tuples(st.text(max_size=8), st.text(max_size=8), st.lists(SPANS, min_size=1, max_size=3)),
            min_size=1,
            max_size=2,
        ),
    ),
    min_size=1,
    max_size=2,
)


def fill(target: AnyValue, described: tuple[str, Any]) -> None:
    tag, value = described
    if tag == "s":
        target.string_value = value
    elif tag == "i":
        target.int_value = value
    elif tag == "b":
        target.bool_value = value
    elif tag == "d":
        target.double_value = value
    elif tag == "y":
        target.bytes_value = value
    elif tag == "a":
        target.array_value.SetInParent()
        for item in value:
            fill(target.array_value.values.add(), item)
    elif tag == "k":
        target.kvlist_value.SetInParent()
        for key, item in value:
            pair = target.kvlist_value.values.add()
            pair.key = key
            fill(pair.value, item)


def fill_attributes(repeated: Any, attributes: list[tuple[str, Any]]) -> None:
    for key, value in attributes:
        pair = repeated.add()
        pair.key = key
        fill(pair.value, value)


def build_request(described: list[Any]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for resource_attributes, scopes in described:
        resource_spans = request.resource_spans.add()
        fill_attributes(resource_spans.resource.attributes, resource_attributes)
        for scope_name, scope_version, spans in scopes:
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name, scope_spans.scope.version = scope_name, scope_version
            for s in spans:
                span = scope_spans.spans.add()
                span.trace_id, span.span_id, span.parent_span_id = s["trace_id"], s["span_id"], s["parent_span_id"]
                span.name, span.trace_state, span.kind = s["name"], s["trace_state"], s["kind"]
                span.start_time_unix_nano, span.end_time_unix_nano = s["start"], s["end"]
                span.status.code, span.status.message = s["code"], s["message"]
                fill_attributes(span.attributes, s["attributes"])
                for at, name, attributes in s["events"]:
                    event = span.events.add()
                    event.time_unix_nano, event.name = at, name
                    fill_attributes(event.attributes, attributes)
                for trace_id, span_id, state, attributes in s["links"]:
                    link = span.links.add()
                    link.trace_id, link.span_id, link.trace_state = trace_id, span_id, state
                    fill_attributes(link.attributes, attributes)
    return request


def ids_are_valid(described: list[Any]) -> bool:
    """True when every id has an OTLP length (16 / 8 bytes) or is empty."""
    for _, scopes in described:
        for _, _, spans in scopes:
            for s in spans:
                if len(s["trace_id"]) not in (0, 16) or len(s["span_id"]) not in (0, 8):
                    return False
                if len(s["parent_span_id"]) not in (0, 8):
                    return False
                if any(len(t) not in (0, 16) or len(x) not in (0, 8) for t, x, _, _ in s["links"]):
                    return False
    return True


def check_row(row: tuple[Any, ...]) -> None:
    """What the store needs of a row: the right width and types, ids in hex, times that fit an Int64."""
    assert len(row) == len(INSERT_COLUMNS)
    assert -I64 <= row[0] < I64 and 0 <= row[12] <= U64
    for index, size in ((1, 32), (2, 16), (3, 16)):
        assert row[index] == "" or (len(row[index]) == size and row[index] == row[index].lower()), row[index]
        int(row[index] or "0", 16)
    for index in (8, 11):
        assert all(type(k) is str and type(v) is str for k, v in row[index].items())
    assert all(-I64 <= t < I64 for t in row[15])
    assert all(type(k) is str and type(v) is str for attrs in (*row[17], *row[21]) for k, v in attrs.items())
    for value in (row[4], row[5], row[6], row[7], row[9], row[10], row[13], row[14]):
        assert type(value) is str
        value.encode("utf-8")  # the store takes UTF-8 text only


def fill_nested(target: AnyValue, depth: int, kind: str) -> None:
    """Fill ``target`` in place with a value nested ``depth`` arrays or kvlists deep around ``"leaf"``."""
    leaf = target
    for _ in range(depth):
        if kind == "array":
            leaf = leaf.array_value.values.add()
        else:
            pair = leaf.kvlist_value.values.add()
            pair.key = "k"
            leaf = pair.value
    leaf.string_value = "leaf"


def one_span_request(
    *,
    trace_id: bytes = b"\x0a" * 16,
    span_id: bytes = b"\x0b" * 8,
    name: str = "op",
    start: int = 1_700_000_000_000_000_000,
    end: int | None = None,
    event_at: int | None = None,
    attributes: dict[str, Any] | None = None,
) -> ExportTraceServiceRequest:
    """A request holding one span; an attribute value is a string, bytes, or a function filling the AnyValue."""
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = trace_id, span_id, name
    span.start_time_unix_nano = start
    span.end_time_unix_nano = min(start + 1000, U64) if end is None else end
    if event_at is not None:
        span.events.add(time_unix_nano=event_at, name="at")
    for key, value in (attributes or {}).items():
        pair = span.attributes.add()
        pair.key = key
        if callable(value):
            value(pair.value)
        elif isinstance(value, bytes):
            pair.value.bytes_value = value
        else:
            pair.value.string_value = value
    return request


# =========================================================================================== OTLP → rows


def _real_request_bytes() -> bytes:
    described = [
        (
            [("service.name", ("s", "svc"))],
            [
                (
                    "lib",
                    "1",
                    [
                        {
                            "trace_id": b"\x01" * 16,
                            "span_id": b"\x02" * 8,
                            "parent_span_id": b"",
                            "name": "root",
                            "trace_state": "",
                            "kind": 1,
                            "start": 1_700_000_000_000_000_000,
                            "end": 1_700_000_001_000_000_000,
                            "attributes": [("a", ("s", "x")), ("n", ("i", 3)), ("l", ("a", [("d", 0.5), ("b", True)]))],
                            "events": [(1_700_000_000_500_000_000, "e", [("k", ("s", "v"))])],
                            "links": [(b"\x03" * 16, b"\x04" * 8, "", [])],
                            "code": 2,
                            "message": "boom",
                        }
                    ],
                )
            ],
        )
    ]
    return build_request(described).SerializeToString()


REAL_REQUEST = _real_request_bytes()


@fuzz(300)
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.tuples(st.integers(0, len(REAL_REQUEST)), st.integers(0, 30), st.binary(max_size=12)).map(
            lambda m: REAL_REQUEST[: m[0]] + m[2] + REAL_REQUEST[m[0] + m[1] :]
        ),
    )
)
def test_random_protobuf_bytes_are_rows_or_a_decode_error(data: bytes) -> None:
    """Random bytes and mutated real requests: well-formed rows or DecodeError / ValueError, nothing else."""
    try:
        rows = rows_from_request(data)
    except (DecodeError, ValueError) as exc:
        assert str(exc)
        return
    for row in rows:
        check_row(row)


# 40 examples: drawing one is the cost (up to 12 spans, each with attributes, events and links of recursive
# values: about 0.1 s apiece, the mapping a few ms); 40 of them still map over a hundred spans (134) with their
# attributes, events and links, each scalar kind, hostile string, id length and time edge many times over.
@fuzz(40)
@given(described=REQUESTS)
def test_hostile_requests_map_alike_from_message_and_bytes(described: list[Any]) -> None:
    """NUL bytes, invalid UTF-8 in bytes values, NaN/±Inf, any kind or status code, times across the whole u64
    range, empty ids: rows the store takes, the same from the message as from its wire bytes. Ids of another
    length than OTLP's are a ValueError that says so, as the Collector refuses the request."""
    request = build_request(described)
    if not ids_are_valid(described):
        with pytest.raises(ValueError, match="OTLP ids are"):
            rows_from_request(request)
        with pytest.raises(ValueError, match="OTLP ids are"):
            rows_from_request(request.SerializeToString())
        return
    rows = rows_from_request(request)
    assert rows == rows_from_request(request.SerializeToString())
    assert len(rows) == sum(len(spans) for _, scopes in described for _, _, spans in scopes)
    for row in rows:
        check_row(row)
    assert [r.span_name for r in records_from_request(request)] == [row[5] for row in rows]


@pytest.mark.parametrize("kind", ["array", "kvlist"])
@pytest.mark.parametrize("depth", [1000, 5000])
def test_values_nested_past_the_recursion_limit_are_written_out(kind: str, depth: int) -> None:
    value = AnyValue()
    fill_nested(value, depth, kind)
    text = any_value_to_string(value)
    if kind == "array":
        assert text == "[" * depth + '"leaf"' + "]" * depth
    else:
        assert text == '{"k":' * depth + '"leaf"' + "}" * depth
    (row,) = rows_from_request(one_span_request(attributes={"deep": lambda v: fill_nested(v, depth, kind)}))
    assert row[11]["deep"] == text
    # on the wire, protobuf refuses such nesting before the mapping sees it: a clear DecodeError
    wire = one_span_request(attributes={"deep": lambda v: fill_nested(v, depth, kind)}).SerializeToString()
    with pytest.raises(DecodeError):
        rows_from_request(wire)


@pytest.mark.parametrize(
    ("field", "size"),
    [
        ("trace_id", 3),
        ("trace_id", 17),
        ("span_id", 7),
        ("span_id", 9),
        ("parent_span_id", 1),
        ("link_trace", 15),
        ("link_span", 20),
    ],
)
def test_ids_of_the_wrong_length_are_refused_naming_the_span(field: str, size: int) -> None:
    request = one_span_request(name="payment")
    span = request.resource_spans[0].scope_spans[0].spans[0]
    if field.startswith("link"):
        link = span.links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
        setattr(link, "trace_id" if field == "link_trace" else "span_id", b"\x05" * size)
    else:
        setattr(span, field, b"\x05" * size)
    with pytest.raises(ValueError, match=rf"span 'payment' has a .*id of {size} bytes: OTLP ids are"):
        rows_from_request(request.SerializeToString())


def test_huge_values_and_many_attributes_map_in_bounded_time() -> None:
    big_text, big_bytes = "é" * (5 * MIB), os.urandom(10 * MIB)
    attributes: dict[str, Any] = {f"a{i}": str(i) for i in range(50_000)}
    attributes.update({"text": big_text, "bytes": big_bytes})
    wire = one_span_request(attributes=attributes).SerializeToString()
    assert len(wire) > 20 * MIB
    started = time.process_time()  # this process's CPU time: what other processes on the machine do is not counted
    (row,) = rows_from_request(wire)
    assert time.process_time() - started < 10
    assert len(row[11]) == 50_002 and row[11]["text"] == big_text
    assert row[11]["bytes"] == base64.b64encode(big_bytes).decode()


# ================================================================================================== world

VERSIONS = {
    "0.1": "re-record",
    "99.0": "upgrade otel-replay",
    "": "re-record",
    "abc": "re-record",
    "'; DROP TABLE otel_traces; --": "re-record",
    "\u00b2.0": "re-record",
    "1" * 5000 + ".0": "re-record",
}
"""Convention versions no reader of this version takes, and what the refusal tells the user to do."""


def _with_version(records: list[SpanRecord], version: str) -> list[SpanRecord]:
    """The run's spans as if recorded with convention ``version``, under a trace id of their own."""
    trace_id = hashlib.sha256(version.encode()).hexdigest()[:32]
    out = []
    for record in records:
        attributes = dict(record.span_attributes)
        if semconv.SCHEMA_VERSION_ATTR in attributes:
            attributes[semconv.SCHEMA_VERSION_ATTR] = version
        out.append(replace(record, trace_id=trace_id, span_attributes=attributes))
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A home whose store holds one good run of the desk agent (with a credential) and the same run as if
    recorded with each convention version of :data:`VERSIONS`; a good case file of the good run."""
    base = tmp_path_factory.mktemp("bad-input")
    home, cases = base / "home", base / "cases"
    cases.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        mp.delenv("OTEL_REPLAY_STORE", raising=False)
        orp.configure(home=home, exporter="spool")
        ca.DESK.update(ca.DESK_DEFAULTS)
        ca.desk_agent("refund order A7", api_key=API_KEY)
        orp.flush()
        with Store.open(home=home) as store:
            (summary,) = store.runs()
            good = summary.trace_id
            spans = store.load_spans(good)
            versions = {}
            for version in VERSIONS:
                changed = _with_version(spans, version)
                store.insert_spans(changed)
                versions[version] = changed[0].trace_id
            run = store.load_run(good)
            shown = run.to_dict()
        document = case_document(run, redactor=runtime().redactor, expect=["output", "tools"])
        case_file = cases / "desk.case.json"
        case_file.write_text(dumps_case(document), encoding="utf-8")
        yield {
            "home": home,
            "cases": cases,
            "good": good,
            "shown": shown,
            "versions": versions,
            "case_file": case_file,
            "document": document,
        }


@pytest.fixture
def at_world(world: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The world's home as this process's configured home, and an empty folder as the working folder."""
    monkeypatch.setenv("OTEL_REPLAY_HOME", str(world["home"]))
    monkeypatch.delenv("OTEL_REPLAY_STORE", raising=False)
    monkeypatch.delenv("OTEL_REPLAY_DEBUG", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("OTEL_REPLAY_TRUSTED_MODULES", "case_agents")  # the cases' agent is not under work/
    orp.configure(home=world["home"], exporter="spool")
    ca.DESK.update(ca.DESK_DEFAULTS)
    return {**world, "work": work}


def world_state(world: dict[str, Any]) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The store's rows and the spool's files."""
    with Store.open(home=world["home"], ingest=False) as store:
        rows = store_state(store)
    spool = world["home"] / "spool"
    files = sorted(p.name for p in spool.iterdir()) if spool.is_dir() else []
    return rows, files


# ================================================================================================= store


@pytest.fixture
def fresh_store(home: Path) -> Iterator[tuple[Store, str, dict[str, Any]]]:
    """A store in a fresh home holding one good run: (store, its trace id, its ``show --json`` form)."""
    ca.desk_agent("refund order B9", api_key=API_KEY)
    orp.flush()
    with Store.open(home=home) as store:
        (summary,) = store.runs()
        yield store, summary.trace_id, store.load_run(summary.trace_id).to_dict()


@pytest.mark.hypothesis  # its property runs inside: `make fuzz` selects it by this marker
def test_hostile_requests_are_stored_as_mapped_and_earlier_runs_stay_unchanged(
    fresh_store: tuple[Store, str, dict[str, Any]],
) -> None:
    store, good, before = fresh_store
    good_rows = len(store.load_spans(good))
    inserted = 0
    stored_as: defaultdict[tuple[str, str], list[Any]] = defaultdict(list)

    @fuzz(40)
    @given(described=REQUESTS)
    def insert_hostile(described: list[Any]) -> None:
        nonlocal inserted
        if not ids_are_valid(described):
            return
        rows = rows_from_request(build_request(described).SerializeToString())
        assert store.insert_rows(rows) == len(rows)  # whatever the mapping accepts, the store takes
        inserted += len(rows)
        for trace_id in {row[1] for row in rows} - {"", good}:
            mine = [row for row in rows if row[1] == trace_id]
            if not all(0 <= row[0] < 4_000_000_000 * 10**9 for row in mine):
                continue  # outside the lookup table's DateTime range: stored, but not found by trace id
            loaded = store.load_spans(trace_id)
            # read back exactly as mapped: NUL bytes, unicode, maps and all. A span is read once by its ids (a
            # span sent twice is read once: LIMIT 1 BY TraceId, SpanId), so of the rows stored under one pair of
            # ids (an all-zero id, ids drawn again by a later example) one is read back, whichever the store keeps
            for row in mine:
                record = record_from_query_row(row)
                stored_as[(trace_id, record.span_id)].append(record)
            for span_id in {record_from_query_row(row).span_id for row in mine}:
                assert any(record in loaded for record in stored_as[(trace_id, span_id)])

    insert_hostile()
    specials = [
        one_span_request(
            trace_id=b"\x11" * 16,
            name="big",
            attributes={"text": "x" * (10 * MIB), "bytes": os.urandom(MIB), "nul\x00key": "nul\x00value"},
        ),
        one_span_request(
            trace_id=b"\x12" * 16, name="deep", attributes={"deep": lambda v: fill_nested(v, 2000, "kvlist")}
        ),
        one_span_request(trace_id=b"\x13" * 16, name="late", start=U64, end=U64, event_at=U64),
        one_span_request(trace_id=b"\x14" * 16, name="2262", start=I64 - 1, end=I64 - 1),
        one_span_request(trace_id=b"\x15" * 16, name=SQLISH[1], attributes={k: k for k in SQLISH}),
        one_span_request(trace_id=b"", span_id=b"", name="no ids"),
    ]
    for request in specials:
        rows = rows_from_request(request)
        assert store.insert_rows(rows) == 1
        inserted += 1
    (big,) = store.load_spans("11" * 16)
    assert len(big.span_attributes["text"]) == 10 * MIB and big.span_attributes["nul\x00key"] == "nul\x00value"
    (deep,) = store.load_spans("12" * 16)
    assert deep.span_attributes["deep"].count('{"k":') == 2000
    (sqlish,) = store.load_spans("15" * 16)
    assert sqlish.span_name == SQLISH[1] and sqlish.span_attributes == {k: k for k in SQLISH}

    total = store.client.query("SELECT count() FROM otel_traces").result_rows[0][0]
    assert total == good_rows + inserted
    assert [s.trace_id for s in store.runs()] == [good]
    assert store.load_run(good).to_dict() == before


# ================================================================================================= spool


@pytest.mark.hypothesis  # its property runs inside: `make fuzz` selects it by this marker
def test_random_bytes_in_spool_segments_never_break_ingest(fresh_store: tuple[Store, str, dict[str, Any]]) -> None:
    """Garbage segments (random bytes, a valid header then garbage, checksummed records that are not OTLP or
    are hostile OTLP) beside a good one: every ingest returns a report, the good spans arrive, nothing is left
    half-ingested, and the store still answers with its earlier run unchanged."""
    store, good, before = fresh_store
    spool = store.home / "spool"
    spool.mkdir(exist_ok=True)
    counter = iter(range(10**6))
    good_payload = one_span_request(trace_id=b"\x21" * 16, name="good").SerializeToString()

    def segment_bytes(kind: str, raw: bytes, described: list[Any]) -> bytes:
        if kind == "raw":
            return raw
        if kind == "header":
            return SEGMENT_MAGIC + raw
        if kind == "records":
            return SEGMENT_MAGIC + encode_record(raw) + encode_record(good_payload) + raw[: len(raw) // 2]
        return SEGMENT_MAGIC + encode_record(build_request(described).SerializeToString())

    @fuzz(25)
    @given(kind=st.sampled_from(["raw", "header", "records", "otlp"]), raw=st.binary(max_size=200), described=REQUESTS)
    def ingest_garbage(kind: str, raw: bytes, described: list[Any]) -> None:
        n = next(counter)
        (spool / f"{n:020d}-x-1-{n:08x}.seg").write_bytes(segment_bytes(kind, raw, described))
        write_segment(spool / f"{n:020d}-x-1-{n + 1:08x}.seg", [good_payload])
        report = store.ingest()
        assert report.spans >= 1 and not report.busy
        assert not sealed_segments(spool) and not sealed_segments(spool, suffix=".ingesting")

    ingest_garbage()
    assert store.load_run(good).to_dict() == before
    assert {s.trace_id for s in store.runs()} == {good}
    assert store.load_spans("21" * 16)


def test_a_span_stamped_after_2262_is_stored_and_never_blocks_the_store(home: Path) -> None:
    """An OTLP time of 2^63 ns or more does not fit ClickHouse's Int64: it is stored as the Collector stores
    it (wrapped), so the insert succeeds instead of failing on every ingest and leaving the store unopenable."""
    spool = home / "spool"
    spool.mkdir(parents=True, exist_ok=True)
    request = one_span_request(trace_id=b"\x31" * 16, name="far future", start=U64, end=U64, event_at=U64)
    write_segment(spool / "00000000000000000001-x-1-00000001.seg", [request.SerializeToString()])
    for _ in range(2):
        with Store.open(home=home) as store:
            (count,) = store.client.query("SELECT count() FROM otel_traces WHERE SpanName = 'far future'").result_rows[
                0
            ]
            assert count == 1
    assert not list(spool.glob("*.seg")) and not list(spool.glob("*.ingesting"))


# ============================================================================================ case files

EXPECTED = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))


def _generated_corpus(folder: Path, document: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Case files too large or too deep to keep in the corpus, written into ``folder``; what each must give."""
    big = json.loads(json.dumps(document))
    spans = big["trace"]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0].setdefault("attributes", []).append({"key": "huge", "value": {"stringValue": "x" * (10 * MIB)}})
    (folder / "ten-mib.case.json").write_text(json.dumps(big), encoding="utf-8")
    (folder / "garbage-ten-mib.case.json").write_bytes(random.Random(7).randbytes(10 * MIB))
    (folder / "nested-100k.case.json").write_text("[" * 100_000 + "]" * 100_000, encoding="ascii")
    deep = json.loads(json.dumps(document))
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(150):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    deep["trace"]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append({"key": "d", "value": value})
    (folder / "otlp-nested-150.case.json").write_text(json.dumps(deep), encoding="utf-8")
    return {
        "ten-mib.case.json": {"pass": ""},
        "garbage-ten-mib.case.json": {"load": "not a readable JSON"},
        "nested-100k.case.json": {"load": "nested too deeply"},
        "otlp-nested-150.case.json": {"load": "not OTLP JSON"},
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_case_files_are_one_clear_error(name: str, tmp_path: Path) -> None:
    ((stage, needle),) = EXPECTED[name].items()
    if stage == "load":
        with pytest.raises(CaseError) as caught:
            load_case(CORPUS / name)
        message = str(caught.value)
        assert needle in message and name in message and "\n" not in message, message
        return
    result = run_case(load_case(CORPUS / name))
    assert result.status in ("failed", "error"), result
    assert needle in " ".join([result.error or "", *result.failures])


def test_generated_case_files_are_one_clear_error_or_run(world: dict[str, Any], tmp_path: Path) -> None:
    expected = _generated_corpus(tmp_path, world["document"])
    for name, outcome in expected.items():
        ((stage, needle),) = outcome.items()
        if stage == "load":
            with pytest.raises(CaseError, match=needle):
                load_case(tmp_path / name)
        else:
            result = run_case(load_case(tmp_path / name))
            assert result.status == "passed", (name, result.failures, result.error)


def test_case_run_reports_every_bad_file_and_still_runs_the_good_one(at_world: dict[str, Any]) -> None:
    """The whole corpus and a good case in one ``case run``: exit 2, an ERROR or FAIL line per bad file, the
    good case passes, no traceback; with ``--json``, one result per file."""
    suite = at_world["work"] / "suite"
    suite.mkdir()
    for name in EXPECTED:
        (suite / name).write_bytes((CORPUS / name).read_bytes())
    generated = _generated_corpus(suite, at_world["document"])
    (suite / "good.case.json").write_bytes(at_world["case_file"].read_bytes())
    result = cli("case", "run", str(suite), "--json")
    assert result.code == 2 and "Traceback" not in result.out + result.err, result.err[-3000:]
    report = json.loads(result.out)
    by_file = {Path(c["path"]).name: c for c in report["cases"]}
    assert set(by_file) == set(EXPECTED) | set(generated) | {"good.case.json"}
    assert by_file["good.case.json"]["status"] == "passed"
    assert by_file["ten-mib.case.json"]["status"] == "passed"
    for name, outcome in {**EXPECTED, **generated}.items():
        ((stage, needle),) = outcome.items()
        if stage != "pass":
            case = by_file[name]
            assert case["status"] in ("failed", "error"), case
            assert needle in " ".join([case["error"] or "", *case["failures"]]), case
    text = cli("case", "run", str(suite))
    assert text.code == 2 and "Traceback" not in text.out + text.err
    heads = [line.split(" ", 1)[0] for line in text.out.splitlines() if not line.startswith(" ")]
    assert heads.count("ERROR") + heads.count("FAIL") == len(EXPECTED) + len(generated) - 1, text.out[-3000:]
    assert heads.count("PASS") == 2


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 70), 1 << 70),
    st.floats(),
    st.text(max_size=30),
    st.sampled_from(
        [
            "",
            "0" * 32,
            "ab" * 16,
            "AB" * 16,
            "00" * 8,
            "-1",
            "18446744073709551616",
            "NaN",
            "Infinity",
            "1e400",
            "AAAA",
            "\x00",
            "\ud800",
            "../../etc/passwd",
            "1.1",
            "2.0",
            "mock",
            "live",
            "output",
            *SQLISH,
        ]
    ),
)
JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


def _paths(tree: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(tree, dict):
        for key, value in tree.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            out += _paths(value, (*prefix, index))
    return out


def _mutated(tree: Any, path: tuple[Any, ...], op: str, value: Any) -> Any:
    tree = json.loads(json.dumps(tree))
    if not path:
        return value
    parent = tree
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "wrap":
        parent[last] = [parent[last]]
    else:
        parent[last] = value
    return tree


@pytest.mark.hypothesis  # its property runs inside: `make fuzz` selects it by this marker
def test_generated_json_is_a_case_error_or_a_case(world: dict[str, Any]) -> None:
    document = world["document"]

    @fuzz(300)
    @given(
        field=st.sampled_from(
            ["name", "entrypoint", "mode", "expect", "convention", "source", "trace", "otel_replay_case", None]
        ),
        value=JSON,
    )
    def check(field: str | None, value: Any) -> None:
        doc = value if field is None else {**document, field: value}
        try:
            case = parse_case(doc)
        except CaseError as exc:
            assert str(exc) and "\n" not in str(exc)
        else:
            assert case.spans and case.trace_id
        try:
            from_otlp_json(value)
        except OtlpJsonError as exc:
            assert str(exc)

    check()


@pytest.mark.hypothesis  # its property runs inside: `make fuzz` selects it by this marker
def test_mutated_real_case_files_load_or_fail_with_one_clear_error(world: dict[str, Any], tmp_path: Path) -> None:
    """A real case file with one value replaced, deleted or wrapped anywhere in it, or its bytes cut, spliced
    with NULs or invalid UTF-8: reading is a Case or a CaseError; running a case that reads always ends in a
    result (passed, failed or error), never an exception."""
    document = world["document"]
    paths = _paths(document)
    text = dumps_case(document).encode()
    ran = {"passed": 0, "failed": 0, "error": 0}

    @fuzz(120)
    @given(
        path=st.sampled_from(paths),
        op=st.sampled_from(["replace", "delete", "wrap"]),
        value=JSON,
        cut=st.none() | st.tuples(st.integers(0, len(text)), st.sampled_from([b"", b"\x00", b"\xff\xfe", b'"', b"]"])),
    )
    def check(path: tuple[Any, ...], op: str, value: Any, cut: tuple[int, bytes] | None) -> None:
        file = tmp_path / "mutated.case.json"
        if cut is None:
            try:
                file.write_text(
                    json.dumps(_mutated(document, path, op, value)), encoding="utf-8", errors="surrogatepass"
                )
            except (TypeError, IndexError, KeyError):
                return
        else:
            file.write_bytes(text[: cut[0]] + cut[1] + text[cut[0] + 3 :])
        try:
            case = load_case(file)
        except CaseError as exc:
            assert str(exc) and "\n" not in str(exc)
            return
        if sum(ran.values()) < 40:  # replaying costs more than reading: enough of them to see every outcome
            result = run_case(case)
            assert result.status in ran, result
            ran[result.status] += 1

    check()
    assert ran["passed"] and ran["failed"] + ran["error"], ran


# ================================================================================================== paths


def test_path_looking_case_arguments_never_read_or_hang(at_world: dict[str, Any]) -> None:
    work = at_world["work"]
    good = at_world["case_file"]
    folder = work / "odd"
    folder.mkdir()
    (folder / "dir.case.json").mkdir()
    os.mkfifo(folder / "fifo.case.json")
    os.symlink(folder / "self.case.json", folder / "self.case.json")
    os.symlink(folder, folder / "loop")
    (folder / "good.case.json").write_bytes(good.read_bytes())
    # a folder holding a directory, a FIFO and a symlink loop named like case files, and a symlinked folder
    # pointing at itself: only the real case file runs, nothing blocks on the FIFO or loops
    result = cli("case", "run", str(folder), "--json")
    assert result.code == 0, result.err
    assert [Path(c["path"]).name for c in json.loads(result.out)["cases"]] == ["good.case.json"]

    assert_one_error_line(cli("case", "run", "../../etc/passwd-not-here"), "no such file or folder")
    assert_one_error_line(cli("case", "run", str(folder / "self.case.json")), "no such file or folder")
    assert_one_error_line(cli("case", "run", str(folder / "dir.case.json")), "no case files")
    assert_one_error_line(cli("case", "run", "a\x00b.case.json"), "no such file or folder")
    long = cli("case", "run", "x" * 5000 + ".case.json")
    assert_one_error_line(long, "cannot be read")
    assert len(long.err) < 600
    for target in (str(folder / "fifo.case.json"), "/etc/passwd", "/dev/null"):
        ran = cli("case", "run", target)  # read as a case file, or refused; never a hang or a traceback
        assert ran.code == 2 and "ERROR" in ran.out and "Traceback" not in ran.out + ran.err, ran


def test_case_export_writes_only_where_it_is_told(at_world: dict[str, Any]) -> None:
    work, good = at_world["work"], at_world["good"]
    outside = work.parent / "outside"
    outside.mkdir()
    before = world_state(at_world)

    # a name is never a path: traversal, separators, control characters and overlong names are refused
    for name in ("../../evil", "..\\evil", "a/b", "a\x00b", "a\nb", "\x1b[2J", "n" * 300):
        assert_one_error_line(cli("case", "export", good, "--name", name), "case name")
    assert not list(work.iterdir()) and not list(work.parent.glob("*evil*"))
    assert not list(work.parent.parent.glob("*evil*"))

    # a directory in the way stays a directory, with or without --force
    (work / "d.case.json").mkdir()
    assert_one_error_line(cli("case", "export", good, "-o", "d.case.json"), "--force")
    assert cli("case", "export", good, "-o", "d.case.json", "--force").code == 2
    assert (work / "d.case.json").is_dir() and not list((work / "d.case.json").iterdir())

    # a symlink in the way is replaced itself: the file it points to is never written through it
    victim = outside / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, work / "link.case.json")
    assert cli("case", "export", good, "-o", "link.case.json", "--force").code == 0
    assert victim.read_text() == "keep me" and not (work / "link.case.json").is_symlink()
    os.symlink(outside / "created.case.json", work / "dangling.case.json")
    assert cli("case", "export", good, "-o", "dangling.case.json").code == 0
    assert not (outside / "created.case.json").exists()
    assert load_case(work / "dangling.case.json").trace_id == good

    # -o with a path is the user's choice and is honoured as given; nothing else is written
    assert cli("case", "export", good, "-o", "../outside/chosen.case.json").code == 0
    assert sorted(p.name for p in outside.iterdir()) == ["chosen.case.json", "victim.txt"]
    assert sorted(p.name for p in work.iterdir()) == ["d.case.json", "dangling.case.json", "link.case.json"]
    assert not list(work.rglob(".*.tmp"))
    assert world_state(at_world) == before


def test_a_hostile_agent_name_never_becomes_a_path(at_world: dict[str, Any]) -> None:
    """The default case file name comes from the agent's name: path characters and control characters are
    replaced, and a very long name is cut, so the file lands in the working folder."""
    with Store.open(home=at_world["home"]) as store:
        spans = store.load_spans(at_world["good"])
        hostile = "../../" + "evil\x00\n\x1b[31m" * 40
        trace_id = hashlib.sha256(b"hostile agent name").hexdigest()[:32]
        store.insert_spans(
            [
                replace(
                    s,
                    trace_id=trace_id,
                    span_attributes={
                        **s.span_attributes,
                        **(
                            {semconv.GEN_AI_AGENT_NAME: hostile}
                            if semconv.GEN_AI_AGENT_NAME in s.span_attributes
                            else {}
                        ),
                    },
                )
                for s in spans
            ]
        )
    result = cli("case", "export", trace_id, "--json")
    assert result.code == 0, result.err
    (written,) = at_world["work"].iterdir()
    assert written.name.endswith(f"-{trace_id[:12]}.case.json") and len(written.name) < 120
    assert set(written.name) <= set(string.ascii_letters + string.digits + "_.-")
    assert json.loads(result.out)["path"] == written.name


# ==================================================================================== convention versions


@pytest.mark.parametrize(
    "version",
    [
        pytest.param(v, id=i)
        for v, i in zip(VERSIONS, ["old", "future", "empty", "words", "sql", "superscript", "5000-digits"])
    ],
)
def test_unknown_convention_versions_show_but_never_replay_or_export(at_world: dict[str, Any], version: str) -> None:
    trace_id = at_world["versions"][version]
    before = world_state(at_world)
    shown = cli("show", trace_id, "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["schema_version"] == version
    assert cli("show", trace_id).code == 0
    assert_one_error_line(cli("replay", trace_id, "--mode", "mock"), "convention")
    assert_one_error_line(cli("case", "export", trace_id, "-o", "x.case.json"), "convention")
    assert not (at_world["work"] / "x.case.json").exists()
    document = json.loads(
        json.dumps(at_world["document"]).replace(json.dumps(semconv.SCHEMA_VERSION), json.dumps(version))
    )
    (at_world["work"] / "v.case.json").write_text(json.dumps(document), encoding="utf-8")
    ran = cli("case", "run", "v.case.json")
    assert ran.code == 2 and "ERROR" in ran.out and VERSIONS[version] in ran.out, ran
    assert "Traceback" not in ran.out + ran.err
    assert world_state(at_world) == before


# ============================================================================================= trace ids

HOSTILE_IDS = {
    "sql": "' OR 1=1 --",
    "sql-after-hex": "0af7651916cd43dd8448eb211c80319c' OR '1'='1",
    "drop": "'; DROP TABLE otel_traces; --",
    "fullwidth-digits": "\uff10\uff41\uff46\uff17" * 8,
    "dotted-i": "\u0130" * 32,
    "sharp-s": "\u00df" * 32,
    "emoji": "\U0001f600" * 32,
    "ten-thousand": "a" * 10_000,
    "inner-space": "0af7651916cd43dd 8448eb211c80319c",
    "zeros": "0" * 32,
    "empty": "",
    "dash": "-1",
    "short": "abc",
    "nul": "0af7651916cd43dd8448eb211c80319\x00",
}
COMMANDS = {
    "show": lambda tid, good: ["show", tid],
    "replay": lambda tid, good: ["replay", tid, "--mode", "mock"],
    "diff-a": lambda tid, good: ["diff", tid, good],
    "diff-b": lambda tid, good: ["diff", good, tid],
    "case-export": lambda tid, good: ["case", "export", tid, "-o", "out.case.json"],
    "replay-tool": lambda tid, good: ["replay-tool", tid, "--step", "0"],
}


def test_hostile_trace_ids_are_one_error_line_in_every_command_and_change_nothing(at_world: dict[str, Any]) -> None:
    good = at_world["good"]
    before = world_state(at_world)
    for name, trace_id in HOSTILE_IDS.items():
        for command, args in COMMANDS.items():
            result = cli(*args(trace_id, good))
            assert_one_error_line(result)
            assert len(result.err) < 400, (name, command, result.err)
            if name not in ("dash", "empty"):  # an id that reads as an option is a usage error
                assert "trace id" in result.err, (name, command, result.err)
    for args in COMMANDS.values():  # well formed, but no such run
        assert_one_error_line(cli(*args("f" * 32, good)), "f" * 32)
    assert not list(at_world["work"].iterdir())
    assert world_state(at_world) == before


def test_trace_ids_are_read_case_and_space_insensitively(at_world: dict[str, Any]) -> None:
    """Uppercase hex and surrounding whitespace are the same id (as copied from another tool); inner
    whitespace is not."""
    good = at_world["good"]
    expected = cli("show", good, "--json")
    for spelling in (good.upper(), f"  {good}\n", good[:8].upper() + good[8:]):
        shown = cli("show", spelling, "--json")
        assert shown.code == 0 and json.loads(shown.out) == json.loads(expected.out)
    assert cli("diff", good.upper(), good).code == 0


def test_an_all_zero_trace_id_is_refused_by_name_by_the_console_command(tmp_path: Path) -> None:
    """W3C Trace Context: an all-zero trace id is invalid. It is 32 hexadecimal characters, so the refusal says
    what is wrong with it instead of asking for 32 hexadecimal characters."""
    zeros = "0" * 32
    env = {**os.environ, "OTEL_REPLAY_HOME": str(tmp_path / "home")}
    env.pop("OTEL_REPLAY_STORE", None)
    for args in (["show", zeros], ["diff", zeros, "f" * 32], ["replay", " " + zeros.upper() + "\n", "--mode", "mock"]):
        done = subprocess.run(
            [sys.executable, "-m", "otel_replay.cli", *args], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.splitlines() == [f"error: trace id {zeros} is invalid: all zeros is not a trace id"], args
        assert done.stdout == ""


# =================================================================================================== CLI

ARG_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"), max_size=40
).filter(lambda s: s.strip(".") != "")
OPTIONS = st.sampled_from(
    [
        ["--json"],
        ["--limit", "0"],
        ["--limit", "-1"],
        ["--limit", "99999999999999999999"],
        ["--limit", "1e3"],
        ["--limit", "NaN"],
        ["--step", "-5"],
        ["--step", "99999999999999999999"],
        ["--from-step", "-3"],
        ["--mode", "live"],
        ["--mode", "LIVE"],
        ["--mode", ""],
        ["--expect", "vibes"],
        ["--kind", "x"],
        ["--status", "' OR 1=1"],
        ["--args", "[1]"],
        ["--args", "{"],
        ["--args", '{"a": NaN}'],
        ["--store", "ftp://x"],
        ["--store", "chdb://relative/path"],
        ["--store", "chdb:///dev/null/x"],
        ["--app", "../../x:f"],
        ["--unknown-flag"],
        ["-x"],
        ["--"],
        ["--help"],
        ["--approve"],
        ["--reason", "\n\n"],
        ["--name", "../x"],
    ]
)
COMMAND_NAMES = st.sampled_from(
    [
        ["show"],
        ["replay"],
        ["diff"],
        ["case", "export"],
        ["replay-tool"],
        ["runs"],
        ["audit"],
        ["case", "run"],
        ["replay-session"],
        ["case"],
        ["db"],
        ["nope"],
        [],
    ]
)


@pytest.mark.hypothesis  # its property runs inside: `make fuzz` selects it by this marker
def test_generated_command_lines_never_print_a_traceback(at_world: dict[str, Any]) -> None:
    """Any command with any mix of hostile arguments and options: exit 0, 1 or 2; an exit 2 is one ``error:``
    line; never a traceback. (NUL bytes cannot pass through argv and are left out.)"""
    before = world_state(at_world)
    codes: dict[int | str, int] = {}

    @fuzz(120)
    @given(
        command=COMMAND_NAMES,
        words=st.lists(ARG_TEXT | st.sampled_from(list(HOSTILE_IDS.values())[:-1]), max_size=3),
        options=st.lists(OPTIONS, max_size=3),
    )
    def check(command: list[str], words: list[str], options: list[list[str]]) -> None:
        args = [*command, *words, *(o for option in options for o in option)]
        result = cli(*args)
        codes[result.code] = codes.get(result.code, 0) + 1
        assert result.code in (0, 1, 2), (args, result)
        assert "Traceback" not in result.out + result.err, (args, result.err[-3000:])
        if result.code == 2:
            lines = result.error_lines()
            assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.err[-3000:])

    check()
    assert codes.get(2, 0) > 50, codes
    assert world_state(at_world) == before


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "--limit", "99999999999999999999"],
        ["runs", "--limit", "-1"],
        ["runs", "--limit", "0"],
        ["audit", "--limit", "99999999999999999999"],
        ["audit", "--limit", "4294967296"],
        ["audit", "--limit", "-5"],
        ["replay-tool", "f" * 32, "--step", "-1"],
        ["replay-tool", "f" * 32, "--step", "99999999999999999999999"],
        ["replay", "f" * 32, "--mode", "mock", "--from-step", "-1"],
        ["runs", "--bogus"],
        ["show"],
        ["case", "run"],
        ["replay-session", "'; DROP TABLE otel_traces; --", "--mode", "mock"],
        ["replay-session", "", "--mode", "mock"],
        ["replay-tool", "f" * 32, "--step", "0", "--args", "[" * 100_000],
        ["replay-tool", "f" * 32, "--step", "0", "--args", json.dumps({"a": "x" * (10 * MIB)})],
    ],
    ids=lambda a: " ".join(a)[:40] if isinstance(a, list) else None,
)
def test_out_of_range_numbers_and_unknown_flags_are_one_error_line(at_world: dict[str, Any], args: list[str]) -> None:
    assert_one_error_line(cli(*args))


def test_the_installed_command_prints_one_line_for_bad_input(world: dict[str, Any], tmp_path: Path) -> None:
    """The same promises from the command's entry point in a fresh interpreter, with no test harness capturing
    its logs or output: a SQL-looking trace id, a runaway limit, a hostile case file, an unknown flag."""
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(world["home"]),
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG"):
        env.pop(name, None)
    script = (
        "import sys\nfrom otel_replay.cli import main\nfor args in [['show', \"' OR 1=1 --\"], "
        "['runs', '--limit', '99999999999999999999'], ['case', 'run', sys.argv[1]], ['show', '--what']]:\n"
        "    sys.argv = ['otel-replay', *args]\n"
        "    try:\n        main()\n    except SystemExit as exc:\n        print('exit', exc.code)\n"
        "    sys.stderr.write('--\\n')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(CORPUS / "name-nul.case.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.stdout.count("exit 2") == 4, out
    blocks = out.stderr.split("--\n")[:4]
    assert all(len([x for x in b.splitlines() if x.strip()]) <= 1 for b in blocks), out.stderr
    assert "Traceback" not in out.stdout + out.stderr


def test_a_limit_past_uint32_is_refused_or_honoured_never_wrapped(fresh_store: tuple[Store, str, Any]) -> None:
    store, good, _ = fresh_store
    try:
        rows = store.run_rows(limit=2**32)
    except ValueError:
        return
    assert [r.trace_id for r in rows] == [good]


# ============================================================================================= redaction

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "_-"
UPPER_DIGITS = string.ascii_uppercase + string.digits


def _token(alphabet: str, low: int, high: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=low, max_size=high)


SHAPED_SECRETS = st.one_of(
    _token(ALNUM, 32, 48).map(lambda t: "sk-" + t),
    _token(ALNUM, 24, 40).map(lambda t: "sk-proj-" + t),
    _token(B64URL, 24, 48).map(lambda t: "sk-ant-api03-" + t),
    _token(UPPER_DIGITS, 16, 16).map(lambda t: "AKIA" + t),
    _token(UPPER_DIGITS, 16, 16).map(lambda t: "ASIA" + t),
    _token(ALNUM, 36, 44).map(lambda t: "ghp_" + t),
    _token(ALNUM + "_", 22, 40).map(lambda t: "github_pat_" + t),
    _token(ALNUM + "-", 10, 40).map(lambda t: "xoxb-" + t),
    _token(B64URL, 35, 35).map(lambda t: "AIza" + t),
    _token(ALNUM, 16, 32).map(lambda t: "sk_live_" + t),
    st.tuples(_token(B64URL, 6, 30), _token(B64URL, 6, 30), _token(B64URL, 0, 40)).map(
        lambda p: f"eyJ{p[0]}.{p[1]}.{p[2]}"
    ),
)
"""Secrets by their shape (docs/redaction.md, "Detection by value shape"), with random bodies."""

PROSE = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
SEPARATORS = st.sampled_from([" ", "\n", "\t", ", ", ": ", "(", ")", "[", "]", '"', "'", "=", "; ", " - ", "é "])
"""What may stand right before or after a secret in prose. Letters, digits, '_' and '-' glued to a token make a
longer word that is no longer that token (the documented boundary rule); these are everything else typical."""


def _distinctive(secret: str) -> list[str]:
    """The parts of a secret that must not survive: the whole, and its random body when it is long enough."""
    body = secret.split("_", 1)[-1] if secret.startswith(("ghp_", "github_pat_", "sk_live_")) else secret[4:]
    return [secret] + ([body] if len(body) >= 16 else [])


def _prose_as_recorded(planted: list[tuple[str, ...]]) -> str:
    """Every form in which a run records the planted texts with their secrets cut out: each text, the texts as
    :func:`planted_agent` joins them, each of those as a JSON string (with and without ``ensure_ascii``). A piece
    of a secret found here is made by the prose around the secret, not by the secret: a NUL character followed by
    twelve zeros in the prose is a JSON escape and twelve zeros in a payload, sixteen zeros in a row."""
    texts = ["".join((parts[0], parts[1], " ", parts[3], parts[4])) for parts in planted]
    forms: list[str] = []
    for text in (*texts, " ".join(texts), " | ".join(texts), "\n".join(texts)):
        forms += [text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]]
    return "\n".join(forms)


@orp.tool("lookup", risk="read")
def lookup_tool(query: str, headers: dict[str, Any], options: Any = None) -> dict[str, Any]:
    return {"found": query, "headers_seen": len(headers)}


@orp.model("planner", provider="scripted", model="scripted-1")
def planner_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    # the request quoted whole: a cut could leave a planted secret's body in a shape no rule knows (a token one
    # character short), which the leak check below would count against the recorder
    return {"text": "plan: " + messages[-1]["content"], "usage": {"input_tokens": 7, "output_tokens": 3}}


@orp.agent("planted-agent")
def planted_agent(question: str, *, planted: list[str], fail: bool = True) -> dict[str, Any]:
    """Puts every planted string in every place a run records: input, state, context, tool arguments and
    result, model request and response, an attached file, and the exception the run ends with."""
    orp.record_state({"notes": planted, "last": planted[-1]})
    orp.record_context(system_rules=" ".join(planted), memory={"items": planted})
    for text in planted:
        lookup_tool(text, {"X-Trace": text}, options=[text])
        planner_model([{"role": "user", "content": text}])
    orp.attach_file("\n".join(planted).encode(), name="notes.txt")
    if fail:
        raise RuntimeError("could not finish: " + " | ".join(planted))
    return {"answer": planted[0]}


@fuzz(150)
@given(planted=st.lists(st.tuples(PROSE, SEPARATORS, SHAPED_SECRETS, SEPARATORS, PROSE), min_size=1, max_size=4))
@example(planted=[("\x00" + "0" * 12, " ", "AKIA" + "0" * 16, " ", "")])  # the body's zeros stand in the escaped prose
def test_secret_shapes_inside_prose_never_survive_recording(
    planted: list[tuple[str, ...]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Secret-shaped tokens with random bodies inside random prose, in every place a run records: the spans as
    the store would hold them keep neither a whole secret nor its body; the prose around it survives.

    A piece of a secret counts as leaked only when the prose, in every form a run records it (as it is, joined,
    as a JSON string), does not hold it too: Hypothesis mixes constants of the package's imported modules into
    its draws (unless tests/conftest.py pins them), so the examples of a seed may differ with the tests that ran
    before in the process, and a check that depends on which prose was drawn fails by luck."""
    texts = ["".join(parts) for parts in planted]
    secrets_ = [parts[2] for parts in planted]
    home = tmp_path_factory.getbasetemp() / "shapes-home"
    outcome, records = records_of(lambda: planted_agent("q", planted=texts), home)
    assert isinstance(outcome, RuntimeError)
    assert any(s.span_name.startswith(semconv.SPAN_AGENT) for s in records)
    recorded = everything(records)
    prose = _prose_as_recorded(planted)
    for secret in secrets_:
        for piece in _distinctive(secret):
            if piece not in prose:  # (a piece the prose happens to hold is the prose's, not the secret's)
                at = recorded.find(piece)
                assert at < 0, f"{piece[:12]}… survived: {recorded[max(at - 200, 0) : at + 200]!r}"
    for words in (p for parts in planted for p in (parts[0], parts[4])):
        if len(words) > 20 and words.isalpha():
            assert json.dumps(words)[1:-1] in recorded or words in recorded


LOOKALIKES = [
    "sk-learn is the usual import name for scikit-learn",
    "sk- is followed by prose here, not by a key",
    "ghp_ is how GitHub tokens start; AKIA is how AWS key ids start",
    "see https://docs.example.com/api-keys for how to make a key",
    "my password is in the vault, ask the on-call",
    "The bearer of this letter is a friend.",
    "Authorization is required for this endpoint",
    "eyJhbGciOiJIUzI1NiJ9 is only a JWT header",
    "used 1234 tokens of a 4096 token budget",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it",
    "request 550e8400-e29b-41d4-a716-446655440000",
    "order ORD-4111111111111111 and card 4111 1111 1111 1112",
    "desk-organizer-with-long-descriptive-slug",
    "-----BEGIN PUBLIC KEY----- is not a secret",
    "the key: value pairs of the config",
]
"""Text that looks like a secret but, by the documented rules, is none: every one is kept as it is."""
SAFE_KEYS = {
    "max_tokens": 4096,
    "input_tokens": 11,
    "tokenizer": "cl100k_base",
    "token_count": 3,
    "secret_name": "prod/db",
    "password_min_length": 12,
    "token_url": "https://auth.example.com/token",
}


def test_lookalikes_the_rules_keep_survive_a_recorded_run(tmp_path: Path) -> None:
    outcome, records = records_of(lambda: planted_agent("q", planted=LOOKALIKES, fail=False), tmp_path)
    assert outcome == {"answer": LOOKALIKES[0]}
    runs_ = [r for r in records if r.span_name.startswith(semconv.SPAN_AGENT)]
    assert runs_
    from otel_replay.runs import build_run

    run = build_run(records)
    assert sum(s.redactions for s in run.timeline) == 0
    recorded = json.dumps(run.to_dict(), ensure_ascii=False)
    for text in LOOKALIKES:
        assert json.dumps(text, ensure_ascii=False)[1:-1] in recorded, text
    outcome, records = records_of(lambda: safe_keys_agent(SAFE_KEYS), tmp_path)
    run = build_run(records)
    assert run.steps[0].snapshots["tool"]["arguments"]["headers"] == SAFE_KEYS
    assert run.snapshots["input"]["args"] == [SAFE_KEYS]
    assert sum(s.redactions for s in run.timeline) == 0


@orp.agent("safe-keys")
def safe_keys_agent(config: dict[str, Any]) -> dict[str, Any]:
    return lookup_tool("q", config, options=config)


@orp.tool("call_service", risk="read")
def call_service(url: str, headers: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return {"status": 200, "echo": headers.get("Authorization", "")}


@orp.agent("quiet-secrets", config={"database": {"password": "placeholder"}})
def quiet_secrets_agent(question: str, *, credentials: dict[str, Any], secrets_: dict[str, str]) -> dict[str, Any]:
    """Holds secrets that do not look like secrets, everywhere a run records them."""
    s = secrets_
    orp.record_state({"db_password": s["plain"], "log": f"connecting to postgres://app:{s['url_password']}@db/x"})
    orp.record_context(system_rules=f"use AWS key {s['aws']} for the bucket", memory={"session_id": s["plain"]})
    call_service(
        f"https://app:{s['url_password']}@api.example.test/v1",
        {"Authorization": f"Bearer {s['bearer']}", "X-Api-Key": s["plain"], "Cookie": f"sid={s['plain']}"},
        {"jwt": s["jwt"], "note": f"the key block is\n{s['pem']}\n", "pwd": s["plain"]},
    )
    planner_model(
        [
            {
                "role": "user",
                "content": f'log line: {{"client_secret": "{s["long"]}"}} and Authorization: Basic {s["basic"]}',
            }
        ]
    )
    orp.attach_file(f"password={s['plain']}\n{s['pem']}\n".encode(), name="env.txt")
    raise PermissionError(f"login failed for password={s['plain']} with token {s['jwt']}")


QUIET = st.fixed_dictionaries(
    {
        "plain": _token(string.ascii_lowercase, 10, 14).map(lambda w: f"{w}-garden"),
        "url_password": _token(ALNUM, 12, 20),
        "bearer": _token(ALNUM, 24, 32),
        "basic": _token(ALNUM, 20, 28),
        "aws": _token(UPPER_DIGITS, 16, 16).map(lambda t: "AKIA" + t),
        "jwt": st.tuples(_token(B64URL, 12, 20), _token(B64URL, 12, 20), _token(B64URL, 20, 40)).map(
            lambda p: f"eyJ{p[0]}.eyJ{p[1]}.{p[2]}"
        ),
        "pem": _token(ALNUM, 64, 64).map(
            lambda b: f"-----BEGIN RSA PRIVATE KEY-----\n{b}\n-----END RSA PRIVATE KEY-----"
        ),
        "long": _token(ALNUM, 600, 700),
    }
)
"""Secrets whose value has no shape of its own: caught only by where they stand (a secret key, a URL's
userinfo, an Authorization header, ``password=``), plus tokens with a shape inside prose, a key block and a
quoted secret longer than any cap."""


def _quiet_pieces(secrets_: dict[str, str]) -> list[str]:
    pieces = [v for k, v in secrets_.items() if k != "pem"]
    return [*pieces, secrets_["pem"].splitlines()[1], secrets_["long"][-40:]]


def test_secrets_that_do_not_look_like_secrets_never_reach_spool_store_output_or_cases(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = iter(range(100))

    @fuzz(2)
    @given(secrets_=QUIET)
    def check(secrets_: dict[str, str]) -> None:
        where = home / f"run-{next(counter)}"
        monkeypatch.setenv("OTEL_REPLAY_HOME", str(where))
        monkeypatch.chdir(home)
        orp.configure(home=where, exporter="spool")
        with pytest.raises(PermissionError):
            quiet_secrets_agent(
                "q", credentials={"password": secrets_["plain"], "nested": {"token": 12345678}}, secrets_=secrets_
            )
        orp.flush()
        pieces = _quiet_pieces(secrets_)

        def clean(blob: bytes | str, what: str) -> None:
            data = blob.encode() if isinstance(blob, str) else blob
            for piece in pieces:
                assert piece.encode() not in data, f"{piece[:10]}… leaked into {what}"

        spool = b"".join(p.read_bytes() for p in (where / "spool").rglob("*") if p.is_file())
        assert spool
        clean(spool, "the spool")
        with Store.open(home=where) as store:
            (summary,) = store.runs()
            clean(repr(store.client.query("SELECT * FROM otel_traces").result_rows), "the store")
        trace_id = summary.trace_id
        outputs = {
            args: cli(*args)
            for args in (
                ("runs", "--json"),
                ("show", trace_id),
                ("show", trace_id, "--json"),
                ("case", "export", trace_id, "-o", "-"),
                ("case", "export", trace_id, "-o", str(where / "c.case.json")),
            )
        }
        for args, result in outputs.items():
            assert result.code == 0, (args, result.err)
            clean(result.out + result.err, " ".join(args))
        shown = json.loads(outputs[("show", trace_id, "--json")].out)
        assert sum(step["snapshots"] != {} for step in shown["steps"]) == 2
        for path in where.rglob("*"):
            if path.is_file():
                clean(path.read_bytes(), str(path.relative_to(where)))
        assert load_case(where / "c.case.json").trace_id == trace_id

    check()


# ========================================================================================== hostile values


class Unprintable:
    """repr, str, eq and hash all raise."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no eq")

    def __hash__(self) -> int:
        raise RuntimeError("no hash")


class Unstringable(str):
    def __str__(self) -> str:
        raise RuntimeError("no str")


class Everything:
    """Answers every attribute with itself, and is callable (a mock gone wild)."""

    def __getattr__(self, name: str) -> Any:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self


class EndlessList(list):
    def __iter__(self) -> Iterator[Any]:
        while True:
            yield self


class EndlessDict(dict):
    def items(self) -> Any:
        while True:
            yield "k", 1


class LyingMapping(dict):
    def items(self) -> Any:
        raise RuntimeError("no items")


class BadException(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")

    __repr__ = __str__


def _cyclic_list() -> list[Any]:
    items: list[Any] = [1]
    items.append(items)
    return items


def _cyclic_dict() -> dict[str, Any]:
    mapping: dict[str, Any] = {"a": 1}
    mapping["self"] = {"parent": mapping}
    return mapping


def _deep(depth: int, kind: type) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value] if kind is list else {"k": value}
    return value


HOSTILE_VALUES: dict[str, Callable[[], Any]] = {
    "unprintable": Unprintable,
    "unstringable-str": lambda: Unstringable("text"),
    "everything": Everything,
    "cyclic-list": _cyclic_list,
    "cyclic-dict": _cyclic_dict,
    "deep-list-10k": lambda: _deep(10_000, list),
    "deep-dict-10k": lambda: _deep(10_000, dict),
    "invalid-utf8": lambda: b"\xff\xfe\xc3\x28\x00" * 1000,
    "nul": lambda: {"k\x00ey": "va\x00lue", "\x00": ["\x00" * 100]},
    "surrogates": lambda: {"name": "\ud800\udfff", "\udc80": "x"},
    "odd-keys": lambda: {None: 1, (1, 2): 2, 3.5: 3, frozenset({1}): 5, b"\xff": 6, Everything(): 7},
    "huge-int": lambda: 10**5000,
    "non-finite": lambda: [math.nan, math.inf, -math.inf, complex(math.nan, math.inf)],
    "endless-list": lambda: EndlessList([1, 2]),
    "endless-dict": lambda: EndlessDict(a=1),
    "lying-mapping": lambda: LyingMapping(a=1),
    "generator": lambda: (i for i in iter(int, 1)),
    "exception": lambda: BadException("x"),
    "type": lambda: type,
    "module": lambda: sys,
}


@orp.tool("hostile_tool", risk="read")
def hostile_tool(value: Any) -> Any:
    return value


@orp.model("hostile_model", provider="scripted", model="scripted-1")
def hostile_model(messages: Any) -> Any:
    return {"text": "ok", "echo": messages}


@orp.retriever("hostile_retriever")
def hostile_retriever(query: Any) -> Any:
    return [query, {"content": query, "id": query, "score": query}]


@orp.agent("hostile-agent")
def hostile_agent(value: Any, *, raise_it: BaseException | None = None) -> Any:
    orp.record_state(value, step_state={"v": value}, transition=value)
    orp.record_context(system_rules=value, memory=value, history=[value])
    back = hostile_tool(value)
    hostile_model([{"role": "user", "content": value}])
    hostile_retriever(value)
    orp.record_safety(value)
    if raise_it is not None:
        raise raise_it
    return back


HANG_S = (
    600  # a bound against a hang (an endless loop fails the test instead of stalling the suite), never a speed check
)


def _call_with_deadline(function: Callable[[], Any], seconds: float = HANG_S) -> Any:
    """``function()`` in a thread; fails the test (instead of hanging it) if it does not return in time.

    The thread runs in a copy of the caller's context, so it records under the runtime of the caller's
    ``capture()`` block (a runtime is active in a context, not process-wide)."""
    import contextvars
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = function()
        except BaseException as exc:  # noqa: BLE001 - compared by the caller
            box["raised"] = exc

    thread = threading.Thread(target=contextvars.copy_context().run, args=(target,), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "raised" in box:
        raise box["raised"]
    return box["value"]


@pytest.mark.parametrize("name", list(HOSTILE_VALUES))
def test_hostile_values_never_change_what_the_agent_returns(name: str, tmp_path: Path) -> None:
    """Every hostile value through an agent, a tool, a model, a retriever, state, context and safety: the agent
    returns the very object the tool returned, nothing leaks from the telemetry path, and the run is still
    recorded (with the value's encoding, a tag or a marker where it could not be kept)."""
    value = HOSTILE_VALUES[name]()
    with capture(home=tmp_path) as recorded:
        returned = _call_with_deadline(lambda: hostile_agent(value))
        assert returned is value
        (run,) = recorded.runs()
    assert [s.kind for s in run.steps] == ["tool", "model", "retrieval"]
    assert run.status == "ok" and {"input", "state", "context", "output"} <= set(run.snapshots)


@orp.agent("big-agent")
def big_agent(text: str) -> str:
    return hostile_tool(text)


def test_a_ten_mib_argument_with_a_secret_at_its_end_is_recorded_truncated_and_redacted(tmp_path: Path) -> None:
    """10 MiB is over the snapshot cap: the payloads become truncation markers (with a preview), the agent
    gets its value back, and the secret at the end is nowhere in the run."""
    text = "x" * (10 * MIB) + " " + API_KEY
    with capture(home=tmp_path) as recorded:
        assert _call_with_deadline(lambda: big_agent(text)) is text
        (run,) = recorded.runs()
    shown = json.dumps(run.to_dict())
    assert API_KEY not in shown and "Bq47Bq47" not in shown
    assert run.steps[0].snapshot_list[0].truncated and run.snapshot_list[0].truncated
    assert len(shown) < MIB


CUT_CAP = 8000  # OTEL_REPLAY_SNAPSHOT_MAX_BYTES of the test below: strings over CUT_CAP + CUT_MARGIN are cut
LONG_SECRET = "sk-live-" + "Bq47" * 1000  # 4,008 characters that become one short inline token


@pytest.mark.parametrize(
    "filler",
    [
        pytest.param("x", id="clean"),  # the kept head stays over the cap: the payload is a truncation marker
        pytest.param(LONG_SECRET + " ", id="secrets"),  # redaction shrinks the kept head under the cap: stored whole
    ],
)
@pytest.mark.parametrize(
    "at",
    [
        CUT_CAP - len(API_KEY) // 2,  # straddling the end of the kept head
        CUT_CAP + CUT_MARGIN - len(API_KEY) + 1,  # its last character past the scanned part
        CUT_CAP + CUT_MARGIN - len(API_KEY) // 2,  # straddling the end of the scanned part
        CUT_CAP + CUT_MARGIN - 11,  # only "sk-live-Bq4" scanned: too short for any rule
        CUT_CAP + CUT_MARGIN - 1,  # only "s" scanned
    ],
)
def test_a_secret_straddling_where_a_long_string_is_cut_leaves_no_recognisable_part(
    filler: str, at: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A string too long for any payload is scanned only up to the cap plus a margin before it is cut: a secret
    (API_KEY at ``at``) lying across the kept head's end or across the scanned part's end is in no span in any
    part ("sk-live", "Bq47"), also when the secrets before it shrink the kept head so much that the payload is
    stored whole; the agent still gets its value back, and values that differ only past the cut are recorded as
    different."""
    monkeypatch.setenv("OTEL_REPLAY_SNAPSHOT_MAX_BYTES", str(CUT_CAP))
    size = CUT_CAP + CUT_MARGIN + 5000
    before = filler * ((at - 1) // len(filler)) + " " * ((at - 1) % len(filler) + 1)
    text = (before + API_KEY + " " + "x" * size)[:size]
    other = text[:-1] + "y"
    with capture(home=tmp_path) as recorded:
        assert big_agent(text) is text
        assert big_agent(other) is other
        stored = repr(recorded.records())
        first, second = recorded.runs()
    assert "sk-live" not in stored and "Bq47" not in stored
    if filler == "x":
        assert "x" * 100 in stored  # the head is kept (in the truncation markers' previews)
        assert first.steps[0].snapshot_list[0].truncated
    assert first.steps[0].snapshot_list[0].payload != second.steps[0].snapshot_list[0].payload


def test_an_agent_raising_an_unprintable_exception_raises_that_very_exception(tmp_path: Path) -> None:
    error = BadException()
    error.__cause__ = BadException()
    error.__cause__.__context__ = error  # a cycle of causes
    with capture(home=tmp_path) as recorded:
        with pytest.raises(BadException) as caught:
            hostile_agent("q", raise_it=error)
        (run,) = recorded.runs()
    assert caught.value is error
    assert run.status == "error"


HOSTILE_TREES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(),
        st.binary(),
        st.sampled_from([10**400, "\x00", b"\xff", math.nan, Unprintable, API_KEY]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.frozensets(st.integers()),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers(), st.none()), inner, max_size=4),
    ),
    max_leaves=15,
).map(lambda v: v() if v is Unprintable else v)


@fuzz(60)
@given(value=HOSTILE_TREES)
def test_generated_values_never_change_what_the_agent_returns(
    value: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with capture(home=tmp_path_factory.getbasetemp() / "values-home") as recorded:
        assert hostile_agent(value) is value
        (run,) = recorded.runs()
    assert run.status == "ok" and len(run.steps) == 3
    assert API_KEY not in json.dumps(run.to_dict())


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("password: see the docs", " the docs"),
        ('set api_key = "YOUR_API_KEY" in the config', " in the config"),
        ("token: abc is what the tokenizer printed", " is what the tokenizer printed"),
    ],
)
def test_documented_over_redaction_hides_only_the_assigned_word(text: str, kept: str, tmp_path: Path) -> None:
    """docs/redaction.md names these as over-redacted: the assigned word goes, the rest of the prose stays."""
    _outcome, records = records_of(lambda: planted_agent("q", planted=[text], fail=False), tmp_path)
    recorded = everything(records)
    assert json.dumps(kept)[1:-1] in recorded and "[REDACTED:secret_assignment:" in recorded
    assert json.dumps(text)[1:-1] not in recorded


def test_a_bad_spool_segment_is_one_warning_line_beside_a_command_s_one_error_line(tmp_path: Path) -> None:
    """Ingest problems are logged on the ``otel_replay.ingest`` logger; the command prints each as one
    ``warning:`` line (the user is told) and still prints exactly one ``error:`` line."""
    spool = tmp_path / "home" / "spool"
    spool.mkdir(parents=True)
    (spool / "00000000000000000001-x-1-00000001.seg").write_bytes(SEGMENT_MAGIC + b"garbage" * 4)
    env = {**os.environ, "OTEL_REPLAY_HOME": str(tmp_path / "home")}
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG"):
        env.pop(name, None)
    out = fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", "show", "f" * 32],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: no run with trace id"), out.stderr
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert warnings and all("00000001" in w for w in warnings) and len(warnings) + 1 == len(lines), out.stderr
