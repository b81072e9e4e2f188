"""MCP instrumentation: the calls an agent makes to MCP servers through the ``mcp`` client, as steps of its run.

Why it exists: an agent whose tools live on an MCP server (``mcp`` ``ClientSession`` over stdio, SSE or
streamable HTTP; the OpenAI Agents SDK's ``MCPServerStdio`` / ``MCPServerSse`` / ``MCPServerStreamableHttp``;
anything else built on ``ClientSession``) should be recorded call by call and replayed without the server.
Two boundaries are wrapped:

* the session's calls (``ClientSession``): ``call_tool`` is a tool step named after the MCP tool, with the
  arguments sent and the ``CallToolResult`` received (an ``isError`` result is a result, as on the wire);
  ``list_tools``, ``list_resources``, ``list_prompts``, ``read_resource`` and ``get_prompt`` are retrieval steps
  named ``mcp <method>`` (what the agent learnt from the server: its tools, resources and prompts). During a
  replay the recorded result comes back, rebuilt as the same ``mcp`` type, and nothing is sent. The handshake
  (``initialize``, ``server/discover``) is no step: it has no effect and says nothing the agent acts on, and an
  agent often connects before its run begins (the Agents SDK's ``async with MCPServerStdio(...)``), so as a step
  it would be a call of the replay (whose run is the whole ``--app`` function) the recording never had;
* the transports (``stdio_client``, ``sse_client``, ``streamable_http_client`` and the Agents SDK servers'
  ``create_streams``): in a replay that is not ``live`` they start no process and open no connection. They
  hand the session an *offline stand-in*: a pair of in-memory streams answered by a few lines here, which
  accept the handshake (``initialize`` answered with a stand-in result naming ``otel-replay offline
  stand-in``; ``server/discover`` refused, so the client falls back to ``initialize``) and answer every other
  request that reaches them (a call made outside the replayed run, which the recording cannot answer) with an
  error, said on the replay as an ``unanswerable`` divergence.

Risk of a tool: ``tool_risks={name: risk}`` given to :meth:`MCPInstrumentor.instrument` wins; else the
server's ``ToolAnnotations`` from the session's last ``list_tools``: ``readOnlyHint`` → ``read``,
``destructiveHint`` → ``high``, otherwise ``write`` (a tool the session never listed is ``write``). The
annotations are the server's word, so they never lower the name rule: a ``readOnlyHint`` tool named
``send_…`` stays ``high``.

Trace context: each step's span is current while its request is sent, so the ``mcp`` client (2.x injects the
W3C context into ``params._meta`` itself) carries the run's ``traceparent`` to the server, and a Python MCP
server instrumented with otel-replay or OpenTelemetry joins the run's trace. Steps carry the MCP semantic
convention attributes: ``mcp.method.name``, ``mcp.protocol.version`` once the handshake was seen,
``mcp.resource.uri`` for a resource; a ``tools/call`` step is also ``gen_ai.operation.name=execute_tool`` with
``gen_ai.tool.name``. ``otel_replay.mcp.server`` says which server (the stdio command, or the URL without its
credentials and query, redacted like any recorded value), so ``replay --mode dry`` can list the servers an
offline replay does not start and a live one does.

Calls outside a run are not recorded (like tools outside a run); during a replay a ``write``/``high`` MCP tool
called outside the replayed run is refused. With the OpenAI Agents SDK, its MCP tools are recorded here (with
the server's annotations), not a second time by the Agents SDK instrumentor.

What it must never do: raise into the host program from its own bookkeeping (every failure is logged and the
real call goes ahead), swallow or wrap the host's exceptions, start a server or open a connection in a replay
that is not live, or import ``mcp`` before :meth:`MCPInstrumentor.instrument` is called. A replay's
:class:`ReplayInterrupt` propagates.

Process-wide state: the functions it wraps, the ``tracer_provider=`` binding of its guards, and one weak map
from each live ``ClientSession`` to what this module learnt about it (its server, its tools' risks).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.metadata
import json
import logging
import math
import os
import weakref
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import propagate, trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from .. import semconv
from ..recording import (
    DivergenceStop,
    begin_retrieval_call,
    begin_tool_call,
    current_replay,
    effective_risk,
    encode_value,
    end_call,
    end_run,
    in_run,
)
from . import _lazy
from ._guarded import Guards, check_risks, main_script, patch, unpatch
from ._guarded import enabled as _enabled

__all__ = ["STAND_IN_NAME", "MCPInstrumentor"]

_log = logging.getLogger("otel_replay")
guards = Guards("MCP")

_instruments: Final = ("mcp >= 1.10",)
"""The ``mcp`` versions this instrumentor supports (``opentelemetry-instrument`` checks them)."""

_NAME: Final = "mcp"  # otel_replay.step.instrumentation of the steps recorded here
STAND_IN_NAME: Final = "otel-replay offline stand-in"
"""The ``serverInfo.name`` of the stand-in that answers an offline replay's MCP handshake."""


_SESSION: Final = "mcp.client.session"
_METHODS: Final[dict[str, str]] = {  # ClientSession method → MCP method of the retrieval steps
    "list_tools": "tools/list",
    "list_resources": "resources/list",
    "list_prompts": "prompts/list",
    "read_resource": "resources/read",
    "get_prompt": "prompts/get",
}
_RESULT_TYPES: Final[dict[str, str]] = {  # ClientSession method → the mcp type its recorded result is rebuilt as
    "list_tools": "ListToolsResult",
    "list_resources": "ListResourcesResult",
    "list_prompts": "ListPromptsResult",
    "read_resource": "ReadResourceResult",
    "get_prompt": "GetPromptResult",
    "call_tool": "CallToolResult",
}
_TRANSPORTS: Final = (
    ("mcp.client.stdio", "stdio_client"),
    ("mcp", "stdio_client"),
    ("mcp.client.sse", "sse_client"),
    ("mcp.client.streamable_http", "streamable_http_client"),
)
_TRANSPORTS_1X: Final = (("mcp.client.streamable_http", "streamablehttp_client"),)
"""Transports only mcp 1.x has (its older name of the streamable HTTP one): wrapped where they exist."""
_AGENTS_SERVERS: Final = ("MCPServerStdio", "MCPServerSse", "MCPServerStreamableHttp")
_AGENTS_MODULE: Final = "agents.mcp.server"


# -------------------------------------------------------------------------------------------- sessions


class _Session:
    """What this module knows of one ``ClientSession``: its server and the risks its last tool list gave."""

    __slots__ = ("risks", "run", "server")

    def __init__(self, server: str | None) -> None:
        self.server = server
        self.risks: dict[str, str] = {}
        self.run: Any = None
        """The run this session began (its first recorded call came outside any run), ended when it closes."""


_sessions: weakref.WeakKeyDictionary[Any, _Session] = weakref.WeakKeyDictionary()
_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("otel_replay_mcp_inside", default=False)
"""True while a recorded MCP call runs: the calls the session makes for it (``call_tool`` lists the tools to
check the result against their output schema) are part of that step, not steps of their own."""
_server_now: contextvars.ContextVar[str | None] = contextvars.ContextVar("otel_replay_mcp_server", default=None)
"""The server of the transport entered last in this context (read when a session is made on its streams)."""


def _info(session: Any) -> _Session:
    info = _sessions.get(session)
    if info is None:
        info = _sessions.setdefault(session, _Session(_server_now.get()))
    return info


def _session_run(session: Any, info: _Session | None) -> None:
    """Begin a run for a session whose call comes outside any run (an agent with no other boundary: the plain
    client of the MCP docs, under zero-code): named after the server, ended when the session closes
    (:func:`_exit_wrapper`). Never during a replay, which is a run itself."""
    if info is None or info.run is not None or in_run() or current_replay.get() is not None:
        return
    served = getattr(session, "server_info", None)
    name = getattr(served, "name", None) if not callable(served) else None
    info.run = guards.begin_run(f"mcp {name or info.server or 'session'}", arguments={}, script=main_script())
    if info.run is not None:
        trace.get_current_span().set_attribute(semconv.RUN_BOUNDARY, "mcp_session")


def _exit_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Wrapper of ``ClientSession.__aexit__``: the run the session began ends with it."""

    async def exit_() -> Any:
        try:
            return await wrapped(*args, **kwargs)
        finally:
            info = _sessions.get(instance)
            if info is not None and info.run is not None:
                handle, info.run = info.run, None
                exc = args[1] if len(args) > 1 and isinstance(args[1], BaseException) else None
                end_run(handle, exc=exc)

    return exit_()


def _init_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = wrapped(*args, **kwargs)
    guards.safely("note the session's server", _info, instance)
    return result


def _annotated_risk(annotations: Any) -> str:
    """``read`` for ``readOnlyHint``, ``high`` for ``destructiveHint``, else ``write``."""
    if annotations is None:
        return "write"
    if _hint(annotations, "read_only_hint", "readOnlyHint"):
        return "read"
    if _hint(annotations, "destructive_hint", "destructiveHint"):
        return "high"
    return "write"


def _hint(annotations: Any, name: str, name_1x: str) -> bool:
    """Whether a ``ToolAnnotations`` hint is set: mcp 2's snake-case field, or where the class has none, the
    camel-case one of mcp 1 (never both: a client library that wraps the class warns on the old name)."""
    if hasattr(annotations, name):
        return getattr(annotations, name, None) is True
    return getattr(annotations, name_1x, None) is True


def _note_tools(session: Any, result: Any) -> None:
    """Keep the risk each listed tool's annotations give (for the session's later ``call_tool``)."""
    info = _info(session)
    for tool in getattr(result, "tools", None) or ():
        name = getattr(tool, "name", None)
        if isinstance(name, str):
            info.risks[name] = _annotated_risk(getattr(tool, "annotations", None))


# ---------------------------------------------------------------------------------------------- results


def _plain(result: Any) -> Any:
    """A result as the JSON the wire carried (a pydantic model dumped by its aliases), else as it is."""
    dump = getattr(result, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True, exclude_none=True)
    return result


def _rebuilt(method: str, value: Any) -> Any:
    """A recorded result as the ``mcp`` type ``method`` returns (the type comes from the method, never from the
    data); ValueError (pydantic's, or ours) when the value is not one."""
    import mcp.types

    if not isinstance(value, Mapping):
        raise ValueError(f"a {type(value).__name__}, not an object")
    return getattr(mcp.types, _RESULT_TYPES[method]).model_validate(value)


def _served(call: Any, method: str) -> Any:
    """The answer of a call the replay answered: the recorded error raised, or the recorded result rebuilt. A
    recorded result that is not one of the method's type stops the replay (it cannot be answered)."""
    served = call.served
    if served.error is not None:
        end_call(call, exc=served.error)
        raise served.error
    try:
        rebuilt = _rebuilt(method, served.value)
    except Exception as exc:  # noqa: BLE001 - a damaged or hostile recording: never handed to the agent
        stop = DivergenceStop(
            f"replay stopped: the recorded result of MCP {_METHODS.get(method, 'tools/call')} is no "
            f"{_RESULT_TYPES[method]} ({type(exc).__name__}); nothing was executed"
        )
        end_call(call, exc=stop)
        raise stop from None
    end_call(call, result=served.value)
    return rebuilt


def _absorb_listing(session: Any, result: Any, complete: bool) -> None:
    """Let the session take a tool listing the replay answered as it takes one from its server: it keeps each
    tool's output schema, and checks a later ``tools/call`` result against it (``validate_tool_result``, which
    the fastmcp client calls) without listing the tools again, as it did while recording. mcp 2.3's
    ``_absorb_tool_listing``; before it, its output-schema cache."""
    absorb = getattr(session, "_absorb_tool_listing", None)
    if callable(absorb):
        absorb(result, complete=complete)
        return
    schemas = getattr(session, "_tool_output_schemas", None)
    if isinstance(schemas, dict):
        for tool in getattr(result, "tools", None) or ():
            schema = getattr(tool, "output_schema", getattr(tool, "outputSchema", None))
            schemas[tool.name] = schema


def _mark(call: Any, session: Any, info: _Session | None, method: str, extra: Mapping[str, Any] | None = None) -> None:
    """The MCP attributes of a step's span."""
    if call is None:
        return
    span = call.step.span
    version = getattr(session, "protocol_version", None)
    attrs: dict[str, Any] = {
        semconv.MCP_METHOD_NAME: method,
        semconv.MCP_PROTOCOL_VERSION: version if isinstance(version, str) else None,
        **(extra or {}),
    }
    if info is not None and info.server is not None:  # redacted like any value: a key in an argument is marked
        tree, _, _ = encode_value(call.step.run.rt, info.server, "mcp.server")
        attrs[semconv.MCP_SERVER] = tree if isinstance(tree, str) else json.dumps(tree)
    for key, value in attrs.items():
        if value is not None:
            span.set_attribute(key, value)


# ------------------------------------------------------------------------------------------- the calls


def _arguments(method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What a retrieval call sends, by name."""
    if method == "read_resource":
        uri = args[0] if args else kwargs.get("uri")
        return {"uri": str(uri)}
    if method == "get_prompt":
        name = args[0] if args else kwargs.get("name")
        arguments = args[1] if len(args) > 1 else kwargs.get("arguments")
        return {"name": name, "arguments": dict(arguments) if isinstance(arguments, Mapping) else arguments}
    params = kwargs.get("params")
    cursor = getattr(params, "cursor", None)
    if cursor is None:  # mcp 1.x: list_tools(cursor=None, *, params=None)
        cursor = args[0] if args and isinstance(args[0], str) else kwargs.get("cursor")
    return {"cursor": cursor} if cursor is not None else {}


def _with_trace_meta(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``call_tool``'s keyword arguments with the step's trace context in ``meta`` (``traceparent``), for mcp 1.x,
    whose session does not put it in ``params._meta`` as mcp 2 does; unchanged for mcp 2, or when the caller
    gave ``meta`` or its session takes none."""
    if _mcp_major() >= 2:
        return kwargs
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if not carrier or kwargs.get("meta") is not None:
        return kwargs
    return {**kwargs, "meta": carrier}


@functools.cache
def _mcp_major() -> int:
    """The major version of the installed ``mcp`` (2 when it cannot be read)."""
    try:
        return int(importlib.metadata.version("mcp").split(".", 1)[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 2


async def _through(step: Any, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The real call of a step the replay did not answer (or of no step), its result or exception recorded; the
    session's own calls for it are no steps (:data:`_inside`)."""
    token = _inside.set(True)
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        end_call(step, exc=exc)
        raise
    finally:
        _inside.reset(token)
    if step is not None:
        end_call(step, result=guards.safely("encode the result", _plain, result))
    return result


def _retrieval_wrapper(method: str) -> Callable[..., Any]:
    """Wrapper of one of the session's read calls (a coroutine function): a retrieval step ``mcp <method>``."""
    mcp_method = _METHODS[method]

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled() or _inside.get():
            return wrapped(*args, **kwargs)

        async def call() -> Any:
            arguments = guards.safely("read the call", _arguments, method, args, kwargs, default={})
            guards.safely("begin the session's run", _session_run, instance, _info(instance))
            step = guards.begin(
                "retrieval", begin_retrieval_call, f"mcp {mcp_method}", arguments, instrumentation=_NAME
            )
            info = guards.safely("read the session", _info, instance)
            uri = arguments.get("uri") if method == "read_resource" else None
            guards.safely("mark the step", _mark, step, instance, info, mcp_method, {semconv.MCP_RESOURCE_URI: uri})
            if step is not None and step.served is not None:
                result = _served(step, method)
                if method == "list_tools":
                    complete = "cursor" not in arguments and getattr(result, "next_cursor", None) is None
                    guards.safely("let the session take the listing", _absorb_listing, instance, result, complete)
            else:
                result = await _through(step, wrapped, args, kwargs)
            if method == "list_tools":
                guards.safely("note the tools' risks", _note_tools, instance, result)
            return result

        return call()

    return wrapper


def _tool_wrapper(instrumentor: MCPInstrumentor) -> Callable[..., Any]:
    """Wrapper of ``ClientSession.call_tool(name, arguments=None, ...)``: a tool step named after the tool."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled() or _inside.get():
            return wrapped(*args, **kwargs)
        name = str(args[0] if args else kwargs.get("name"))
        given = args[1] if len(args) > 1 else kwargs.get("arguments")
        arguments = dict(given) if isinstance(given, Mapping) else ({} if given is None else {"arguments": given})

        async def call() -> Any:
            info = guards.safely("read the session", _info, instance)
            guards.safely("begin the session's run", _session_run, instance, info)
            risk = guards.safely("read the tool's risk", instrumentor.risk_of, name, info, default="write")
            step = guards.begin("tool", begin_tool_call, name, arguments, risk=risk, instrumentation=_NAME)
            guards.safely("mark the step", _mark, step, instance, info, "tools/call")
            if step is not None and step.served is not None:
                return _served(step, "call_tool")
            sent = guards.safely("carry the trace context", _with_trace_meta, kwargs, default=kwargs)
            return await _through(step, wrapped, args, sent)

        return call()

    return wrapper


# ------------------------------------------------------------------------------------------ transports


def _offline() -> Any:
    """The replay session when this context is in a replay that is not live (its MCP servers stay unstarted),
    else None."""
    session = current_replay.get()
    if session is None or getattr(getattr(session, "mode", None), "value", None) == "live":
        return None
    return session


def _describe_stdio(params: Any) -> str:
    command = os.path.basename(str(getattr(params, "command", "") or ""))
    args = getattr(params, "args", None) or []
    return " ".join(["stdio:", command, *(os.path.basename(str(a)) if os.sep in str(a) else str(a) for a in args)])


def _describe_url(url: Any) -> str:
    """``http: scheme://host:port/path``: the URL without its credentials, query and fragment."""
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return f"http: {urlunsplit((parts.scheme, netloc, parts.path, '', ''))}"


def _transport_description(target: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
    if target == "stdio_client":
        return _describe_stdio(args[0] if args else kwargs.get("server"))
    url = args[0] if args else kwargs.get("url")
    return _describe_url(url) if url is not None else None


@contextlib.asynccontextmanager
async def _noted(server: str | None, transport: Any) -> AsyncIterator[Any]:
    """Enter the real ``transport``, with ``server`` as the server of the sessions made on its streams."""
    token = _server_now.set(server)
    try:
        async with transport as streams:
            yield streams
    finally:
        with contextlib.suppress(ValueError):  # exited in another context: nothing to reset there
            _server_now.reset(token)


def _transport_wrapper(target: str) -> Callable[..., Any]:
    """Wrapper of a transport function: the offline stand-in in a replay that is not live, else the transport
    with its server noted."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        server = guards.safely("describe the server", _transport_description, target, args, kwargs)
        if _enabled() and _offline() is not None:
            # mcp 1.x's streamable HTTP transports yield a third item: the session id's getter
            three = target.startswith("streamable") and _mcp_major() < 2
            return _stand_in(server, session_id=three)
        return _noted(server, wrapped(*args, **kwargs))

    return wrapper


def _agents_server_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Wrapper of an Agents SDK MCP server's ``create_streams()``: as :func:`_transport_wrapper`."""
    server = guards.safely("describe the server", _agents_description, getattr(instance, "params", None))
    if _enabled() and _offline() is not None:
        return _stand_in(server)
    return _noted(server, wrapped(*args, **kwargs))


def _agents_description(params: Any) -> str | None:
    """The server of an Agents SDK MCP server: its ``StdioServerParameters``, or the ``url`` of its params."""
    if hasattr(params, "command"):
        return _describe_stdio(params)
    url = params.get("url") if isinstance(params, Mapping) else None
    return _describe_url(url) if url else None


@contextlib.asynccontextmanager
async def _stand_in(server: str | None, *, session_id: bool = False) -> AsyncIterator[Any]:
    """The offline stand-in transport: the session's streams, answered by :func:`_answer_offline` (with
    ``session_id``, also a getter of the session id, which is None, as mcp 1.x's streamable HTTP yields)."""
    import anyio
    from mcp.shared.message import SessionMessage

    to_client_send, to_client = anyio.create_memory_object_stream[Any](math.inf)
    from_client, from_client_receive = anyio.create_memory_object_stream[Any](math.inf)
    replay = current_replay.get()
    token = _server_now.set(server)

    async def answer() -> None:
        async with from_client_receive:
            async for message in from_client_receive:
                reply = _answer_offline(replay, message)
                if reply is not None:
                    await to_client_send.send(SessionMessage(reply))

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(answer)
            try:
                yield (to_client, from_client, lambda: None) if session_id else (to_client, from_client)
            finally:
                group.cancel_scope.cancel()
    finally:
        for stream in (to_client_send, to_client, from_client, from_client_receive):
            stream.close()
        with contextlib.suppress(ValueError):
            _server_now.reset(token)


def _answer_offline(replay: Any, message: Any) -> Any:
    """The stand-in's reply to one message of the client (None for a notification or a response)."""
    import mcp.types

    sent = json.loads(message.message.model_dump_json(by_alias=True, exclude_unset=True))
    if not isinstance(sent, dict) or "id" not in sent or "method" not in sent:
        return None
    method = sent["method"]
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": sent["id"]}
    if method == "initialize":
        params = sent.get("params") or {}
        reply["result"] = {
            "protocolVersion": params.get("protocolVersion"),
            "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
            "serverInfo": {"name": STAND_IN_NAME, "version": "0"},
            "instructions": "An offline replay: calls are answered from the recorded run.",
        }
    elif method == "ping":
        reply["result"] = {}
    elif method == "server/discover":  # refused like a server of the handshake era: the client falls back
        reply["error"] = {"code": -32601, "message": "Method not found"}
    else:
        # the server's description stays out: its arguments are not redacted here
        reason = (
            f"MCP {method} has no recorded step to answer it (made outside the replayed run, or a method "
            "otel-replay does not record): an offline replay starts no MCP server"
        )
        diverge = getattr(replay, "_diverge", None)
        if diverge is not None:
            guards.safely("note the divergence", diverge, None, "unanswerable", reason)
        reply["error"] = {"code": -32603, "message": f"otel-replay: {reason}"}
    adapter = getattr(mcp.types, "jsonrpc_message_adapter", None)  # mcp 2; mcp 1.x has a root model
    if adapter is not None:
        return adapter.validate_python(reply)
    root_model: Any = mcp.types.JSONRPCMessage
    return root_model.model_validate(reply)


# -------------------------------------------------------------------------------------- instrumentor


class MCPInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Records the calls of ``mcp`` client sessions as tool and retrieval steps and answers them from the
    recording during a replay, without starting the servers of a replay that is not live.

    Options (constructor or :meth:`instrument`): ``tool_risks`` maps MCP tool names to ``read`` / ``write`` /
    ``high`` (it wins over the server's annotations); ``tracer_provider``. Bad values raise ValueError. A
    singleton, like every ``BaseInstrumentor``.
    """

    def __init__(self, *, tool_risks: Mapping[str, str] | None = None) -> None:
        if tool_risks is not None or not hasattr(self, "_tool_risks"):
            self._tool_risks: dict[str, str] = check_risks(tool_risks)

    def instrumentation_dependencies(self) -> Collection[str]:
        """The ``mcp`` requirement checked by ``instrument()`` and ``opentelemetry-instrument``."""
        return _instruments

    def check_options(self, **options: Any) -> None:
        """Raise ValueError for options :meth:`instrument` would refuse, without instrumenting."""
        if "tool_risks" in options:
            check_risks(options["tool_risks"])

    def risk_of(self, name: str, info: _Session | None) -> str:
        """The risk a call of the tool ``name`` is recorded with: ``tool_risks``, else the session's annotations
        (never below the name rule), else ``write``."""
        if name in self._tool_risks:
            return self._tool_risks[name]
        annotated = info.risks.get(name, "write") if info is not None else "write"
        named = effective_risk(name, None)
        order = ("read", "write", "high")
        return max(annotated, named, key=order.index)

    def _wrap(self, module: str, target: str, wrapper: Callable[..., Any]) -> None:
        patch("MCP", module, target, wrapper, self._patched)

    def _agents(self, module: Any) -> None:
        """The Agents SDK's MCP servers (its ``agents.mcp.server`` has just been imported, or was already)."""
        for cls in _AGENTS_SERVERS:
            if hasattr(getattr(module, cls, None), "create_streams"):
                self._wrap(_AGENTS_MODULE, f"{cls}.create_streams", _agents_server_wrapper)

    def _instrument(self, **kwargs: Any) -> None:
        if "tool_risks" in kwargs:
            self._tool_risks = check_risks(kwargs["tool_risks"])
        guards.bind(kwargs.get("tracer_provider"))
        self._patched: list[tuple[str, str]] = []
        self._wrap(_SESSION, "ClientSession.__init__", _init_wrapper)
        self._wrap(_SESSION, "ClientSession.__aexit__", _exit_wrapper)
        for method in _METHODS:
            self._wrap(_SESSION, f"ClientSession.{method}", _retrieval_wrapper(method))
        self._wrap(_SESSION, "ClientSession.call_tool", _tool_wrapper(self))
        for module, target in _TRANSPORTS:
            self._wrap(module, target, _transport_wrapper(target))
        for module, target in _TRANSPORTS_1X:
            if _mcp_major() < 2:
                self._wrap(module, target, _transport_wrapper(target))
        self._agents_hook = _lazy.when_imported(_AGENTS_MODULE, self._agents)

    def _uninstrument(self, **kwargs: Any) -> None:
        _lazy.cancel(getattr(self, "_agents_hook", None))
        unpatch(getattr(self, "_patched", []))
        self._patched = []
        guards.bind(None)
