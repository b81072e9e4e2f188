"""The supervisor of a live replay's recorded steps: a process of its own that decides, for the replayed agent's
thread, each system call the seccomp filter of :mod:`otel_replay.replay.safety.seccomp` hands it.

A live replay from step N runs the recorded steps before N offline and everything after live, in one call of
the agent on one thread. Landlock cannot serve that (a confined thread stays confined), so that thread runs
under a seccomp filter that hands every system call that could change the world (opening a file for writing,
creating, renaming or removing one, writing through a descriptor, connecting, binding, executing) to this
process, which is in one of two states:

* ``confined`` (the recorded part, from the replayed run's start until the replay passes step N-1): the call is
  let through only when Landlock's sandbox of an offline replay would let it through (files under the writable
  folders, TCP connections to the allowed ports, no TCP bind, nothing executed); a write through a descriptor
  is let through only when it reaches such a file, an allowed TCP port, a pipe, an unnamed socket or a
  terminal, so what the agent's module opened at import (its import is live code) is not written through
  either. Anything else fails with ``EACCES`` and is kept, named, for the replay to report.
* ``released`` (the import and the live part): every call goes on as asked.

It runs outside the agent's process, so a call trapped while the agent holds Python's GIL is answered all the
same, and it ends when no thread or process under the filter is left. It reads the call's arguments (paths,
addresses) from the agent's memory through ``/proc/PID/mem``, once: a thread that rewrites them between this
check and the kernel's call is not caught (docs/security.md lists it).

Run as ``python -I -S -c "...; import supervisor; supervisor.main()" PID FD``, imported from its own folder (so
its bytecode is cached): the standard library's C modules only, since the replay waits for it to start
(``ctypes`` only once a socket must be looked at), and nothing of otel-replay. The call tables below are
imported by :mod:`~otel_replay.replay.safety.seccomp`, which builds the filter from them. x86-64 only;
elsewhere the replay falls back to the audit hooks.

Messages on the control socket (``SOCK_SEQPACKET``, one per send): the supervisor says ``pid N``, is told
``go``, says ``ready`` (or ``error: ...``), receives the listener with its configuration (``PORT,PORT,...``,
then each writable folder, NUL-separated) and says ``ok``; then ``confine`` is answered ``ok``, and
``release`` with ``released``, what was refused meanwhile and the descriptors to silence (``fd:...``),
NUL-separated. When the replay closes its end, the supervisor stays released.
"""

import _socket
import errno
import os
import select
import struct
import sys

ARCH_X86_64 = 0xC000003E
"""``AUDIT_ARCH_X86_64``: a call made under any other ABI (i386 through ``int 0x80``, x32) is handed over too."""
X32_BIT = 0x40000000

_AT_FDCWD = -100
_AT_SYMLINK_FOLLOW = 0x400
_RESOLVE_IN_ROOT = 0x10
_MAX_HOPS = 40
_SYS_PIDFD_GETFD = 438

OPEN_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | 0o20000000  # __O_TMPFILE
"""The open flags that make an open a write: an open without any of them is not handed over."""

OPENS = {2: ("open", None, 0, 1), 257: ("openat", 0, 1, 2)}
"""Opens whose flags the filter checks: number -> (name, dirfd argument, path argument, flags argument)."""
REFUSED = {
    425: "io_uring_setup",
    272: "unshare",
    308: "setns",
    165: "mount",
    161: "chroot",
    155: "pivot_root",
    428: "open_tree",
    429: "move_mount",
    430: "fsopen",
    431: "fsconfig",
    432: "fsmount",
    433: "fspick",
    442: "mount_setattr",
    304: "open_by_handle_at",
}
ALWAYS = {
    85: "creat",
    437: "openat2",
    76: "truncate",
    82: "rename",
    264: "renameat",
    316: "renameat2",
    86: "link",
    265: "linkat",
    88: "symlink",
    266: "symlinkat",
    87: "unlink",
    263: "unlinkat",
    83: "mkdir",
    258: "mkdirat",
    84: "rmdir",
    133: "mknod",
    259: "mknodat",
    42: "connect",
    49: "bind",
    59: "execve",
    322: "execveat",
    326: "copy_file_range",
    275: "splice",
    435: "clone3",
    **REFUSED,
}
"""Calls always handed over: number -> name."""
REFUSED_NAMES = frozenset(REFUSED.values())
"""Calls refused whatever their arguments while confined: ``io_uring`` (its operations would pass no check),
new namespaces, mounts and root changes (each would make a path mean another file than the supervisor checks),
opening by file handle (no path at all)."""
LOW_FD_ARG1 = {33: "dup2", 292: "dup3"}
"""Calls handed over when their second argument is a descriptor up to 2: a file put in place of standard output
or error, whose writes the filter does not hand over."""
CLONE = 56
CLONE_NEW_FLAGS = 0x7E020000
"""``clone`` is handed over when its flags ask for a new namespace (``CLONE_NEWNS``, ``NEWCGROUP``, ``NEWUTS``,
``NEWIPC``, ``NEWUSER``, ``NEWPID``, ``NEWNET``); ``clone3`` always (its flags are in memory)."""
FD_WRITES = {
    1: "write",
    18: "pwrite64",
    20: "writev",
    296: "pwritev",
    328: "pwritev2",
    44: "sendto",
    46: "sendmsg",
    307: "sendmmsg",
    77: "ftruncate",
    285: "fallocate",
    40: "sendfile",
}
"""Writes through the descriptor in their first argument, handed over for descriptors above 2 (standard input,
output and error are never checked)."""

_PATHS = {
    # name -> the (dirfd argument or None, path argument) pairs the call changes
    "creat": ((None, 0),),
    "truncate": ((None, 0),),
    "rename": ((None, 0), (None, 1)),
    "renameat": ((0, 1), (2, 3)),
    "renameat2": ((0, 1), (2, 3)),
    "link": ((None, 0), (None, 1)),  # the file linked must be writable too (a link is a way to write it)
    "linkat": ((0, 1), (2, 3)),
    "symlink": ((None, 1),),
    "symlinkat": ((1, 2),),
    "unlink": ((None, 0),),
    "unlinkat": ((0, 1),),
    "mkdir": ((None, 0),),
    "mkdirat": ((0, 1),),
    "rmdir": ((None, 0),),
    "mknod": ((None, 0),),
    "mknodat": ((0, 1),),
}
_FOLLOWED = frozenset({"creat", "truncate"})
"""Calls that act on what the path's last component points to (the others act on the name itself)."""
_TERMINALS = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")

_NOTIF = struct.Struct("<QIIiIQ6Q")
"""``struct seccomp_notif``: id, pid, flags, then ``struct seccomp_data``: nr, arch, instruction pointer, args."""
_RESP = struct.Struct("<QqiI")
"""``struct seccomp_notif_resp``: id, val, error, flags."""


def _iowr(nr: int, size: int) -> int:
    return (3 << 30) | (size << 16) | (ord("!") << 8) | nr


_NOTIF_RECV = _iowr(0, _NOTIF.size)
_NOTIF_SEND = _iowr(1, _RESP.size)
_FLAG_CONTINUE = 1
_FRAME_WAIT = 0.25
"""Seconds to wait for the frame of a refused call (the call waits as long)."""


class _Refused(Exception):
    """A call the recorded part may not make: its description as the replay reports it."""


class Supervisor:
    """The decisions: the state (confined or released), what may be changed, and what was refused."""

    def __init__(self, agent_pid: int, writable: list[str], ports: list[int]) -> None:
        self.agent_pid = agent_pid
        self.writable = [os.path.realpath(path) for path in writable]
        self.ports = set(ports)
        self.confined = False
        self.refused: list[str] = []
        self.silence: list[str] = []
        """The descriptors a refused write went through, as ``fd:TGID:FD:DEV:INO``: the replay points them at
        ``/dev/null``, so what the agent still holds for them (a buffered line) is never written later."""
        self.frames: _socket.socket | None = None
        """Where to ask the replaying process which of the agent's frames made a refused call."""
        self._asked = 0
        self.before: set[int] = set()
        """The agent's sockets when the recorded steps began (inodes): a named Unix socket among them was
        connected before them, so nothing is sent through it while confined."""
        self._mem: dict[int, int] = {}
        self._pidfds: dict[int, int] = {}

    # ----------------------------------------------------------------------------------------- reading the call

    def _tgid(self, tid: int) -> int:
        with open(f"/proc/{tid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
        return tid

    def read(self, tgid: int, address: int, size: int) -> bytes:
        """``size`` bytes of process ``tgid``'s memory at ``address`` (its ``mem`` file kept open; opened again
        once when it reads nothing, as for a process that ended and whose id was given to another)."""
        for _ in range(2):
            if tgid not in self._mem:
                self._mem[tgid] = os.open(f"/proc/{tgid}/mem", os.O_RDONLY | os.O_CLOEXEC)
            try:
                data = os.pread(self._mem[tgid], size, address)
            except OSError:
                data = b""
            if data:
                return data
            os.close(self._mem.pop(tgid))
        return b""

    def string(self, tgid: int, address: int) -> bytes:
        """The NUL-terminated string at ``address`` (read a page at a time: it may end before an unmapped one)."""
        out = b""
        while len(out) < 4096:
            chunk = self.read(tgid, address, 4096 - (address % 4096))
            if not chunk:  # the process's memory is gone (it is exiting)
                raise OSError(errno.EIO, "the agent's memory could not be read")
            end = chunk.find(b"\0")
            if end >= 0:
                return out + chunk[:end]
            out += chunk
            address += len(chunk)
        return out

    def _copy_socket(self, tgid: int, fd: int) -> "_socket.socket":
        """A copy of the agent's socket ``fd`` in this process (``pidfd_getfd``); close it after use."""
        if tgid not in self._pidfds:
            self._pidfds[tgid] = os.pidfd_open(tgid)
        return _socket.socket(fileno=_pidfd_getfd(self._pidfds[tgid], fd))

    def _resolve(self, tid: int, tgid: int, dirfd: "int | None", path: str, *, follow: bool) -> str:
        """The absolute path a call names, as the kernel will resolve it for the agent: relative to its folder
        descriptor or the thread's folder, each symbolic link followed (the last one only when the call
        follows it), ``..`` after the link before it, and ``/proc/self`` (also reached through ``/dev/fd`` or
        a link) as the agent's, not this process's."""
        if not path.startswith("/"):
            at = None if dirfd is None else _int(dirfd)
            base = os.readlink(f"/proc/{tid}/cwd" if at in (None, _AT_FDCWD) else f"/proc/{tid}/fd/{at}")
            path = f"{base}/{path}"
        pending = [part for part in reversed(path.split("/")) if part not in ("", ".")]
        current, hops = "/", 0
        while pending:
            part = pending.pop()
            if part == "..":
                current = os.path.dirname(current)
                continue
            if current == "/proc" and part in ("self", "thread-self"):
                current = f"/proc/{tgid}" if part == "self" else f"/proc/{tgid}/task/{tid}"
                continue
            candidate = f"{current.rstrip('/')}/{part}"
            if not pending and not follow:
                return candidate
            try:
                target = os.readlink(candidate)
            except OSError:  # not a link, or not there: the kernel creates it or fails
                current = candidate
                continue
            hops += 1
            if hops > _MAX_HOPS:
                raise OSError(errno.ELOOP, "too many symbolic links")
            if target.startswith("/"):
                current = "/"
            pending.extend(part for part in reversed(target.split("/")) if part not in ("", "."))
        return current

    def writable_path(self, path: str) -> bool:
        return path == os.devnull or any(path == root or path.startswith(root + "/") for root in self.writable)

    def _writable(self, what: str, path: str) -> None:
        """Refuse ``what`` unless ``path`` (resolved) is writable."""
        if not self.writable_path(path):
            raise _Refused(f"{what}: {_shown(path)}")

    # ------------------------------------------------------------------------------------------------ deciding

    def check(self, tid: int, nr: int, arch: int, args: tuple[int, ...]) -> None:
        """Raise :class:`_Refused` when the recorded part may not make this call."""
        if arch != ARCH_X86_64 or nr & X32_BIT:
            raise _Refused(f"system call of another ABI (number {nr & ~X32_BIT})")
        tgid = self._tgid(tid)
        if nr in OPENS:
            name, dirfd_at, path_at, flags_at = OPENS[nr]
            if args[flags_at] & OPEN_WRITE_FLAGS:
                dirfd = None if dirfd_at is None else args[dirfd_at]
                self._file(f"file write ({name}, refused by the kernel)", tid, tgid, dirfd, args[path_at], True)
            return
        name = ALWAYS.get(nr) or FD_WRITES.get(nr) or LOW_FD_ARG1.get(nr) or ("clone" if nr == CLONE else "")
        if name in REFUSED_NAMES:
            raise _Refused(f"{name} (refused by the kernel while the recorded steps run)")
        if name in ("dup2", "dup3"):
            raise _Refused(f"descriptor redirect ({name} onto descriptor {_int(args[1])}, refused by the kernel)")
        if name in ("clone", "clone3"):
            flags = args[0] if name == "clone" else struct.unpack("<Q", self.read(tgid, args[0], 8))[0]
            if flags & CLONE_NEW_FLAGS:
                raise _Refused(f"new namespace ({name}, refused by the kernel)")
        elif name == "openat2":
            flags, _, resolve = struct.unpack("<QQQ", self.read(tgid, args[2], 24))
            if flags & OPEN_WRITE_FLAGS:
                path = os.fsdecode(self.string(tgid, args[1]))
                if resolve & _RESOLVE_IN_ROOT:  # an absolute path is taken from the folder descriptor
                    path = path.lstrip("/") or "."
                real = self._resolve(tid, tgid, args[0], path, follow=True)
                self._writable("file write (openat2, refused by the kernel)", real)
        elif name in _PATHS:
            for n, (dirfd_at, path_at) in enumerate(_PATHS[name]):
                dirfd = None if dirfd_at is None else args[dirfd_at]
                what = f"file change ({name}, refused by the kernel)"
                follow = name in _FOLLOWED or (name == "linkat" and n == 0 and bool(args[4] & _AT_SYMLINK_FOLLOW))
                self._file(what, tid, tgid, dirfd, args[path_at], follow)
        elif name in ("execve", "execveat"):
            at = 1 if name == "execveat" else 0
            raise _Refused(f"process spawn ({name}, refused by the kernel): {_shown(self.string(tgid, args[at]))}")
        elif name in ("connect", "bind"):
            self._address(name, tid, tgid, args)
        elif name:
            fd = args[2] if name in ("copy_file_range", "splice") else args[0]
            self._descriptor(name, tid, tgid, _int(fd))

    def _file(self, what: str, tid: int, tgid: int, dirfd: "int | None", address: int, follow: bool) -> None:
        """Refuse ``what`` unless the path at ``address`` names a writable file."""
        path = os.fsdecode(self.string(tgid, address))
        self._writable(what, self._resolve(tid, tgid, dirfd, path, follow=follow))

    def _address(self, name: str, tid: int, tgid: int, args: tuple[int, ...]) -> None:
        raw = self.read(tgid, args[1], min(args[2], 128))
        family = struct.unpack("<H", raw[:2])[0] if len(raw) >= 2 else 0
        if family == _socket.AF_UNIX:
            path = raw[2:].split(b"\0", 1)[0] if raw[2:3] != b"\0" else b""
            if not path:
                if len(raw) > 3 and name == "connect":  # an abstract socket (Landlock scopes them too)
                    raise _Refused(f"network connection ({name}, refused by the kernel): @{_shown(raw[3:])}")
                return
            # connecting to a named socket is left to the audit hooks, as under Landlock (the C library's own
            # lookups of users and hosts connect to such sockets); binding one creates a file
            if name == "bind":
                real = self._resolve(tid, tgid, None, os.fsdecode(path), follow=False)
                self._writable(f"network connection ({name}, refused by the kernel)", real)
            return
        if family not in (_socket.AF_INET, _socket.AF_INET6) or len(raw) < 8:
            return
        if not self._stream(tgid, _int(args[0])):
            return  # UDP: left to the audit hooks, as under Landlock
        port = struct.unpack(">H", raw[2:4])[0]
        if family == _socket.AF_INET:
            host = _socket.inet_ntop(_socket.AF_INET, raw[4:8])
        else:
            host = f"[{_socket.inet_ntop(_socket.AF_INET6, raw[8:24])}]" if len(raw) >= 24 else "[?]"
        if name == "bind" or port not in self.ports:
            raise _Refused(f"network connection ({name}, refused by the kernel): {host}:{port}")

    def _stream(self, tgid: int, fd: int) -> bool:
        try:
            sock = self._copy_socket(tgid, fd)
        except OSError as exc:  # not open (the kernel fails the call itself), or unknown: checked as TCP
            return exc.errno != errno.EBADF
        try:
            return bool(sock.type == _socket.SOCK_STREAM)
        finally:
            sock.close()

    def _descriptor(self, name: str, tid: int, tgid: int, fd: int) -> None:
        """A write through ``fd``: allowed to a writable file, a pipe, an unnamed or writable Unix socket, a TCP
        connection to an allowed port, a terminal or a kernel object; refused to anything else."""
        try:
            target = os.readlink(f"/proc/{tid}/fd/{fd}")
        except OSError:
            return  # not open: the kernel fails the call itself
        before = f"{name} through a descriptor opened before the recorded steps, refused by the kernel"
        if target.startswith("/"):
            if target.endswith(" (deleted)") or target.startswith("/memfd:"):
                return
            if self.writable_path(target) or target in _TERMINALS or target.startswith(("/dev/pts/", "/dev/tty")):
                return
            self._refuse_descriptor(tid, tgid, fd, f"file write ({before}): {_shown(target)}")
        if not target.startswith("socket:"):
            return  # a pipe, an eventfd, an epoll or another kernel object
        try:
            sock = self._copy_socket(tgid, fd)
        except OSError as exc:
            if exc.errno == errno.EBADF:
                return  # gone: the kernel fails the call itself
            self._refuse_descriptor(tid, tgid, fd, f"network send ({before}): {target} (it could not be checked)")
            return
        try:
            family, kind = sock.family, sock.type
            inode = os.fstat(sock.fileno()).st_ino
            try:
                peer = sock.getpeername() if kind == _socket.SOCK_STREAM or family == _socket.AF_UNIX else None
            except OSError:
                peer = None  # not connected
        finally:
            sock.close()
        tcp = family in (_socket.AF_INET, _socket.AF_INET6) and kind == _socket.SOCK_STREAM
        if tcp and not peer:  # only a send that connects (TCP Fast Open) would get through
            raise _Refused(f"network connection ({name} that connects, refused by the kernel)")
        if family == _socket.AF_UNIX:
            shown = os.fsdecode(peer) if isinstance(peer, bytes) else str(peer or "")
            if not shown or inode not in self.before or self.writable_path(shown):
                return  # unnamed, or connected while confined (the connect was the audit hooks' to check)
            self._refuse_descriptor(tid, tgid, fd, f"network send ({before}): {_shown(shown)}")
        if tcp and peer and peer[1] not in self.ports:
            self._refuse_descriptor(tid, tgid, fd, f"network send ({before}): {_shown(str(peer[0]))}:{peer[1]}")

    def _refuse_descriptor(self, tid: int, tgid: int, fd: int, text: str) -> None:
        """Refuse a write through ``fd``, and keep the descriptor (with its file's identity) to be silenced."""
        try:
            target = os.stat(f"/proc/{tid}/fd/{fd}")
        except OSError:
            pass
        else:
            entry = f"fd:{tgid}:{fd}:{target.st_dev}:{target.st_ino}"
            if entry not in self.silence:
                self.silence.append(entry)
        raise _Refused(text)

    # -------------------------------------------------------------------------------------------------- serving

    def answer(self, listener: int) -> None:
        """Receive one handed-over call and answer it: go on, or fail with ``EACCES`` (kept, named)."""
        import fcntl  # here, not at the top: the call tables are imported on systems without it (Windows)

        buffer = bytearray(_NOTIF.size)
        try:
            fcntl.ioctl(listener, _NOTIF_RECV, buffer)
        except OSError:
            return  # the thread died meanwhile, or a signal interrupted it
        ident, tid, _, nr, arch, _, *args = _NOTIF.unpack(buffer)
        error, flags = 0, _FLAG_CONTINUE
        if self.confined:
            try:
                self.check(tid, nr, arch, tuple(args))
            except _Refused as refused:
                error, flags = -errno.EACCES, 0
                where = self._frame(tid)
                self._keep(f"{refused} (in {where})" if where else str(refused))
            except Exception as exc:  # noqa: BLE001 - a call that cannot be checked does not go on
                error, flags = -errno.EACCES, 0
                self._keep(f"system call {nr} that could not be checked ({type(exc).__name__})")
        try:
            fcntl.ioctl(listener, _NOTIF_SEND, bytearray(_RESP.pack(ident, 0, error, flags)))
        except OSError:
            pass  # the thread died meanwhile

    def _frame(self, tid: int) -> str:
        """The agent's frame that made the call thread ``tid`` is held at, as the replaying process tells it
        (nothing when it does not answer in time: the thread may hold the GIL in a C extension)."""
        if self.frames is None:
            return ""
        self._asked += 1
        try:
            self.frames.send(f"{self._asked} {tid}".encode())
            while True:  # an answer to an earlier question that came too late is dropped
                ident, _, where = self.frames.recv(4096).decode("utf-8", "replace").partition(" ")
                if ident == str(self._asked):
                    return _shown(where)
        except OSError:  # a timeout included
            return ""

    def _keep(self, text: str) -> None:
        if text not in self.refused:
            self.refused.append(text)

    def command(self, control: "_socket.socket", message: bytes) -> None:
        if message == b"confine":
            self.before = _sockets(self.agent_pid)
            self.confined = True
            control.send(b"ok")
        elif message == b"release":
            self.confined = False
            control.send("\0".join(["released", *self.refused, *self.silence]).encode("utf-8", "replace"))
            self.refused, self.silence = [], []


def _pidfd_getfd(pidfd: int, target: int) -> int:
    import ctypes  # only now: a socket to look at is rare, and ctypes is slow to import

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    copy = int(libc.syscall(_SYS_PIDFD_GETFD, pidfd, target, 0))
    if copy < 0:
        raise OSError(ctypes.get_errno(), "pidfd_getfd")
    return copy


def _sockets(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` holds now."""
    found: set[int] = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:[") and target.endswith("]") and target[8:-1].isdigit():
            found.add(int(target[8:-1]))
    return found


def _int(value: int) -> int:
    """A call argument (an unsigned 64-bit register) as the C ``int`` it holds (a descriptor, ``AT_FDCWD``)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _shown(raw: "bytes | str") -> str:
    text = os.fsdecode(raw) if isinstance(raw, bytes) else raw
    return "".join(ch if ch.isprintable() else "?" for ch in text)[:300]


def serve(agent_pid: int, control: "_socket.socket") -> None:
    """Check the agent's memory can be read, say so, then serve until no thread under the filter is left."""
    control.send(f"pid {os.getpid()}".encode())
    if control.recv(16) != b"go":
        return
    try:
        with open(f"/proc/{agent_pid}/mem", "rb"):
            pass
    except OSError as exc:
        control.send(f"error: cannot read the agent's memory ({exc.strerror})".encode())
        return
    control.send(b"ready")
    message, ancillary, _, _ = control.recvmsg(65536, _socket.CMSG_SPACE(8))
    fds = [
        fd
        for level, kind, data in ancillary
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
        for fd in struct.unpack(f"{len(data) // 4}i", data[: len(data) // 4 * 4])
    ]
    if len(fds) < 2:
        return
    listener = fds[0]
    ports, *writable = os.fsdecode(message).split("\0")
    supervisor = Supervisor(agent_pid, writable, [int(port) for port in ports.split(",") if port])
    supervisor.frames = _socket.socket(fileno=fds[1])
    supervisor.frames.settimeout(_FRAME_WAIT)
    control.send(b"ok")
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    poller.register(control.fileno(), select.POLLIN)
    attached = True
    while True:
        for fd, events in poller.poll():
            if fd == listener:
                if events & select.POLLIN:
                    supervisor.answer(listener)
                elif events & (select.POLLHUP | select.POLLERR):
                    return  # no thread or process under the filter is left
            elif attached:
                message = control.recv(64) if events & select.POLLIN else b""
                if message:
                    supervisor.command(control, message)
                else:  # the replay ended (or the agent's process): released for good
                    supervisor.confined = False
                    attached = False
                    poller.unregister(control.fileno())


def main() -> None:
    agent_pid, control_fd = int(sys.argv[1]), int(sys.argv[2])
    control = _socket.socket(fileno=control_fd)
    if os.fork() > 0:  # the replay waits for this first process only; the supervisor is not its child
        os._exit(0)
    os.setsid()  # no signal meant for the replay's terminal (Ctrl-C) ends it
    try:
        serve(agent_pid, control)
    except OSError:
        pass


if __name__ == "__main__":
    main()
