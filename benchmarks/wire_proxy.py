"""The recording proxy's added latency: one chat completion through ``otel-replay proxy`` against the same call
straight to the upstream, both on the same local fake OpenAI server (``otel_replay.demo.fake_llm``) in one run.

The proxy runs in this process as the ``proxy`` command runs it (:class:`otel_replay.wire.proxy.Proxy`, each
request a run of its own recorded to the spool, otel-replay's default exporter; the spool is flushed outside the
timed calls, as the command flushes when a run closes). The client is plain ``http.client`` on kept-alive
connections, so the figures are the proxy's and not an SDK's. Each round times ``--calls`` calls of each side
in alternating order; the reported figure is the median over rounds of the per-call p50 difference.

- non-streamed: the whole exchange (request out, JSON body back);
- streamed: the time to the first server-sent event (what a user waits for before the first token).

    python benchmarks/wire_proxy.py [--calls 200] [--rounds 7]

Goals (issue "any language"): under 2 ms added at p50 for a call, under 1 ms for the first token of a stream.
After the JSON report, the rows of the table in docs/performance.md; exit 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from urllib.parse import urlsplit

from _table import print_rows, row

from otel_replay.demo.fake_llm import FakeLLMServer
from otel_replay.exporting import setup
from otel_replay.wire.proxy import Proxy, Upstream
from otel_replay.wire.runs import WireRuns

BODY = json.dumps(
    {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a support agent. Cite the knowledge base."},
            {"role": "user", "content": "Where is my replacement kettle? It shipped last week."},
        ],
    }
).encode()
STREAM_BODY = json.dumps({**json.loads(BODY), "stream": True}).encode()


def one(connection: http.client.HTTPConnection, path: str, body: bytes, *, first_event: bool) -> float:
    """Seconds for one call: to the whole body, or to the first server-sent event (the rest then read)."""
    start = time.perf_counter()
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    if first_event:
        while b"data:" not in response.read1(65536):
            pass
        elapsed = time.perf_counter() - start
        response.read()
        return elapsed
    response.read()
    return time.perf_counter() - start


def p50(connection: http.client.HTTPConnection, path: str, body: bytes, n: int, *, first_event: bool) -> float:
    return statistics.median(one(connection, path, body, first_event=first_event) for _ in range(n))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, FakeLLMServer() as upstream:
        setup.configure(home=home)
        runs = WireRuns(idle_s=30, closed=lambda run: None)
        proxy = Proxy({"openai": Upstream.parse(upstream.openai_url, "--openai-upstream")}, runs, port=0)
        threading.Thread(target=proxy.serve, daemon=True).start()
        direct_at, proxied_at = urlsplit(upstream.openai_url), urlsplit(proxy.url)
        direct = http.client.HTTPConnection(direct_at.hostname, direct_at.port)
        proxied = http.client.HTTPConnection(proxied_at.hostname, proxied_at.port)
        direct_path, proxied_path = direct_at.path + "/chat/completions", "/v1/chat/completions"
        added: dict[str, list[float]] = {"call": [], "first_event": []}
        for _ in range(options.rounds):
            for kind, body, first in (("call", BODY, False), ("first_event", STREAM_BODY, True)):
                a = p50(direct, direct_path, body, options.calls, first_event=first)
                b = p50(proxied, proxied_path, body, options.calls, first_event=first)
                added[kind].append(b - a)
            setup.flush()
        proxy.stop()
        runs.close_all()
        setup.flush()
    call_ms = statistics.median(added["call"]) * 1000
    first_ms = statistics.median(added["first_event"]) * 1000
    print(json.dumps({"added_ms_p50_call": round(call_ms, 3), "added_ms_p50_first_event": round(first_ms, 3)}))
    met_call, met_first = call_ms < 2.0, first_ms < 1.0
    print_rows(
        [
            row(
                "proxy: a chat completion through `otel-replay proxy` (recorded) / straight to a local upstream, "
                "added at p50",
                f"+{call_ms:.2f} ms",
                "< 2 ms",
                met_call,
            ),
            row(
                "proxy: the first event of a streamed chat completion through the proxy / straight, added at p50",
                f"+{first_ms:.2f} ms",
                "< 1 ms",
                met_first,
            ),
        ]
    )
    return 0 if met_call and met_first else 1


if __name__ == "__main__":
    sys.exit(main())
