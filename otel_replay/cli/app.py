"""The ``otel-replay`` Typer app, its ``db`` and ``case`` groups, the helpers every command shares (one error
line and exit code 2 for any failure, ``--json`` output, the store a command opens, the empty-store shortcut),
and the console-script entry point ``main()``.

It must never import the store, the SDK, Rich or the engine at module level: ``--help`` and ``--version`` load
only this package, typer and the leaf modules; a helper imports what it needs when it runs.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from ..terminal import SafeConsole


app = typer.Typer(
    name="otel-replay",
    help="Record AI-agent runs as OpenTelemetry traces; list, show, replay and diff them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rendering it with Rich costs more than the 0.3 s --help may take
)
db_app = typer.Typer(help="Manage the ClickHouse schema.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(db_app, name="db")
case_app = typer.Typer(
    help="Regression cases: export a recorded run to a file, replay case files in CI.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(case_app, name="case")

EXIT_ERROR = 2
F = TypeVar("F", bound=Callable[..., Any])

STORE_HELP = (
    "Store URL (chdb:///path or http(s)://user:pass@host:8123/db); default: $OTEL_REPLAY_STORE or the embedded store."
)


def version() -> str:
    """The installed otel-replay version: the distribution's metadata, else the package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as distribution_version

    try:
        return distribution_version("otel-replay")
    except PackageNotFoundError:
        from .. import __version__

        return __version__


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"otel-replay {version()}\n")
        raise typer.Exit(0)


@app.callback()
def _main_options(
    show_version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version (otel-replay X.Y.Z) and exit.",
    ),
) -> None:
    """Record AI-agent runs as OpenTelemetry traces, list them, show them, replay them."""


def out_console() -> SafeConsole:
    # Piped output (files, CI logs) gets a wide console instead of Rich's 80-column default.
    from ..terminal import SafeConsole

    wide = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    return SafeConsole(soft_wrap=True, width=200 if wide else None)


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print one error line on stderr and exit."""
    from rich.text import Text

    from ..redaction import scrub_message
    from ..terminal import SafeConsole

    line = " ".join(scrub_message(message).split())
    SafeConsole(stderr=True, soft_wrap=True).print(Text(f"error: {line}", style="bold red"))
    raise typer.Exit(code)


def handled(func: F) -> F:
    """Turn every failure of a command into one error line and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Exception as exc:  # the CLI promises no tracebacks
            if os.environ.get("OTEL_REPLAY_DEBUG"):
                raise
            from ..errorlines import error_line
            from ..errors import AgentCodeUnavailable

            fail(
                error_line(exc), AgentCodeUnavailable.exit_code if isinstance(exc, AgentCodeUnavailable) else EXIT_ERROR
            )

    return wrapper  # type: ignore[return-value]


HTML_HELP = (
    "Write a self-contained HTML report to FILE (links to Jaeger / Grafana from $OTEL_REPLAY_JAEGER_URL / "
    "$OTEL_REPLAY_GRAFANA_URL)."
)


def write_html(path: str, page: str, *, quiet: bool = False) -> None:
    from ..report import write_report
    from ..terminal import SafeConsole

    written = write_report(path, page)
    SafeConsole(stderr=quiet, soft_wrap=True).print(f"wrote HTML report {written}")


@contextlib.contextmanager
def output_to_stderr(active: bool) -> Iterator[None]:
    """With ``--json``, stdout holds one JSON document and nothing else: while the replayed agent runs, what it
    prints goes to stderr, whether it prints through ``sys.stdout``, writes to file descriptor 1 itself, or
    starts a process that inherits it."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def print_json(value: Any) -> None:
    from ..terminal import escape_json_text

    sys.stdout.write(escape_json_text(json.dumps(value, indent=2, ensure_ascii=False, default=str)) + "\n")


def open_store(url: str | None) -> Any:
    from ..storage.store import Store

    without_dataframes()
    return Store.open(url)


_DATAFRAMES_UNDO: list[Callable[[], None]] | None = None
"""While :func:`main` runs a command: how to put back what :func:`without_dataframes` changed (None otherwise)."""


def without_dataframes() -> None:
    """Tell clickhouse-connect, while :func:`main` runs a command, that pandas is absent when nothing imported it
    yet; :func:`main` puts its options back when the command ends.

    The store hands clickhouse-connect lists of rows, never DataFrames, but clickhouse-connect's insert asks
    whether the data is a DataFrame, and that first question imports pandas and pyarrow: 0.3-0.5 s, most of the
    time of a command that writes. Call it before a command opens the store or replays. The one effect beyond
    speed: during the command, clickhouse-connect will not take DataFrames (a replayed agent that inserts a
    DataFrame through clickhouse-connect gets its "pandas is not installed" error); pandas itself is untouched.
    Outside :func:`main` (importing the CLI, library use, a command function called directly) it does nothing."""
    undo = _DATAFRAMES_UNDO
    if undo is None or "pandas" in sys.modules:
        return
    from clickhouse_connect.driver import options

    names = ("pd", "pd_time_test")
    saved = {name: vars(options)[name] for name in names if name in vars(options)}  # unset: resolved lazily
    if all(saved.get(name, ...) is None for name in names):
        return

    def restore() -> None:
        for name in names:
            if name in saved:
                setattr(options, name, saved[name])
            else:
                vars(options).pop(name, None)

    undo.append(restore)
    options.pd = None
    options.pd_time_test = None


@contextlib.contextmanager
def _dataframes_scope() -> Iterator[None]:
    """The scope of one command run by :func:`main`: inside it :func:`without_dataframes` may change
    clickhouse-connect's options; leaving it puts them back as they were."""
    global _DATAFRAMES_UNDO
    outer, _DATAFRAMES_UNDO = _DATAFRAMES_UNDO, []
    try:
        yield
    finally:
        undo, _DATAFRAMES_UNDO = _DATAFRAMES_UNDO, outer
        for restore in reversed(undo):
            restore()


def nothing_stored(url: str | None) -> bool:
    """True when the store this command would open is an embedded one that does not exist yet and no spool
    segment waits to be ingested into it: then there is nothing to read, and the command answers without
    starting chDB (which takes a second). The store is found as :meth:`Store.open` finds it (argument, the
    runtime ``configure()`` built, ``OTEL_REPLAY_STORE``, the home's embedded store). Any doubt (a server URL,
    a store folder or a spool file present) is False: the store is opened as usual."""
    from .. import settings

    settings.resolve_lock_timeout()  # a bad setting is an error whether or not the store exists yet
    given_home: Path | None = None
    setup = sys.modules.get("otel_replay.exporting.setup")  # loaded when configure() may have run in-process
    configured = setup.current_runtime() if setup is not None else None
    if configured is not None:  # what the application passed to configure() rules, as in Store.open
        given_home = configured.home if configured.home_given else None
        url = url or configured.store_url
    home = settings.resolve_home(given_home)
    resolved = settings.resolve_store_url(url, home)
    scheme, _, rest = resolved.partition("://")
    if scheme.lower() != "chdb" or not rest.startswith("/") or "?" in rest or "#" in rest:
        return False
    from urllib.parse import unquote

    path = Path(unquote(rest)).expanduser()
    if not path.is_absolute() or path.exists():
        return False
    spool = home / "spool"
    try:
        return not spool.exists() or not any(spool.iterdir())
    except OSError:
        return False


class _WarningLines(logging.Handler):
    """otel-replay's own warnings (an ingest that skipped a torn record, say) as ``warning:`` lines on stderr:
    one line each, no traceback, apart from the one ``error:`` line a failing command prints. Every record
    is scrubbed of secrets first (the redaction module is imported with the first record, not at start)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from rich.text import Text

            from ..redaction import ScrubbingLogFilter
            from ..terminal import SafeConsole

            if not ScrubbingLogFilter().filter(record):
                return
            text = " ".join(record.getMessage().split()).removeprefix("otel-replay ingest: ")
            SafeConsole(stderr=True, soft_wrap=True).print(Text(f"warning: {text}", style="yellow"))
        except Exception:  # noqa: BLE001 - a warning never breaks a command
            pass


def main() -> None:
    """Console-script entry point: usage errors too are one ``error:`` line and exit code 2."""
    # Driver libraries log their own copy of errors the CLI already reports in one line.
    logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)
    ours = logging.getLogger("otel_replay")
    if not ours.handlers:
        ours.addHandler(_WarningLines(logging.WARNING))
        ours.propagate = False
    try:
        with _dataframes_scope():
            code = app(standalone_mode=False)
    except (typer.Exit, SystemExit):
        raise
    except typer.Abort:
        sys.exit(130)
    except Exception as exc:  # click's (or typer's vendored click's) usage errors, matched by shape
        kinds = {c.__name__ for c in type(exc).__mro__}
        context = getattr(exc, "ctx", None)
        if "NoArgsIsHelpError" in kinds and context is not None:
            sys.stdout.write(context.get_help() + "\n")
            sys.exit(0)
        if "UsageError" not in kinds and "ClickException" not in kinds:
            raise
        hint = f" (see `{context.command_path} --help`)" if context is not None else ""
        from rich.text import Text

        from ..errorlines import usage_line
        from ..redaction import scrub_message
        from ..terminal import SafeConsole

        formatter = getattr(exc, "format_message", None)
        message = usage_line(str(formatter() if callable(formatter) else exc))
        SafeConsole(stderr=True, soft_wrap=True).print(
            Text(f"error: {' '.join(scrub_message(message).split())}{hint}", style="bold red")
        )
        sys.exit(EXIT_ERROR if "UsageError" in kinds else getattr(exc, "exit_code", EXIT_ERROR) or EXIT_ERROR)
    sys.exit(code if isinstance(code, int) else 0)
