"""SDK instrumentation overhead: an instrumented OpenAI ``chat.completions.create`` call against the same call
uninstrumented, both on the same local fake OpenAI server (``otel_replay.demo.fake_llm``) in the same run.

Each round times ``--calls`` calls of each side, in alternating order, the instrumented side inside one
``@orp.agent`` run (each call a model step with request, response and context snapshots) and recorded to
the spool (otel-replay's default exporter, flushed inside the timed region). The uninstrumented side is
the same client with the instrumentor removed. The ratio reported is the median of the per-round ratios;
the time includes the fake server's HTTP round trip, as a real call would. ``added_us_per_call`` is the
difference of the two medians per call.

    python benchmarks/sdk_overhead.py [--calls 200] [--rounds 7] [--no-context] [--stream]

``--stream`` makes every call ``stream=True`` (with ``stream_options={"include_usage": True}``) and reads the
stream to its end: the instrumented side then also records each chunk as it is received.

Target (issue 4): ratio <= 1.2. After the JSON report, the row of the table in docs/performance.md; exit 1 when the
target is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time

import openai
from _table import print_rows, row

import otel_replay as orp
from otel_replay.demo.fake_llm import FakeLLMServer
from otel_replay.exporting import setup
from otel_replay.instrumentation.openai import OpenAIInstrumentor

MESSAGES = [
    {"role": "system", "content": "You are a support agent. Cite the knowledge base. Never refund without approval."},
    {"role": "user", "content": "Where is my replacement kettle? It shipped last week to the Lyon address."},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    }
]


STREAM = False
"""Set by ``--stream``: every call streams, and its stream is read to the end."""


def calls(client: openai.OpenAI, n: int) -> None:
    for _ in range(n):
        if STREAM:
            stream = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=MESSAGES,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            )
            for _chunk in stream:
                pass
        else:
            client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, temperature=0)


def timed_plain(client: openai.OpenAI, n: int) -> float:
    start = time.perf_counter()
    calls(client, n)
    return time.perf_counter() - start


def timed_instrumented(client: openai.OpenAI, n: int) -> float:
    @orp.agent("sdk-bench")
    def run() -> None:
        calls(client, n)

    start = time.perf_counter()
    run()
    setup.flush()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--no-context", action="store_true", help="instrument with capture_context=False (no context snapshot per call)"
    )
    parser.add_argument("--stream", action="store_true", help="stream every call and read the stream to its end")
    args = parser.parse_args()
    global STREAM
    STREAM = args.stream
    options = {"capture_context": not args.no_context}
    instrumentor = OpenAIInstrumentor()
    with tempfile.TemporaryDirectory() as home, FakeLLMServer() as server:
        orp.configure(home=home, exporter="spool")
        client = openai.OpenAI(base_url=server.openai_url, api_key="sk-bench", max_retries=0)
        calls(client, 20)  # warm up the connection pool and the SDK
        instrumentor.instrument(**options)
        timed_instrumented(client, 20)
        instrumentor.uninstrument()
        plain_s, instrumented_s, ratios = [], [], []
        for i in range(args.rounds):
            order = (False, True) if i % 2 == 0 else (True, False)
            result = {}
            for instrumented in order:
                if instrumented:
                    instrumentor.instrument(**options)
                    result[True] = timed_instrumented(client, args.calls)
                    instrumentor.uninstrument()
                else:
                    result[False] = timed_plain(client, args.calls)
            plain_s.append(result[False])
            instrumented_s.append(result[True])
            ratios.append(result[True] / result[False])
    per_call = lambda xs: statistics.median(xs) / args.calls * 1e6  # noqa: E731
    report = {
        "capture_context": options["capture_context"],
        "stream": args.stream,
        "calls_per_round": args.calls,
        "rounds": args.rounds,
        "uninstrumented_us_per_call": round(per_call(plain_s), 1),
        "instrumented_us_per_call": round(per_call(instrumented_s), 1),
        "added_us_per_call": round(per_call(instrumented_s) - per_call(plain_s), 1),
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_rounds": [round(r, 3) for r in ratios],
        "requests_served": server.count,
        "python": sys.version.split()[0],
        "openai": openai.__version__,
    }
    print(json.dumps(report, indent=2))
    ratio = report["ratio_median"]
    kind = "streamed " if args.stream else ""
    context = "" if options["capture_context"] else ", no context snapshot"
    print_rows(
        [
            row(
                f"SDK call: an instrumented OpenAI `chat.completions.create` ({kind}in a run{context}) / the same "
                "call uninstrumented, on a local fake server",
                f"{ratio:.2f}x ({report['added_us_per_call']:+.0f} us per call)",
                "<= 1.2x",
                ratio <= 1.2,
            )
        ]
    )
    return 0 if ratio <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
