"""pytest plugin (entry point ``pytest11``): regression case files become test items, one per case.

Configure the folders that hold ``*.case.json`` files in the ini file or on the command line::

    [tool.pytest.ini_options]
    otel_replay_cases = ["tests/cases"]

    pytest --otel-replay-cases tests/cases --otel-replay-mode deterministic

Cases run under the side-effect guard (:mod:`otel_replay.replay.safety.guard`): a process spawn, a file change
outside the temp folder or a network connection made by the case's code is blocked and fails the case.
``--otel-replay-allow-side-effects`` turns the guard off, and says so in the session header.

Each case is an item named after the case (so ``-k`` selects by name), failing with what did not hold, the
first divergence and the changed diff sections. Items are plain files to pytest, so ``-x``, ``--lf`` and
pytest-xdist work as for any test. Without a configured folder the plugin does nothing. A case's entrypoint
runs only when it is code of the project under test (a module under pytest's rootdir, or listed in
``OTEL_REPLAY_TRUSTED_MODULES``) and defined in the module it names; any other case fails with the reason.
``--otel-replay-app MODULE:FUNCTION`` (ini ``otel_replay_app``) runs every case through that entrypoint instead,
as ``case run --app`` does: a name you give, such as a LangGraph graph's ``module:graph.invoke``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

_FOLDERS = pytest.StashKey[list[Path]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("otel-replay", "otel-replay regression cases")
    group.addoption(
        "--otel-replay-cases",
        action="append",
        default=[],
        metavar="FOLDER",
        help="Folder of *.case.json files to run as tests (repeatable; adds to the ini setting).",
    )
    group.addoption(
        "--otel-replay-mode",
        choices=("mock", "deterministic"),
        default=None,
        help="Replay every case in this mode instead of the one it names.",
    )
    group.addoption(
        "--otel-replay-app",
        default=None,
        metavar="MODULE:FUNCTION",
        help="Entrypoint for every case instead of the one each names (as case run --app): your choice, so the "
        "rule for entrypoints read from case files does not apply to it.",
    )
    group.addoption(
        "--otel-replay-allow-path",
        action="append",
        default=[],
        metavar="PATH",
        help="A file or folder the cases' code may change (repeatable), as case run --allow-path.",
    )
    group.addoption(
        "--otel-replay-allow-address",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="A HOST:PORT the cases' code may connect to (repeatable), as case run --allow-address.",
    )
    group.addoption(
        "--otel-replay-allow-side-effects",
        action="store_true",
        default=False,
        help="Turn the side-effect guard off: case code may spawn processes, change files and open "
        "connections for real.",
    )
    parser.addini(
        "otel_replay_cases", type="paths", default=[], help="Folders of otel-replay *.case.json files to run as tests."
    )
    parser.addini("otel_replay_mode", default="", help="Replay every case in this mode (mock or deterministic).")
    parser.addini("otel_replay_app", default="", help="Entrypoint module:function for every case (as case run --app).")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "otel_replay_case: an otel-replay regression case (a *.case.json file)")
    folders = [Path(p).resolve() for p in config.getini("otel_replay_cases")]
    folders += [Path(p).resolve() for p in config.getoption("otel_replay_cases")]
    config.stash[_FOLDERS] = folders
    mode = config.getoption("otel_replay_mode") or config.getini("otel_replay_mode") or None
    if mode not in (None, "mock", "deterministic"):
        raise pytest.UsageError(f"otel_replay_mode must be mock or deterministic, got {mode!r}")
    config.option.otel_replay_mode = mode
    config.option.otel_replay_app = config.getoption("otel_replay_app") or config.getini("otel_replay_app") or None
    # Folders outside the paths pytest was asked to collect are collected too, unless paths were given.
    if folders and config.args_source is not pytest.Config.ArgsSource.ARGS:
        collected = [Path(arg).resolve() for arg in config.args]
        for folder in folders:
            if folder.is_dir() and not any(folder == c or c in folder.parents for c in collected):
                config.args.append(str(folder))


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("otel_replay_allow_side_effects", False):
        return (
            "otel-replay: WARNING --otel-replay-allow-side-effects: the side-effect guard is off; case code "
            "may spawn processes, change files and open connections for real"
        )
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    from .cases import CASE_SUFFIX

    if not file_path.name.endswith(CASE_SUFFIX):
        return None
    folders = parent.config.stash.get(_FOLDERS, [])
    resolved = file_path.resolve()
    if not any(folder == resolved.parent or folder in resolved.parents for folder in folders):
        return None
    return CaseFile.from_parent(parent, path=file_path)


class CaseFile(pytest.File):
    """A ``*.case.json`` file: one item, the case."""

    def collect(self) -> Any:
        from .cases import CaseError, load_case

        try:
            case = load_case(self.path)
        except CaseError as exc:
            raise self.CollectError(str(exc)) from None
        yield CaseItem.from_parent(self, name=case.name, case=case)


class CaseFailed(Exception):
    """A case's requirements did not hold."""


class CaseNote(UserWarning):
    """What a case's replay could not promise or had to change (its ``notes``: an agent module imported before the
    kernel sandbox, values replayed as plain dicts), shown in pytest's warnings summary."""


class CaseItem(pytest.Item):
    """One regression case replayed against the code under test."""

    def __init__(self, *, case: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.add_marker("otel_replay_case")

    def runtest(self) -> None:
        from .cases import describe_failure, run_case

        # The case's entrypoint is data: it runs only when it is code of the project under test (the rootdir).
        result = run_case(
            self.case,
            mode=self.config.option.otel_replay_mode,
            entrypoint=self.config.option.otel_replay_app,
            root=self.config.rootpath,
            allow_side_effects=bool(self.config.getoption("otel_replay_allow_side_effects", False)),
            allow_paths=self.config.getoption("otel_replay_allow_path", []),
            allow_addresses=self.config.getoption("otel_replay_allow_address", []),
        )
        if result.replay is not None:
            import warnings

            from .terminal import clean

            for note in result.replay.notes:
                warnings.warn(CaseNote(f"{self.case.name}: {clean(str(note))}"), stacklevel=1)
        if not result.passed:
            raise CaseFailed(describe_failure(result))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed):
            from .terminal import clean

            return clean(str(excinfo.value))  # pytest prints it as it is: nothing from the case drives the terminal
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"otel-replay case {self.case.name} ({self.case.mode})"
