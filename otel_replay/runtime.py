"""The runtime: what recording needs (provider, tracer, redactor, limits, exporter, store settings), as one object.

:func:`otel_replay.configure` builds a :class:`Runtime` and makes it the process default (the analogue of
OpenTelemetry's global TracerProvider). A block can run under another runtime with :func:`active`; that choice
lives in a context variable, so it follows the block's context (its ``asyncio`` tasks, threads started with a
copy of the context) and nothing else: two runtimes in one process do not see each other's spans.

Process-wide state, kept here and nowhere else: the default runtime (``_default``) and the factory that builds it
on first use (``_factory``, registered by the package ``__init__``: ``configure()`` with defaults).

This module must never import a layer above it at run time (recording, exporting, storage, replay): it is
imported by ``import otel_replay``, so it stays cheap (redaction, snapshots and the OTel SDK are named for the
type checker only).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from . import semconv
from ._version import __version__

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer, TracerProvider

    from .redaction import Redactor
    from .snapshots import SnapshotLimits


chosen_trace_id: ContextVar[int | None] = ContextVar("otel_replay_chosen_trace_id", default=None)
"""While set, the trace id the next root span otel-replay's tracer provider starts takes (a run that joins the
trace of a request's ``traceparent``: :func:`otel_replay.recording.begin_run`); read by its id generator."""


@dataclass
class Flusher:
    """The helper thread of a runtime's latest flush that waits on a server (see ``exporting.setup._drain``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None
    pid: int = field(default_factory=os.getpid)
    """The process the lock and thread belong to."""

    def own_lock(self) -> threading.Lock:
        """The lock, made anew (and the helper thread forgotten) in a process forked since they were made: a
        thread of the parent flushing at the fork may have held the lock, and it does not exist in the child,
        so the child's copy would never be released (the child's exit flush would hang)."""
        pid = os.getpid()
        if self.pid != pid:
            self.lock, self.thread, self.pid = threading.Lock(), None, pid
        return self.lock


@dataclass(frozen=True, kw_only=True)
class Runtime:
    """What the recording API needs, resolved once per :func:`otel_replay.configure` (or per
    ``exporting_to`` block)."""

    provider: TracerProvider
    tracer: Tracer
    home: Path
    home_given: bool
    """True when ``home`` was passed to :func:`configure` (then it is the default of ``Store.open``)."""
    store_url: str | None
    exporter_name: str
    redactor: Redactor
    limits: SnapshotLimits
    exporter: SpanExporter | None
    processor: SpanProcessor | None = None
    """This runtime's own processor (scrubbing, then its exporter's batch processor, then the taps)."""
    watch: SpanExporter | None = None
    """What wraps ``exporter`` to remember failed deliveries (``flush`` reports them), if anything."""
    key: tuple[Any, ...] | None = None
    """The arguments ``configure`` resolved (a second call with the same ones changes nothing)."""
    flusher: Flusher = field(default_factory=Flusher, compare=False, repr=False)


_active: ContextVar[Runtime | None] = ContextVar("otel_replay_runtime", default=None)
_default: Runtime | None = None
_factory: Callable[[], Runtime] | None = None


def current() -> Runtime | None:
    """The runtime of this context (:func:`active`), else the process default, else None (never configures)."""
    return _active.get() or _default


def in_context() -> Runtime | None:
    """The runtime :func:`active` set for this context, or None (the default is not looked at)."""
    return _active.get()


def default() -> Runtime | None:
    """The process default (what :func:`otel_replay.configure` set), whatever the context says."""
    return _default


def get() -> Runtime:
    """The current runtime; with none, the default is built on first use (``configure()`` with defaults)."""
    found = _active.get() or _default
    if found is not None:
        return found
    factory = _factory
    if factory is None:
        raise RuntimeError("otel-replay is not configured: call otel_replay.configure() first")
    return factory()


@contextmanager
def active(rt: Runtime) -> Iterator[Runtime]:
    """Run the block (and whatever inherits its context) under ``rt`` instead of the default."""
    token = _active.set(rt)
    try:
        yield rt
    finally:
        _active.reset(token)


def set_default(rt: Runtime | None) -> None:
    """Make ``rt`` the process default (None: back to "never configured")."""
    global _default
    _default = rt


def set_factory(fn: Callable[[], Runtime] | None) -> None:
    """Register what builds the default runtime on first use (it must also :func:`set_default` it)."""
    global _factory
    _factory = fn


def for_provider(tp: TracerProvider) -> Runtime:
    """The current runtime (built on first use) with its tracer taken from ``tp``: what an instrumentor given
    ``tracer_provider=`` records with. Everything else (home, redactor, exporter) is the current runtime's."""
    return _derived(get(), tp)


def _derived(base: Runtime, tp: TracerProvider) -> Runtime:
    if tp is base.provider:
        return base
    return replace(base, provider=tp, tracer=tp.get_tracer(semconv.TRACER_NAME, __version__))


class ProviderBinding:
    """What an instrumentor given ``tracer_provider=`` records with: calling it gives :func:`for_provider` of
    that provider, resolved when a call is recorded (so a later ``configure()``, or the runtime an ``active``
    block set, is followed: its redactor and home), rebuilt only when the current runtime changes.

    Nothing is configured when the binding is made: an instrumentor bound at ``instrument()`` time sets no
    global provider and builds no runtime until it records."""

    __slots__ = ("_cached", "provider")

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self._cached: tuple[Runtime, Runtime] | None = None

    def __call__(self) -> Runtime:
        base = get()
        cached = self._cached  # one read: a thread that rebuilds it meanwhile replaces the pair whole
        if cached is not None and cached[0] is base:
            return cached[1]
        derived = _derived(base, self.provider)
        self._cached = (base, derived)
        return derived


def bind_provider(tp: object) -> ProviderBinding | None:
    """The :class:`ProviderBinding` of an instrumentor's ``tracer_provider=`` option (None: no option, record
    with the current runtime). Anything without ``get_tracer`` raises :class:`ValueError`."""
    if tp is None:
        return None
    if not callable(getattr(tp, "get_tracer", None)):
        raise ValueError(
            f"tracer_provider must be an OpenTelemetry TracerProvider, got {type(tp).__name__}: "
            "pass the provider whose processors should receive the spans, or leave it out"
        )
    return ProviderBinding(cast("TracerProvider", tp))
