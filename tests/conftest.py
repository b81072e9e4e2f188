"""Shared fixtures, the suite-wide Hypothesis profiles and the skip check (``tests/skip_check.py``).

chDB runs one embedded ClickHouse engine per process and one on-disk path at a time: every test that opens a
store must close it (use the ``store`` fixture or ``with Store.open(...)``) before another path is opened.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

NOT_REWRITTEN = ("anyio", "hypothesis", "langsmith", "otel_replay")
"""Installed packages whose modules pytest would rewrite for assertion introspection because they ship a pytest
plugin (entry point ``pytest11``), and whose modules this suite imports as the libraries they are."""


def _rewrite_only_the_suites_asserts() -> None:
    """Import the packages in :data:`NOT_REWRITTEN` as Python imports them, not rewritten by pytest.

    pytest rewrites the ``assert`` statements of every module of a distribution that ships a pytest plugin, and
    caches the result next to the source unless bytecode writing is off (``PYTHONDONTWRITEBYTECODE``, as many CI
    images set it): then every pytest process (each xdist worker) parsed and rewrote about 500 library modules
    again (LangSmith's types alone, imported with LangChain: 230), 6-7 s of CPU. Their few ``assert`` statements
    behave the same unrewritten (only a failing one's message is shorter), and the package under test is then
    imported as its users import it. The tests' own modules and helpers are still rewritten. pytest has no
    public switch for this: when its hook changes shape, nothing happens."""
    for hook in sys.meta_path:
        marked = getattr(hook, "_must_rewrite", None)
        if type(hook).__name__ == "AssertionRewritingHook" and isinstance(marked, set):
            marked.difference_update(NOT_REWRITTEN)


_rewrite_only_the_suites_asserts()

pytest_plugins = ("skip_check",)

TESTS = Path(__file__).resolve().parent

# The Agents SDK reads this at import: the agents of the suite run with it (no model data in the SDK's own logs),
# and so does every fork server started from this environment (tests/fork_server.py), so their children match.
os.environ.setdefault("OPENAI_AGENTS_DONT_LOG_MODEL_DATA", "1")


def _cache_the_suites_rewritten_modules() -> None:
    """Let pytest cache the rewritten modules of tests/ even where bytecode writing is off.

    With ``PYTHONDONTWRITEBYTECODE`` set (as this machine and many CI images set it) pytest writes no cache of the
    modules whose asserts it rewrites, so every pytest process (each xdist worker) parsed and rewrote the suite's
    own modules again: about 7 s of CPU per process. Here the rewritten code of a module under tests/ is written
    where pytest would have written it (``__pycache__`` beside it, a name with pytest's version, atomically) and
    read back by pytest itself only while the source's hash matches; nothing else changes: bytecode writing stays
    off for every other module and for the processes the tests start. pytest has no public switch for this:
    when its functions change shape, nothing happens."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    original = getattr(rewrite, "_rewrite_test", None)
    needed = ("get_cache_dir", "try_makedirs", "_write_pyc", "PYC_TAIL", "assertstate_key")
    if original is None or not all(hasattr(rewrite, name) for name in needed) or not sys.dont_write_bytecode:
        return

    def rewrite_and_cache(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        try:
            fn, config = args
            source_hash, co = result
            if TESTS in Path(fn).resolve().parents:
                pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
                if rewrite.try_makedirs(pyc.parent):
                    rewrite._write_pyc(config.stash[rewrite.assertstate_key], co, source_hash, pyc)
        except Exception:  # noqa: BLE001 - a pytest whose internals changed: the module is used, just not cached
            pass
        return result

    rewrite._rewrite_test = rewrite_and_cache


_cache_the_suites_rewritten_modules()

from hypothesis import settings  # noqa: E402 - after the rewrite hook is narrowed

from otel_replay import configure  # noqa: E402

# Property tests draw new examples on every run: the examples come from a seed, random unless the run gives one
# (`make test` and `make fuzz` pick one, print it and pass it as --hypothesis-seed; the summary repeats it), and
# the same seed draws the same examples again, whatever ran before (see _pin_local_constants). No example
# database is kept between runs (a run is reproduced by its seed alone) and no example has a wall-clock deadline.
# Profile "ci" (the default) runs each test's usual number of examples; "fuzz" (`make fuzz`) ten times as many
# (tests/property_budget.py). HYPOTHESIS_PROFILE or --hypothesis-profile chooses.
settings.register_profile("ci", database=None, deadline=None, print_blob=True)
settings.register_profile("fuzz", settings.get_profile("ci"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "ci")


def _pin_local_constants() -> str | None:
    """Draw no "local constants" in property tests. Hypothesis (from 6.131) also draws, about once in twenty
    draws, string and number constants found in the source of the project's modules imported so far in the
    process; a test's examples would then depend on which modules earlier tests happened to import on that xdist
    worker, which worksteal decides, and a failing seed would not draw the failing examples again when the test
    is rerun alone. Without them a seed draws the same examples whatever ran before the test. Returns a line for
    the report header when this Hypothesis cannot be pinned so."""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:  # a Hypothesis that draws no local constants
        return None
    if not hasattr(providers, "_get_local_constants"):
        return "hypothesis: local constants not pinned; a seed's examples may depend on test order"
    empty = Constants()
    providers._get_local_constants = lambda: empty  # no public switch exists
    return None


_UNPINNED = _pin_local_constants()


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say so at the top of the run when property tests' examples could not be pinned (:func:`_pin_local_constants`)."""
    return _UNPINNED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The property tests' profile and seed, at the end of the run next to any failure, with how to rerun them."""
    if hasattr(config, "workerinput"):
        return
    seed = config.getoption("hypothesis_seed", None)
    profile = config.getoption("hypothesis_profile", None) or os.environ.get("HYPOTHESIS_PROFILE") or "ci"
    if seed is None:
        terminalreporter.write_line(
            f"property tests: profile {profile!r}, a random seed per test (no --hypothesis-seed)"
        )
    else:
        terminalreporter.write_line(
            f"property tests: profile {profile!r}, seed {seed} (the same examples again: --hypothesis-seed={seed})"
        )


SLOW_FIRST = ("realworld",)
"""Folders of tests/ whose tests run first: each of their tests runs real agent programs and replays them in
processes of their own (tens of seconds apiece)."""

SLOW_MODULES = {
    "test_rw_cookbook_sql.py": 33.0,
    "test_rw_openai_agents.py": 29.0,
    "test_rw_secret_loop.py": 26.0,
    "test_lab_ray.py": 22.0,
    "test_volatile_ids.py": 22.0,
    "test_adv_repeated_secret.py": 20.0,
    "test_rw_langgraph.py": 20.0,
    "test_rw_agent_executor.py": 17.0,
    "test_rw_smolagents.py": 12.0,
    "test_rw_llamaindex.py": 19.0,
    "test_rw_supervisor.py": 12.0,
    "test_rw_swarm.py": 10.0,
    "test_rw_pydantic_ai.py": 9.0,
    "test_adv_undeclared_tools.py": 45.0,
}
"""Modules that run first too (besides :data:`SLOW_FIRST`'s), with about the seconds of wall their tests took in
``make test`` on two cores (``--durations``, 2026-12-01): Ray started twice, a zero-code LangGraph run, the agents
whose tool decorator is removed (tests/adversarial/test_adv_undeclared_tools.py, estimated), and the
real-world agents. They are used only to deal the modules evenly to the workers; a stale figure makes the
dealing less even, never a test fail. A module of a :data:`SLOW_FIRST` folder that is not listed counts
:data:`SLOW_SECONDS_PER_TEST` per test."""

SLOW_SECONDS_PER_TEST = 4.0


def _slow_seconds(module: Path, tests: int) -> float | None:
    """About how long ``module``'s tests take, when it is one of the modules that run first; else None."""
    if module.name in SLOW_MODULES:
        return SLOW_MODULES[module.name]
    if module.parent.name in SLOW_FIRST:
        return SLOW_SECONDS_PER_TEST * tests
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start every xdist worker on the slowest tests (:data:`SLOW_FIRST`, :data:`SLOW_MODULES`), keeping every
    other order.

    ``--dist worksteal`` gives each of N workers a contiguous share of the collection (the next
    ``len(pending) // workers_left`` tests) and lets an idle worker steal the end of another's queue. So the slow
    modules are dealt to the workers whole (a module's tests stay together, and share what their module fixtures
    record), each to the share with the fewest seconds of them so far, longest first, and each share starts with
    its slow tests: the queues end with short tests, which an idle worker can take, and the workers finish
    together. Without workers: the slow tests first, longest module first."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
    seconds = {path: _slow_seconds(path, len(tests)) for path, tests in modules.items()}
    slow_modules = sorted(
        (path for path, cost in seconds.items() if cost is not None), key=lambda path: -(seconds[path] or 0.0)
    )
    slow = [item for path in slow_modules for item in modules[path]]
    rest = [item for item in items if seconds[item.path] is None]
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers <= 1 or not slow:
        items[:] = slow + rest
        return
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for path in slow_modules:
        k = loads.index(min(loads))
        shares[k].extend(modules[path])
        loads[k] += seconds[path] or 0.0
    ordered: list[pytest.Item] = []
    pending = len(items)
    for k, share in enumerate(shares):
        size = pending // (workers - k)
        take = max(0, size - len(share))
        ordered += share + rest[:take]
        rest = rest[take:]
        pending -= len(share) + take
    items[:] = ordered + rest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh OTEL_REPLAY_HOME for one test, with no store URL inherited from the environment."""
    path = tmp_path / "otel-replay-home"
    monkeypatch.setenv("OTEL_REPLAY_HOME", str(path))
    monkeypatch.delenv("OTEL_REPLAY_STORE", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    # Start from the spool exporter in this home, as a fresh process would (an earlier test may have
    # configured another home or exporter in this process).
    configure(home=path, exporter="spool")
    return path
