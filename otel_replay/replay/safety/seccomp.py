"""The kernel's side of a live replay from step N: a seccomp filter on the replay's thread that hands each call
that could change the world to a supervisor process, and the replay's end of that supervisor.

Landlock confines a thread for good, but a live replay from step N must be confined only over the recorded steps
before N, then run live in the same call. So the thread that imports and calls the agent installs a seccomp
filter (:func:`install`): opens for writing, file creation, renaming, linking and removal, writes through
descriptors other than standard input, output and error (and a descriptor put in their place), connect, bind,
program execution, ``io_uring``, new namespaces, mounts and opens by file handle are suspended in the kernel
and handed to :mod:`~otel_replay.replay.safety.supervisor`, a process of its own, which refuses what the
recorded part may not do while the replay says it is confined (:meth:`Supervisor.confine`,
:meth:`Supervisor.release`) and lets everything through otherwise. Every other call (reads, ``mmap``, the
allocator's work) never leaves the kernel. The filter applies to that thread and all it starts, and cannot be
removed: once the replay is over the supervisor lets every call through until no thread or process under the
filter is left, then ends. A thread of this process tells it which of the agent's frames made a call it
refuses (:func:`_answer_frames`), and the descriptors a refused write went through are pointed at
``/dev/null`` when the recorded steps end (:func:`_silence`).

Available on Linux 5.8 or later on x86-64 with seccomp user notification, where the supervisor can read the
agent's memory (``/proc/PID/mem``; under Yama's ``ptrace_scope=1`` the replay names the supervisor as its
tracer, ``PR_SET_PTRACER``, for the replay's duration). Nothing else here is process-wide: the filter is the
calling thread's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import socket
import subprocess
import sys
import threading
from typing import Final

from ..raised import agent_frame
from . import supervisor

_SYS_SECCOMP: Final = 317  # x86-64
_SET_MODE_FILTER: Final = 1
_FLAG_NEW_LISTENER: Final = 1 << 3
_PR_SET_NO_NEW_PRIVS: Final = 38
_PR_SET_PTRACER: Final = 0x59616D61
_RET_ALLOW: Final = 0x7FFF0000
_RET_USER_NOTIF: Final = 0x7FC00000
_LD_ABS: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ, _JGE, _JGT, _JSET = 0x15, 0x35, 0x25, 0x45  # BPF_JMP | BPF_K
_RET: Final = 0x06
_NR, _ARCH = 0, 4
_WAIT: Final = 30.0
"""Seconds the replay waits for the supervisor to answer it (it answers at once unless it died)."""


def _arg(index: int) -> int:
    return 16 + 8 * index  # the low half of seccomp_data.args[index] (little-endian)


class SeccompError(OSError):
    """The kernel refused the filter, or the supervisor could not start or read the agent's memory."""


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program() -> list[tuple[int, int, int, int]]:
    """The filter as BPF instructions ``(code, jt, jf, k)``: hand over the calls :mod:`supervisor` checks,
    allow everything else in the kernel."""
    code: list[tuple[int, str | int, str | int, int]] = [
        (_LD_ABS, 0, 0, _ARCH),
        (_JEQ, 0, "notify", supervisor.ARCH_X86_64),
        (_LD_ABS, 0, 0, _NR),
        (_JGE, "notify", 0, supervisor.X32_BIT),
    ]
    code += [(_JEQ, "notify", 0, nr) for nr in sorted(supervisor.ALWAYS)]
    code += [(_JEQ, "fd", 0, nr) for nr in sorted(supervisor.FD_WRITES)]
    code += [(_JEQ, "low_fd1", 0, nr) for nr in sorted(supervisor.LOW_FD_ARG1)]
    code += [(_JEQ, f"open{nr}", 0, nr) for nr in sorted(supervisor.OPENS)]
    code.append((_JEQ, "clone", 0, supervisor.CLONE))
    code.append((_RET, 0, 0, _RET_ALLOW))
    labels: dict[str, int] = {"fd": len(code)}
    code += [(_LD_ABS, 0, 0, _arg(0)), (_JGT, "notify", "allow", 2)]
    labels["low_fd1"] = len(code)
    code += [(_LD_ABS, 0, 0, _arg(1)), (_JGT, "allow", "notify", 2)]
    labels["clone"] = len(code)
    code += [(_LD_ABS, 0, 0, _arg(0)), (_JSET, "notify", "allow", supervisor.CLONE_NEW_FLAGS)]
    for nr, (_, _, _, flags_at) in sorted(supervisor.OPENS.items()):
        labels[f"open{nr}"] = len(code)
        code += [(_LD_ABS, 0, 0, _arg(flags_at)), (_JSET, "notify", "allow", supervisor.OPEN_WRITE_FLAGS)]
    labels["notify"] = len(code)
    code.append((_RET, 0, 0, _RET_USER_NOTIF))
    labels["allow"] = len(code)
    code.append((_RET, 0, 0, _RET_ALLOW))

    def offset(at: int, target: str | int) -> int:
        return target if isinstance(target, int) else labels[target] - at - 1

    return [(op, offset(i, jt), offset(i, jf), k) for i, (op, jt, jf, k) in enumerate(code)]


_KERNEL: Final = (5, 8)
"""The first Linux with all the supervisor needs: user notification that lets a call go on (5.5),
``pidfd_getfd`` (5.6) and a listener that reports when no thread is left under the filter (5.8)."""


def available() -> bool:
    """Whether this system can supervise a thread: Linux 5.8 or later on x86-64 with seccomp user notification."""
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        return False
    try:
        release = tuple(int(part) for part in platform.release().split("-")[0].split(".")[:2])
    except ValueError:
        return False
    if release < _KERNEL:
        return False
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail", encoding="ascii") as actions:
            return "user_notif" in actions.read().split()
    except OSError:
        return False


def install() -> int:
    """Put the calling thread (and all it starts from now on) under the filter; return the listener descriptor
    the supervisor answers on. Until a supervisor holds it, a handed-over call of this thread waits: pass it
    on from another thread (:meth:`Supervisor.attach`)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    instructions = program()
    table = (_Filter * len(instructions))(*(_Filter(*ins) for ins in instructions))
    prog = _Program(len(instructions), table)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"seccomp: set no_new_privs: {os.strerror(err)}")
    listener = libc.syscall(_SYS_SECCOMP, _SET_MODE_FILTER, _FLAG_NEW_LISTENER, ctypes.byref(prog))
    if listener < 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"seccomp: install the filter: {os.strerror(err)}")
    return int(listener)


_START: Final = (
    f"import sys; sys.path.append({os.path.dirname(supervisor.__file__)!r}); import supervisor; supervisor.main()"
)
"""The supervisor, imported as a module of its own from its folder (after the standard library, so it shadows
nothing): its bytecode is cached, and nothing else of otel-replay is imported."""


def _answer_frames(sock: socket.socket) -> None:
    """Answer the supervisor's ``ID TID`` questions with ``ID`` and the agent's frame the thread ``TID`` is in
    (``function() at file:line``, or nothing), until it ends. The thread asked about is held in the kernel at
    the refused call meanwhile, so its frame is the one that made it."""
    with sock:
        while True:
            try:
                question = sock.recv(64)
            except OSError:
                return
            if not question:
                return  # the supervisor ended
            ident, _, tid = question.decode("ascii", "replace").partition(" ")
            try:
                where = _frame_of(int(tid)) or ""
            except Exception:  # noqa: BLE001 - a frame that cannot be told is left out, never raised
                where = ""
            try:
                sock.send(f"{ident} {where}".encode("utf-8", "replace"))
            except OSError:
                return


def _frame_of(tid: int) -> str | None:
    """The agent's innermost frame on the Python thread whose kernel id is ``tid`` (None for a thread Python did
    not start, or one in another process)."""
    for thread in threading.enumerate():
        if thread.native_id == tid and thread.ident is not None:
            return agent_frame(sys._current_frames().get(thread.ident))
    return None


def _silence(entry: str) -> str | None:
    """Point the descriptor ``fd:TGID:FD:DEV:INO`` at ``/dev/null`` when it is this process's and still the file
    the write was refused through (the agent may have closed it and the number been reused); return its path."""
    try:
        tgid, fd, dev, ino = (int(part) for part in entry.split(":")[1:5])
    except ValueError:
        return None
    if tgid != os.getpid():
        return None  # a process the recorded steps forked: its descriptors are not ours to change
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (dev, ino):
            return None
        name = os.readlink(f"/proc/self/fd/{fd}")
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.dup2(null, fd, inheritable=os.get_inheritable(fd))
        finally:
            os.close(null)
    except OSError:
        return None
    return name


def _yama_scope() -> int:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="ascii") as scope:
            return int(scope.read().strip() or 0)
    except (OSError, ValueError):
        return 0


class Supervisor:
    """The replay's end of one supervisor process: started by :meth:`start`, given the filter's listener by
    :meth:`attach`, told when the recorded part begins (:meth:`confine`) and ends (:meth:`release`, which
    returns what it refused meanwhile), and let go by :meth:`close`."""

    def __init__(self, *, writable: list[str], ports: list[int]) -> None:
        config = [",".join(str(port) for port in sorted(set(ports))), *writable]
        self._config = "\0".join(config).encode("utf-8", "surrogateescape")
        self._control: socket.socket | None = None
        self._ptracer = False
        self._lock = threading.Lock()  # one question and its answer at a time, from any of the agent's threads
        self.confined = False
        self.pid: int | None = None
        """The supervisor process, once it started."""

    def _ask(self, message: bytes, size: int = 65536) -> bytes:
        if self._control is None:
            raise SeccompError(0, "seccomp: the supervisor is not running")
        try:
            self._control.send(message)
            answer = self._control.recv(size)
        except OSError as exc:
            raise SeccompError(0, f"seccomp: the supervisor did not answer ({exc})") from None
        if not answer:
            raise SeccompError(0, "seccomp: the supervisor ended")
        return answer

    def start(self) -> None:
        """Start the supervisor process and wait until it can read this process's memory; raises
        :class:`SeccompError` when it cannot (nothing is then under a filter)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            first = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _START, str(os.getpid()), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            ours.close()
            raise SeccompError(0, f"seccomp: could not start the supervisor ({exc})") from None
        finally:
            theirs.close()
        ours.settimeout(_WAIT)
        self._control = ours
        try:
            hello = self._receive()  # "pid N", from the supervisor the first process forked before it ended
            if hello.startswith(b"pid ") and hello[4:].isdigit():
                self.pid = int(hello[4:])
                if _yama_scope() == 1:  # it may read our memory once named our tracer
                    self._set_ptracer(self.pid)
            hello = self._ask(b"go")
            if hello != b"ready":
                raise SeccompError(0, f"seccomp: {hello.decode(errors='replace')}")
        except BaseException:
            self.close()
            first.kill()
            raise
        finally:
            first.wait()  # reaped now: the supervisor is not our child, so no later replay counts it as one

    def _receive(self) -> bytes:
        assert self._control is not None
        try:
            answer = self._control.recv(512)
        except OSError as exc:
            raise SeccompError(0, f"seccomp: the supervisor did not answer ({exc})") from None
        if not answer:
            raise SeccompError(0, "seccomp: the supervisor ended before it started")
        return answer

    def _set_ptracer(self, pid: int) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PTRACER, pid, 0, 0, 0) == 0:
            self._ptracer = True

    def attach(self, listener: int) -> None:
        """Hand the supervisor the filter's listener and close it here, with the socket on which it asks which
        of the agent's frames made a call it refuses; answered by a thread started here. Call it from a thread
        not under the filter: that thread's own calls would otherwise wait for the supervisor they serve."""
        if self._control is None:
            raise SeccompError(0, "seccomp: the supervisor is not running")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self._control, [self._config], [listener, theirs.fileno()])
        finally:
            os.close(listener)
            theirs.close()
        threading.Thread(target=_answer_frames, args=(ours,), name="otel-replay-frames", daemon=True).start()
        if self._receive() != b"ok":
            raise SeccompError(0, "seccomp: the supervisor refused the filter")

    def confine(self) -> None:
        """From now on, refuse what the recorded part of a replay may not do."""
        with self._lock:
            self._ask(b"confine")
            self.confined = True

    def release(self) -> tuple[list[str], list[str]]:
        """From now on, let every call through; return what was refused while confined (each once, to the
        first caller), and the descriptors of this process a refused write went through, each now pointed at
        ``/dev/null`` (named by its path as it was): what the agent still holds for one (a buffered line its
        next flush, or the interpreter's exit, would write) is never written."""
        with self._lock:
            if not self.confined:
                return [], []
            self.confined = False
            answer = self._ask(b"release")
        released, *items = answer.decode("utf-8", "replace").split("\0")
        if released != "released":
            raise SeccompError(0, "seccomp: the supervisor answered out of turn")
        silenced = [_silence(item) for item in items if item.startswith("fd:")]
        return [item for item in items if not item.startswith("fd:")], [name for name in silenced if name]

    def close(self) -> None:
        """Let go: the supervisor lets every call through until no thread under the filter is left."""
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.close()
            self._control = None
        if self._ptracer:
            with contextlib.suppress(OSError):
                ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PTRACER, 0, 0, 0, 0)
            self._ptracer = False
