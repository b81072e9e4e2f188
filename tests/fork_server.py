"""CLI and agent processes forked from a warm interpreter, for the suite (test-only).

Most of the suite's CPU goes into processes it starts the way a user starts them: ``python -m otel_replay.cli
replay ...`` and agent programs (``python agent.py``). Each of them imports the CLI and the agent's SDK again
(openai, LangChain, LangGraph, the Agents SDK: seconds apiece). :func:`run` runs such a command as
``subprocess.run(command, capture_output=True, text=True, env=..., cwd=..., timeout=...)`` would, but in a child
forked from a server process (one per test process) that has already imported those modules and done nothing
else: no store opened, no thread started, otel-replay not configured.

The child gets what a fresh process would have got: the same argv (``sys.argv``, a fresh ``__main__``), the
call's environment (``os.environ`` replaced, so C code sees it too), working directory and ``sys.path`` (the
path a fresh interpreter computes for that environment and directory, asked of one once per distinct
``PYTHONPATH`` and directory), and the call's pipes as file descriptors 0, 1 and 2; it runs the command as the
interpreter would (``runpy`` for ``-m``, the script's code in ``__main__``) and exits with the command's exit
code after the interpreter's exit steps (non-daemon threads joined, ``atexit`` handlers, streams flushed).
Whatever the command installs (the side-effect guard's process-wide audit hook) and imports (the agent, chDB and
its threads) dies with the child.

A command runs as a real subprocess instead whenever the fork could differ from one:

- ``OTEL_REPLAY_TEST_FORKSERVER=0`` in the test process's environment (the switch back to subprocesses), or
  coverage is measuring (a forked child would not be measured);
- the call's environment differs from the server's in a variable that a preloaded module read while it was
  imported (the server records every read of ``os.environ`` during its imports: ``OTEL_PYTHON_CONTEXT``,
  ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``, the Agents SDK's ``OPENAI_AGENTS_DONT_LOG_MODEL_DATA``...; not
  ``OTEL_REPLAY_FAULTS``: ``otel_replay.faults`` is not among the preloaded modules, so a child imports it and
  reads the call's value), or in one the interpreter reads at start-up (``PYTHON*`` other than ``PYTHONPATH``,
  the locale's ``LC_*``/``LANG``, ``TZ``, coverage's);
- a module the server imported would be found elsewhere on the call's ``sys.path`` (a file in the working
  directory or on ``PYTHONPATH`` that shadows it);
- any other argument than the ones above, a command that is neither ``python -m otel_replay.cli`` nor
  ``python SCRIPT.py``, or the server could not start (its log says why).

What stays different, on purpose: the child has imported the preloaded SDKs even when the command would not
have (``sys.modules`` holds more; otel-replay's instrumentors patch an imported SDK at ``instrument()`` rather
than on its import), its parent is the server, its hash seed is the server's (``random`` is reseeded at fork by
the standard library), a traceback it prints starts with this module's frames, the server's imported objects
are frozen for the garbage collector (``gc.freeze``: otherwise every full collection in a child would scan and
copy the server's heap), numpy's BLAS and pyarrow's allocator run without threads of their own
(:data:`NO_IMPORT_THREADS`), and the teardown of modules at exit is skipped (``os._exit`` after the steps above).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SWITCH = "OTEL_REPLAY_TEST_FORKSERVER"
"""Environment variable: ``0`` runs every command as a real subprocess."""

LOG = "OTEL_REPLAY_TEST_FORKSERVER_LOG"
"""Environment variable: a file to which each call appends one line, ``fork`` or ``subprocess: <reason>``."""

PRELOAD = (
    "otel_replay.cli",
    "otel_replay.cli.app",
    "otel_replay.replay.engine",
    "otel_replay.storage.store",
    "otel_replay.exporting.setup",
    "otel_replay.instrumentation",
    "otel_replay.cases",
    "otel_replay.report",
    "opentelemetry.sdk.trace",
    "openai",
    "langchain_core.language_models",
    "langchain_openai",
    "langgraph.prebuilt",
    "langchain_classic.agents",
    "agents",
    "anthropic",
    # what instrument() imports: the instrumentors, the SDK modules they patch, the contrib base's checks
    "otel_replay.instrumentation.openai",
    "otel_replay.instrumentation.anthropic",
    "otel_replay.instrumentation.langchain",
    "otel_replay.instrumentation.openai_agents",
    "openai.resources.chat.completions.completions",
    "openai.resources.responses.responses",
    "anthropic.resources.messages.messages",
    "opentelemetry.instrumentation.instrumentor",
    "opentelemetry.instrumentation.dependencies",
    "httpcore2",  # the SDKs' HTTP transport imports it when a client is made
    "otel_replay.storage.ingest",
    "clickhouse_connect",
    "pyarrow",
    # what most commands import on first use: the CLI's run, its rich output, the replay's trust rule, the lab,
    # the SDKs' lazily imported parts
    "runpy",
    "typer._adapters",
    "typer._click.decorators",
    "rich._emoji_codes",
    "otel_replay.terminal",
    "otel_replay.replay.safety.trust",
    "otel_replay.replay.scopes",
    "otel_replay.replay.scopes.toolcode",
    "otel_replay.lab",
    "openai.resources.chat",
    "langchain_core.tracers.stdout",
    "langchain_core.tracers.run_collector",
    # the SDKs of the other realworld agents: multi-agent LangGraph, MCP (not smolagents or LlamaIndex: they read
    # OPENBLAS_NUM_THREADS at import, which the server sets, so no call could use it; nor Pydantic AI, which
    # imports fastmcp when it is installed, whose settings copy the whole environment at import: every call
    # whose environment differs in any variable would then run as a subprocess)
    "langgraph_supervisor",
    "langgraph_swarm",
    "mcp",
    "mcp.client.stdio",
    "agents.mcp",
    "otel_replay.instrumentation.pydantic_ai",
    "otel_replay.instrumentation.mcp",
)
"""What the server imports before it forks: the CLI, the SDKs of the suite's agents, the modules that
``instrument()``, the SDKs' first client and most commands import on first use (about 0.4 s of CPU per forked
replay), and what opening a store imports besides chDB (clickhouse-connect; pyarrow and numpy, which chDB's
connection module imports: about 0.35 s of CPU per command that opens a store). Never a module that starts a
thread on import (chDB starts a dozen native ones: a forked child would inherit none of them; numpy and pyarrow
start none under :data:`NO_IMPORT_THREADS`) or that the CLI treats as a signal (pandas)."""

NO_IMPORT_THREADS = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
"""Set in the server while it imports :data:`PRELOAD`, then removed: numpy's OpenBLAS starts no worker threads
and pyarrow's jemalloc no background thread (both read these from C when they load). A child runs with the
call's environment, but its BLAS stays single-threaded and its Arrow allocator purges inline, as the knobs
left them; nothing the suite checks depends on either."""

STARTUP_PREFIXES = ("PYTHON", "LC_", "COV_", "COVERAGE_")
STARTUP_NAMES = ("LANG", "LANGUAGE", "TZ")
"""Variables the interpreter (or coverage's start-up hook) reads when it starts: a call whose value differs from
the server's runs as a subprocess (``PYTHONPATH`` aside, which :func:`run` handles)."""


def _startup_variable(name: str) -> bool:
    return name != "PYTHONPATH" and (name.startswith(STARTUP_PREFIXES) or name in STARTUP_NAMES)


# ---------------------------------------------------------------------------------------------------------------
# The server (``python fork_server.py SOCKET MODULE...``)
# ---------------------------------------------------------------------------------------------------------------


def _preload(modules: Sequence[str]) -> tuple[dict[str, str | None], list[str]]:
    """Import ``modules``; return every environment variable read meanwhile (value, or None when unset) and the
    modules that could not be imported."""
    reads: dict[str, str | None] = {}
    environ_type = type(os.environ)
    original = environ_type.__getitem__

    def recording_getitem(self: Any, key: Any) -> Any:
        name = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
        try:
            value = original(self, key)
        except KeyError:
            reads.setdefault(name, None)
            raise
        reads.setdefault(name, value.decode(errors="replace") if isinstance(value, bytes) else value)
        return value

    missing: list[str] = []
    environ_type.__getitem__ = recording_getitem  # type: ignore[method-assign]
    try:
        for name in modules:
            try:
                __import__(name)
            except ImportError:
                missing.append(name)
    finally:
        environ_type.__getitem__ = original  # type: ignore[method-assign]
    return reads, missing


def _locate(name: str, path: Sequence[str]) -> str | None:
    """Where the path-based import system finds top-level module ``name`` on ``path`` (None: not there)."""
    from importlib.machinery import PathFinder

    try:
        spec = PathFinder.find_spec(name, list(path))
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin is not None:
        return spec.origin
    return os.pathsep.join(spec.submodule_search_locations or ())


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _serve(address: str, modules: Sequence[str]) -> None:
    """Preload, say what was read and found (one JSON line on stdout), then fork a child per connection until
    stdin (the test process's end of a pipe) closes."""
    del sys.path[0]  # this file's folder (tests/): a fresh ``python -m`` or script run would not have it
    before = {name: os.environ.get(name) for name in NO_IMPORT_THREADS}
    os.environ.update(NO_IMPORT_THREADS)
    try:
        reads, missing = _preload(modules)
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    problem = None
    if _threads() != 1:
        problem = f"{_threads()} threads after the imports: a forked child would miss them"
    for name in ("chdb", "pandas"):
        if name in sys.modules:
            problem = f"{name} was imported by the preloaded modules"
    top = sorted({name.partition(".")[0] for name in sys.modules} - {"__main__"})
    origins = {name: _locate(name, sys.path) or "" for name in top}
    origins = {name: where for name, where in origins.items() if where}
    # Run at start-up when found on the path: the server ran the one it found (Debian's Python has one), and a
    # call whose path finds that same file gets a child in which it has run. Where the server found none, a call
    # whose path finds one (PYTHONPATH) runs as a subprocess: a fresh process would run it, a child would not.
    for name in ("sitecustomize", "usercustomize"):
        origins.setdefault(name, "")
    sys.stdout.flush()
    sys.stderr.flush()
    # Out of the collector's sight: a child's collections would otherwise scan (and so copy) the whole heap.
    gc.freeze()
    import site

    hello = {
        "reads": reads,
        "missing": missing,
        "origins": origins,
        "problem": problem,
        "pid": os.getpid(),
        "user_site": bool(site.ENABLE_USER_SITE),
    }
    os.write(1, (json.dumps(hello) + "\n").encode())
    if problem is not None:
        return

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    os.write(1, b"ready\n")
    children: dict[int, socket.socket] = {}
    ready = selectors.DefaultSelector()
    ready.register(0, selectors.EVENT_READ)
    ready.register(listener, selectors.EVENT_READ)
    ready.register(wake_r, selectors.EVENT_READ)
    while True:
        events = [key.fileobj for key, _ in ready.select()]
        if 0 in events and not os.read(0, 4096):
            return  # the test process is gone or done
        if wake_r in events:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 4096):
                    pass
        _reap(children)
        if listener not in events:
            continue
        conn, _ = listener.accept()
        try:
            request, fds = _receive(conn)
        except (OSError, ValueError):
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:  # the child: becomes the command, and never returns
            ready.close()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for other in children.values():
                other.close()
            listener.close()
            os.close(wake_r)
            os.close(wake_w)
            conn.close()
            _exit(_become, request, fds)
        for fd in fds:
            os.close(fd)
        children[pid] = conn
        try:
            conn.sendall(f"pid {pid}\n".encode())
        except OSError:
            pass
        _reap(children)


def _reap(children: dict[int, socket.socket]) -> None:
    """Tell each finished child's caller its exit code (as ``subprocess`` gives it: negative for a signal)."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            conn.close()


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One request: its length, then JSON, with the child's stdin, stdout and stderr as passed descriptors."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    if len(fds) != 3 or b"\n" not in data:
        for fd in fds:
            os.close(fd)
        raise ValueError("bad request")
    size, _, body = data.partition(b"\n")
    while len(body) < int(size):
        more = conn.recv(1 << 16)
        if not more:
            raise ValueError("short request")
        body += more
    return json.loads(body), list(fds)


def _exit(command: Any, *args: Any) -> None:
    """Run ``command(*args)`` and leave the process as the interpreter's exit would, step by step: the exit code
    of ``SystemExit`` (or the traceback and 1), non-daemon threads joined, ``atexit`` handlers, the standard
    streams flushed. Then ``os._exit``: the teardown of every module the server had imported is skipped (it
    would copy most of the server's memory, about a second of CPU per call; a fresh process has far fewer
    modules to tear down)."""
    import atexit
    import threading

    try:
        command(*args)
        code = 0
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 - printed as the interpreter prints an uncaught exception
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
    if code < 0:  # the interpreter re-raises SIGINT on an uncaught KeyboardInterrupt
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def _exit_code(code: object) -> int:
    """The exit status the interpreter gives ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _become(request: Mapping[str, Any], fds: Sequence[int]) -> None:
    """In the forked child: take the call's descriptors, environment, directory, path and argv, then run it."""
    import importlib
    import runpy
    import types

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[:] = request["path"]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    main = types.ModuleType("__main__")
    main.__annotations__ = {}  # as the interpreter's own __main__ has
    sys.modules["__main__"] = main
    sys.orig_argv = [sys.executable, *request["argv"]]
    if request["module"] is not None:
        sys.argv = ["-m", *request["args"]]
        runpy._run_module_as_main(request["module"])  # type: ignore[attr-defined]  # what ``python -m`` calls
        return
    _run_script(main, request["script"], request["args"])


def _run_script(main: Any, script: str, args: Sequence[str]) -> None:
    """What ``python SCRIPT ARGS`` does: the file's code run in ``__main__``."""
    import builtins
    from importlib.machinery import SourceFileLoader

    filename = os.path.abspath(script)
    main.__dict__.update(
        __file__=filename,
        __cached__=None,
        __doc__=None,
        __package__=None,
        __spec__=None,
        __loader__=SourceFileLoader("__main__", filename),
        __builtins__=builtins,
    )
    sys.argv = [script, *args]
    with open(filename, "rb") as source:
        code = compile(source.read(), filename, "exec")
    exec(code, main.__dict__)


# ---------------------------------------------------------------------------------------------------------------
# The client (the test process)
# ---------------------------------------------------------------------------------------------------------------

_BASE_ENV = dict(os.environ)
"""The test process's environment when this module was imported (before any test changed it): the server's."""


class _Server:
    """One fork server, started with environment ``env``."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(_BASE_ENV if env is None else env)
        self.calls = 0  # calls in flight
        self.folder = tempfile.mkdtemp(prefix="orp-fork-")
        self.address = os.path.join(self.folder, "socket")
        self.log = Path(self.folder) / "server.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), self.address, *PRELOAD],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=self.env,
                cwd=self.folder,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        self.hello: dict[str, Any] = json.loads(line) if line.strip() else {"problem": "the server exited"}
        self.problem: str | None = self.hello.get("problem")
        if self.problem is None and self.process.stdout.readline() != b"ready\n":
            self.problem = f"the server did not start (see {self.log})"
        self.process.stdout.close()
        self.reads: dict[str, str | None] = self.hello.get("reads", {})
        self.origins: dict[str, str] = self.hello.get("origins", {})
        self.user_site: bool = self.hello.get("user_site", True)
        self.paths: dict[tuple[str, ...], list[str]] = {}
        atexit.register(self.stop)

    def stop(self) -> None:
        """Close the server's stdin (it exits), wait for it, and remove its folder (socket and log) unless it
        reported a problem, whose log is kept."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)
        if self.problem is None and self.process.returncode == 0:
            shutil.rmtree(self.folder, ignore_errors=True)

    def site_path(self, env: Mapping[str, str], cwd: str) -> list[str]:
        """``sys.path`` after start-up (before the script's or ``-m``'s first entry) for this environment and
        directory, as a fresh interpreter computes it."""
        pythonpath = env.get("PYTHONPATH", "")
        relative = any(not os.path.isabs(entry) for entry in pythonpath.split(os.pathsep)) if pythonpath else False
        # the directory matters only to relative PYTHONPATH entries, HOME only to the user's site-packages
        key = (pythonpath, cwd if relative else "", env.get("HOME", "") if self.user_site else "")
        if key not in self.paths:
            probe = subprocess.run(
                [sys.executable, "-c", "import sys, json; print(json.dumps(sys.path))"],
                capture_output=True,
                text=True,
                env=dict(env),
                cwd=cwd,
                timeout=60,
                check=True,
            )
            path = json.loads(probe.stdout.splitlines()[-1])  # after whatever a sitecustomize printed
            assert path[0] == "", path
            self.paths[key] = path[1:]
        return self.paths[key]

    def mismatch(self, env: Mapping[str, str], path: Sequence[str]) -> str | None:
        """Why this call's environment or path could make a fresh process differ from a forked child."""
        for name, value in self.reads.items():
            if env.get(name) != value:
                return f"{name} was read at import and differs"
        for name in {*env, *self.env}:
            if _startup_variable(name) and env.get(name) != self.env.get(name):
                return f"{name} differs from the server's"
        for name, where in self.origins.items():
            if (_locate(name, path) or "") != where:
                return f"module {name} would be found elsewhere"
        return None


MAX_SERVERS = 2
"""Servers one test process keeps at most: the one started from its own environment, and one for the last
recurring set of import-time values that differ from it (see :func:`_server_for`)."""

_servers: dict[tuple[tuple[str, str | None], ...], _Server] = {}
_seen: set[tuple[tuple[str, str | None], ...]] = set()
_server_lock = threading.Lock()


def _server_for(env: Mapping[str, str]) -> _Server | None:
    """The server whose preloaded modules read, at import, what they would read in ``env``; None when there is
    none yet. A test that sets a variable the SDKs read at import (``OPENAI_AGENTS_DONT_LOG_MODEL_DATA``) for
    all its commands would otherwise run them all as subprocesses: the second call with the same differing
    values starts a server with those values (the first runs as a subprocess, so that a value unique to one
    call never costs a server's start)."""
    with _server_lock:
        default = _servers.get(())
        if default is None or default.process.poll() is not None:
            default = _servers[()] = _Server()
        if default.problem is not None:
            return default
        differing = tuple(
            sorted((name, env.get(name)) for name, value in default.reads.items() if env.get(name) != value)
        )
        if not differing:
            return default
        server = _servers.get(differing)
        if server is not None and server.process.poll() is None:
            return server
        if differing not in _seen:
            _seen.add(differing)
            return None
        others = [key for key in _servers if key != ()]
        if len(_servers) >= MAX_SERVERS:
            if any(_servers[key].calls for key in others):
                return None
            for key in others:
                _servers.pop(key).stop()
        server_env = dict(default.env)
        for name, value in differing:
            if value is None:
                server_env.pop(name, None)
            else:
                server_env[name] = value
        server = _servers[differing] = _Server(server_env)
        return server


def stop_servers() -> None:
    """Stop this process's servers (they stop by themselves when it exits); the next call starts one again."""
    with _server_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()
        _seen.clear()


def _note(line: str) -> None:
    target = os.environ.get(LOG)
    if target:
        with open(target, "a", encoding="utf-8") as log:
            log.write(line + "\n")


def _coverage_measuring() -> bool:
    coverage = sys.modules.get("coverage")
    current = getattr(getattr(coverage, "Coverage", None), "current", None)
    return callable(current) and current() is not None


def _parse(command: Sequence[str]) -> tuple[str | None, str | None, list[str]] | None:
    """(module, script, args) of ``python -m otel_replay.cli ARGS`` or ``python SCRIPT.py ARGS``, else None."""
    if len(command) < 2 or str(command[0]) != sys.executable:
        return None
    words = [str(word) for word in command]
    if words[1] == "-m" and len(words) >= 3 and words[2] == "otel_replay.cli":
        return "otel_replay.cli", None, words[3:]
    if words[1].endswith(".py") and not words[1].startswith("-"):
        return None, words[1], words[2:]
    return None


def run(
    command: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    input: str | bytes | None = None,  # noqa: A002 - subprocess.run's name
    capture_output: bool = False,
    text: bool = False,
    check: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(command, ...)`` with the same arguments and defaults, in a child of the fork server when
    that cannot differ (see the module docstring). Only ``capture_output=True`` calls are forked."""
    args = [str(word) for word in command]
    call_env = dict(os.environ if env is None else env)
    workdir = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    reason = _why_not(command, call_env, capture_output=capture_output)
    parsed = _parse(command)
    server = None
    if reason is None and parsed is not None:
        server = _server_for(call_env)
        reason = "a recurring value read at import needs a server of its own" if server is None else server.problem
    path: list[str] = []
    if reason is None and server is not None and parsed is not None:
        module, script, _ = parsed
        # ``-m``: the working directory; a script: its folder, symbolic links resolved (as the interpreter does)
        head = workdir if module is not None else os.path.dirname(os.path.realpath(os.path.join(workdir, str(script))))
        path = [head, *server.site_path(call_env, workdir)]
        reason = server.mismatch(call_env, path)
    if reason is not None or server is None or parsed is None:
        _note(f"subprocess: {reason}")
        return subprocess.run(
            args, capture_output=capture_output, text=text, env=env, cwd=cwd, timeout=timeout, input=input, check=check
        )
    _note("fork")
    module, script, rest = parsed
    request = {
        "argv": args[1:],
        "module": module,
        "script": script,
        "args": rest,
        "env": call_env,
        "cwd": workdir,
        "path": path,
    }
    data = input.encode(locale.getpreferredencoding(False)) if isinstance(input, str) else input
    server.calls += 1
    try:
        code, out, err = _call(server, request, data, timeout)
    finally:
        server.calls -= 1
    decode = _text if text else bytes
    if code is None:  # timed out: killed, as subprocess.run kills it
        raise subprocess.TimeoutExpired(args, timeout or 0, output=decode(out), stderr=decode(err))
    result = subprocess.CompletedProcess(args, code, decode(out), decode(err))
    if check:
        result.check_returncode()
    return result


def _why_not(command: Sequence[Any], env: Mapping[str, str], *, capture_output: bool) -> str | None:
    """Why this call runs as a subprocess whatever the server would say (None: it may be forked)."""
    if os.environ.get(SWITCH, "1") == "0":
        return f"{SWITCH}=0"
    if not capture_output:
        return "only capture_output=True is forked"
    if _parse(command) is None:
        return "not python -m otel_replay.cli or python SCRIPT.py"
    if _coverage_measuring() or any(name.startswith(("COV_CORE_", "COVERAGE_PROCESS")) for name in env):
        return "coverage is measuring"
    if "PYTHONSAFEPATH" in env:
        return "PYTHONSAFEPATH is set"
    return None


def _text(data: bytes) -> str:
    """Bytes as ``subprocess.run(..., text=True)`` decodes them (locale encoding, universal newlines)."""
    return io.TextIOWrapper(io.BytesIO(data)).read()


def _call(
    server: _Server, request: Mapping[str, Any], stdin_data: bytes | None, timeout: float | None
) -> tuple[int | None, bytes, bytes]:
    """Send the request with fresh pipes, collect stdout and stderr until both close, then the exit code."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if stdin_data is not None else (os.dup(0), -1)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(server.address)
        body = json.dumps(request).encode()
        socket.send_fds(conn, [f"{len(body)}\n".encode() + body], [in_r, out_w, err_w])
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    pending = stdin_data or b""
    control = b""
    pid = None
    deadline = None if timeout is None else _monotonic() + timeout
    selector = selectors.DefaultSelector()
    selector.register(out_r, selectors.EVENT_READ)
    selector.register(err_r, selectors.EVENT_READ)
    selector.register(conn, selectors.EVENT_READ)
    if in_w >= 0:
        if pending:
            os.set_blocking(in_w, False)
            selector.register(in_w, selectors.EVENT_WRITE)
        else:
            os.close(in_w)
    open_fds = {out_r, err_r}
    code: int | None = None
    finished = False
    try:
        while open_fds or not finished:
            wait = None if deadline is None else max(0.0, deadline - _monotonic())
            events = selector.select(wait)
            if not events and deadline is not None and _monotonic() >= deadline:
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                return None, b"".join(chunks[out_r]), b"".join(chunks[err_r])
            for key, _ in events:
                fd = key.fd
                if fd == in_w:
                    try:
                        written = os.write(in_w, pending[:65536])
                    except BrokenPipeError:
                        written = len(pending)
                    pending = pending[written:]
                    if not pending:
                        selector.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                elif fd in open_fds:
                    data = os.read(fd, 65536)
                    if data:
                        chunks[fd].append(data)
                    else:
                        selector.unregister(fd)
                        open_fds.discard(fd)
                elif key.fileobj is conn:
                    data = conn.recv(4096)
                    if not data:
                        selector.unregister(conn)
                        finished = True
                        if code is None:
                            raise RuntimeError(f"the fork server dropped a call (see {server.log})")
                    control += data
                    while b"\n" in control:
                        line, _, control = control.partition(b"\n")
                        word, _, value = line.decode().partition(" ")
                        if word == "pid":
                            pid = int(value)
                        elif word == "exit":
                            code = int(value)
                            finished = True
                            with contextlib.suppress(KeyError, ValueError):
                                selector.unregister(conn)
    finally:
        selector.close()
        conn.close()
        for fd in (out_r, err_r, in_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
    return code, b"".join(chunks[out_r]), b"".join(chunks[err_r])


def _monotonic() -> float:
    import time

    return time.monotonic()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2:])
