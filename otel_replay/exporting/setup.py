"""Wiring otel-replay into OpenTelemetry: one TracerProvider, one processor of ours on it, and per runtime its
own pipeline (scrubbing, the chosen exporter, taps).

:func:`configure` builds a :class:`~otel_replay.runtime.Runtime` and makes it the process default; it is
idempotent and cheap to call again. If the application already installed an SDK ``TracerProvider`` it is reused
(our processor is added to it) instead of replaced, so the application's own exporters keep working. Our one
processor on the provider (``Router``; it and each runtime's ``Pipeline`` are in :mod:`.pipeline`) hands
each span to the pipeline of the runtime that was active where the span started
(:func:`otel_replay.runtime.active`, a context variable), else to the default runtime's.
Reconfiguring (another home, another exporter) builds a new runtime and shuts the old pipeline down (flushing
it), because the SDK cannot remove a processor once added. :func:`exporting_to` runs a block under a runtime
of its own instead: nothing global is reconfigured or restored, and two runtimes in one process do not see
each other's spans.

Every span that ends goes through one scrubbing step (:func:`.scrubbing.scrub_span` with its runtime's
redactor) before the exporter or a tap sees it: otel-replay's own spans and those of other instrumentations
alike.

Process-wide state: ``_lock`` (serialises building runtimes and changing taps; a forked child gets a new one) is
this module's only global.
The router sits on the provider it serves (attribute ``_otel_replay_router``, so a provider gets one router
however often it is configured), and importing this module tells :mod:`otel_replay.redaction` where the current
runtime's redactor is (for :func:`~otel_replay.redaction.scrub_message`). Everything else is a field of a
runtime.

What it must never do: raise into the host program after setup (exporters log and return FAILURE); keep a
runtime in a module global (the default lives in :mod:`otel_replay.runtime`); import the package facade or
anything above it (replay, storage, cases).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from .. import settings
from .._version import __version__
from ..forks import flush_when_multiprocessing_child_ends
from ..redaction import RedactionConfig, Redactor, set_message_redactor_source
from ..runtime import Flusher, Runtime, active, chosen_trace_id, current, default, get, set_default
from ..semconv import TRACER_NAME
from ..snapshots import SnapshotLimits
from .pipeline import DeliveryWatch, Pipeline, Router

__all__ = [
    "TRACER_NAME",
    "Runtime",
    "build_runtime",
    "close",
    "configure",
    "current_runtime",
    "exporting_to",
    "flush",
    "runtime",
    "tap",
]

_log = logging.getLogger("otel_replay")

OTEL_SERVICE_NAME: Final = "OTEL_SERVICE_NAME"
_DEFAULT_SERVICE_NAME: Final = "otel-replay-agent"
_DEFAULT_MAX_EVENTS: Final = 100_000
_EXPORTERS: Final = ("spool", "otlp", "clickhouse", "none")


_ROUTER_ATTR: Final = "_otel_replay_router"


def _router(provider: TracerProvider) -> Router:
    """The router on ``provider``, added (once per provider) when it has none."""
    found = getattr(provider, _ROUTER_ATTR, None)
    if isinstance(found, Router):
        return found
    router = Router()
    provider.add_span_processor(router)
    try:
        setattr(provider, _ROUTER_ATTR, router)
    except (AttributeError, TypeError):  # a provider class with __slots__: one router per configure() then
        pass
    atexit.register(_flush_at_exit)
    flush_when_multiprocessing_child_ends(_flush_at_exit)  # such a child ends without atexit
    return router


_lock = threading.RLock()


def _new_lock_after_fork() -> None:
    # A thread of the parent (one reconfiguring, whose old pipeline was exporting) may have held the lock at the
    # fork; that thread does not exist in the child, so the child's copy would never be released.
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_after_fork)


def _resolve_exporter_name(exporter: str | SpanExporter | None) -> str | SpanExporter:
    if exporter is not None and not isinstance(exporter, str):
        return exporter
    name = exporter or os.environ.get(settings.OTEL_REPLAY_EXPORTER)
    if not name:
        otlp = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        name = "otlp" if otlp else "spool"
    name = name.strip().lower()
    if name not in _EXPORTERS:
        raise ValueError(f"unknown exporter {name!r}: use one of {', '.join(_EXPORTERS)} or a SpanExporter instance")
    return name


def _otlp_exporter() -> SpanExporter:
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter()


def _make_exporter(name: str | SpanExporter, home: Path, store: str | None = None) -> SpanExporter | None:
    if not isinstance(name, str):
        return name
    if name == "clickhouse":
        from .clickhouse import ClickHouseSpanExporter

        url = store or os.environ.get(settings.OTEL_REPLAY_STORE)
        if not url:
            raise ValueError(
                "exporter 'clickhouse' needs a ClickHouse store URL: pass configure(store="
                "'http://user:password@host:8123/database') or set OTEL_REPLAY_STORE"
            )
        return ClickHouseSpanExporter(url=url, home=home)
    if name == "spool":
        from .spool import SpoolExporter

        return SpoolExporter(home / "spool")
    if name == "otlp":
        return _otlp_exporter()
    return None


def batch_processor(exporter: SpanExporter) -> BatchSpanProcessor:
    # Bigger queue than the SDK default so a long run is not dropped; OTEL_BSP_* still win when set.
    kwargs: dict[str, Any] = {}
    if "OTEL_BSP_MAX_QUEUE_SIZE" not in os.environ:
        kwargs["max_queue_size"] = 65536
    if "OTEL_BSP_SCHEDULE_DELAY" not in os.environ:
        kwargs["schedule_delay_millis"] = 1000
    return BatchSpanProcessor(exporter, **kwargs)


class _ChosenTraceIds(RandomIdGenerator):
    """Random ids, except a root span's trace id while :data:`otel_replay.runtime.chosen_trace_id` is set: a
    run that joins a request's trace is a parentless root in that trace."""

    def generate_trace_id(self) -> int:
        chosen = chosen_trace_id.get()
        return chosen if chosen else super().generate_trace_id()


def _provider(service_name: str | None) -> TracerProvider:
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current  # the application's own SDK provider: attach, never replace
    attributes = {SERVICE_NAME: service_name} if service_name else {}
    resource = Resource.create(attributes)
    if (
        not service_name
        and not os.environ.get(OTEL_SERVICE_NAME)
        and str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service")
    ):
        resource = resource.merge(Resource({SERVICE_NAME: _DEFAULT_SERVICE_NAME}))
    # A run root carries one event per snapshot; the SDK's default of 128 events per span would silently
    # drop snapshots of long runs. OTEL_SPAN_EVENT_COUNT_LIMIT still wins when set.
    limits = SpanLimits(max_events=None if "OTEL_SPAN_EVENT_COUNT_LIMIT" in os.environ else _DEFAULT_MAX_EVENTS)
    provider = TracerProvider(resource=resource, span_limits=limits, id_generator=_ChosenTraceIds())
    trace.set_tracer_provider(provider)
    installed = trace.get_tracer_provider()
    return installed if isinstance(installed, TracerProvider) else provider


def configure(
    *,
    service_name: str | None = None,
    store: str | None = None,
    exporter: str | SpanExporter | None = None,
    home: str | os.PathLike[str] | None = None,
    redaction: Redactor | RedactionConfig | None = None,
) -> TracerProvider:
    """Set up recording and return the TracerProvider in use.

    Idempotent: a second call with the same (or no) arguments changes nothing. Reads ``OTEL_REPLAY_HOME``,
    ``OTEL_REPLAY_STORE``, ``OTEL_REPLAY_EXPORTER`` and ``OTEL_SERVICE_NAME``; with
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` set and no exporter named, spans go over OTLP to a Collector.
    If the application already set a global SDK TracerProvider, otel-replay attaches to it.
    Bad arguments raise :class:`ValueError` here, at setup.
    """
    with _lock:
        resolved_home = settings.resolve_home(home)
        exporter_choice = _resolve_exporter_name(exporter)
        key = (
            service_name,
            store,
            exporter_choice if isinstance(exporter_choice, str) else id(exporter_choice),
            resolved_home,
            id(redaction) if redaction is not None else None,
        )
        previous = default()
        if (
            previous is not None
            and isinstance(previous.provider, TracerProvider)
            and (
                key == previous.key
                or (home is None and store is None and exporter is None and redaction is None and service_name is None)
            )
        ):
            return previous.provider
        rt = _build(
            service_name=service_name,
            store=store,
            exporter_choice=exporter_choice,
            home=home,
            resolved_home=resolved_home,
            redaction=redaction,
            key=key,
        )
        provider = rt.provider
        assert isinstance(provider, TracerProvider)  # _build always takes an SDK provider
        router = _router(provider)
        old = router.default
        router.default = rt.processor if isinstance(rt.processor, Pipeline) else None
        set_default(rt)
        if old is not None:
            old.shutdown()
        if previous is not None and previous.processor is not None and previous.processor is not old:
            previous.processor.shutdown()
        return provider


def _build(
    *,
    service_name: str | None,
    store: str | None,
    exporter_choice: str | SpanExporter,
    home: str | os.PathLike[str] | None,
    resolved_home: Path,
    redaction: Redactor | RedactionConfig | None,
    key: tuple[Any, ...] | None,
) -> Runtime:
    """A new runtime with its own pipeline and exporter (made neither the default nor active here)."""
    if isinstance(redaction, Redactor):
        redactor = redaction
    else:
        redactor = Redactor.for_home(resolved_home, redaction)
    limits = SnapshotLimits.from_env()
    provider = _provider(service_name)
    _router(provider)
    span_exporter = _make_exporter(exporter_choice, resolved_home, store)
    watch = None
    if span_exporter is not None:  # the spool and clickhouse exporters log their failures themselves
        watch = DeliveryWatch(
            span_exporter,
            exporter_choice if isinstance(exporter_choice, str) else type(span_exporter).__name__,
            warn=exporter_choice not in ("spool", "clickhouse"),
        )
    pipeline = Pipeline(batch_processor(watch) if watch is not None else None, redactor)
    return Runtime(
        provider=provider,
        tracer=provider.get_tracer(TRACER_NAME, __version__),
        home=resolved_home,
        home_given=home is not None,
        store_url=store,
        exporter_name=exporter_choice if isinstance(exporter_choice, str) else type(exporter_choice).__name__,
        redactor=redactor,
        limits=limits,
        exporter=span_exporter,
        processor=pipeline,
        watch=watch,
        key=key,
    )


def default_runtime() -> Runtime:
    """The process default runtime, configured from the environment on first use (the factory the package
    registers with :func:`otel_replay.runtime.set_factory`)."""
    configure()
    built = default()
    assert built is not None  # configure() always sets one
    return built


runtime = get
"""The current runtime (this context's, else the default), configuring with defaults on first use."""

current_runtime = current
"""The current runtime if :func:`configure` ran or a block made one active, else None (never configures)."""


def flush(timeout_millis: int = 30000, *, rt: Runtime | None = None) -> bool:
    """Export everything recorded so far and make it visible to the store (seals the spool segment).

    Flushes ``rt``, by default the current runtime (the one of this context, else the default); other
    runtimes are left alone. Waits at most ``timeout_millis`` for the exporter (then returns False; the spans
    stay queued for it). False when an export failed since the previous flush (a full disk, an unreachable
    Collector: those spans were dropped, or held in memory by the ClickHouse exporter for a later attempt) or
    sealing the spool failed; the failure itself is logged on the ``otel_replay`` logger. Spans the SDK's
    queue dropped because it was full (``OTEL_BSP_MAX_QUEUE_SIZE``) are logged by the SDK, not seen here.
    Never raises.
    """
    target = rt if rt is not None else current()
    if target is None or target.processor is None:
        return True
    processor = target.processor
    ok = True
    try:
        if target.exporter_name == "spool":  # appends to a local file: never waits on anybody
            ok = processor.force_flush(timeout_millis)
        else:
            ok = _drain(processor, timeout_millis, target.flusher)
        if target.exporter is not None:
            ok = target.exporter.force_flush(timeout_millis) and ok
        if isinstance(target.watch, DeliveryWatch):
            ok = not target.watch.take_failed() and ok
    except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
        _log.exception("otel-replay: flush failed")
        return False
    return ok


def _drain(processor: SpanProcessor, timeout_millis: int, flusher: Flusher) -> bool:
    """``processor.force_flush()``, waiting at most ``timeout_millis``.

    The SDK's ``BatchSpanProcessor.force_flush`` ignores its timeout and exports the whole queue in the calling
    thread, for as long as the exporter takes (minutes with a Collector that accepts connections and never
    answers). So for exporters that talk to a server it runs in a helper thread, and while one is still stuck,
    later flushes of the same runtime wait for that one instead of starting more (the number of helper threads
    stays bounded).
    """
    deadline = time.monotonic() + max(timeout_millis, 0) / 1000
    with flusher.own_lock():
        previous = flusher.thread
    if previous is not None and previous.is_alive():
        previous.join(max(deadline - time.monotonic(), 0))
        if previous.is_alive():
            _log.warning(
                "otel-replay: flush did not finish within %d ms: the exporter is still busy with earlier "
                "spans (slow or unreachable); the agent goes on",
                timeout_millis,
            )
            return False
    outcome: list[bool] = []

    def run() -> None:
        try:
            outcome.append(bool(processor.force_flush(timeout_millis)))
        except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
            _log.exception("otel-replay: flush failed")
            outcome.append(False)

    helper = threading.Thread(target=run, name="otel-replay-flush", daemon=True)
    with flusher.own_lock():
        flusher.thread = helper
    helper.start()
    helper.join(max(deadline - time.monotonic(), 0))
    if helper.is_alive():
        _log.warning(
            "otel-replay: flush did not finish within %d ms: the exporter is slow or unreachable; the "
            "agent goes on and the spans stay queued",
            timeout_millis,
        )
        return False
    return outcome[0]


@contextmanager
def tap(callback: Callable[[ReadableSpan], None], *, rt: Runtime | None = None) -> Iterator[None]:
    """Call ``callback`` with every span of ``rt`` (default: the current runtime) inside the block (the replay
    engine uses it to read the replay it just ran without waiting for the store)."""
    processor = (rt if rt is not None else get()).processor
    assert isinstance(processor, Pipeline)  # every runtime is built by _build
    with _lock:
        processor.taps = (*processor.taps, callback)
    try:
        yield
    finally:
        with _lock:
            processor.taps = tuple(t for t in processor.taps if t is not callback)


def build_runtime(
    *,
    service_name: str | None = None,
    store: str | None = None,
    exporter: str | SpanExporter | None = None,
    home: str | os.PathLike[str] | None = None,
    redaction: Redactor | RedactionConfig | None = None,
) -> Runtime:
    """A runtime of its own, from the same arguments (and variables) as :func:`configure`, made neither the
    default nor active: run a block under it with :func:`otel_replay.runtime.active`, flush it with
    ``flush(rt=...)`` and :func:`close` it when done. Bad arguments raise :class:`ValueError`."""
    with _lock:
        return _build(
            service_name=service_name,
            store=store,
            exporter_choice=_resolve_exporter_name(exporter),
            home=home,
            resolved_home=settings.resolve_home(home),
            redaction=redaction,
            key=None,
        )


def close(rt: Runtime, timeout_millis: int = 30000) -> bool:
    """Flush ``rt`` and shut its pipeline (and exporter) down; spans started under it later go nowhere.
    Returns what :func:`flush` returned. Never raises."""
    ok = flush(timeout_millis, rt=rt)
    try:
        if rt.processor is not None:
            rt.processor.shutdown()
    except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
        _log.exception("otel-replay: could not shut a runtime's exporter down")
        return False
    return ok


@contextmanager
def exporting_to(exporter: str | SpanExporter, *, home: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """Send the spans started inside the block to ``exporter`` (``"none"``: nowhere but the taps), then flush it.

    The block runs under a runtime of its own (:func:`otel_replay.runtime.active`): the default runtime and
    other blocks are not touched, and spans started elsewhere meanwhile go where they went. Without ``home``,
    the current runtime's home and redactor are kept. Used by :func:`otel_replay.testing.capture` and the case
    runner."""
    previous = current()
    if home is None and previous is not None:
        rt = build_runtime(exporter=exporter, home=previous.home, redaction=previous.redactor)
    else:
        rt = build_runtime(exporter=exporter, home=home)
    try:
        with active(rt):
            yield
    finally:
        close(rt)


def _current_redactor() -> Redactor | None:
    rt = current()
    return rt.redactor if rt is not None else None


def _flush_at_exit() -> None:
    flush(5000)


set_message_redactor_source(_current_redactor)
