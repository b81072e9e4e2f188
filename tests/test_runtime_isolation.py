"""Two runtimes in one process do not see each other.

A runtime is what ``configure()`` builds (provider, pipeline, redactor, exporter, home). A block runs under
another one with ``otel_replay.runtime.active`` (or ``exporting_to`` / ``otel_replay.testing.capture``); each
runtime's store, spool or exporter gets only the spans started under it, flushing one leaves the other alone,
and a runtime made active in one context does not reach a thread that did not inherit that context.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_replay as orp
from otel_replay import runtime
from otel_replay.exporting import setup
from otel_replay.testing import capture


def _agent(name: str) -> Callable[[], str]:
    @orp.agent(name)
    def run() -> str:
        return f"{name} done"

    return run


def _agents_in(home: Path) -> list[str]:
    with orp.Store.open(home=home) as store:
        return sorted(r.agent for r in store.runs())


def _roots(exporter: InMemorySpanExporter) -> list[str]:
    return sorted(s.name for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent"))


class _CountingExporter(SpanExporter):
    """Keeps what it was given; answers FAILURE when told to (a full disk, an unreachable Collector)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.names: list[str] = []
        self.flushes = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.names.extend(s.name for s in spans)
        return SpanExportResult.FAILURE if self.fail else SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.flushes += 1
        return True


def test_two_runtimes_record_into_their_own_homes_only(home: Path, tmp_path: Path) -> None:
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    rt_a = setup.build_runtime(exporter="spool", home=home_a)
    rt_b = setup.build_runtime(exporter="spool", home=home_b)
    try:
        with runtime.active(rt_a):
            _agent("alpha")()
            assert setup.runtime() is rt_a
        with runtime.active(rt_b):
            _agent("beta")()
        _agent("default")()
    finally:
        assert setup.close(rt_a) and setup.close(rt_b)
    orp.flush()

    assert _agents_in(home_a) == ["alpha"]
    assert _agents_in(home_b) == ["beta"]
    assert _agents_in(home) == ["default"]
    assert list((home_a / "spool").iterdir()) and list((home_b / "spool").iterdir())


def test_flushing_one_runtime_leaves_the_other_alone(home: Path, tmp_path: Path) -> None:
    healthy, broken = _CountingExporter(), _CountingExporter(fail=True)
    rt_a = setup.build_runtime(exporter=healthy, home=tmp_path / "a")
    rt_b = setup.build_runtime(exporter=broken, home=tmp_path / "b")
    try:
        with runtime.active(rt_a):
            _agent("alpha")()
        with runtime.active(rt_b):
            _agent("beta")()

        assert setup.flush(rt=rt_b) is False  # its exporter failed
        assert broken.flushes == 1 and healthy.flushes == 0  # flushing b never flushed a
        assert setup.flush(rt=rt_a) is True  # b's failure is not a's
        assert healthy.flushes == 1 and broken.flushes == 1
        with runtime.active(rt_a):
            assert orp.flush() is True  # the public flush() flushes the runtime of its context
        assert broken.flushes == 1
    finally:
        setup.close(rt_a)
        setup.close(rt_b)

    assert healthy.names == ["invoke_agent alpha"]
    assert broken.names == ["invoke_agent beta"]


def test_an_active_runtime_does_not_leak_into_a_thread_that_did_not_inherit_it(home: Path, tmp_path: Path) -> None:
    default_spans, block_spans = InMemorySpanExporter(), InMemorySpanExporter()
    orp.configure(exporter=default_spans, home=home)
    block = setup.build_runtime(exporter=block_spans, home=tmp_path / "block")
    seen: dict[str, runtime.Runtime | None] = {}

    def plain() -> None:
        seen["plain"] = runtime.current()
        _agent("plain_thread")()

    def inherited() -> None:
        seen["inherited"] = runtime.current()
        _agent("inherited_thread")()

    try:
        with runtime.active(block):
            _agent("in_block")()
            context = contextvars.copy_context()
            threads = [threading.Thread(target=plain), threading.Thread(target=context.run, args=(inherited,))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        _agent("after_block")()
        assert setup.flush(rt=block) and orp.flush()
    finally:
        setup.close(block)

    assert seen["plain"] is runtime.default() and seen["inherited"] is block
    assert _roots(block_spans) == ["invoke_agent in_block", "invoke_agent inherited_thread"]
    assert _roots(default_spans) == ["invoke_agent after_block", "invoke_agent plain_thread"]


def test_capture_runs_beside_the_default_runtime_without_replacing_it(home: Path, tmp_path: Path) -> None:
    before = runtime.default()
    outside = threading.Thread(target=_agent("outside_capture"))
    with capture(home=tmp_path / "captured") as recorded:
        assert runtime.current() is not before
        _agent("captured")()
        outside.start()  # a thread that did not inherit the capture's context records into the default
        outside.join()
        assert [r.summary.agent for r in recorded.runs()] == ["captured"]
    assert runtime.default() is before and runtime.current() is before  # nothing was reconfigured or restored
    orp.flush()
    assert _agents_in(home) == ["outside_capture"]
    assert not (tmp_path / "captured" / "spool").exists()


def test_configure_stays_idempotent_and_process_wide_inside_an_active_block(home: Path, tmp_path: Path) -> None:
    provider = orp.configure(home=home, exporter="spool")
    default = runtime.default()
    block = setup.build_runtime(exporter="none", home=tmp_path / "block")
    try:
        with runtime.active(block):
            assert orp.configure() is provider
            assert orp.configure(home=home, exporter="spool") is provider
            assert runtime.default() is default  # configure() speaks for the process, not for the block
            assert setup.runtime() is block and setup.current_runtime() is block
    finally:
        setup.close(block)
    assert setup.runtime() is default
    assert runtime.for_provider(provider) is default
