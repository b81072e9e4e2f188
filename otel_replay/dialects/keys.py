"""The names other GenAI conventions write (dialect names, their attribute and event keys, their span kinds, the
request parameters they record) and how their stored strings parse back (JSON, numbers, flattened keys).

It must never name a key otel-replay itself writes (those live in ``semconv``), or import anything but the leaf
modules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

DIALECT_OTEL_REPLAY: Final = "otel_replay"
"""Dialect of runs recorded by otel-replay itself (the default of ``Run.dialect``)."""
DIALECT_GENAI: Final = "genai"
"""OpenTelemetry GenAI semantic conventions (``gen_ai.operation.name``; old and new content keys)."""
DIALECT_OPENINFERENCE: Final = "openinference"
"""OpenInference (Arize Phoenix): ``openinference.span.kind`` and flattened ``llm.*`` keys."""
DIALECT_TRACELOOP: Final = "traceloop"
"""OpenLLMetry / Traceloop: ``traceloop.span.kind``, ``traceloop.entity.*``, legacy ``gen_ai.prompt.N.*``."""

# ---------------------------------------------------------------------------------------- foreign keys
# Names of other conventions, kept here (not in semconv.py, which lists only what otel-replay writes).

GENAI_OPERATION: Final = "gen_ai.operation.name"
GENAI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GENAI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GENAI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GENAI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GENAI_INFERENCE_EVENT: Final = "gen_ai.client.inference.operation.details"
GENAI_LEGACY_PROMPT_EVENT: Final = "gen_ai.content.prompt"
GENAI_LEGACY_COMPLETION_EVENT: Final = "gen_ai.content.completion"
OI_SPAN_KIND: Final = "openinference.span.kind"
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_REQUEST_TYPE: Final = "llm.request.type"

FOREIGN_ROOT_KEYS: Final[tuple[str, ...]] = (GENAI_OPERATION, OI_SPAN_KIND, TRACELOOP_SPAN_KIND, TRACELOOP_REQUEST_TYPE)
"""A parentless span carrying one of these keys is listed as the root of a (foreign) run."""

REDACTED_OI: Final = "__REDACTED__"
"""The value OpenInference writes in place of hidden content."""

MODEL_OPS: Final = frozenset({"chat", "text_completion", "generate_content", "embeddings", "completion"})
AGENT_OPS: Final = frozenset({"invoke_agent", "create_agent"})
OI_KINDS: Final = {
    "LLM": "model",
    "EMBEDDING": "model",
    "TOOL": "tool",
    "RETRIEVER": "retrieval",
    "RERANKER": "retrieval",
    "AGENT": "agent",
}
TRACELOOP_KINDS: Final = {"tool": "tool", "agent": "agent"}

SDK_STEP_NAMES: Final[dict[tuple[str, str], str]] = {
    ("openai", "chat"): "openai.chat.completions",
    ("openai", "responses"): "openai.responses",
    ("anthropic", "chat"): "anthropic.messages",
}
"""(provider, operation) → the model step name otel-replay's own SDK instrumentor gives the same call
(``otel_replay.instrumentation.openai.CHAT_STEP`` …), so a replay through that instrumentor matches a
foreign model step by kind and name, then by request hash."""

PARAMS: Final[tuple[tuple[str, str], ...]] = (
    # gen_ai.request.* suffix → OpenAI chat-completions argument name
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("top_k", "top_k"),
    ("max_tokens", "max_tokens"),
    ("stop_sequences", "stop"),
    ("seed", "seed"),
    ("frequency_penalty", "frequency_penalty"),
    ("presence_penalty", "presence_penalty"),
    ("choice.count", "n"),
    ("stream", "stream"),
)


# ------------------------------------------------------------------------------------------- parsing


def parse_json(text: str | None) -> Any:
    """A stored string parsed as JSON; the string itself when it is not JSON; None for absent/empty."""
    if text is None or text == "":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def json_or_none(text: str | None) -> Any:
    """A stored string parsed as JSON, None when absent or not JSON."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def first(attrs: Mapping[str, str], *keys: str) -> str | None:
    for key in keys:
        value = attrs.get(key)
        if value:
            return value
    return None


def nest(attrs: Mapping[str, str], prefix: str) -> Any:
    """Flattened keys ``prefix.0.message.role`` … as a nested tree: numeric segments become lists."""
    root: dict[str, Any] = {}
    head = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(head):
            continue
        node = root
        parts = key[len(head) :].split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        if parts[-1] not in node or not isinstance(node[parts[-1]], dict):
            node[parts[-1]] = value

    def listify(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        if node and all(k.isdigit() for k in node):
            return [listify(node[k]) for k in sorted(node, key=int)]
        return {k: listify(v) for k, v in node.items()}

    return listify(root) if root else None


def arguments_text(arguments: Any) -> str:
    """Tool-call arguments as the OpenAI wire format carries them (a JSON string)."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def has_redacted(tree: Any) -> bool:
    if isinstance(tree, str):
        return tree == REDACTED_OI
    if isinstance(tree, dict):
        return any(has_redacted(v) for v in tree.values())
    if isinstance(tree, list):
        return any(has_redacted(v) for v in tree)
    return False
