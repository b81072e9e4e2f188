"""Linux Landlock, as the kernel offers it: which ABI it has, and the one call that confines the calling thread.

Landlock (Linux 5.13 and later) lets an unprivileged thread give up rights for good: once
:func:`restrict_thread` returns, the calling thread and every thread and process it starts afterwards can no
longer write, create, rename or remove files outside the folders it was given, connect or bind TCP ports it was
not given, or execute any program, whatever code does it (Python, ``ctypes``, a C extension, a forked child).
Reading stays allowed. Rights are checked when a file is opened, so a descriptor opened before keeps its rights;
the replay engine confines a thread before the agent's module is imported, so the agent holds none.

What each ABI version adds (``landlock(7)``): 2 renames and links across folders (``REFER``), 3 truncation, 4 TCP
bind and connect by port, 5 device ``ioctl``, 6 scoping of abstract Unix sockets and signals, 7 logging flags.
Older kernels enforce what they know; :func:`restrict_thread` asks for no right the kernel does not know.

The syscalls are called through ``ctypes`` (their numbers are the same on every architecture: they were added
after the tables were unified). Nothing here is process-wide: :func:`abi` asks the kernel each time (one cheap
syscall), and :func:`restrict_thread` acts on the calling thread only (``no_new_privs`` too is per thread).

This module must never confine a thread it was not asked to, and never report a confinement that did not
happen: any failure raises :class:`LandlockError` and leaves the thread unconfined.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable
from typing import Final

_SYS_CREATE_RULESET: Final = 444
_SYS_ADD_RULE: Final = 445
_SYS_RESTRICT_SELF: Final = 446
_CREATE_RULESET_VERSION: Final = 1 << 0
_RULE_PATH_BENEATH: Final = 1
_RULE_NET_PORT: Final = 2
_PR_SET_NO_NEW_PRIVS: Final = 38

# File system rights (landlock.h), by the ABI that introduced them.
FS_EXECUTE: Final = 1 << 0
FS_WRITE_FILE: Final = 1 << 1
_FS_READ_FILE: Final = 1 << 2
_FS_READ_DIR: Final = 1 << 3
_FS_REMOVE_DIR: Final = 1 << 4
_FS_REMOVE_FILE: Final = 1 << 5
_FS_MAKE_CHAR: Final = 1 << 6
_FS_MAKE_DIR: Final = 1 << 7
_FS_MAKE_REG: Final = 1 << 8
_FS_MAKE_SOCK: Final = 1 << 9
_FS_MAKE_FIFO: Final = 1 << 10
_FS_MAKE_BLOCK: Final = 1 << 11
_FS_MAKE_SYM: Final = 1 << 12
_FS_REFER: Final = 1 << 13  # ABI 2
FS_TRUNCATE: Final = 1 << 14  # ABI 3

_FS_CHANGES_V1: Final = (
    FS_WRITE_FILE
    | _FS_REMOVE_DIR
    | _FS_REMOVE_FILE
    | _FS_MAKE_CHAR
    | _FS_MAKE_DIR
    | _FS_MAKE_REG
    | _FS_MAKE_SOCK
    | _FS_MAKE_FIFO
    | _FS_MAKE_BLOCK
    | _FS_MAKE_SYM
)
"""Every right that changes the file system in ABI 1 (reading files and folders is not restricted)."""

_NET_BIND_TCP: Final = 1 << 0  # ABI 4
_NET_CONNECT_TCP: Final = 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0  # ABI 6

_FILE_RIGHTS: Final = FS_EXECUTE | FS_WRITE_FILE | _FS_READ_FILE | FS_TRUNCATE
"""The rights that apply to a file (a rule on a file, not a folder, may hold only these)."""


class LandlockError(OSError):
    """The kernel refused to confine the thread (or offers no Landlock)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols: libc is among them
    except OSError:
        return None
    libc.syscall.restype = ctypes.c_long
    return libc


def abi() -> int:
    """The Landlock ABI version this kernel offers, or 0 when it offers none (not Linux, an old kernel,
    Landlock not enabled at boot, or a container whose seccomp profile forbids the call)."""
    libc = _libc()
    if libc is None:
        return 0
    version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return int(version) if version > 0 else 0


def _fail(what: str) -> LandlockError:
    err = ctypes.get_errno()
    return LandlockError(err, f"landlock: {what}: {os.strerror(err)}")


def restrict_thread(
    *, writable: Iterable[str], ports: Iterable[int], version: int | None = None, network: bool = True
) -> int:
    """Confine the calling thread (and all it starts from now on): file-system changes only under the folders and files
    in ``writable``, TCP connections only to ``ports`` and no TCP bind (unless ``network`` is False: TCP is then not
    confined), nothing executed, abstract Unix sockets only within the sandbox. Returns the ABI version that was
    enforced; raises :class:`LandlockError` when the kernel offers no Landlock or refuses a step (the thread is then
    not confined, though ``no_new_privs`` may already be set on it)."""
    libc = _libc()
    version = abi() if version is None else version
    if libc is None or version < 1:
        raise LandlockError(0, "landlock: the kernel offers no Landlock")
    handled_fs = FS_EXECUTE | _FS_CHANGES_V1
    if version >= 2:
        handled_fs |= _FS_REFER
    if version >= 3:
        handled_fs |= FS_TRUNCATE
    handled_net = _NET_BIND_TCP | _NET_CONNECT_TCP if version >= 4 and network else 0
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET if version >= 6 else 0
    attr = _RulesetAttr(handled_fs, handled_net, scoped)
    size = ctypes.sizeof(_RulesetAttr) if version >= 6 else 16  # older kernels reject the unknown field
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _fail("create_ruleset")
    try:
        for path in dict.fromkeys(writable):
            _allow_path(libc, int(ruleset), path, handled_fs)
        if handled_net:
            for port in sorted(set(ports)):
                if _add_rule(libc, int(ruleset), _RULE_NET_PORT, _NetPortAttr(_NET_CONNECT_TCP, port)) < 0:
                    raise _fail(f"allow TCP port {port}")
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("set no_new_privs")
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise _fail("restrict_self")
    finally:
        os.close(int(ruleset))
    return version


def _allow_path(libc: ctypes.CDLL, ruleset: int, path: str, handled_fs: int) -> None:
    """Allow every handled change except execution beneath ``path`` (a folder), or writing ``path`` (a file).
    A path that does not exist is skipped: nothing can be written there that the rule would allow."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        access = handled_fs & ~FS_EXECUTE
        if not os.path.isdir(path):
            access &= _FILE_RIGHTS
        if _add_rule(libc, ruleset, _RULE_PATH_BENEATH, _PathBeneathAttr(access, fd)) < 0:
            raise _fail(f"allow writes under {path}")
    finally:
        os.close(fd)


def _add_rule(libc: ctypes.CDLL, ruleset: int, kind: int, rule: ctypes.Structure) -> int:
    return int(
        libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(kind), ctypes.byref(rule), ctypes.c_uint32(0))
    )
