"""The seccomp supervisor that confines the recorded steps of a live replay from step N (docs/security.md,
"Enforcement"), attacked on a real filter and a real supervisor process: a thread under the filter, in states
the replay switches (released, confined, released again), makes the calls a user's agent makes, through Python
and below it, and the test looks at the real effect (the file, the bytes a loopback listener received, the
program that ran) and at what the supervisor names."""

from __future__ import annotations

import ctypes
import errno
import os
import select
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from otel_replay.errors import ReplayRefused
from otel_replay.replay.safety import sandbox, seccomp
from otel_replay.semconv import ReplayMode

pytestmark = pytest.mark.skipif(not seccomp.available(), reason="needs seccomp user notification on Linux x86-64")

SUPERVISED = sandbox.Enforcement(abi=0, guarded=True, supervised=True)


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path) -> Path:
    """A folder outside every writable one: the temp folder is moved below the test's own folder."""
    temp = tmp_path / "system-temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder.resolve()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(10)
    try:
        yield server
    finally:
        server.close()


def attempt(action: Callable[[], object]) -> str:
    """``done``, or the name of the error the call met."""
    try:
        action()
    except OSError as exc:
        return str((exc.errno and os.strerror(exc.errno)) or type(exc).__name__)
    return "done"


def checked(result: int) -> int:
    """A libc call's result, raised as the ``OSError`` it stands for when it failed."""
    if result != 0 and result < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


def write_file(path: Path, text: str = "x", mode: str = "w") -> None:
    with open(path, mode, encoding="utf-8") as out:
        out.write(text)


def test_the_recorded_steps_change_nothing_outside_and_the_live_part_everything(
    outside: Path, listener: socket.socket
) -> None:
    """Confined, every way an agent changes the world outside the writable folders fails with ``EACCES`` and is
    named: an open for writing, a write through a descriptor opened before (at import), the same descriptor
    reached by its ``/proc/self/fd`` path, a symbolic link in the temp folder that points outside, a rename, a
    removal, a folder created, libc's ``open`` and ``system`` through ``ctypes``, a program started, a TCP
    connection and a send on a connection made before. Released (before and after), the same calls are real."""
    ledger = outside / "ledger.txt"
    write_file(ledger, "recorded\n")
    (outside / "keep.txt").write_text("keep", encoding="utf-8")
    temp = Path(tempfile.gettempdir())
    (temp / "link").symlink_to(outside / "through-link.txt")
    opened_at_import = open(ledger, "a", encoding="utf-8")  # noqa: SIM115
    (outside / "sub").mkdir()  # for evade()
    (outside / "victim.txt").write_text("victim", encoding="utf-8")
    (temp / "lnk").symlink_to(outside / "sub")
    peer = socket.create_connection(listener.getsockname(), timeout=10)
    accepted, _ = listener.accept()
    accepted.settimeout(10)
    peer_name = os.readlink(f"/proc/self/fd/{peer.fileno()}")  # socket:[inode]
    port = listener.getsockname()[1]
    libc = ctypes.CDLL(None, use_errno=True)

    def effects(tag: str) -> dict[str, str]:
        marker = outside / f"spawned-{tag}"
        return {
            "open": attempt(lambda: write_file(outside / f"new-{tag}.txt")),
            "descriptor": attempt(lambda: os.write(opened_at_import.fileno(), f"{tag}\n".encode())),
            "proc-self": attempt(lambda: write_file(Path(f"/proc/self/fd/{opened_at_import.fileno()}"), tag, "a")),
            "symlink": attempt(lambda: write_file(temp / "link")),
            "read": attempt(lambda: (outside / "keep.txt").read_text(encoding="utf-8")),
            "rename": attempt(lambda: os.rename(outside / "keep.txt", outside / f"kept-{tag}.txt")),
            "remove": attempt(lambda: os.remove(outside / f"kept-{tag}.txt")),
            "mkdir": attempt(lambda: os.mkdir(outside / f"folder-{tag}")),
            "libc": attempt(
                lambda: os.close(checked(libc.open(str(outside / f"libc-{tag}").encode(), os.O_WRONLY | os.O_CREAT)))
            ),
            "system": attempt(lambda: checked(-1 if libc.system(f"touch {marker}".encode()) else 0)),
            "spawn": attempt(lambda: subprocess.run(["/usr/bin/touch", f"{marker}-run"], check=True)),
            "connect": attempt(lambda: socket.create_connection(("127.0.0.1", port), timeout=10).close()),
            "send": attempt(lambda: peer.sendall(tag.encode())),
            "inside": attempt(lambda: write_file(temp / f"inside-{tag}.txt")),
        }

    with sandbox.Confinement(SUPERVISED) as confinement:
        before = confinement.call(lambda: effects("before"))
        supervisor = confinement.supervisor
        assert supervisor is not None
        supervisor.confine()
        (outside / "keep.txt").write_text("keep", encoding="utf-8")  # the test's own thread is never confined
        confined = confinement.call(lambda: effects("confined"))
        evasions = confinement.call(lambda: evade(outside, port))
        refused, silenced = supervisor.release()
        after = confinement.call(lambda: effects("after"))
    opened_at_import.close()
    assert set(evasions.values()) == {"Permission denied"}, evasions
    assert (outside / "victim.txt").read_text(encoding="utf-8") == "victim"
    assert not (Path(tempfile.gettempdir()) / "hard.txt").exists()
    failed = {
        f"{what} {tag}": result
        for tag, results in (("before", before), ("after", after))
        for what, result in results.items()
        if result != "done"
    }
    # the earlier connection was silenced when released (below): a send through it now fails, loudly
    assert failed == {"send after": os.strerror(errno.ENOTSOCK)}, failed
    assert sorted(what for what, result in confined.items() if result == "done") == ["inside", "read"], confined
    assert not (outside / "new-confined.txt").exists() and not (outside / "folder-confined").exists()
    assert not (outside / "spawned-confined").exists() and not (outside / "spawned-confined-run").exists()
    # the ledger's descriptor and the earlier connection, refused while confined, now lead to /dev/null: what the
    # agent still held for them is never written, the live part's writes through them go nowhere
    assert sorted(silenced) == sorted([str(ledger), peer_name])
    assert ledger.read_text(encoding="utf-8") == "recorded\nbefore\nbefore"
    received = b""
    while chunk := accepted.recv(64):  # the connection ended when its descriptor was silenced
        received += chunk
    assert received == b"before"
    accepted.close()
    peer.close()
    for named in (
        f"file write (openat, refused by the kernel): {outside / 'new-confined.txt'}",
        f"through a descriptor opened before the recorded steps, refused by the kernel): {ledger}",
        f"file write (openat, refused by the kernel): {outside / 'through-link.txt'}",
        f"file change (rename, refused by the kernel): {outside / 'keep.txt'}",
        f"file change (mkdir, refused by the kernel): {outside / 'folder-confined'}",
        f"file write (openat, refused by the kernel): {outside / 'libc-confined'}",
        "process spawn (execve, refused by the kernel): /bin/sh",
        "process spawn (execve, refused by the kernel): /usr/bin/touch",
        f"file write (openat, refused by the kernel): {outside / 'victim.txt'}",
        f"file change (unlink, refused by the kernel): {outside / 'victim.txt'}",
        f"file change (link, refused by the kernel): {outside / 'victim.txt'}",
        "descriptor redirect (dup2 onto descriptor 2, refused by the kernel)",
        "unshare (refused by the kernel while the recorded steps run)",
        "network connection (sendto that connects, refused by the kernel)",
        f"network connection (connect, refused by the kernel): 127.0.0.1:{port}",
        f"network send (sendto through a descriptor opened before the recorded steps, refused by the kernel): "
        f"127.0.0.1:{port}",
    ):
        assert any(named in what for what in refused), (named, refused)


def evade(outside: Path, port: int) -> dict[str, str]:
    """Ways around a check by path or descriptor, each tried while confined: a write-open of ``/dev/fd/N`` (the
    agent's descriptor, not the supervisor's), ``..`` after a link in the temp folder that points outside, a hard
    link of an outside file into the temp folder, a file put in place of standard error, a new user namespace,
    and a TCP Fast Open send that connects without ``connect`` (the files are made before, see the test)."""
    temp = Path(tempfile.gettempdir())
    libc = ctypes.CDLL(None, use_errno=True)
    readonly = open(outside / "victim.txt", encoding="utf-8")  # noqa: SIM115
    saved = os.dup(2)

    def fast_open() -> None:
        with socket.socket() as sock:
            sock.sendto(b"fast", socket.MSG_FASTOPEN, ("127.0.0.1", port))

    try:
        return {
            "dev-fd": attempt(lambda: write_file(Path(f"/dev/fd/{readonly.fileno()}"))),
            "dotdot": attempt(lambda: os.unlink(temp / "lnk" / ".." / "victim.txt")),
            "link": attempt(lambda: os.link(outside / "victim.txt", temp / "hard.txt")),
            "dup2": attempt(lambda: os.dup2(readonly.fileno(), 2)),
            "unshare": attempt(lambda: checked(libc.unshare(0x10000000))),  # CLONE_NEWUSER
            "fast-open": attempt(fast_open),
        }
    finally:
        if os.path.sameopenfile(2, readonly.fileno()):  # only if the redirect got through: give stderr back
            os.dup2(saved, 2)
        os.close(saved)
        readonly.close()


def test_the_supervisor_ends_with_the_last_thread_under_its_filter() -> None:
    """No supervisor outlives the threads it answers for: once the replay's thread (and what it started) ended,
    the supervisor process exits; the host's threads were never under the filter."""
    with sandbox.Confinement(SUPERVISED) as confinement:
        confinement.call(lambda: None)
        assert confinement.supervisor is not None and confinement.supervisor.pid is not None
        pid = confinement.supervisor.pid
        pidfd = os.pidfd_open(pid)
    try:
        poller = select.poll()  # not select(): a worker of the suite may hold more than 1,024 descriptors
        poller.register(pidfd, select.POLLIN)
        assert poller.poll(60_000), f"the supervisor {pid} is still running"  # readable once the process exited
    finally:
        os.close(pidfd)
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/status", encoding="ascii") as status:
        assert "Seccomp:\t0" in status.read()  # the caller's thread: no filter


@pytest.mark.parametrize("setting", ["auto", "require"])
@pytest.mark.parametrize("failing", ["start", "install"])
def test_a_supervisor_that_cannot_start_falls_back_or_refuses(
    monkeypatch: pytest.MonkeyPatch, setting: str, failing: str
) -> None:
    """The supervisor process could not start (or read this process's memory), or the kernel refused the filter:
    under ``auto`` the replay learns it runs under the audit hooks alone and its calls run here; under ``require``
    it is refused before the agent's first line."""

    def refuse(*_: object, **__: object) -> None:
        raise seccomp.SeccompError(0, f"seccomp: {failing} refused")

    if failing == "start":
        monkeypatch.setattr(seccomp.Supervisor, "start", refuse)
    else:
        monkeypatch.setattr(seccomp, "install", refuse)
    monkeypatch.setenv("OTEL_REPLAY_SANDBOX", setting)
    learned: list[str] = []
    ran: list[str] = []
    with sandbox.Confinement(SUPERVISED, on_unconfined=lambda weaker: learned.append(weaker.text)) as confinement:
        if setting == "require":
            with pytest.raises(ReplayRefused, match=f"{failing} refused"):
                confinement.call(lambda: ran.append("agent"))
            assert ran == [] and learned == []
        else:
            confinement.call(lambda: ran.append("import"))
            assert learned == ["audit hooks only"] and ran == ["import"] and confinement.supervisor is None


def test_which_live_replays_are_supervised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a live replay from a step past 0 has recorded steps to confine; ``off`` keeps the guard alone, and
    ``require`` refuses one the system cannot supervise."""

    def live(from_step: int | None, setting: str) -> str:
        return sandbox.plan(ReplayMode.LIVE, allow_side_effects=False, setting=setting, from_step=from_step).text

    assert live(2, "auto") == "seccomp supervisor" and live(2, "require") == "seccomp supervisor"
    assert live(2, "off") == "audit hooks only"
    assert live(0, "require") == "audit hooks only" and live(None, "require") == "none"
    monkeypatch.setattr(seccomp, "available", lambda: False)
    assert live(2, "auto") == "audit hooks only"
    with pytest.raises(ReplayRefused, match="cannot confine the recorded steps of a live replay"):
        live(2, "require")
