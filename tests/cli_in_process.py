"""``otel-replay`` run inside the test process, for tests where a separate process is not what is tested.

A subprocess pays the interpreter's and the CLI's start-up (about two seconds with the SDKs imported) on every
call; the read-only commands (``runs``, ``show``, ``audit``, ``diff``, ``case export``) run the very same code
here, through the console script's ``main()``, with the environment, working directory and argv a subprocess
would have had. Commands that run agent code (``replay``, ``case run``, ``demo``) stay in subprocesses: there
the process boundary (the side-effect guard, a fresh import of the agent) is part of what is tested.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import fork_server
import typer.main

READ_ONLY = ("runs", "show", "audit", "diff")
"""Commands that only read the store (and print): safe to run in the test process."""


def runs_in_process(args: Sequence[str]) -> bool:
    """Whether ``otel-replay ARGS`` only reads the store and writes what it prints (or an exported case file)."""
    return bool(args) and (args[0] in READ_ONLY or tuple(args[:2]) == ("case", "export"))


@contextlib.contextmanager
def _cwd(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def loggers_restored() -> Iterator[None]:
    """``main()`` gives the package's logger its own handler (warnings as lines on stderr) and stops its
    propagation; a process of its own ends right after. In the test process, put the loggers back as they were,
    so the tests that follow (``caplog``) see the package's records again."""
    ours, driver = logging.getLogger("otel_replay"), logging.getLogger("clickhouse_connect")
    handlers, propagate, level, driver_level = list(ours.handlers), ours.propagate, ours.level, driver.level
    try:
        yield
    finally:
        ours.handlers[:] = handlers
        ours.propagate = propagate
        ours.setLevel(level)
        driver.setLevel(driver_level)


_COMMANDS: dict[tuple[int, int, int], Any] = {}


def _command_built_once(build: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``typer.main.get_command``, built once per app in this process: typer builds the click command tree from
    the app's functions and their annotations on every call (about 11 ms for this CLI), which a process of its
    own does once. The tree holds no state of a run (click makes a new context per call); an app with commands
    added since is built again."""

    def get_command(app: Any) -> Any:
        key = (id(app), len(app.registered_commands), len(app.registered_groups))
        if key not in _COMMANDS:
            _COMMANDS[key] = build(app)
        return _COMMANDS[key]

    return get_command


def _same_configuration(env: Mapping[str, str]) -> bool:
    """Whether this process is configured as a fresh one would be from ``env`` (when in doubt: not)."""
    try:
        from otel_replay.exporting.setup import current_runtime

        configured = current_runtime()
        home = env.get("OTEL_REPLAY_HOME")
        if configured is None or not home or env.get("OTEL_REPLAY_STORE") or configured.store_url:
            return False
        return Path(configured.home).resolve() == Path(home).resolve()
    except (ImportError, AttributeError):  # the runtime's shape changed: run the command in a process of its own
        return False


def run_cli(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``otel-replay ARGS`` in this process, as ``subprocess.run([... "-m", "otel_replay.cli", *args],
    capture_output=True, text=True, env=env, cwd=cwd)`` would have run it; an exception escaping ``main()``
    shows as a traceback on stderr and exit code 1, as it would in a process of its own.

    A fresh process would configure otel-replay from ``env``; this one may have been configured by the test
    (``otel_replay.configure``), and the CLI's store and redaction key follow that configuration. So the command
    runs here only when that configuration is what ``env`` gives (same home, no other store); otherwise it runs
    in a process of its own after all, through :func:`fork_server.run` (a child of the warm interpreter, or a
    subprocess where a fork could differ)."""
    from otel_replay import cli as cli_module

    if not _same_configuration(env if env is not None else os.environ):
        return fork_server.run(
            [sys.executable, "-m", "otel_replay.cli", *args],
            capture_output=True,
            text=True,
            env=None if env is None else dict(env),
            cwd=cwd,
            timeout=300,
            check=False,
        )
    out, err = io.StringIO(), io.StringIO()
    code = 0
    environment = mock.patch.dict(os.environ, dict(env), clear=True) if env is not None else contextlib.nullcontext()
    with (
        loggers_restored(),
        environment,
        _cwd(cwd),
        mock.patch.object(sys, "argv", ["otel-replay", *args]),
        mock.patch.object(typer.main, "get_command", _command_built_once(typer.main.get_command)),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            cli_module.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException as exc:  # noqa: BLE001 - a crash is what the caller's checks look for
            code = 1
            err.write("Traceback (most recent call last):\n" + "".join(traceback.format_exception(exc)))
    return subprocess.CompletedProcess(["otel-replay", *args], code, out.getvalue(), err.getvalue())
