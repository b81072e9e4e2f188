"""The floor of recording the LangGraph benchmark's agent on OpenTelemetry (``langgraph_overhead.py --floor``).

A minimal hand-written instrumentation of the same three LangChain / LangGraph methods otel-replay wraps
(``Pregel.invoke``, ``BaseChatModel._generate_with_cache``, ``BaseTool.run``), replaced on their classes by plain
functions, on the real OTel SDK set up as otel-replay sets it up (a ``TracerProvider`` with the same resource
and span limits, the same ``BatchSpanProcessor`` settings, otel-replay's ``SpoolExporter``, flushed and sealed
the same way). It records what otel-replay records for one agent run: the run span with its input and output
snapshot events, one span per model call and per tool call with the same names, kinds, attributes and
snapshot events, and the same payloads (the same keys and values: the request messages without per-run ids, the
invocation parameters with the bound tools' schemas, LangChain's message dicts, usage, the tool's arguments and
``ToolMessage``, the graph's output messages as ``{"$type": "pydantic", ...}``), so a replay would have the
same information to work from.

What it leaves out is what otel-replay adds on top of that: redaction (the pre-check walks and the span
scrubbing step), keyed hashes (its hashes are plain sha256 of the texts it stores), canonical dumps (each
payload is one plain ``json.dumps``, its request and response dumped once and spliced into the payload text),
replay (no check of a replay session, no served answers, no firewall), implicit runs (a model or tool called
outside a graph run is not recorded), the tool-risk heuristic (a tool's risk is the one in its metadata, else
``read``), the filtering of injected tool arguments (the benchmark's tools have none), truncation and chunking
of big payloads, and every guard that keeps a failure of its own bookkeeping out of the host program. It is a
benchmark's yardstick, not an instrumentation to use.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Final

from opentelemetry import context, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_replay import semconv
from otel_replay._version import __version__
from otel_replay.exporting import setup
from otel_replay.exporting.spool import SpoolExporter

_MAX_EVENTS: Final = 100_000  # otel-replay's span limit (exporting/setup.py)
_REQUEST_EXCLUDE: Final = {"id", "response_metadata", "usage_metadata"}
_OK: Final = Status(StatusCode.OK)


class _Run:
    """One graph run being recorded: its step and snapshot counters and token totals (shared with the
    threads LangGraph runs tools in, which inherit the context)."""

    __slots__ = ("input_tokens", "output_tokens", "seq", "steps")

    def __init__(self) -> None:
        self.steps = itertools.count()
        self.seq = itertools.count()
        self.input_tokens = 0
        self.output_tokens = 0


_RUN: ContextVar[_Run | None] = ContextVar("langgraph_floor_run", default=None)


def _fallback(value: Any) -> Any:
    """``json.dumps``'s ``default``: a pydantic model as otel-replay records one, anything else as text."""
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        cls = type(value)
        return {"$type": "pydantic", "class": f"{cls.__module__}:{cls.__qualname__}", "fields": dump()}
    return repr(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=_fallback)


def _hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _snapshot(span: Any, kind: str, run: _Run, payload: str) -> None:
    data = payload.encode()
    span.add_event(
        semconv.SNAPSHOT_EVENT_PREFIX + kind,
        {
            semconv.SNAPSHOT_SCHEMA_VERSION: semconv.SCHEMA_VERSION,
            semconv.SNAPSHOT_SIZE: len(data),
            semconv.SNAPSHOT_SHA256: hashlib.sha256(data).hexdigest(),
            semconv.SNAPSHOT_PAYLOAD: payload,
            semconv.SNAPSHOT_SEQ: next(run.seq),
        },
    )


def _failed(span: Any, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, str(exc)))
    span.end()


def _request_message(message: Any) -> Any:
    data = message.model_dump(exclude=_REQUEST_EXCLUDE)
    return {k: v for k, v in data.items() if k in ("type", "content") or v not in (None, {}, [], "")}


class FloorRecorder:
    """The floor instrumentation: :meth:`install` replaces the three methods, :meth:`uninstall` puts them back,
    :meth:`flush` exports and seals as ``otel_replay.exporting.setup.flush`` does for the spool. ``processor``
    replaces the batch processor over the spool (the benchmark's check reads the spans in memory with it)."""

    def __init__(self, *, spool: Path, resource: Resource, processor: SpanProcessor | None = None) -> None:
        self.exporter: SpoolExporter | None = None
        if processor is None:
            self.exporter = SpoolExporter(spool)
            processor = setup.batch_processor(self.exporter)
        self.processor = processor
        self.provider = TracerProvider(resource=resource, span_limits=SpanLimits(max_events=_MAX_EVENTS))
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer(semconv.TRACER_NAME, __version__)
        self._saved: list[tuple[type, str, Any]] = []

    def flush(self) -> None:
        """Export what was recorded and seal the spool segment (what the benchmark's recorded blocks end with)."""
        self.processor.force_flush()
        if self.exporter is not None:
            self.exporter.force_flush()

    def uninstall(self) -> None:
        """Put the original methods back."""
        for cls, name, original in self._saved:
            setattr(cls, name, original)
        self._saved = []

    def install(self) -> None:
        """Replace ``Pregel.invoke``, ``BaseChatModel._generate_with_cache`` and ``BaseTool.run`` with the
        recording functions."""
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.tools import BaseTool
        from langgraph.pregel import Pregel

        originals: dict[tuple[type, str], Any] = {
            (Pregel, "invoke"): Pregel.invoke,
            (BaseChatModel, "_generate_with_cache"): BaseChatModel._generate_with_cache,
            (BaseTool, "run"): BaseTool.run,
        }
        replacements: dict[tuple[type, str], Callable[..., Any]] = {
            (Pregel, "invoke"): self._graph_invoke(Pregel.invoke),
            (BaseChatModel, "_generate_with_cache"): self._generate(BaseChatModel._generate_with_cache),
            (BaseTool, "run"): self._tool_run(BaseTool.run),
        }
        for (cls, name), function in replacements.items():
            self._saved.append((cls, name, originals[cls, name]))
            setattr(cls, name, function)

    def _graph_invoke(self, invoke: Callable[..., Any]) -> Callable[..., Any]:
        tracer = self.tracer

        def graph_invoke(graph: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:  # noqa: A002
            if _RUN.get() is not None:
                return invoke(graph, input, config, **kwargs)
            run = _Run()
            name = graph.get_name()
            span = tracer.start_span(
                f"invoke_agent {name}",
                attributes={
                    semconv.RUN_ID: str(uuid.uuid4()),
                    "otel_replay.schema.version": semconv.SCHEMA_VERSION,
                    semconv.RUN_KIND: "original",
                    semconv.RUN_ENTRYPOINT: "",
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": name,
                },
            )
            text = _dumps(input)
            _snapshot(
                span,
                "input",
                run,
                f'{{"args":[],"entrypoint":"","files":[],"input":{text},"kwargs":{{"input":{text}}},'
                '"role":null,"script":null,"session":null,"tenant":null}',
            )
            token = context.attach(trace.set_span_in_context(span))
            run_token = _RUN.set(run)
            try:
                output = invoke(graph, input, config, **kwargs)
            except BaseException as exc:
                _failed(span, exc)
                raise
            finally:
                _RUN.reset(run_token)
                context.detach(token)
            _snapshot(
                span,
                "output",
                run,
                f'{{"answer":null,"citations":null,"error":null,"safety":null,"structured":{_dumps(output)}}}',
            )
            span.set_attributes(
                {
                    semconv.RUN_STEP_COUNT: next(run.steps),
                    semconv.RUN_INPUT_TOKENS: run.input_tokens,
                    semconv.RUN_OUTPUT_TOKENS: run.output_tokens,
                }
            )
            span.set_status(_OK)
            span.end()
            return output

        return graph_invoke

    def _generate(self, generate: Callable[..., Any]) -> Callable[..., Any]:
        tracer = self.tracer

        def generate_with_cache(
            model: Any, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Any:
            run = _RUN.get()
            if run is None:
                return generate(model, messages, stop, run_manager, **kwargs)
            from langchain_core.messages import message_to_dict

            index = next(run.steps)
            name = model.get_name()
            params = model._get_invocation_params(stop=stop, **kwargs)
            metadata = getattr(run_manager, "metadata", None) or {}
            provider, model_name = metadata.get("ls_provider"), metadata.get("ls_model_name")
            request = _dumps({"messages": [_request_message(m) for m in messages], "params": params})
            request_hash = _hash(request)
            span = tracer.start_span(
                f"chat {model_name}",
                kind=SpanKind.CLIENT,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": provider,
                    "gen_ai.request.model": model_name,
                    "otel_replay.step.instrumentation": "langchain",
                    "otel_replay.model.request_hash": request_hash,
                    semconv.STEP_INDEX: index,
                    semconv.STEP_KIND: "model",
                    semconv.STEP_NAME: name,
                    semconv.STEP_ATTEMPT: 1,
                },
            )
            try:
                result = generate(model, messages, stop, run_manager, **kwargs)
            except BaseException as exc:
                _failed(span, exc)
                raise
            first = result.generations[0].message
            usage = dict(first.usage_metadata or {})
            meta = first.response_metadata or {}
            response_model, finish = meta.get("model_name"), meta.get("finish_reason")
            response = _dumps(
                {
                    "generations": [
                        {"message": message_to_dict(g.message), "generation_info": g.generation_info}
                        for g in result.generations
                    ],
                    "llm_output": result.llm_output,
                    "usage": usage,
                    "model": response_model,
                    "finish_reason": finish,
                }
            )
            response_hash = _hash(response)
            input_tokens, output_tokens = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
            run.input_tokens += input_tokens
            run.output_tokens += output_tokens
            span.set_attributes(
                {
                    "otel_replay.model.response_hash": response_hash,
                    "gen_ai.response.model": response_model,
                    "gen_ai.response.finish_reasons": (finish,),
                    "gen_ai.usage.input_tokens": input_tokens,
                    "gen_ai.usage.output_tokens": output_tokens,
                }
            )
            _snapshot(
                span,
                "model",
                run,
                f'{{"error":null,"model":{_dumps(model_name)},"name":{_dumps(name)},"prompt_version":null,'
                f'"provider":{_dumps(provider)},"request":{request},"request_hash":"{request_hash}",'
                f'"response":{response},"response_hash":"{response_hash}",'
                f'"usage":{{"input_tokens":{input_tokens},"output_tokens":{output_tokens}}}}}',
            )
            span.set_status(_OK)
            span.end()
            return result

        return generate_with_cache

    def _tool_run(self, tool_run: Callable[..., Any]) -> Callable[..., Any]:
        tracer = self.tracer

        def run_tool(tool: Any, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
            run = _RUN.get()
            if run is None:
                return tool_run(tool, tool_input, *args, **kwargs)
            from langchain_core.messages import BaseMessage, message_to_dict

            index = next(run.steps)
            name = tool.name
            risk = (tool.metadata or {}).get("otel_replay_risk", "read")
            arguments = _dumps(dict(tool_input) if isinstance(tool_input, dict) else {"input": tool_input})
            args_hash = _hash(arguments)
            span = tracer.start_span(
                f"execute_tool {name}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.type": "function",
                    "otel_replay.tool.risk": risk,
                    "otel_replay.tool.args_hash": args_hash,
                    "otel_replay.step.instrumentation": "langchain",
                    semconv.STEP_INDEX: index,
                    semconv.STEP_KIND: "tool",
                    semconv.STEP_NAME: name,
                    semconv.STEP_ATTEMPT: 1,
                },
            )
            try:
                output = tool_run(tool, tool_input, *args, **kwargs)
            except BaseException as exc:
                _failed(span, exc)
                raise
            result = _dumps(message_to_dict(output) if isinstance(output, BaseMessage) else output)
            result_hash = _hash(result)
            span.set_attribute("otel_replay.tool.result_hash", result_hash)
            _snapshot(
                span,
                "tool",
                run,
                f'{{"approval_id":null,"approval_status":null,"args_hash":"{args_hash}","arguments":{arguments},'
                f'"call_id":"call_{os.urandom(8).hex()}","error":null,"result":{result},'
                f'"result_hash":"{result_hash}","risk":{_dumps(risk)},"schema_version":null,"tool":{_dumps(name)}}}',
            )
            span.set_status(_OK)
            span.end()
            return output

        return run_tool
