"""The kernel sandbox of an offline replay: which enforcement a replay gets, and the confined thread it runs in.

An offline replay (``dry``, ``mock``, ``deterministic``, a ``--from-step`` replay on one of those, a regression
case, a lab worker's replay, ``replay-tool --mode mock``) promises that nothing it runs reaches the world. The
audit-hook guard (:mod:`otel_replay.replay.safety.guard`) sees what Python sees and names it; below Python (``ctypes``,
a C extension, a descriptor opened before the replay) it sees nothing. Where the kernel offers Linux Landlock,
the engine therefore runs the agent's import and call in a fresh thread that confines itself first
(:class:`Confinement`: the import and the call on that one thread): from then on that thread and all it starts
can change files only under the temp folder, otel-replay's home, the embedded store and the paths the person
replaying allowed (``--allow-path``), connect only to the TCP ports of the store, the export endpoints and the
allowed addresses (``--allow-address``; by port, the guard checks the address), bind none, and execute nothing.
The host program's other threads are untouched, and the confinement ends with the thread, so an in-process
replay leaves its caller as it was.

A ``whatif`` replay is confined the same way except for TCP: its model calls connect to endpoints not known
before the agent runs, so the guard alone decides there (it lets only the executing model call connect).

A live replay from step N runs its recorded steps before N offline and the rest live, in one call on one
thread, which a Landlock confinement (it cannot be lifted) cannot serve: its thread runs under the seccomp
filter of :mod:`otel_replay.replay.safety.seccomp` instead, whose supervisor the session tells when the
recorded steps begin and end (:attr:`Confinement.supervisor`).

``OTEL_REPLAY_SANDBOX`` chooses: ``auto`` (default) confines where the kernel can, ``require`` refuses an
offline (or whatif) replay it cannot confine, ``off`` keeps the guard alone. :class:`Enforcement` says what ran; every
replay result carries it (``sandbox`` in ``--json``), and ``dry`` lists what the weaker one leaves uncovered
(:func:`gaps`).

Process-wide state, kept on purpose: the names of the entrypoint modules first imported inside a confined
thread (``_confined_imports``), so a later replay in the same process (a lab worker replays many runs) knows
that a module found already imported was imported under the sandbox, not before it.

This module must never confine a thread other than the one it starts, never report a confinement that did not
happen, and never let an offline replay run unconfined under ``require``.
"""

from __future__ import annotations

import contextvars
import functools
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from ... import settings
from ...errors import ReplayRefused
from ...semconv import ReplayMode
from . import landlock, seccomp
from .exempt import endpoint_of, exempt_endpoints, exempt_roots

T = TypeVar("T")

AUDIT_HOOKS_ONLY: Final = "audit hooks only"
""":attr:`Enforcement.text` of a replay guarded by the audit hooks alone."""

SUPERVISED: Final = "seccomp supervisor"
""":attr:`Enforcement.text` of a live replay from step N whose recorded steps the kernel confined."""

NO_SANDBOX: Final = "none"
""":attr:`Enforcement.text` of a replay with real effects allowed (``live``, ``--allow-side-effects``)."""

_confined_imports: set[str] = set()
_confined_lock = threading.Lock()

_AUDIT_ONLY_GAPS: Final = (
    "writes through files, databases and connections the agent's module opened before the replay "
    "(a module imported earlier in the same process)",
    "code below Python: a C extension or native library writing files, connecting or starting processes "
    "(a ctypes call other than the libc functions the guard knows; SQLite's ATTACH and VACUUM INTO on a "
    "connection whose authorizer or trace callback the agent replaced); a process so started runs, and is "
    "reported after it started, without its program or the frame that started it",
    "threads that never received the replay's context (started before it, or by a native library)",
)
_KERNEL_GAPS: Final = (
    "a write the kernel refuses inside a C extension other than SQLite is stopped, but when the agent catches "
    "the error and carries on the replay cannot name it (the kernel reports it to no one in the process)",
    "TCP is confined by port, not address (the audit hooks check the address); UDP and Unix path sockets "
    "are checked by the audit hooks only",
    "work the agent hands to a thread started before the replay (a pool created earlier) runs outside the "
    "kernel sandbox, under the audit hooks",
)

_SUPERVISED_GAPS: Final = (
    "a path, descriptor or address another thread of the agent changes between the supervisor's check and the "
    "kernel's call (the supervisor reads a call's arguments once)",
    "writes through a shared memory mapping (mmap) of a file the agent's module opened at import",
    "writes through standard output and error, wherever they lead (a descriptor put in their place during the "
    "recorded steps is refused)",
    "UDP, and connections to Unix path sockets made during the recorded steps, are checked by the audit hooks only",
    "work the agent hands to a thread started before the replay runs outside the filter, under the audit hooks",
)

_WHATIF_GAP: Final = (
    "the network is left to the audit hooks (a whatif replay's model calls connect to endpoints not known before "
    "the agent runs): they let only the executing model call connect, and see no connection made below Python"
)


@dataclass(frozen=True, kw_only=True)
class Enforcement:
    """What stops a replay's unrecorded side effects: the Landlock ABI its thread is confined with (0 for
    none) and whether the audit-hook guard is on."""

    abi: int
    guarded: bool
    network: bool = True
    """Whether the kernel confines TCP too: not for a ``whatif`` replay, whose model calls connect to endpoints
    not known before the agent runs (the guard lets only the executing model call connect)."""
    supervised: bool = False
    """A live replay from step N: its thread runs under a seccomp filter whose supervisor process confines the
    recorded steps before N (see :mod:`otel_replay.replay.safety.seccomp`)."""

    @property
    def text(self) -> str:
        """``landlock ABI n``, ``seccomp supervisor``, ``audit hooks only`` or ``none`` (what ``--json`` says under
        ``sandbox``)."""
        if self.abi > 0:
            return f"landlock ABI {self.abi}"
        if self.supervised:
            return SUPERVISED
        return AUDIT_HOOKS_ONLY if self.guarded else NO_SANDBOX


def plan(
    mode: ReplayMode, *, allow_side_effects: bool, setting: str | None = None, from_step: int | None = None
) -> Enforcement:
    """The enforcement a replay in ``mode`` gets under ``OTEL_REPLAY_SANDBOX`` (or ``setting``).

    ``live`` replays and ``--allow-side-effects`` get none (real effects are intended), ``whatif`` the kernel
    sandbox for files and programs with TCP left to the guard (its model calls need the network), a live
    replay from step N the guard and the seccomp supervisor over the recorded steps before N (a Landlock
    confinement could not be lifted for the live part). Raises :class:`ReplayRefused` for a bad setting, and
    under ``require`` when the kernel offers neither or the person replaying allowed every side effect."""
    try:
        chosen = settings.resolve_sandbox(setting)
    except ValueError as exc:
        raise ReplayRefused(str(exc)) from None
    offline = mode in (ReplayMode.DRY, ReplayMode.MOCK, ReplayMode.DETERMINISTIC)
    if chosen == "require" and offline and allow_side_effects:
        raise ReplayRefused(
            f"{settings.OTEL_REPLAY_SANDBOX}=require and --allow-side-effects contradict each other: allow the "
            "one path or address the replay needs (--allow-path, --allow-address) instead; nothing ran"
        )
    if allow_side_effects:
        return Enforcement(abi=0, guarded=False)
    if mode is ReplayMode.LIVE:
        return _live(chosen, from_step)
    if chosen == "off":
        return Enforcement(abi=0, guarded=True)
    abi = landlock.abi()
    if abi < 1 and chosen == "require":
        raise ReplayRefused(
            f"{settings.OTEL_REPLAY_SANDBOX}=require: this system offers no Landlock sandbox (Linux 5.13 or "
            "later with Landlock enabled, outside a container that forbids it); nothing ran. Unset it to replay "
            "under the audit hooks alone"
        )
    return Enforcement(abi=max(abi, 0), guarded=True, network=offline)


def _live(chosen: str, from_step: int | None) -> Enforcement:
    """A live replay: nothing to stop, or (from step N > 0) the recorded steps before N under the guard and,
    where the kernel can, the seccomp supervisor."""
    if not from_step:  # from step 0 nothing is recorded: all of it is live
        return Enforcement(abi=0, guarded=from_step is not None)
    if chosen == "off":
        return Enforcement(abi=0, guarded=True)
    if not seccomp.available():
        if chosen == "require":
            raise ReplayRefused(
                f"{settings.OTEL_REPLAY_SANDBOX}=require: this system cannot confine the recorded steps of a live "
                "replay from a step (that needs seccomp user notification on Linux x86-64); nothing ran. Unset it "
                "to replay them under the audit hooks alone"
            )
        return Enforcement(abi=0, guarded=True)
    return Enforcement(abi=0, guarded=True, supervised=True)


def live_prefix() -> dict[str, Any]:
    """What would confine the recorded steps of a live replay from a step here, and what it leaves uncovered
    (``dry`` reports it beside the offline enforcement)."""
    try:
        chosen = plan(ReplayMode.LIVE, allow_side_effects=False, from_step=1)
    except ReplayRefused as exc:
        return {"enforcement": "refused", "not_covered": [str(exc)]}
    return {"enforcement": chosen.text, "not_covered": gaps(chosen)}


def gaps(enforcement: Enforcement) -> list[str]:
    """What ``enforcement`` does not stop (``dry`` lists these)."""
    if enforcement.supervised:
        return list(_SUPERVISED_GAPS)
    if enforcement.abi > 0:
        return list(_KERNEL_GAPS) if enforcement.network else [_WHATIF_GAP, *_KERNEL_GAPS[:1], *_KERNEL_GAPS[2:]]
    if enforcement.guarded:
        return [*_AUDIT_ONLY_GAPS, *_KERNEL_GAPS[:1]]
    return ["nothing is blocked: real side effects are intended"]


def allowed_ports(addresses: Iterable[str]) -> list[int]:
    """The TCP ports of the export endpoints, the store and the allowed ``HOST:PORT`` addresses."""
    ports = [port for _, port in exempt_endpoints()]
    for address in addresses:
        endpoint = endpoint_of(address)
        if endpoint is not None:
            ports.append(endpoint[1])
    return ports


def check_addresses(addresses: Sequence[str]) -> tuple[str, ...]:
    """``--allow-address`` values, each ``HOST:PORT``; raises :class:`ReplayRefused` for one that is not."""
    for address in addresses:
        if "://" in address or endpoint_of(address) is None or ":" not in address:
            raise ReplayRefused(f"--allow-address takes HOST:PORT (like 127.0.0.1:5432), got {address[:80]!r}")
    return tuple(addresses)


def check_paths(paths: Sequence[str | os.PathLike[str]]) -> tuple[str, ...]:
    """``--allow-path`` values as absolute paths (symbolic links resolved); raises :class:`ReplayRefused` for
    an empty one or the root folder."""
    checked: list[str] = []
    for raw in paths:
        text = os.fsdecode(raw)
        if not text.strip():
            raise ReplayRefused("--allow-path takes a file or folder, got an empty value")
        real = os.path.realpath(os.path.expanduser(text))
        if real == os.sep:
            raise ReplayRefused("--allow-path / would allow every write: name the file or folder the agent needs")
        checked.append(real)
    return tuple(dict.fromkeys(checked))


def imported_before(module_name: str | None, enforcement: Enforcement) -> str | None:
    """When the entrypoint's module is already imported, and not by an earlier confined replay, what it opened
    at import (files, databases, connections) is outside the kernel sandbox: the note that says so, or None.
    Raises :class:`ReplayRefused` instead under ``require``."""
    if enforcement.abi < 1 or not module_name or module_name not in sys.modules:
        return None
    with _confined_lock:
        if module_name in _confined_imports:
            return None
    if settings.resolve_sandbox() == "require":
        raise ReplayRefused(
            f"{settings.OTEL_REPLAY_SANDBOX}=require: the agent's module {module_name!r} was imported before this "
            "replay, so what it opened at import is outside the kernel sandbox; replay it in a process of its own "
            "(otel-replay replay, otel-replay case run); nothing ran"
        )
    return (
        f"the agent's module {module_name!r} was imported before this replay: files, databases and connections "
        "it opened at import are outside the kernel sandbox (replay it with otel-replay replay or case run, in a "
        "process of its own, for that guarantee)"
    )


def note_confined_import(module_name: str | None) -> None:
    """Remember that ``module_name`` was first imported inside a confined thread."""
    if module_name:
        with _confined_lock:
            _confined_imports.add(module_name)


class Confinement:
    """One thread the kernel confines, serving every call a replay confines: the agent's import, then its call,
    run one after the other on the same thread, as they ran in the recording. Code that keeps per-thread state
    from its import (a SQLite connection opened at import checks that it is used on the thread that opened it;
    thread-local clients and caches) then sees one thread, not two.

    Without ``enforcement.abi`` the calls run right here. When the kernel refuses the confinement after all,
    ``on_unconfined`` learns the weaker enforcement and the calls run here, unconfined; under ``require`` the
    replay is refused instead. Use it as a context manager: the thread ends with the block."""

    def __init__(
        self,
        enforcement: Enforcement,
        *,
        allow_paths: Sequence[str] = (),
        allow_addresses: Sequence[str] = (),
        on_unconfined: Callable[[Enforcement], Any] | None = None,
    ) -> None:
        self._enforcement = enforcement
        self._writable = [*exempt_roots(), os.devnull, *allow_paths]
        self._ports = allowed_ports(allow_addresses)
        self._on_unconfined = on_unconfined
        self._unconfined = enforcement.abi < 1 and not enforcement.supervised
        self._work: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._refusal: OSError | None = None
        self._listener: int | None = None
        self.supervisor: seccomp.Supervisor | None = None
        """The supervisor of a live replay's recorded steps, once its thread runs under the filter: the session
        tells it when the recorded steps begin and end (see :mod:`otel_replay.replay.safety.seccomp`)."""

    def __enter__(self) -> Confinement:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self._thread is not None:
            self._work.put(None)  # the thread ends after its current call
            if exc_type is None:  # an interrupt (Ctrl-C) does not wait for the agent's call to end
                self._thread.join()
            self._thread = None
        if self.supervisor is not None:  # it lets every call through from now on
            self.supervisor.close()
            self.supervisor = None

    def _serve(self, confined: threading.Event) -> None:
        try:
            if self._enforcement.supervised:
                self._listener = seccomp.install()
            else:
                landlock.restrict_thread(
                    writable=self._writable,
                    ports=self._ports,
                    version=self._enforcement.abi,
                    network=self._enforcement.network,
                )
        except OSError as exc:  # LandlockError, SeccompError
            self._refusal = exc
            confined.set()
            return
        confined.set()
        while (item := self._work.get()) is not None:
            fn, outcome, done = item
            try:
                outcome["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                outcome["error"] = exc
            finally:
                done.set()

    def _start(self) -> OSError | None:
        """Start the thread, confined (Landlock) or under the filter with its supervisor attached (seccomp);
        return the kernel's refusal, if any."""
        supervisor = None
        if self._enforcement.supervised:
            supervisor = seccomp.Supervisor(writable=self._writable, ports=self._ports)
            try:
                supervisor.start()
            except seccomp.SeccompError as exc:
                return exc
        confined = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(confined,), name="otel-replay-sandbox", daemon=True)
        self._thread.start()
        confined.wait()
        refusal = self._refusal
        if supervisor is not None and self._listener is not None:
            try:  # from this thread: the filtered one would wait on its own handed-over send
                supervisor.attach(self._listener)
                self.supervisor = supervisor
            except seccomp.SeccompError as exc:  # its calls now fail (no supervisor): it only waits for work
                self._work.put(None)
                refusal = exc
        if refusal is not None:
            self._thread.join()
            self._thread = None
        if supervisor is not None and self.supervisor is None:
            supervisor.close()
        return refusal

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` in the caller's context (variables as they are now), on the confined thread."""
        if self._thread is None and not self._unconfined:
            refusal = self._start()
            if refusal is not None:
                if settings.resolve_sandbox() == "require":
                    raise ReplayRefused(
                        f"{settings.OTEL_REPLAY_SANDBOX}=require: the kernel refused the sandbox "
                        f"({refusal}); nothing ran"
                    )
                self._unconfined = True
                if self._on_unconfined is not None:
                    self._on_unconfined(Enforcement(abi=0, guarded=self._enforcement.guarded))
        if self._unconfined:
            return fn()
        outcome: dict[str, Any] = {}
        done = threading.Event()
        self._work.put((functools.partial(contextvars.copy_context().run, fn), outcome, done))
        done.wait()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]  # type: ignore[no-any-return]
