"""The lab's guards against a lab that would silently test nothing or hang: an ``--inject`` for a tool no run calls,
a ``--prompt-file`` role given twice, a ``--set-param`` that overwrites the request's structure, a ``RAY_ADDRESS``
nothing answers at: each one error line and exit 2 from the CLI, a ``ValueError`` / ``ReplayRefused`` from
``otel_replay.lab``, before any replay runs.

One cohort per module: three runs of ``lab_agents.counter_agent`` (tool ``read_number``). Refusals run the CLI
in a process of its own; labs that replay run in this process (``workers=1``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lab_agents
import pytest
from cli_in_process import run_cli

import otel_replay as orp

TESTS_DIR = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("lab-guards")
    home = base / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(name, raising=False)
        for name in (lab_agents.INTERRUPT_ENV, "RAY_ADDRESS"):
            mp.delenv(name, raising=False)
        orp.configure(home=home, exporter="spool")
        for n in range(3):
            lab_agents.counter_agent(n)
        orp.flush()
        with orp.Store.open() as store:
            runs = store.runs(kind="original", limit=100)
        counter = [r.trace_id for r in runs if r.agent == "counter-agent"]
        assert len(counter) == 3
        yield {"home": home, "counter": counter}


def _env(world: dict[str, Any], **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(world["home"]),
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
        "OTEL_REPLAY_TRUSTED_MODULES": "lab_agents",
        **extra,
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "RAY_ADDRESS"):
        if name not in extra:
            env.pop(name, None)
    return env


def _one_error_line(out: Any) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in out.stderr + out.stdout
    assert out.stdout == ""
    return lines[0]


def _replays() -> int:
    with orp.Store.open() as store:
        return len(store.runs(kind="replay", limit=100_000))


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port nothing listens on: bound and never listening, so a connect is refused at once and no other
    process can take the port while the test runs."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


# ------------------------------------------------------------------------------------------ --inject


def test_an_inject_for_a_tool_no_run_calls_is_one_error_line_before_anything_replays(world: dict[str, Any]) -> None:
    before = _replays()
    out = run_cli(
        ["lab", "--agent", "counter-agent", "--workers", "1", "--inject", "read_numbr:error=timeout"],
        env=_env(world),
    )

    line = _one_error_line(out)
    assert "'read_numbr'" in line and "no run of the cohort calls" in line and "read_number" in line
    assert _replays() == before


def test_an_inject_for_a_tool_no_run_calls_is_a_value_error_from_the_api(world: dict[str, Any]) -> None:
    before = _replays()
    with pytest.raises(ValueError, match=r"'lookup_order', which no run of the cohort calls.*call read_number"):
        orp.lab(agent="counter-agent", workers=1, inject=["read_number:error=timeout", "lookup_order:error=empty"])
    assert _replays() == before

    injected = orp.lab(agent="counter-agent", workers=1, inject=["read_number:error=empty"])  # a tool they call
    assert sum(len(p.tape["injected"]) for p in injected.pairs) == 3


def test_an_inject_for_a_tool_no_case_calls_is_refused_too(world: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "cases"
    out = run_cli(["case", "export", world["counter"][0], "--output", str(folder / "one.case.json")])
    assert out.returncode == 0, out.stderr

    out = run_cli(
        ["lab", "--cases", str(folder), "--workers", "1", "--inject", "refund:error=exception"], env=_env(world)
    )

    line = _one_error_line(out)
    assert "'refund'" in line and "read_number" in line


# ------------------------------------------------------------------------------------- --prompt-file


def test_a_prompt_file_role_given_twice_is_one_error_line(world: dict[str, Any], tmp_path: Path) -> None:
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("You are terse.", encoding="utf-8")
    second.write_text("You are verbose.", encoding="utf-8")

    out = run_cli(
        ["lab", "--agent", "counter-agent", "--prompt-file", f"system={first}", "--prompt-file", f"system={second}"],
        env=_env(world),
    )

    line = _one_error_line(out)
    assert "--prompt-file" in line and "'system'" in line and "twice" in line


def test_a_role_given_as_text_and_as_file_is_refused_by_the_api(world: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("You are terse.", encoding="utf-8")
    with pytest.raises(ValueError, match=r"'system' twice"):
        orp.lab(agent="counter-agent", workers=1, prompts={"system": "x"}, prompt_files={"system": str(path)})


@pytest.mark.parametrize(("first", "second"), [("system", "developer"), ("user", "human"), ("ai", "assistant")])
def test_two_roles_that_replace_the_same_prompt_are_one_error_line(
    world: dict[str, Any], tmp_path: Path, first: str, second: str
) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("Prompt A.", encoding="utf-8")
    b.write_text("Prompt B.", encoding="utf-8")
    before = _replays()

    out = run_cli(
        ["lab", "--agent", "counter-agent", "--prompt-file", f"{first}={a}", "--prompt-file", f"{second}={b}"],
        env=_env(world),
    )

    line = _one_error_line(out)
    assert f"'{first}' and '{second}'" in line and "same prompt" in line
    assert _replays() == before
    with pytest.raises(ValueError, match="same prompt"):  # the API too, however the two are given
        orp.lab(agent="counter-agent", workers=1, prompts={second: "B"}, prompt_files={first: str(a)})


# ------------------------------------------------------------------------------------------ --set-param


@pytest.mark.parametrize(
    ("param", "instead"),
    [
        ("model=gpt-4o", "--model"),
        ('messages=[{"role":"user","content":"hi"}]', "--prompt-file"),
        ("input=hello", "--prompt-file"),
        ("stream=true", "shape"),
        ("tools=[]", "agent's code"),
        ("instructions=be brief", "--prompt-file system=PATH"),
        ("extra_body={}", "transport"),
    ],
)
def test_a_set_param_that_overwrites_the_request_structure_is_refused(
    world: dict[str, Any], param: str, instead: str
) -> None:
    out = run_cli(["lab", "--agent", "counter-agent", "--set-param", param], env=_env(world))

    line = _one_error_line(out)
    key = param.partition("=")[0]
    assert f"'{key}' is the request's structure" in line and instead in line


def test_set_param_structure_is_refused_by_the_api_and_sampling_parameters_pass(world: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="--model"):
        orp.lab(agent="counter-agent", workers=1, mode="mock", params={"model": "other"})
    result = orp.lab(agent="counter-agent", workers=1, mode="mock", params={"temperature": 0, "top_p": 0.5})
    assert result.spec["params"] == {"temperature": 0, "top_p": 0.5}


@pytest.mark.parametrize(
    ("flag", "first", "second", "named"),
    [
        ("--set-param", "temperature=0", "temperature=1", "'temperature'"),
        ("--tag", "otel_replay.tenant.id=acme", "otel_replay.tenant.id=globex", "'otel_replay.tenant.id'"),
    ],
)
def test_a_key_given_twice_is_one_error_line(
    world: dict[str, Any], flag: str, first: str, second: str, named: str
) -> None:
    out = run_cli(["lab", "--agent", "counter-agent", flag, first, flag, second], env=_env(world))

    line = _one_error_line(out)
    assert flag in line and named in line and "twice" in line


# ------------------------------------------------------------------------------------------ RAY_ADDRESS


def test_an_unreachable_ray_address_is_one_error_line_naming_it(world: dict[str, Any], closed_port: int) -> None:
    before = _replays()
    address = f"127.0.0.1:{closed_port}"

    out = run_cli(["lab", "--agent", "counter-agent", "--executor", "ray"], env=_env(world, RAY_ADDRESS=address))

    line = _one_error_line(out)
    assert f"RAY_ADDRESS={address}" in line and "unset it" in line
    assert _replays() == before


@pytest.mark.parametrize(
    "form",
    ["ray://127.0.0.1:{port}", "ray://admin:Zq93pass@127.0.0.1:{port}", "auto", "not-an-address", "10.0.0.1:port"],
)
def test_unreachable_or_unreadable_ray_addresses_are_refused_by_the_api(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, closed_port: int, form: str
) -> None:
    port = closed_port
    if form == "auto":  # the cluster the last `ray start` recorded, in Ray's temp folder
        (tmp_path / "ray").mkdir()
        (tmp_path / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{port}\n", encoding="utf-8")
        monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.setenv("RAY_ADDRESS", form.format(port=port))
    before = _replays()

    with pytest.raises(orp.ReplayRefused, match="RAY_ADDRESS") as raised:
        orp.lab(agent="counter-agent", executor="ray", workers=1)

    message = str(raised.value)
    assert "\n" not in message
    assert "Zq93pass" not in message  # credentials in the address are never shown
    if form in ("not-an-address", "10.0.0.1:port"):
        assert "is not a Ray address" in message
    else:
        assert f"127.0.0.1:{port}" in message and "no Ray cluster answers" in message
    assert _replays() == before
