"""The recording API: runs, steps and snapshots as OpenTelemetry spans and events.

A run is one trace whose root span is ``invoke_agent {name}``; each model, tool, retrieval or nested agent
call inside it is a step span; what the run saw and did is carried by ``otel_replay.snapshot.<kind>`` events
(see ``docs/semconv.md``). Run and step state live in context variables, so nested agents, threads and
concurrent asyncio tasks each build their own, separate tree; threads and pool work started inside a run carry
the run (``threads``), so their calls are steps of it.

Two rules shape every function here:

* Recording never raises into the agent. Every piece of bookkeeping runs behind a guard that logs and
  carries on; only the agent's own exceptions propagate, unchanged.
* No value becomes an attribute before redaction. Every payload goes through :func:`to_jsonable`, then the
  redactor, then canonical JSON; hashes are taken of the redacted form, so equal secrets hash equal (the
  redactor's keyed fingerprint) and no secret is ever recoverable from a hash or payload. Every hash of
  content is the redactor's keyed :meth:`~otel_replay.redaction.Redactor.content_hash` (HMAC with the
  installation key), never a plain sha256 that would confirm a guessed PIN or password without the key.

This package re-exports the API from its modules (the ``recording`` contract in ``pyproject.toml`` layers them,
top to bottom): ``decorators`` (``@agent``, ``@tool``, ``@retriever``, ``@model``), ``calls`` (the tool,
retrieval and model steps, ``begin_*_call`` / ``end_call``) and ``runlevel`` (``record_*``, ``attach_file``,
``identity``, ``now`` / ``new_uuid`` / ``random``), ``hooks`` (where a replay session answers a call),
``lifecycle`` (run and step spans), ``encoding`` (values to redacted payloads and events), ``arguments``
(a call's arguments by name) and ``threads`` (a run's or replay's context carried into the threads and pool
work it starts), ``state`` (the run context and its context variables). It must never define
anything itself: every name lives in one module and is imported from there (its public classes keep this
module's name as their ``__module__``, the name a recorded exception type was always stored under).
"""

from __future__ import annotations

from ..risk import effective_risk
from .calls import begin_model_call, begin_retrieval_call, begin_tool_call, end_call
from .decorators import AgentBlock, agent, model, retriever, tool
from .encoding import encode_value, scrubbed_fields
from .hooks import (
    DivergenceStop,
    ReplayInterrupt,
    Served,
    interrupt_in,
    permit,
    replaying,
    unguarded,
    unguarded_call,
)
from .lifecycle import begin_run, end_run, in_model_step, in_run
from .runlevel import (
    OutsideRunWarning,
    attach_file,
    identity,
    new_uuid,
    now,
    random,
    record_approval,
    record_context,
    record_safety,
    record_state,
    target_span,
)
from .state import current_replay, current_run, current_step

__all__ = [
    "AgentBlock",
    "DivergenceStop",
    "OutsideRunWarning",
    "ReplayInterrupt",
    "Served",
    "agent",
    "attach_file",
    "begin_model_call",
    "begin_retrieval_call",
    "begin_run",
    "begin_tool_call",
    "current_replay",
    "current_run",
    "current_step",
    "effective_risk",
    "encode_value",
    "end_call",
    "end_run",
    "identity",
    "in_model_step",
    "in_run",
    "interrupt_in",
    "model",
    "new_uuid",
    "now",
    "permit",
    "random",
    "record_approval",
    "record_context",
    "record_safety",
    "record_state",
    "replaying",
    "retriever",
    "scrubbed_fields",
    "target_span",
    "tool",
    "unguarded",
    "unguarded_call",
]

# A recorded exception's type is stored as ``module.qualname`` (and a value as ``module:qualname``): the public
# classes keep the module name they were always recorded under.
for _public in (AgentBlock, ReplayInterrupt, DivergenceStop):
    _public.__module__ = __name__
