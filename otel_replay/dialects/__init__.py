"""Runs recorded by other GenAI instrumentations, read into the same :class:`~otel_replay.runs.Run` objects.

Why it exists: traces written by ``opentelemetry-instrumentation-openai-v2`` and other emitters of the
OpenTelemetry GenAI conventions (old ``gen_ai.prompt.N`` / events and new ``gen_ai.input.messages`` style),
by OpenInference (Arize Phoenix) and by OpenLLMetry / Traceloop sit in the same ``otel_traces`` table as
otel-replay's own runs. This module turns such a trace into a run as far as its content allows, so ``show``,
dry replay, the readiness report and diff work on it, and deterministic model replay can match a model call
by its request hash when the message content was captured. ``docs/dialects.md`` documents the mapping and
what each dialect lacks for replay.

What it must never do: change, store or write anything (it only reads :class:`SpanRecord` objects); invent
content that was not recorded (a model call recorded without its messages gets a snapshot that says so,
never a guessed request); import an instrumentation package.

Every value arrives as the Collector stores it: a string (numbers in decimal, arrays and maps as compact
JSON), so numbers and JSON are parsed back here.

The package holds one module per step of the reading: ``keys`` (the other conventions' names and how their
stored strings parse), ``detect`` (which dialect, which root, the summary), ``messages``, ``rebuilt`` (a
request reduced to what a recording keeps, to compare it with a rebuilt one), ``calls`` (one model call),
``steps`` (model, tool and retrieval steps) and ``build`` (the whole run); this module re-exports the public
names.
"""

from __future__ import annotations

from .build import build_foreign_run
from .detect import find_foreign_root, span_dialect, summary_from_root
from .keys import (
    DIALECT_GENAI,
    DIALECT_OPENINFERENCE,
    DIALECT_OTEL_REPLAY,
    DIALECT_TRACELOOP,
    FOREIGN_ROOT_KEYS,
)
from .keys import SDK_STEP_NAMES as SDK_STEP_NAMES
from .rebuilt import as_rebuilt

__all__ = [
    "DIALECT_GENAI",
    "DIALECT_OPENINFERENCE",
    "DIALECT_OTEL_REPLAY",
    "DIALECT_TRACELOOP",
    "FOREIGN_ROOT_KEYS",
    "as_rebuilt",
    "build_foreign_run",
    "find_foreign_root",
    "span_dialect",
    "summary_from_root",
]
