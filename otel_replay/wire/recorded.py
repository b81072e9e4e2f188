"""The steps the wire commands record, in the run (or replay) current in their context: a model step per
request, and the tool steps a request's tool results show (``observed``: they ran in the agent).

Why it exists: the recording proxy records them from the real exchange, the replay server from the replayed
one (where the current replay matches and answers them); both record the same steps the same way, so a replay
at the wire compares step for step with its recording.

What it must never do: let a recording failure fail a request; a replay's interrupt (a divergence that stops
it) passes, for the replay server to answer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from .. import semconv
from ..recording import begin_model_call, begin_tool_call, end_call
from .endpoints import Endpoint, ToolCall, returned
from .httpd import safely

INSTRUMENTATION: Final = "wire"
"""``otel_replay.step.instrumentation`` of the steps the wire commands record."""


def begin_model(name: str, endpoint: Endpoint, request: dict[str, Any]) -> Any:
    """Begin the model step of one request (None when recording is unavailable); a replay answers it in
    ``call.served`` or raises its interrupt."""
    model = request.get("model")
    return safely(
        name,
        "begin the model step",
        begin_model_call,
        endpoint.step,
        request,
        provider=endpoint.provider,
        model=model if isinstance(model, str) else None,
        instrumentation=INSTRUMENTATION,
    )


def observe(
    name: str, endpoint: Endpoint, request: dict[str, Any], pending: dict[str, ToolCall], lock: threading.Lock
) -> None:
    """Tool steps for the ``pending`` calls (asked by earlier answers) whose results this request sends back,
    in the order they were asked; each leaves ``pending``."""
    results = returned(endpoint, request)
    with lock:
        answered = [(c, results[c.call_id]) for c in pending.values() if c.call_id in results]
        for done, _ in answered:
            del pending[done.call_id]
    for tool, result in answered:
        arguments = tool.arguments if isinstance(tool.arguments, dict) else {"arguments": tool.arguments}
        step = safely(
            name, "begin an observed tool step", begin_tool_call, tool.name, arguments, instrumentation=INSTRUMENTATION
        )
        if step is not None:
            mark: Callable[..., Any] = step.step.span.set_attribute
            safely(name, "mark the step", mark, semconv.TOOL_OBSERVED, True)
        end_call(step, result=result)
