"""The write/high tools a recording holds, kept at their recorded risk whatever the current code declares.

A tool's risk is declared in code (``@otel_replay.tool(risk="write")``, an instrumentor's ``tool_risks``). When
the declaration is removed, the current code's call of that tool is no step at all (an undecorated function
tool of a framework otel-replay does not instrument, a Pydantic AI tool), so the replay cannot count, approve
or refuse it. The recording still says what the tool was. This module holds the three checks built on that:

* :func:`unapproved` (before a live replay starts, nothing imported yet): every recorded ``write``/``high``
  tool (unknown counts as ``high``) at or after ``from_step`` needs an approval in the replay's budget,
  whether or not the current code still declares it; steps before ``from_step`` are answered from the
  recording and need none;
* :class:`UndeclaredWatch` (during a live replay): the tool calls the model asks for (live answers and
  answers served from the recording) against the tool steps the replay saw. A recorded risky tool whose
  result goes back to the model with no tool step of that name, or that the model asked for more often than
  tool steps answered by the end of the run, ran (or may have run) outside the firewall;
* :func:`current_declarations` (a dry replay): whether the function each recorded risky tool step names
  (``otel_replay.tool.function``) still carries an ``@otel_replay.tool`` decorator in its source file, read
  and parsed, never imported, and only for modules the entrypoint rule (:mod:`.trust`) lets a replay run.

What can be seen: tool calls a model asks for in the shapes :mod:`.toolcalls` reads (Chat Completions, the
Responses API, Anthropic, LangChain), and a code agent's calls of its tools in the code its model wrote. A tool
the agent runs without any model asking for it (code that calls it directly) is invisible to the watch; the
pre-flight approval still applies to it.

It must never import, call or look up a tool by the names it reads, lower a recorded risk, or grant an
execution the approvals do not cover.
"""

from __future__ import annotations

import ast
import json
import shlex
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ... import semconv
from ...risk import step_risk
from ...runs import Run
from ..matching.toolcalls import CODE_CALL, code_calls, code_tools, requested_calls, result_ids
from . import trust
from .approvals import Approvals
from .refusals import higher_risk

_RISKY: Final = ("write", "high")
_DECORATOR_NAMES: Final = ("otel_replay", "orp")


@dataclass(frozen=True)
class RiskyTool:
    """A recorded write/high tool: its highest recorded risk, first step and number of recorded calls."""

    name: str
    risk: str
    step_index: int
    calls: int

    @property
    def approve_flag(self) -> str:
        """The ``--approve`` flag that allows every recorded call of it."""
        spec = self.name if self.calls == 1 else f"{self.name}:{self.calls}"
        return f"--approve {shlex.quote(spec)}"


def recorded_risky(run: Run, from_step: int | None = None) -> dict[str, RiskyTool]:
    """The write/high tools of ``run`` (a missing or unknown risk counts as ``high``), by name, in step order;
    with ``from_step`` only the calls at or after it (earlier ones are answered from the recording)."""
    found: dict[str, RiskyTool] = {}
    for step in sorted(run.steps, key=lambda s: s.index):
        if step.kind not in semconv.TOOL_CALL_KINDS or (from_step is not None and step.index < from_step):
            continue
        risk = higher_risk(step_risk(step.kind, step.attributes.get(semconv.TOOL_RISK)))
        if risk not in _RISKY:
            continue
        seen = found.get(step.name)
        if seen is None:
            found[step.name] = RiskyTool(step.name, risk, step.index, 1)
        else:
            found[step.name] = RiskyTool(step.name, higher_risk(seen.risk, risk), seen.step_index, seen.calls + 1)
    return found


def unapproved(run: Run, from_step: int | None, budget: Approvals) -> list[RiskyTool]:
    """The recorded write/high tools at or after ``from_step`` that ``budget`` gives no approval at all
    (how many executions an approval covers is counted as the replay runs)."""
    return [tool for tool in recorded_risky(run, from_step).values() if budget.limit(tool.name) == 0]


def preflight_refusal(missing: list[RiskyTool]) -> tuple[str, str]:
    """The refusal line for a live replay refused before it starts, and the ``--approve`` flags that allow it."""
    flags = " ".join(tool.approve_flag for tool in missing)
    if len(missing) == 1:
        tool = missing[0]
        what = (
            f"tool {tool.name!r} has risk {tool.risk} in the recording (step {tool.step_index}) and no approval "
            "was given for this replay"
        )
    else:
        listed = ", ".join(f"{t.name!r} (risk {t.risk}, step {t.step_index})" for t in missing)
        what = f"tools {listed} have risk write or high in the recording and no approval was given for this replay"
    return (
        f"{what}: a live replay needs an approval for every write/high tool the recording has, whether or not "
        f"the current code still declares it; add {flags} to let the live replay execute "
        f"{'it' if len(missing) == 1 else 'them'}",
        flags,
    )


def undeclared_refusal(tool: RiskyTool, *, carried: bool) -> str:
    """The refusal line for a recorded risky tool the replay saw the model ask for with no tool step of it."""
    seen = (
        "its result went back to the model with no tool step of that name: it ran outside the firewall"
        if carried
        else "no tool step of that name answered it: it ran, if the agent ran it, outside the firewall"
    )
    return (
        f"tool {tool.name!r} has risk {tool.risk} in the recording (step {tool.step_index}) and the current code "
        f"no longer declares it: the model asked for it in this replay and {seen}, where no replay can "
        f'count, approve or refuse it; re-add @otel_replay.tool(risk="{tool.risk}") to {tool.name} (or declare '
        "its risk to the framework's instrumentor) and replay again"
    )


class UndeclaredWatch:
    """The recorded risky tools a live replay must see as tool steps, and the calls of them models asked for.

    A code agent's model asks for no tool calls: it writes code that calls the tools (see
    :func:`~otel_replay.replay.matching.toolcalls.code_tools`). Calls of recorded risky tools in the code of a
    model answer are counted too (with the call id ``CODE_CALL``); their results go back as plain text, with no
    id to follow, so they are checked when the run ends (:meth:`unanswered`), never before a model call. A tool
    the current code still decorates (:func:`declared_now`), or one this replay saw as a step, is a step
    whenever the code reaches it: a call of it that is not a step is a branch not taken, not counted.

    Thread-safe: tools and model calls may come from worker threads."""

    def __init__(self, run: Run) -> None:
        self.risky = recorded_risky(run)
        self._code = frozenset((code_tools(run) or frozenset()) & self.risky.keys())
        self._functions = {
            s.name: s.attributes.get(semconv.TOOL_FUNCTION)
            for s in sorted(run.steps, key=lambda s: s.index, reverse=True)
            if s.name in self._code
        }
        self._declared: dict[str, bool] = {}
        self._asked: dict[str, list[str | None]] = {}
        self._steps: Counter[str] = Counter()
        self._lock = threading.Lock()

    def tool_step(self, name: str) -> None:
        """A tool step of ``name`` reached the replay (answered, executed or refused)."""
        if name in self.risky:
            with self._lock:
                self._steps[name] += 1

    def _undecorated(self, name: str) -> bool:
        """Whether the recorded risky tool ``name`` is not (or cannot be told to be) decorated in current code."""
        if name not in self._declared:
            function = self._functions.get(name)
            self._declared[name] = declared_now(function if isinstance(function, str) else None) is True
        return not self._declared[name]

    def answered(self, response: Any) -> None:
        """A model answer of this replay (its recorded form): the risky tool calls it asks for, and in a code
        agent's run the calls of them in the code it wrote."""
        calls = [(n, i) for n, i in requested_calls(response) if n in self.risky]
        if self._code:
            calls += [(n, CODE_CALL) for n in code_calls(response, self._code) if self._undecorated(n)]
        if calls:
            with self._lock:
                for name, call_id in calls:
                    self._asked.setdefault(name, []).append(call_id)

    def answered_text(self, response: str) -> None:
        """:meth:`answered` for a response as recorded JSON text."""
        if not self.risky or not any(name in response for name in self.risky):
            return
        try:
            self.answered(json.loads(response))
        except ValueError:
            return

    def carried(self, sent: str | None) -> RiskyTool | None:
        """The first recorded risky tool whose results the model request ``sent`` (JSON) carries more often
        than the replay saw tool steps of it: those results came from code outside the firewall."""
        if sent is None or not self._asked:
            return None
        try:
            returned = result_ids(json.loads(sent))
        except ValueError:
            return None
        with self._lock:
            for name, ids in self._asked.items():
                if len({i for i in ids if i is not None and i in returned}) > self._steps[name]:
                    return self.risky[name]
        return None

    def unanswered(self, *, code_firewalled: bool = False) -> list[RiskyTool]:
        """Recorded risky tools the models of this replay asked for more often than tool steps answered.
        ``code_firewalled``: the current code instruments the code agent's framework (every tool its code
        calls is a step), so calls in model-written code that are no step were not reached, not counted."""
        with self._lock:
            found = []
            for name, ids in self._asked.items():
                steps = self._steps[name]
                if code_firewalled or steps:  # the tool is a step where the code reaches it
                    ids = [i for i in ids if i != CODE_CALL]
                if len(ids) > steps:
                    found.append(self.risky[name])
            return found


# ------------------------------------------------------------------------------------- dry: current code


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _tool_decorators(tree: ast.Module) -> set[str]:
    """The names an ``@otel_replay.tool`` decorator goes by in a module: ``otel_replay.tool`` and ``X.tool``
    for ``import otel_replay as X``, and the local name of ``from otel_replay import tool``."""
    names = {f"{n}.tool" for n in _DECORATOR_NAMES}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "otel_replay":
                    names.add(f"{alias.asname or alias.name}.tool")
        elif isinstance(node, ast.ImportFrom) and node.module == "otel_replay":
            for alias in node.names:
                if alias.name == "tool":
                    names.add(alias.asname or alias.name)
    return names


def _function(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body: Iterable[ast.stmt] = tree.body
    parts = qualname.split(".")
    for depth, part in enumerate(parts):
        node = next(
            (
                n
                for n in body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part
            ),
            None,
        )
        if node is None:
            return None
        if depth == len(parts) - 1:
            return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        if not isinstance(node, ast.ClassDef):
            return None
        body = node.body
    return None


def _source_of(module_name: str) -> Path | None:
    """The source file of ``module_name`` when the entrypoint rule lets a replay run it; never imported."""
    if trust.entrypoint_refusal(f"{module_name}:_", given=False) is not None:
        return None
    top, _, rest = module_name.partition(".")
    locations = trust.locate(top)
    if not locations:
        return None
    base = locations[0]
    if not rest:
        return base if base.suffix == ".py" else None
    folder = base.parent if base.name == "__init__.py" else base
    parts = rest.split(".")
    for candidate in (folder.joinpath(*parts).with_suffix(".py"), folder.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def declared_now(function: str | None) -> bool | None:
    """Whether the function a recorded tool step names (``module:qualname``) still carries an
    ``@otel_replay.tool`` decorator in its source: True, False, or None when that cannot be told (no name, a
    module the entrypoint rule does not let a replay run, a function no longer found, unreadable source)."""
    if not function or ":" not in function:
        return None
    module_name, _, qualname = function.partition(":")
    if "<" in qualname or module_name == "__main__":
        return None
    path = _source_of(module_name)
    if path is None:
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    node = _function(tree, qualname)
    if node is None:
        return None
    names = _tool_decorators(tree)
    return any(_dotted(d) in names for d in node.decorator_list)


def current_declarations(run: Run) -> dict[str, bool | None]:
    """For each recorded write/high tool recorded by ``@otel_replay.tool`` (no instrumentor), whether the
    current code still declares it (see :func:`declared_now`)."""
    found: dict[str, bool | None] = {}
    for step in sorted(run.steps, key=lambda s: s.index):
        if step.kind != "tool" or step.name in found or step.attributes.get(semconv.STEP_INSTRUMENTATION):
            continue
        if higher_risk(step.attributes.get(semconv.TOOL_RISK)) not in _RISKY:
            continue
        found[step.name] = declared_now(step.attributes.get(semconv.TOOL_FUNCTION))
    return found
