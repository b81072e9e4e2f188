"""Recorded data never becomes code: ``$type`` tags naming dangerous classes, and recorded entrypoints, tool
functions and exception classes that are not the project's, run nothing in a replay, a case run or a pytest
case.

Every hostile value is planted through the real surface: a run recorded with the real decorators (its values
encode as ``subprocess:Popen``, ``io:FileIO``, ``os:system``, ``builtins:eval``), a case file exported from it,
or spans written straight into the store with the OTel SDK. The payloads would create marker files if anything
called what they name; the tests look for those files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import adv_code_agents as agents
import fork_server
import pytest
from cli_in_process import run_cli, runs_in_process
from pytest_children import UNRELATED_PLUGINS

import otel_replay as orp
from otel_replay import semconv
from otel_replay.cases import case_document, write_case
from otel_replay.storage.store import Store
from otel_replay.testing import capture

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parents[1]
"""The repository: the project folder every replay here runs from (its agents are under it)."""

HOSTILE_NAMES = ("subprocess:Popen", "io:FileIO", "os:system", "builtins:eval")


@pytest.fixture
def marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder hostile payloads would write to; in-process replays run from the project folder."""
    folder = tmp_path / "markers"
    folder.mkdir()
    monkeypatch.setenv(agents.MARKER_ENV, str(folder))
    monkeypatch.chdir(PROJECT)
    return folder


@pytest.fixture
def outside(tmp_path: Path, marks: Path) -> Path:
    """A folder outside the project holding modules that write a marker as soon as they are imported, and a
    script that writes one when it is loaded."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    on_import = textwrap.dedent(f"""
        from pathlib import Path
        (Path({str(marks)!r}) / ("imported-" + __name__)).write_text("imported")

        def run(*args, **kwargs):
            (Path({str(marks)!r}) / ("ran-" + __name__)).write_text("ran")

        echo_tool = run
    """)
    for name in ("adv_outside_agent", "adv_outside_tool"):
        (folder / f"{name}.py").write_text(on_import, encoding="utf-8")
    (folder / "adv_outside_script.py").write_text(on_import.replace("__name__", "'script'"), encoding="utf-8")
    return folder


def record(func: Any, *args: Any, **kwargs: Any) -> str:
    """Run an agent once with the real decorators and return its trace id."""
    func(*args, **kwargs)
    orp.flush()
    with Store.open() as store:
        return store.runs(limit=1)[0].trace_id


def spans_of(trace_id: str) -> list[Any]:
    with Store.open() as store:
        return list(store.load_run(trace_id).spans)


def cli(home: Path, *args: str, extra_path: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """``otel-replay ARGS`` in a fresh process, from the project folder."""
    paths = [str(p) for p in (extra_path, HERE) if p is not None]
    full = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "COLUMNS": "300",
        "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]),
        **env,
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_REPLAY_TRUSTED_MODULES"):
        if name not in env:
            full.pop(name, None)
    if runs_in_process(args):  # the same main(), without a second of interpreter start-up
        return run_cli(args, env=full, cwd=PROJECT)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=180,
        cwd=PROJECT,
    )


def one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    return lines[0]


# ---------------------------------------------------------------------------------------- $type tags


def test_type_tags_naming_popen_fileio_system_eval_in_a_stored_run_run_nothing(home: Path, marks: Path) -> None:
    trace_id = record(agents.hostile_agent, "invoice.pdf", payload=agents.hostile_values(marks))
    with Store.open() as store:
        stored = json.dumps([s.payload for s in store.load_run(trace_id).timeline])
    for name in HOSTILE_NAMES:  # the stored run really names them, with the marker paths as fields
        assert f'"class": "{name}"' in stored, name
    assert agents.created() == []
    for mode in ("mock", "deterministic"):
        result = orp.replay(trace_id, mode=mode)
        assert agents.created() == [], mode
        structured = result.replay.snapshots["output"]["structured"]
        assert structured["tool"] == {
            "eval": "dict",
            "fileio": "dict",
            "popen": "dict",
            "pydantic_popen": "dict",
            "system": "dict",
        }
        assert structured["model"] == {"object": "dict", "text": "str"}
        assert structured["input"] == structured["tool"]
        (note,) = [n for n in result.notes if "imported before this replay" not in n]
        assert all(repr(name) in note for name in HOSTILE_NAMES) and "otel_replay.register_type" in note
        assert note in result.to_dict()["notes"]


def test_type_tags_in_a_case_file_run_nothing_under_case_run(home: Path, marks: Path, tmp_path: Path) -> None:
    trace_id = record(agents.hostile_agent, "invoice.pdf", payload=agents.hostile_values(marks))
    with Store.open() as store:
        run = store.load_run(trace_id)
    path = write_case(case_document(run, name="hostile-values"), tmp_path / "hostile-values.case.json")
    text = path.read_text(encoding="utf-8")
    assert all(name in text for name in HOSTILE_NAMES)
    out = cli(home, "case", "run", str(path), "--json", **{agents.MARKER_ENV: str(marks)})
    (case,) = json.loads(out.stdout)["cases"]
    # It ran, and the values it was handed were plain dicts, not the objects the original agent saw.
    assert out.returncode == 1 and case["status"] == "failed" and case["replay_trace_id"], case
    assert case["failures"] == ["no-divergence: the replay diverged: the run's structured differs from the original"]
    assert agents.created() == []
    (note,) = case["notes"]
    assert all(repr(name) in note for name in HOSTILE_NAMES)


PLUGIN_AGENT = """
import dataclasses
import otel_replay as orp


@dataclasses.dataclass
class Popen:
    args: list


@dataclasses.dataclass
class FileIO:
    file: str
    mode: str


Popen.__module__, FileIO.__module__ = "subprocess", "io"


@orp.tool("fetch", risk="read")
def fetch(folder):
    return {"popen": Popen(["touch", folder + "/plugin-popen"]), "fileio": FileIO(folder + "/plugin-fileio", "w")}


@orp.agent("plugin-hostile")
def handle(folder):
    fetch(folder)
    return {"ok": True}
"""


def test_type_tags_in_a_pytest_collected_case_run_nothing(marks: Path, tmp_path: Path) -> None:
    project = tmp_path / "sample"
    (project / "regression").mkdir(parents=True)
    (project / "plugin_hostile.py").write_text(PLUGIN_AGENT, encoding="utf-8")
    (project / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\notel_replay_cases = ["regression"]\n', encoding="utf-8"
    )
    sys.path.insert(0, str(project))
    try:
        import plugin_hostile  # type: ignore[import-not-found]

        with capture(home=project / "home") as recorded:
            plugin_hostile.handle(str(marks))
        (run,) = recorded.runs()
    finally:
        sys.path.remove(str(project))
        sys.modules.pop("plugin_hostile", None)
    assert agents.created() == []
    case = write_case(case_document(run, name="hostile"), project / "regression" / "hostile.case.json")
    assert '"subprocess:Popen"' in case.read_text().replace('\\"', '"')
    env = {**os.environ, "OTEL_REPLAY_HOME": str(project / "home")}
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "OTEL_REPLAY_TRUSTED_MODULES"):
        env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *UNRELATED_PLUGINS, "-q"],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=300,
    )
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr
    assert agents.created() == []


# ------------------------------------------------------------------------------------- entrypoint rule


def _planted_entrypoint(home: Path, spec: str, args: list[Any], *, script: str | None = None) -> str:
    """A run whose root span and input snapshot name ``spec`` (and ``args``), written with the OTel SDK."""
    spans = spans_of(record(agents.echo, "hi"))

    def payload(kind: str, decoded: dict[str, Any]) -> dict[str, Any] | None:
        if kind != "input":
            return None
        return {**decoded, "entrypoint": spec, "args": args, "kwargs": {}, "script": script}

    return agents.plant(home, spans, root_attributes={semconv.RUN_ENTRYPOINT: spec}, payload=payload)


def test_recorded_entrypoints_outside_the_project_are_refused_before_anything_runs(
    home: Path, marks: Path, outside: Path
) -> None:
    planted = {
        "os:system": _planted_entrypoint(home, "os:system", [f"touch {marks / 'system'}"]),
        "builtins:eval": _planted_entrypoint(home, "builtins:eval", [f"open({str(marks / 'eval')!r}, 'w')"]),
        "subprocess:run": _planted_entrypoint(home, "subprocess:run", [["touch", str(marks / "run")]]),
        "adv_outside_agent:run": _planted_entrypoint(home, "adv_outside_agent:run", []),
        "__main__:run": _planted_entrypoint(home, "__main__:run", [], script=str(outside / "adv_outside_script.py")),
    }
    for spec, trace_id in planted.items():
        line = one_error_line(cli(home, "replay", trace_id, "--mode", "mock", extra_path=outside))
        assert line.startswith(f"error: entrypoint {spec!r} was not run: "), line
        assert "--app" in line, line
        assert agents.created() == [], spec
    line = one_error_line(
        cli(home, "replay", planted["adv_outside_agent:run"], "--mode", "deterministic", extra_path=outside)
    )
    assert "OTEL_REPLAY_TRUSTED_MODULES=adv_outside_agent" in line and str(outside) in line
    # The same run, once the person replaying trusts the module by name, does import and run it: the refusal
    # above is the rule, not a module that could not be found.
    cli(
        home,
        "replay",
        planted["adv_outside_agent:run"],
        "--mode",
        "mock",
        extra_path=outside,
        OTEL_REPLAY_TRUSTED_MODULES="adv_outside_agent",
    )
    assert agents.created() == ["imported-adv_outside_agent", "ran-adv_outside_agent"]


def test_a_recorded_entrypoint_cannot_reach_other_code_through_a_trusted_module(home: Path, marks: Path) -> None:
    # otel_replay.demo is trusted everywhere and adv_code_agents is under the project: neither lends its trust
    # to what it merely imports (a module it holds, or a function it imported from the standard library).
    command = f"touch {marks / 'reached'}"
    for spec in ("otel_replay.demo.agent:settings.os.system", "adv_code_agents:os.system", "adv_code_agents:run_shell"):
        trace_id = _planted_entrypoint(home, spec, [command])
        for mode in ("mock", "live"):
            line = one_error_line(cli(home, "replay", trace_id, "--mode", mode, "--reason", "attack"))
            assert line.startswith(f"error: entrypoint {spec!r} was not run: "), line
            assert "--app" in line, line
    assert not (marks / "reached").exists()
    assert agents.created() == []


def test_a_package_in_a_virtual_environment_inside_the_project_is_not_the_project(
    home: Path, marks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace_id = _planted_entrypoint(home, "adv_venv_pkg:run", [])
    project = tmp_path / "project"
    site = project / ".venv" / "lib" / "python3" / "site-packages"
    (site / "adv_venv_pkg").mkdir(parents=True)
    (site / "adv_venv_pkg" / "__init__.py").write_text(
        f"from pathlib import Path\n(Path({str(marks)!r}) / 'venv-imported').write_text('x')\n"
        "def run(*args):\n    pass\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(orp.ReplayRefused, match="'adv_venv_pkg' is an installed package"):
        orp.replay(trace_id, mode="mock")
    assert agents.created() == [] and "adv_venv_pkg" not in sys.modules


def test_case_files_naming_code_outside_the_project_do_not_run_it(
    home: Path, marks: Path, outside: Path, tmp_path: Path
) -> None:
    trace_id = record(agents.echo, "hi")
    with Store.open() as store:
        run = store.load_run(trace_id)
    document = case_document(run, name="echo")
    cases = tmp_path / "pull-request"
    cases.mkdir()
    for spec in ("os:system", "subprocess:run", "adv_outside_agent:run"):
        write_case(
            {**document, "name": spec.replace(":", "-"), "entrypoint": spec},
            cases / f"{spec.replace(':', '-')}.case.json",
        )
    out = cli(home, "case", "run", str(cases), "--json", extra_path=outside)
    assert out.returncode == 2, out.stderr
    report = json.loads(out.stdout)
    assert report["error"] == 3 and report["passed"] == report["failed"] == 0
    for case in report["cases"]:
        assert case["error"].startswith("entrypoint ") and " was not run: " in case["error"], case
    assert agents.created() == []
    # The same file collected by pytest in a project that does not hold the module: the item fails, saying why.
    project = tmp_path / "sample"
    (project / "regression").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\notel_replay_cases = ["regression"]\n', encoding="utf-8"
    )
    (project / "regression" / "outside.case.json").write_bytes((cases / "adv_outside_agent-run.case.json").read_bytes())
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(project / "home"),
        "PYTHONPATH": os.pathsep.join([str(outside), os.environ.get("PYTHONPATH", "")]),
    }
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "OTEL_REPLAY_TRUSTED_MODULES"):
        env.pop(name, None)
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *UNRELATED_PLUGINS, "-q"],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=300,
    )
    assert ran.returncode == 1 and "1 failed" in ran.stdout, ran.stdout + ran.stderr
    assert "entrypoint 'adv_outside_agent:run' was not run" in ran.stdout
    assert agents.created() == []


def test_app_given_by_the_person_replaying_runs_but_never_the_standard_library(home: Path, marks: Path) -> None:
    trace_id = record(agents.echo, "hi")
    line = one_error_line(cli(home, "replay", trace_id, "--mode", "mock", "--app", "os:system"))
    assert "standard library" in line
    out = cli(home, "replay", trace_id, "--mode", "mock", "--app", "adv_code_agents:echo", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["outcome"] == "matched", out.stderr


def test_replay_tool_refuses_a_recorded_tool_function_before_importing_it(
    home: Path, marks: Path, outside: Path
) -> None:
    spans = spans_of(record(agents.echo, "hi"))
    (tool_step,) = [s for s in spans if s.span_attributes.get(semconv.STEP_KIND) == "tool"]
    index = tool_step.span_attributes[semconv.STEP_INDEX]
    for function in ("os:system", "adv_outside_tool:echo_tool"):
        trace_id = agents.plant(
            home,
            spans,
            span_attributes=lambda s, f=function: {semconv.TOOL_FUNCTION: f} if s.span_id == tool_step.span_id else {},
        )
        line = one_error_line(cli(home, "replay-tool", trace_id, "--step", index, "--mode", "mock", extra_path=outside))
        assert line.startswith(f"error: entrypoint {function!r} was not run: "), line
    assert agents.created() == []  # adv_outside_tool writes a marker the moment it is imported


def test_replay_session_checks_every_turn_whoever_recorded_it(home: Path, marks: Path, outside: Path) -> None:
    with orp.identity(session="conv-adv-1"):
        first = record(agents.echo, "turn one")
    later = agents.plant(
        home,
        spans_of(first),
        root_attributes={semconv.RUN_ENTRYPOINT: "adv_outside_agent:run", semconv.REPLAY_ACTOR: "someone else"},
        shift_ns=60 * 10**9,
    )
    with Store.open() as store:
        assert {r.trace_id for r in store.run_rows(session="conv-adv-1", kind="original")} == {first, later}
    line = one_error_line(cli(home, "replay-session", "conv-adv-1", "--mode", "mock", extra_path=outside))
    assert "entrypoint 'adv_outside_agent:run' was not run" in line
    assert agents.created() == []


# ------------------------------------------------------------------------------------ registered types


def test_registered_types_are_rebuilt_and_an_unregistered_one_is_noted_once(home: Path, marks: Path) -> None:
    trace_id = record(agents.user_types_agent, 7)
    orp.register_type(agents.Ticket)
    orp.register_type(agents.Order)
    result = orp.replay(trace_id, mode="mock")
    structured = result.replay.snapshots["output"]["structured"]
    assert structured["first"] == structured["second"] == {"order": "Order", "other": "dict", "ticket": "Ticket"}
    (note,) = [n for n in result.notes if "imported before this replay" not in n]
    assert "'adv_code_agents:Unregistered'" in note and "Ticket" not in note
    # A fresh process registers nothing: the CLI says so in one line, and in --json.
    out = cli(home, "replay", trace_id, "--mode", "mock")
    assert out.returncode == 1, out.stderr  # the agent saw dicts, so its output differs
    lines = [line for line in out.stdout.splitlines() if "otel_replay.register_type" in line]
    assert len(lines) == 1 and lines[0].startswith("note: "), out.stdout
    assert all(f"'adv_code_agents:{name}'" in lines[0] for name in ("Ticket", "Order", "Unregistered"))
    notes = json.loads(cli(home, "replay", trace_id, "--mode", "mock", "--json").stdout)["notes"]
    assert len(notes) == 1 and "'adv_code_agents:Unregistered'" in notes[0]


def test_register_type_takes_only_dataclasses_models_and_exceptions() -> None:
    import io

    for bad in (io.FileIO, os.system, object, "subprocess:Popen"):
        with pytest.raises(TypeError):
            orp.register_type(bad)  # type: ignore[arg-type]


class _Route:
    """A slotted value class (like LangGraph's ``Send``): no ``__dict__``, its constructor takes its slots."""

    __slots__ = ("arg", "node")

    def __init__(self, node: str, arg: object = None) -> None:
        self.node, self.arg = node, arg

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Route) and (self.node, self.arg) == (other.node, other.arg)

    __hash__ = None  # type: ignore[assignment]


class _Sealed:
    """Slotted, but its constructor does not take its slots: not rebuilt from recorded fields."""

    __slots__ = ("secret",)

    def __init__(self) -> None:
        self.secret = "s"


class _Open(_Route):
    """A subclass without ``__slots__``: its instances keep a ``__dict__`` the fields would not cover."""


def test_a_registered_slotted_value_class_is_recorded_by_its_slots_and_rebuilt() -> None:
    from otel_replay.replay.reviving import revive
    from otel_replay.snapshots import to_jsonable

    unregistered = to_jsonable(_Route("hotel", {"n": 1}))
    assert unregistered["$type"] == "object"  # before registration: its repr, as any object
    assert revive(unregistered) == unregistered  # and a replay never rebuilds it
    orp.register_type(_Route)
    tree = to_jsonable({"goto": [_Route("hotel", {"n": 1})]})
    assert tree["goto"][0]["$type"] == "dataclass"
    assert tree["goto"][0]["fields"] == {"arg": {"n": 1}, "node": "hotel"}
    assert revive(tree) == {"goto": [_Route("hotel", {"n": 1})]}
    forged = {"$type": "dataclass", "class": "subprocess:Popen", "fields": {"args": ["true"]}}
    assert revive(forged) == {"args": ["true"]}  # a name no code registered stays data
    for bad in (_Sealed, _Open):
        with pytest.raises(TypeError):
            orp.register_type(bad)


def test_recorded_exceptions_rebuild_only_builtin_registered_and_project_classes(
    home: Path, marks: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (outside / "adv_outside_errors.py").write_text(
        textwrap.dedent(f'''
        from pathlib import Path

        class Boom(Exception):
            """Its constructor writes a marker: a replay must never call it because a trace names it."""

            def __init__(self, message):
                super().__init__(message)
                (Path({str(marks)!r}) / "boom").write_text(message)

        class Registered(Exception):
            pass
    '''),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(outside))
    import adv_outside_errors  # type: ignore[import-not-found]

    agents.ERRORS.update(
        boom=adv_outside_errors.Boom,
        registered=adv_outside_errors.Registered,
        project=agents.ProjectError,
        builtin=LookupError,
    )
    traces = {name: record(agents.error_agent, name) for name in agents.ERRORS}
    (marks / "boom").unlink()  # written when the run was recorded, for real
    orp.register_type(adv_outside_errors.Registered)
    answers = {
        name: orp.replay(trace_id, mode="mock").replay.snapshots["output"]["answer"]
        for name, trace_id in traces.items()
    }
    assert answers == {
        "boom": "RecordedError",
        "registered": "Registered",
        "project": "ProjectError",
        "builtin": "LookupError",
    }
    assert agents.created() == []
