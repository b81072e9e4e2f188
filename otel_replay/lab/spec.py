"""What a lab is asked to do, as plain checked data: the cohort's filters (:class:`CohortSpec`) and the
candidate, modes, lanes and workers (:class:`LabSpec`), with the parsers of the command line's small grammars
(``--inject``, ``--set-param``, ``--tag``, ``--prompt-file``, ``--since`` / ``--until``) and the
:class:`~otel_replay.replay.matching.policy.ReplayPolicy` of each lane.

Everything is checked here, once, in the lab process, before a store is opened or a worker started: a bad value
raises ``ValueError`` (or :class:`~otel_replay.errors.ReplayRefused` for a refusal) with one line saying what is
accepted.

It must never import, look up or run anything a value names, evaluate text as code, or read a file other than
the prompt files the person running the lab named.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import stat
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..errors import ReplayRefused
from ..replay.matching.policy import FAULT_KINDS, TOOL_MATCHES, ReplayPolicy, ToolFault

LabMode = Literal["deterministic", "whatif", "mock"]
Executor = Literal["local", "ray"]

LAB_MODES: Final = ("deterministic", "whatif", "mock")
EXECUTORS: Final = ("local", "ray")

_INJECT: Final = re.compile(r"^(?P<tool>[^:\s]+):error=(?P<rest>.+)$", re.DOTALL)
_PROBABILITY: Final = re.compile(r":p=(?P<p>[0-9]*\.?[0-9]+)$")
_PROMPT_MAX_BYTES: Final = 4 * 2**20
"""A ``--prompt-file`` larger than this is refused (a prompt, not a data set)."""
_INJECT_HELP: Final = "write TOOL:error=timeout|exception|empty|value=JSON[:p=0.3]"

REQUEST_STRUCTURE: Final[Mapping[str, str]] = {
    "model": "use --model NAME",
    "messages": "use --prompt-file ROLE=PATH to replace a role's prompt",
    "input": "use --prompt-file ROLE=PATH to replace a role's prompt",
    "instructions": "use --prompt-file system=PATH",
    "system": "use --prompt-file system=PATH",
    "stream": "a replay keeps the recorded call's shape",
    "stream_options": "a replay keeps the recorded call's shape",
    "tools": "the tools are the agent's code: change them there",
    "functions": "the tools are the agent's code: change them there",
    "extra_headers": "the SDK's transport is not a request parameter",
    "extra_query": "the SDK's transport is not a request parameter",
    "extra_body": "the SDK's transport is not a request parameter",
    "run_manager": "LangChain's callback plumbing is not a request parameter",
    "callbacks": "LangChain's callback plumbing is not a request parameter",
}
"""``--set-param`` names refused: they are the request's structure (what the model override, the prompt override
and the SDK's own plumbing set), not a parameter of how the model samples; the value is what to do instead."""


@dataclass(frozen=True, kw_only=True)
class CohortSpec:
    """Which recorded runs a lab replays: store filters, or case files (``cases``)."""

    agent: str | None = None
    status: str | None = None
    since: _dt.datetime | None = None
    until: _dt.datetime | None = None
    """Runs that started before this instant (excluded)."""
    trace_ids: tuple[str, ...] = ()
    tags: tuple[tuple[str, str], ...] = ()
    """Root-span attributes a run must carry with exactly these values (``--tag KEY=VALUE``)."""
    limit: int | None = None
    """At most this many runs, newest first, before sampling."""
    sample: int | None = None
    """A deterministic sample of this many of the selected runs (drawn with ``seed``)."""
    seed: int = 0
    cases: tuple[str, ...] = ()
    """Case files or folders: each case's trace is a cohort run (no store is read)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``spec.cohort`` of ``otel-replay lab --json``)."""
        return {
            "agent": self.agent,
            "status": self.status,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "trace_ids": list(self.trace_ids),
            "tags": dict(self.tags),
            "limit": self.limit,
            "sample": self.sample,
            "seed": self.seed,
            "cases": list(self.cases),
        }


@dataclass(frozen=True, kw_only=True)
class LabSpec:
    """A whole lab: cohort, candidate (code and overrides), tool policy, lanes, workers."""

    lab_id: str
    mode: LabMode = "deterministic"
    cohort: CohortSpec = field(default_factory=CohortSpec)
    app: str | None = None
    """``--app module:function``: the candidate's entrypoint instead of each run's recorded one."""
    model: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    shown_params: Mapping[str, Any] | None = None
    """The parameters as the spec shows them (scrubbed like a recorded value: a key or a token in a
    ``--set-param`` value is never printed or stored); None shows ``params``."""
    prompts: Mapping[str, str] = field(default_factory=dict)
    """Role → the prompt text read from ``--prompt-file ROLE=PATH``."""
    prompt_files: Mapping[str, str] = field(default_factory=dict)
    """Role → the path the prompt was read from (what the spec shows; the text is never shown)."""
    tool_match: str = "strict"
    tools_live: tuple[str, ...] = ()
    faults: tuple[ToolFault, ...] = ()
    seed: int = 0
    baseline: bool = False
    repeats: int = 1
    workers: int = 1
    executor: Executor = "local"
    reason: str | None = None
    actor: str | None = None
    approvals: tuple[str, ...] = ()
    allow_paths: tuple[str, ...] = ()
    """``--allow-path``: files or folders every replay's code may change (each replay's audit records them)."""
    allow_addresses: tuple[str, ...] = ()
    """``--allow-address``: ``HOST:PORT`` every replay's code may connect to."""
    scorers: tuple[str, ...] = ()
    """Modules of user scorers (``--scorers MODULE``), imported in the lab process and in every worker."""
    bisect_id: str | None = None
    """The bisect this lab is a step of (``otel-replay bisect --cohort``): written on every replay's root span."""
    bisect_revision: str | None = None
    """The revision that bisect step tries."""

    @property
    def live(self) -> bool:
        """True when the lab makes real calls (whatif models, ``--tool-live`` tools): it needs a reason and is
        journaled before its first replay."""
        return self.mode == "whatif" or bool(self.tools_live)

    def policy(self, lane: str) -> ReplayPolicy:
        """The replay policy of a lane: the candidate's whole policy, or the baseline's (the same tool matching
        and live tools, no model overrides, no faults)."""
        if lane == "baseline":
            return ReplayPolicy(
                lab_id=self.lab_id,
                lane="baseline",
                bisect_id=self.bisect_id,
                bisect_revision=self.bisect_revision,
                tool_match=self.tool_match,  # type: ignore[arg-type]
                tools_live=self.tools_live,
                seed=self.seed,
            )
        return ReplayPolicy(
            lab_id=self.lab_id,
            lane="candidate",
            bisect_id=self.bisect_id,
            bisect_revision=self.bisect_revision,
            tool_match=self.tool_match,  # type: ignore[arg-type]
            tools_live=self.tools_live,
            faults=self.faults,
            seed=self.seed,
            model=self.model,
            params=dict(self.params),
            prompts=dict(self.prompts),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``spec`` of ``otel-replay lab --json``): prompt files by path, never their text."""
        return {
            "cohort": self.cohort.to_dict(),
            "app": self.app,
            "model": self.model,
            "params": dict(self.params if self.shown_params is None else self.shown_params),
            "prompt_files": dict(self.prompt_files),
            "tool_match": self.tool_match,
            "tools_live": list(self.tools_live),
            "inject": [fault_text(f) for f in self.faults],
            "seed": self.seed,
            "baseline": self.baseline,
            "repeats": self.repeats,
            "workers": self.workers,
            "executor": self.executor,
            "reason": self.reason,
            "actor": self.actor,
            "approvals": list(self.approvals),
            "scorers": list(self.scorers),
        }


def new_lab_id() -> str:
    """A fresh lab id (a uuid4 in hex)."""
    return uuid.uuid4().hex


# ------------------------------------------------------------------------------------------------ parsers


def parse_inject(text: str) -> ToolFault:
    """``TOOL:error=timeout|exception|empty|value=JSON[:p=0.3]`` → :class:`ToolFault` (``ValueError``, one
    line, otherwise)."""
    match = _INJECT.match(text.strip())
    if match is None:
        raise ValueError(f"cannot read --inject {text!r}: {_INJECT_HELP}")
    tool, rest = match.group("tool"), match.group("rest")
    p = 1.0
    found = _PROBABILITY.search(rest)
    if found is not None:
        p = float(found.group("p"))
        rest = rest[: found.start()]
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"cannot read --inject {text!r}: p must be between 0 and 1")
    value: Any = None
    if rest.startswith("value="):
        kind = "value"
        try:
            value = json.loads(rest[len("value=") :])
        except ValueError:
            raise ValueError(f"cannot read --inject {text!r}: the value after value= is not JSON") from None
    else:
        kind = rest
    if kind not in FAULT_KINDS:
        raise ValueError(f"cannot read --inject {text!r}: unknown error {kind!r}; {_INJECT_HELP}")
    return ToolFault(tool=tool, kind=kind, value=value, p=p)  # type: ignore[arg-type]


def fault_text(fault: ToolFault) -> str:
    """The ``--inject`` text of a fault (what the spec shows)."""
    kind = f"value={json.dumps(fault.value, separators=(',', ':'))}" if fault.kind == "value" else fault.kind
    return f"{fault.tool}:error={kind}" + (f":p={fault.p:g}" if fault.p != 1.0 else "")


def parse_param(text: str) -> tuple[str, Any]:
    """``--set-param K=V``: V read as JSON when it is JSON (``0``, ``0.2``, ``true``, ``[1]``), else a string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"cannot read --set-param {text!r}: write NAME=VALUE, e.g. temperature=0")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key, value


def check_params(params: Mapping[str, Any]) -> None:
    """Refuse a ``--set-param`` that would overwrite the request's structure (:data:`REQUEST_STRUCTURE`:
    ``model``, ``messages``, ``input``, ``stream``, ``tools``...) rather than set a parameter (``ValueError``,
    one line saying what to use instead)."""
    for key in params:
        instead = REQUEST_STRUCTURE.get(str(key).strip().lower())
        if instead is not None:
            raise ValueError(
                f"--set-param {key}=...: {key!r} is the request's structure, not a model parameter; {instead} "
                "(--set-param sets sampling parameters such as temperature, top_p, max_tokens, seed)"
            )


def check_once(texts: Sequence[str], *, flag: str, what: str) -> None:
    """Refuse a ``KEY=VALUE`` flag naming one key twice (``--prompt-file system=a --prompt-file system=b``):
    which value a lab uses must never depend on the order of the flags (``ValueError``, one line)."""
    seen: set[str] = set()
    for text in texts:
        key = text.partition("=")[0].strip()
        if key in seen:
            raise ValueError(f"{flag} names the {what} {key!r} twice: give it once")
        seen.add(key)


def parse_tag(text: str) -> tuple[str, str]:
    """``--tag KEY=VALUE`` (a root-span attribute of the run and its value as stored)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"cannot read --tag {text!r}: write KEY=VALUE, e.g. otel_replay.tenant.id=acme")
    return key, value


_SAME_PROMPT: Final[Mapping[str, str]] = {"developer": "system", "human": "user", "ai": "assistant"}
"""Prompt roles that replace the same prompt as another (the model override treats them alike)."""


def check_roles(roles: Sequence[str]) -> None:
    """Refuse two prompts for one role, also under two names that replace the same prompt (``system`` and
    ``developer``, ``user`` and ``human``, ``assistant`` and ``ai``): which one a lab sends must never depend
    on the order of the flags (``ValueError``, one line)."""
    seen: dict[str, str] = {}
    for role in roles:
        name = role.strip()
        same = _SAME_PROMPT.get(name, name)
        if same in seen:
            first = seen[same]
            what = f"the role {name!r} twice" if first == name else f"the roles {first!r} and {name!r}"
            raise ValueError(f"--prompt-file names {what}, which replace the same prompt: give one")
        seen[same] = name


def read_prompt_file(text: str) -> tuple[str, str, str]:
    """``--prompt-file ROLE=PATH`` → (role, path, the file's text), read once here (``ValueError`` when the
    file cannot be read as UTF-8 text)."""
    role, sep, path = text.partition("=")
    role = role.strip()
    if not sep or not role or not path:
        raise ValueError(f"cannot read --prompt-file {text!r}: write ROLE=PATH, e.g. system=prompts/v4.txt")
    try:
        # non-blocking: opening a named pipe must not wait for a writer (it is refused below)
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # /dev/zero, a pipe, a folder: never read
                raise ValueError(f"--prompt-file {role}={path}: not a regular file")
            data = fh.read(_PROMPT_MAX_BYTES + 1)
        if len(data) > _PROMPT_MAX_BYTES:
            raise ValueError(f"--prompt-file {role}={path}: larger than {_PROMPT_MAX_BYTES // 2**20} MiB")
        content = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ValueError(f"--prompt-file {role}={path}: cannot be read ({reason})") from None
    return role, path, content


def parse_when(text: str | _dt.datetime, *, end: bool = False) -> _dt.datetime:
    """``--since`` / ``--until``: an ISO date or date-time (UTC when it names no zone). A date alone is the
    start of that day for ``--since`` and the end of that day for ``--until`` (``end``)."""
    if isinstance(text, _dt.datetime):
        return text if text.tzinfo else text.replace(tzinfo=_dt.timezone.utc)
    raw = text.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw):
            day = _dt.datetime.fromisoformat(raw).replace(tzinfo=_dt.timezone.utc)
            return day + _dt.timedelta(days=1) if end else day
        moment = _dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        flag = "--until" if end else "--since"
        raise ValueError(
            f"cannot read {flag} {text!r}: write an ISO date or time, e.g. 2026-11-30 or 2026-11-30T14:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=_dt.timezone.utc)


def to_ns(moment: _dt.datetime | None) -> int | None:
    """Nanoseconds since the epoch of an aware datetime."""
    if moment is None:
        return None
    return int(moment.timestamp()) * 10**9 + moment.microsecond * 1000


def check_spec(spec: LabSpec) -> None:
    """Refuse a lab that cannot start, before anything is opened or run."""
    if spec.mode not in LAB_MODES:
        raise ValueError(f"unknown lab mode {spec.mode!r}: use deterministic, whatif or mock")
    if spec.executor not in EXECUTORS:
        raise ValueError(f"unknown executor {spec.executor!r}: use local or ray")
    if spec.tool_match not in TOOL_MATCHES:
        raise ValueError(f"unknown --tool-match {spec.tool_match!r}: use strict or sequence")
    if spec.repeats < 1:
        raise ValueError(f"--repeats must be 1 or more, got {spec.repeats}")
    if spec.workers < 1:
        raise ValueError(f"--workers must be 1 or more, got {spec.workers}")
    cohort = spec.cohort
    if cohort.sample is not None and cohort.sample < 1:
        raise ValueError(f"--sample must be 1 or more, got {cohort.sample}")
    if cohort.limit is not None and cohort.limit < 1:
        raise ValueError(f"--limit must be 1 or more, got {cohort.limit}")
    if cohort.cases and (
        cohort.agent or cohort.status or cohort.since or cohort.until or cohort.tags or cohort.trace_ids
    ):
        raise ValueError("--cases replays the case files' runs: do not combine it with store filters")
    if cohort.since and cohort.until and cohort.since >= cohort.until:
        raise ValueError("--since must be before --until")
    if spec.live and not (spec.reason and spec.reason.strip()):
        what = "a whatif lab calls real models" if spec.mode == "whatif" else "--tool-live runs real tools"
        raise ReplayRefused(f"{what}: give a reason (--reason TEXT)")
    if spec.tools_live and spec.mode == "mock":
        raise ValueError("--tool-live needs a mode that matches calls: deterministic or whatif")


def check_faults(faults: Sequence[ToolFault], called: Sequence[str]) -> None:
    """Refuse an ``--inject`` rule for a tool no run of the cohort calls (``called``: the tools the cohort's
    recordings call): a misspelt tool would make the fault test pass without injecting anything (``ValueError``,
    one line naming the tool and the tools the cohort calls)."""
    known = set(called)
    for fault in faults:
        if fault.tool in known:
            continue
        names = sorted(known)
        listed = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        raise ValueError(
            f"--inject names the tool {fault.tool!r}, which no run of the cohort calls: "
            + (f"the cohort's runs call {listed}" if names else "the cohort's runs call no tool")
            + "; check the tool's name (it is the name in the recording, as `otel-replay show` lists it)"
        )


def as_faults(inject: Sequence[str | ToolFault]) -> tuple[ToolFault, ...]:
    """``--inject`` texts (or faults already built) as faults."""
    return tuple(item if isinstance(item, ToolFault) else parse_inject(item) for item in inject)
