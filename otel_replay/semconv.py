"""The otel-replay semantic convention, v2: every span, event and attribute name the project writes or reads.

This module is the single source of names. Code never spells an attribute key inline; it imports it from
here. ``docs/semconv.md`` documents every constant (type, meaning, example) and a test keeps the two in
step. Renaming a value is a breaking change of the convention and bumps the major part of
:data:`SCHEMA_VERSION`.

Where the OpenTelemetry GenAI conventions have a key for the same fact, the ``gen_ai.*`` key is written
alongside (the GenAI constants in ``opentelemetry-semantic-conventions`` are deprecated incubating names, so
the few used here are copied, not imported).
"""

from __future__ import annotations

from enum import Enum
from typing import Final

SCHEMA_VERSION: Final = "2.0"
"""Version of this convention written on every run root span and snapshot event (``major.minor``)."""

SCHEMA_MAJOR: Final = 2
"""Major version this recorder writes."""

READABLE_MAJORS: Final = frozenset({1, 2})
"""Major versions readers understand (a 1.x recording reads and replays unchanged); a recording with another
major is refused by replay."""

READABLE_TEXT: Final = " or ".join(f"{major}.x" for major in sorted(READABLE_MAJORS))
""":data:`READABLE_MAJORS` as said in messages (``1.x or 2.x``)."""


class StrEnum(str, Enum):
    """A closed value set whose members compare equal to their string values."""

    _value_: str

    def __str__(self) -> str:
        return self.value


class RunKind(StrEnum):
    """Whether a run is a recording of real work or a replay of another run."""

    ORIGINAL = "original"
    REPLAY = "replay"


class StepKind(StrEnum):
    """What a step span does."""

    MODEL = "model"
    TOOL = "tool"
    RETRIEVAL = "retrieval"
    AGENT = "agent"
    HANDOFF = "handoff"
    """A multi-agent framework's own routing tool (``transfer_to_…``): the model hands the conversation to
    another agent. Recorded like a tool call (its ``tool`` snapshot), without a risk unless one was declared.
    Since 2.0; a 1.x recording has these as ``tool`` steps."""


TOOL_CALL_KINDS: Final = frozenset({StepKind.TOOL.value, StepKind.HANDOFF.value})
"""Step kinds that answer a tool call the model made: matched, answered from the recording and diffed as tool
calls, each with a ``tool`` snapshot."""

STEP_SNAPSHOT: Final = {"model": "model", "tool": "tool", "retrieval": "retrieval", "handoff": "tool"}
"""Step kind → the snapshot kind that holds what the step was called with and returned (an ``agent`` step has
none of its own)."""


class SnapshotKind(StrEnum):
    """The eight snapshot kinds; each is recorded as the span event ``otel_replay.snapshot.<kind>``."""

    INPUT = "input"
    CONFIG = "config"
    CONTEXT = "context"
    RETRIEVAL = "retrieval"
    STATE = "state"
    TOOL = "tool"
    MODEL = "model"
    OUTPUT = "output"


class Risk(StrEnum):
    """How dangerous executing a tool again would be."""

    READ = "read"
    WRITE = "write"
    HIGH = "high"


class ApprovalStatus(StrEnum):
    """A human-in-the-loop decision about one tool call."""

    APPROVED = "approved"
    DENIED = "denied"
    PENDING = "pending"
    EXPIRED = "expired"


class ReplayMode(StrEnum):
    """How a replay answers the calls the agent makes."""

    DRY = "dry"
    MOCK = "mock"
    DETERMINISTIC = "deterministic"
    LIVE = "live"
    WHATIF = "whatif"
    """Models called live through the instrumented SDK, tools answered from the recording (the lab's what-if)."""


# --------------------------------------------------------------------------------------------- span names

TRACER_NAME: Final = "otel_replay"
"""Instrumentation scope name of every span otel-replay records (its tracer's name; the version is the
package's). The scrubbing step tells otel-replay's own spans from other instrumentations' by it."""

SPAN_AGENT: Final = "invoke_agent"
"""Span name prefix of a run root and of a nested agent step: ``invoke_agent {agent name}``."""

SPAN_TOOL: Final = "execute_tool"
"""Span name prefix of a tool step: ``execute_tool {tool name}``."""

SPAN_MODEL: Final = "chat"
"""Span name prefix of a model step: ``chat {request model}``."""

SPAN_RETRIEVAL: Final = "retrieval"
"""Span name prefix of a retrieval step: ``retrieval {retriever name}``."""

# --------------------------------------------------------------------------------------- run (root span)

SCHEMA_VERSION_ATTR: Final = "otel_replay.schema.version"
"""string. Convention version the run was recorded with, e.g. ``1.0``."""

RUN_ID: Final = "otel_replay.run.id"
"""string. Unique id of the run (a UUID4), distinct from the trace id so replays of it can be told apart."""

RUN_KIND: Final = "otel_replay.run.kind"
"""string, :class:`RunKind`. ``original`` for a recording, ``replay`` for a replay of another run."""

RUN_ENTRYPOINT: Final = "otel_replay.run.entrypoint"
"""string. ``module:qualname`` of the agent function, so a replay can import and call it again."""

RUN_STEP_COUNT: Final = "otel_replay.run.step_count"
"""int. Number of steps the run recorded, set when the run ends."""

RUN_INPUT_TOKENS: Final = "otel_replay.run.input_tokens"
"""int. Sum of the model steps' input tokens, set when the run ends."""

RUN_OUTPUT_TOKENS: Final = "otel_replay.run.output_tokens"
"""int. Sum of the model steps' output tokens, set when the run ends."""

RUN_COST_USD: Final = "otel_replay.run.cost_usd"
"""double. Sum of the model steps' reported cost in US dollars, set when the run ends and known."""

RUN_BOUNDARY: Final = "otel_replay.run.boundary"
"""string. On the root of a run that no function call bounds: ``mcp_session`` for a run an MCP client session
began at its first recorded call outside any run and ended when it closed; ``wire`` for a run the recording
proxy made of requests at the model wire. Neither has an entrypoint, input or output of its own (a replay needs
``--app`` and does not compare outputs). Absent on every other run. Since 2.0."""

RUN_EXECUTES_CODE: Final = "otel_replay.run.executes_code"
"""boolean. Set (true) on the root of a run whose agent executes model-written code (a smolagents
``CodeAgent``): tools that code calls without a step of their own ran outside the firewall."""

RUN_CODE_TOOLS: Final = "otel_replay.run.code_tools"
"""string[]. On the root of a run that executes model-written code: the names of the tools that code could
call (a dry replay looks for calls of them in the model's code)."""

TENANT_ID: Final = "otel_replay.tenant.id"
"""string. Tenant the run acted for, from :func:`otel_replay.identity`."""

USER_ROLE: Final = "otel_replay.user.role"
"""string. Role of the caller the run acted for, from :func:`otel_replay.identity`."""

SESSION_ID: Final = "otel_replay.session.id"
"""string. Conversation / session the run belongs to; also written as ``gen_ai.conversation.id``."""

CONFIG_PROMPT_VERSION: Final = "otel_replay.config.prompt_version"
"""string. ``prompt_version`` of the run's config snapshot, copied to the root span for queries."""

CONFIG_HASH: Final = "otel_replay.config.hash"
"""string. sha256 of the run's canonical config snapshot payload."""

# replay runs (written by the replay engine on the root span of a replay)

REPLAY_OF_TRACE_ID: Final = "otel_replay.replay.of_trace_id"
"""string. Trace id of the run this run replays."""

REPLAY_OF_RUN_ID: Final = "otel_replay.replay.of_run_id"
"""string. Run id of the run this run replays."""

REPLAY_MODE: Final = "otel_replay.replay.mode"
"""string, :class:`ReplayMode`. How the replay answered the agent's calls."""

REPLAY_FROM_STEP: Final = "otel_replay.replay.from_step"
"""int. First step that ran per the replay mode; earlier steps were answered from the recording."""

REPLAY_ACTOR: Final = "otel_replay.replay.actor"
"""string. Who started the replay (default: the OS user)."""

REPLAY_REASON: Final = "otel_replay.replay.reason"
"""string. Why the replay was started."""

REPLAY_APPROVALS: Final = "otel_replay.replay.approvals"
"""string[]. Approvals given for this replay, as given: ``NAME`` (one execution of tool NAME), ``NAME:N`` (N
executions) or ``NAME:*`` (every call); never taken from the recording."""

REPLAY_OS_USER: Final = "otel_replay.replay.os_user"
"""string. The operating-system user that ran the replay (never taken from ``--actor``)."""

REPLAY_EXECUTIONS: Final = "otel_replay.replay.executions"
"""string. JSON object: how many times each approved ``write``/``high`` tool ran for real in this replay, set
when the replay ends."""

REPLAY_AUDIT_MAC: Final = "otel_replay.replay.audit_mac"
"""string. ``hmac-sha256:`` + HMAC-SHA256 (key derived from the installation's redaction key) of the canonical
JSON of the replay's actor, OS user, reason, mode, from step, approvals, original trace id, run id and trace
id; ``otel-replay audit`` marks a replay whose MAC does not verify."""

REPLAY_ALLOW_SIDE_EFFECTS: Final = "otel_replay.replay.allow_side_effects"
"""boolean. ``true`` when the person replaying turned the side-effect guard off (``--allow-side-effects``): the
replayed code could spawn processes, change files and open connections. Absent otherwise."""

REPLAY_SANDBOX: Final = "otel_replay.replay.sandbox"
"""string. What stopped the replayed code's unrecorded side effects: ``landlock ABI n`` (the kernel sandbox,
with the audit hooks), ``audit hooks only`` or ``none`` (a live replay, ``--allow-side-effects``)."""

REPLAY_ALLOWED_EFFECTS: Final = "otel_replay.replay.allowed_effects"
"""string[]. The files, folders and addresses the person replaying allowed the replayed code to change or reach
(``--allow-path``, ``--allow-address``), as ``path:/abs/path`` and ``address:HOST:PORT``. Absent when none."""

REPLAY_DIVERGED: Final = "otel_replay.replay.diverged"
"""boolean. Whether the replay diverged from the original, set when the replay ends."""

REPLAY_FIRST_DIVERGENCE: Final = "otel_replay.replay.first_divergence"
"""int. Step index (in the original) of the first divergence, when the replay diverged."""

REPLAY_OUTCOME: Final = "otel_replay.replay.outcome"
"""string. ``matched``, ``diverged`` or ``refused`` (stopped before a call it may not make)."""

REPLAY_SERVED: Final = "otel_replay.replay.served"
"""string. On a replay's step: ``recording`` (answered from the original), ``mock`` (answered by a given mock),
``executed`` (the real function ran), ``refused`` (stopped by the replay firewall, or refused by a policy's
tool tape) or ``injected`` (a policy's tool fault in place of the recorded answer)."""

REPLAY_LAB_ID: Final = "otel_replay.replay.lab_id"
"""string. On a replay's root span: the lab that ran this replay (``otel-replay runs --lab ID``)."""

REPLAY_LAB_LANE: Final = "otel_replay.replay.lab_lane"
"""string. On a lab replay's root span: ``baseline`` or ``candidate``."""

REPLAY_BISECT_ID: Final = "otel_replay.replay.bisect_id"
"""string. On a replay's root span: the bisect that ran this replay as one of its steps (``otel-replay runs
--bisect ID``)."""

REPLAY_BISECT_REVISION: Final = "otel_replay.replay.bisect_revision"
"""string. On a bisect step's replay root span: the revision the step tried (a commit hash, a prompt file's
name, a model)."""

# labs (one span per lab, in a trace of its own, written when the lab ends)

LAB_SPAN_NAME: Final = "otel_replay.lab"
"""Span name of the span that records one lab: who ran it, the cohort, the totals and each scorer's pass rate."""

LAB_ID: Final = "otel_replay.lab.id"
"""string. The lab's id (the ``lab_id`` of ``otel-replay lab --json``)."""

LAB_MODE: Final = "otel_replay.lab.mode"
"""string. ``deterministic``, ``whatif`` or ``mock``."""

LAB_COHORT: Final = "otel_replay.lab.cohort"
"""string[]. Trace ids of the cohort's runs."""

LAB_RUNS: Final = "otel_replay.lab.runs"
"""int. Pairs replayed in the candidate lane."""

LAB_MATCHED: Final = "otel_replay.lab.matched"
"""int. Candidate pairs that matched their original."""

LAB_DIVERGED: Final = "otel_replay.lab.diverged"
"""int. Candidate pairs that diverged."""

LAB_FAILED: Final = "otel_replay.lab.failed"
"""boolean. True when a ``--fail-if`` gate held."""

LAB_SCORES: Final = "otel_replay.lab.scores"
"""string. JSON object: scorer name → pass rate (0..1) over the candidate lane's pairs it applied to."""

LAB_INTERRUPTED: Final = "otel_replay.lab.interrupted"
"""boolean. True when the lab was stopped (Ctrl-C) and its totals cover only the replays that finished."""

# ------------------------------------------------------------------------------------------------- steps

STEP_INDEX: Final = "otel_replay.step.index"
"""int. Position of the step in its run, from 0, in start order across nested agents."""

STEP_KIND: Final = "otel_replay.step.kind"
"""string, :class:`StepKind`. What the step does."""

STEP_NAME: Final = "otel_replay.step.name"
"""string. Name of the tool, model function, retriever or nested agent."""

STEP_ATTEMPT: Final = "otel_replay.step.attempt"
"""int. 1 for a first call; n when the same step (kind and name) directly follows n-1 failed attempts."""

STEP_INSTRUMENTATION: Final = "otel_replay.step.instrumentation"
"""string. The otel-replay instrumentor that recorded the step (``openai``, ``anthropic``, ``langchain``);
absent on steps of decorated functions. A replay instruments these SDKs before it runs the agent. Since 1.1."""

TOOL_RISK: Final = "otel_replay.tool.risk"
"""string, :class:`Risk`. Declared risk of the tool. Absent on a handoff step that declares none (routing:
treated as ``read``)."""

HANDOFF_TO: Final = "otel_replay.handoff.to"
"""string. On a handoff step: the name of the agent the conversation is handed to. Since 2.0 (1.x wrote
``…openai_agents.handoff.to`` on the OpenAI Agents SDK's handoffs)."""

TOOL_OBSERVED: Final = "otel_replay.tool.observed"
"""boolean. Set (true) on a tool step read from the model wire (``otel-replay proxy``): the tool ran in the
agent, outside otel-replay; its arguments are the model's tool call and its result what the agent sent back.
No replay executes or answers it. Since 2.0."""

TOOL_FUNCTION: Final = "otel_replay.tool.function"
"""string. ``module:qualname`` of the tool function, so one tool call can be replayed on its own."""

TOOL_ARGS_HASH: Final = "otel_replay.tool.args_hash"
"""string. Keyed hash (``hmac-sha256:…``) of the canonical (redacted) tool arguments."""

TOOL_RESULT_HASH: Final = "otel_replay.tool.result_hash"
"""string. Keyed hash (``hmac-sha256:…``) of the canonical (redacted) tool result."""

TOOL_SCHEMA_VERSION: Final = "otel_replay.tool.schema_version"
"""string. Version of the tool's argument schema as declared with ``@tool(schema_version=...)``."""

APPROVAL_ID: Final = "otel_replay.approval.id"
"""string. Id of the human approval that covered a tool call (tool step attribute and approval event)."""

APPROVAL_STATUS: Final = "otel_replay.approval.status"
"""string, :class:`ApprovalStatus`. The decision of that approval."""

APPROVAL_APPROVER: Final = "otel_replay.approval.approver"
"""string. Who decided (on the approval event)."""

MODEL_REQUEST_HASH: Final = "otel_replay.model.request_hash"
"""string. Keyed hash (``hmac-sha256:…``) of the canonical (redacted) model request; deterministic replay
matches on it."""

MODEL_RESPONSE_HASH: Final = "otel_replay.model.response_hash"
"""string. Keyed hash (``hmac-sha256:…``) of the canonical (redacted) model response."""

MODEL_PROMPT_VERSION: Final = "otel_replay.model.prompt_version"
"""string. Prompt version in force for the call (from the run config's ``prompt_version``)."""

MODEL_COST_USD: Final = "otel_replay.model.cost_usd"
"""double. Cost of the call in US dollars, when the response reports it."""

RETRIEVAL_QUERY_HASH: Final = "otel_replay.retrieval.query_hash"
"""string. Keyed hash (``hmac-sha256:…``) of the canonical retrieval query."""

RETRIEVAL_ARGS_HASH: Final = "otel_replay.retrieval.args_hash"
"""string. Keyed hash (``hmac-sha256:…``) of the canonical (redacted) retriever arguments; replay matches on it."""

RETRIEVAL_RESULT_COUNT: Final = "otel_replay.retrieval.result_count"
"""int. Number of documents the retriever returned."""

RETRIEVAL_RESULTS_HASH: Final = "otel_replay.retrieval.results_hash"
"""string. Keyed hash (``hmac-sha256:…``) of the canonical (redacted) return value of the retriever."""

# ---------------------------------------------------------------------------------------------- snapshots

SNAPSHOT_EVENT_PREFIX: Final = "otel_replay.snapshot."
"""Prefix of snapshot event names: ``otel_replay.snapshot.<kind>`` with kind from :class:`SnapshotKind`."""

SNAPSHOT_SCHEMA_VERSION: Final = "otel_replay.snapshot.schema_version"
"""string. Convention version of the payload's shape, e.g. ``1.0``."""

SNAPSHOT_PAYLOAD: Final = "otel_replay.snapshot.payload"
"""string. Canonical JSON of the (redacted) snapshot, or one chunk of it."""

SNAPSHOT_SHA256: Final = "otel_replay.snapshot.sha256"
"""string. sha256 (hex) of the whole stored payload (chunks joined; the marker text when truncated)."""

SNAPSHOT_SIZE: Final = "otel_replay.snapshot.size"
"""int. Size in bytes (UTF-8) of the whole canonical payload before any truncation."""

SNAPSHOT_SEQ: Final = "otel_replay.snapshot.seq"
"""int. Position of the snapshot in its run, from 0, so snapshots order across spans and threads."""

SNAPSHOT_CHUNK_INDEX: Final = "otel_replay.snapshot.chunk.index"
"""int. Index of this chunk, from 0; present only when the payload is split."""

SNAPSHOT_CHUNK_COUNT: Final = "otel_replay.snapshot.chunk.count"
"""int. Number of chunks the payload was split into; present only when it is split."""

SNAPSHOT_TRUNCATED: Final = "otel_replay.snapshot.truncated"
"""boolean. true when the payload exceeded the size cap and was replaced by a ``$truncated`` marker."""

SNAPSHOT_REDACTIONS: Final = "otel_replay.snapshot.redactions"
"""int. Number of values the redactor replaced in this snapshot; present only when non-zero."""

# ---------------------------------------------------------------------------------------- other events

EVENT_APPROVAL: Final = "otel_replay.approval"
"""Event name of a human-in-the-loop decision, recorded by :func:`otel_replay.record_approval`."""

EVENT_DIVERGENCE: Final = "otel_replay.replay.divergence"
"""Event name of one divergence found while replaying, on the replay's root span."""

DIVERGENCE_STEP: Final = "otel_replay.divergence.step_index"
"""int. Original step index the divergence is reported at (the closest recorded step)."""

DIVERGENCE_REASON: Final = "otel_replay.divergence.reason"
"""string. What differed, in one sentence."""

DIVERGENCE_KIND: Final = "otel_replay.divergence.kind"
"""string. ``arguments``, ``request``, ``extra_call``, ``missing_call``, ``unanswerable``, ``output``,
``approval``, ``side_effect``, ``unrecorded_tool``, ``redacted`` or ``integrity``."""

EVENT_VALUE: Final = "otel_replay.value"
"""Event name of a non-deterministic value the agent drew through :func:`otel_replay.now`,
:func:`otel_replay.new_uuid` or :func:`otel_replay.random`; deterministic replay hands the same values back."""

VALUE_KIND: Final = "otel_replay.value.kind"
"""string. ``time``, ``uuid`` or ``random``."""

VALUE_PAYLOAD: Final = "otel_replay.value.payload"
"""string. The value as canonical JSON."""

EVENT_SAFETY: Final = "otel_replay.safety"
"""Event name of a guardrail / safety verdict, recorded by :func:`otel_replay.record_safety`."""

SAFETY_VERDICT: Final = "otel_replay.safety.verdict"
"""string. Short verdict of a safety event (``pass``, ``block``, ``flag`` or the checker's own word)."""

SAFETY_PAYLOAD: Final = "otel_replay.safety.payload"
"""string. Canonical JSON of the (redacted) safety result."""

# -------------------------------------------------------------------------------- OpenAI Agents SDK bridge

EVENT_OPENAI_AGENTS_SPAN: Final = "otel_replay.openai_agents.span"
"""Event name of one span of the OpenAI Agents SDK's own tracing (agent, handoff, guardrail, custom, MCP, task,
turn), bridged into the run by the OpenAI Agents SDK instrumentor."""

OPENAI_AGENTS_SPAN_TYPE: Final = "otel_replay.openai_agents.span.type"
"""string. The bridged SDK span's type: ``agent``, ``handoff``, ``guardrail``, ``custom``, ``mcp_tools``,
``task`` or ``turn``."""

OPENAI_AGENTS_SPAN_DATA: Final = "otel_replay.openai_agents.span.data"
"""string. The bridged SDK span's exported data, as redacted canonical JSON."""

OPENAI_AGENTS_SPAN_ERROR: Final = "otel_replay.openai_agents.span.error"
"""string. The bridged SDK span's error, as redacted canonical JSON; present only when it has one."""

OPENAI_AGENTS_TRACE_ID: Final = "otel_replay.openai_agents.trace_id"
"""string. On the run root: the id of the OpenAI Agents SDK's own trace of the run."""


# ----------------------------------------------------------------------------- GenAI keys written alongside

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
"""string. ``invoke_agent``, ``execute_tool``, ``chat`` or ``retrieval``."""

GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
"""string. Model provider of a model step, e.g. ``openai``."""

GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
"""string. Agent name of a run root or nested agent step."""

GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
"""string. Session id, as the GenAI conventions spell it."""

GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
"""string. Model asked for by a model step (and the config's model on the run root)."""

GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
"""string. Model that answered, when the response says."""

GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
"""string[]. Finish reasons reported by the response."""

GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
"""int. Input tokens of a model step."""

GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
"""int. Output tokens of a model step."""

GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
"""string. Tool name of a tool step and of an approval event."""

GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
"""string. Always ``function`` for tools recorded with ``@tool``."""

GEN_AI_DATA_SOURCE_ID: Final = "gen_ai.data_source.id"
"""string. Retriever name of a retrieval step."""

GEN_AI_REQUEST_TOP_K: Final = "gen_ai.request.top_k"
"""int. ``top_k`` a retrieval asked for, when given."""

MCP_METHOD_NAME: Final = "mcp.method.name"
"""string. The MCP method of a step recorded from an MCP client session (``tools/call``, ``resources/read``)."""

MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
"""string. The MCP protocol version the session negotiated, when its handshake was seen."""

MCP_RESOURCE_URI: Final = "mcp.resource.uri"
"""string. The resource a ``resources/read`` step read."""

MCP_SERVER: Final = "otel_replay.mcp.server"
"""string. The MCP server a step's call went to: ``stdio: <command> <arguments>`` (paths by their last part) or
``http: <scheme>://<host>[:<port>]<path>`` (no credentials, query or fragment), redacted like any value."""

# The standard exception event of the OTel trace conventions (messages and stack traces are redacted).
EXCEPTION_EVENT: Final = "exception"
"""Event name of an exception raised in a run or step (OTel convention; message and stack trace redacted)."""

EXCEPTION_TYPE: Final = "exception.type"
"""string. Qualified class name of the exception."""

EXCEPTION_MESSAGE: Final = "exception.message"
"""string. Redacted exception message."""

EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
"""string. Redacted formatted traceback."""

ERROR_TYPE: Final = "error.type"
"""string. Class name of the exception a failed run or step raised (OTel general convention)."""


def snapshot_event_name(kind: SnapshotKind | str) -> str:
    """Event name of a snapshot kind: ``otel_replay.snapshot.<kind>``."""
    return SNAPSHOT_EVENT_PREFIX + str(kind)


def schema_major(version: str) -> int | None:
    """Major part of a ``major.minor`` convention version, or None when it cannot be read."""
    head = str(version).split(".", 1)[0]
    return int(head) if head.isascii() and head.isdigit() and len(head) <= 9 else None
