"""One diff object everywhere: the ``diff`` of ``replay --json``, ``diff --json`` and ``case run --json`` has
one shape, the one ``docs/diff.schema.json`` describes, checked on the real output of the commands.

Runs are recorded for real (decorators, spool, store) in a module home; the commands run as subprocesses. The
schema is checked with a small validator of the JSON Schema keywords the file uses (below); it refuses a
keyword it does not know, so the schema cannot quietly grow past what is checked.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diff_shape_agents as agents
import fork_server
import pytest
from cli_in_process import run_cli, runs_in_process

import otel_replay as orp

TESTS_DIR = Path(__file__).resolve().parent
SCHEMA_PATH = TESTS_DIR.parent / "docs" / "diff.schema.json"
SECTIONS = ["output", "state", "requests", "tools", "citations", "cost", "latency", "safety"]


# ---------------------------------------------------------------------------------- the validator

_ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description", "$comment"}
_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "null": lambda v: v is None,
}


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    assert ref == "#" or ref.startswith("#/"), f"only local references are supported: {ref}"
    node: Any = root
    for part in ref[2:].split("/") if ref != "#" else []:
        node = node[part]
    return node


def errors(instance: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> list[str]:
    """Every place ``instance`` breaks ``schema`` (the keywords the diff schema uses, nothing else)."""
    unknown = set(schema) - _ANNOTATIONS - {"$ref", "type", "required", "properties", "additionalProperties", "items"}
    assert not unknown, f"the test validator does not know {sorted(unknown)} (at {where})"
    if "$ref" in schema:
        return errors(instance, _resolve(root, schema["$ref"]), root, where)
    found: list[str] = []
    if "type" in schema:
        allowed = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](instance) for t in allowed):
            return [f"{where}: {type(instance).__name__} is not {allowed}"]
    if isinstance(instance, dict):
        found += [f"{where}: {key!r} is missing" for key in schema.get("required", []) if key not in instance]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, value in instance.items():
            if key in properties:
                found += errors(value, properties[key], root, f"{where}.{key}")
            elif extra is False:
                found.append(f"{where}: {key!r} is not allowed")
            elif isinstance(extra, dict):
                found += errors(value, extra, root, f"{where}.{key}")
    if isinstance(instance, list) and "items" in schema:
        for i, value in enumerate(instance):
            found += errors(value, schema["items"], root, f"{where}[{i}]")
    return found


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def check(instance: Any, schema: dict[str, Any], ref: str = "#") -> None:
    problems = errors(instance, _resolve(schema, ref), schema)
    assert not problems, "\n".join(problems[:20])


# ------------------------------------------------------------------------------------------ the runs


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A home holding one run of the shape agent as it was (variant 0) and one after a change (variant 1)."""
    base = tmp_path_factory.mktemp("diff-shape")
    home = base / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        mp.delenv("OTEL_REPLAY_STORE", raising=False)
        mp.delenv(agents.VARIANT_ENV, raising=False)
        orp.configure(home=home, exporter="spool")
        try:
            agents.shape_agent("refund for A1?")
            agents.VARIANT["value"] = 1
            agents.shape_agent("refund for A1?")
        finally:
            agents.VARIANT["value"] = 0
        orp.flush()
        world: dict[str, Any] = {"home": home}
        out = cli(world, "runs", "--json")
        assert out.returncode == 0, out.stderr
        runs = sorted(json.loads(out.stdout), key=lambda r: r["started_at"])
        assert [r["agent"] for r in runs] == ["shape-agent", "shape-agent"]
        world["before"], world["after"] = runs[0]["trace_id"], runs[1]["trace_id"]
        yield world


def cli(world: dict[str, Any], *args: str, variant: int = 0) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(world["home"]),
        "COLUMNS": "200",
        agents.VARIANT_ENV: str(variant),
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
        "OTEL_REPLAY_TRUSTED_MODULES": "diff_shape_agents",
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    if runs_in_process(args):  # read-only: the same main() in this process, configured for the world's home
        return run_cli(args, env=env, cwd=world["home"].parent)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=world["home"].parent,
    )


def as_json(out: subprocess.CompletedProcess[str], code: int) -> dict[str, Any]:
    assert out.returncode == code, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    data = json.loads(out.stdout)
    assert isinstance(data, dict)
    return data


# ------------------------------------------------------------------------------------------ the tests


def test_diff_json_keeps_its_keys_and_gains_the_shared_diff(world: dict[str, Any], schema: dict[str, Any]) -> None:
    data = as_json(cli(world, "diff", world["before"], world["after"], "--json"), 1)
    check(data, schema, "#/$defs/diff_command")
    assert list(data) == ["a", "b", "changed", "sections", "diff"]
    assert (data["a"], data["b"], data["changed"]) == (world["before"], world["after"], True)
    assert data["diff"] == data["sections"]
    assert list(data["diff"]) == SECTIONS
    check(data["diff"], schema)
    # every section changed between the two variants, so every section's details were checked filled in
    changed = {name for name, section in data["diff"].items() if section["changed"]}
    assert changed >= {"output", "state", "tools", "citations", "cost", "safety"}, changed
    assert data["diff"]["tools"]["details"]["added"][0]["name"] == "shape_lookup"


def test_replay_json_diff_has_the_same_shape_as_diff_json(world: dict[str, Any], schema: dict[str, Any]) -> None:
    """The replay runs the changed agent (variant 1) against the recording of variant 0."""
    replayed = as_json(cli(world, "replay", world["before"], "--mode", "mock", "--json", variant=1), 1)
    assert replayed["outcome"] == "diverged" and replayed["replay_trace_id"]
    check(replayed["diff"], schema)
    assert list(replayed["diff"]) == SECTIONS
    assert replayed["diff"]["state"]["changed"] and replayed["diff"]["safety"]["changed"]
    # the same two runs compared by `diff`: the same object under the same key
    compared = as_json(cli(world, "diff", world["before"], replayed["replay_trace_id"], "--json"), 1)
    assert compared["diff"] == replayed["diff"]


def test_replay_json_of_a_replay_that_matches(world: dict[str, Any], schema: dict[str, Any]) -> None:
    replayed = as_json(cli(world, "replay", world["before"], "--mode", "mock", "--json"), 0)
    check(replayed["diff"], schema)
    assert not any(section["changed"] for section in replayed["diff"].values())


def test_a_dry_replay_diffs_the_run_with_itself_in_the_same_shape(
    world: dict[str, Any], schema: dict[str, Any]
) -> None:
    replayed = as_json(cli(world, "replay", world["before"], "--mode", "dry", "--json"), 0)
    check(replayed["diff"], schema)
    assert not any(section["changed"] for section in replayed["diff"].values())


def test_no_diff_is_an_empty_object_and_not_a_diff(schema: dict[str, Any]) -> None:
    check({}, schema, "#/$defs/no_diff")
    assert errors({}, schema, schema)
    assert errors({"output": {}}, _resolve(schema, "#/$defs/no_diff"), schema)


@pytest.mark.parametrize("change", ["drop summary", "extra key", "wrong type", "unknown section", "bad item"])
def test_the_schema_check_fails_on_a_changed_shape(world: dict[str, Any], schema: dict[str, Any], change: str) -> None:
    """The validator and the schema can fail: each change of the real output is caught."""
    data = as_json(cli(world, "diff", world["before"], world["after"], "--json"), 1)
    shared = copy.deepcopy(data["diff"])
    if change == "drop summary":
        del shared["tools"]["summary"]
    elif change == "extra key":
        shared["a"] = world["before"]  # metadata mixed into the section map would break `for name, s in items()`
    elif change == "wrong type":
        shared["cost"]["details"]["cost_usd"]["changed"] = "yes"
    elif change == "unknown section":
        shared["citations"]["details"]["retrieved"]["moved"] = []
    else:
        shared["tools"]["details"]["added"][0]["a_index"] = "1"
    assert errors(shared, schema, schema)


def test_case_run_json_diff_has_the_same_shape(world: dict[str, Any], schema: dict[str, Any], tmp_path: Path) -> None:
    case = tmp_path / "shape.case.json"
    exported = cli(world, "case", "export", world["before"], "-o", str(case))
    assert exported.returncode == 0, exported.stderr
    ran = as_json(cli(world, "case", "run", str(case), "--json"), 0)
    (result,) = ran["cases"]
    check(result["diff"], schema)
    assert list(result["diff"]) == SECTIONS
