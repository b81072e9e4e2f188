"""Child process of the fault tests: record rounds of runs while the store or Collector is unavailable, and
report memory after each round, what ``flush()`` answered and what was logged on the ``otel_replay`` logger.

Run as ``python fault_memory.py MODE HOME ROUNDS RUNS_PER_ROUND [URL]``; prints one JSON document. Memory is
measured here, in a process of its own, because a test runner keeps every log record it captures (with the
frames of its traceback), which would hold recorded spans alive and hide what the library itself keeps.

MODE: ``clickhouse`` (direct exporter to URL, a server that refuses connections), ``otlp`` (OTLP/HTTP to URL,
refusing connections), ``otlp-hang`` (OTLP/HTTP to a local Collector that holds every request until the rounds
are recorded, then refuses them with 400, then accepts: the outage and the recovery).
"""

from __future__ import annotations

import gc
import http.server
import json
import logging
import os
import sys
import threading
import tracemalloc

from fault_agents import Expected, fault_agent, spans_of

PAD = "x" * 8000  # ~30 KB of payload per run: keeping runs in memory would show


class _Messages(logging.Handler):
    """Keeps the text of each record only (never the record: it could hold frames alive)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _hanging_collector() -> tuple[str, dict]:
    state: dict = {"mode": "hang", "release": threading.Event(), "held": threading.Event()}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if state["mode"] == "hang":
                state["held"].set()
                state["release"].wait()  # until the test releases it: a Collector that never answers
            self.send_response(200 if state["mode"] == "ok" else 400)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1/traces", state


def main(mode: str, home: str, rounds: int, per_round: int, url: str = "") -> dict:
    import otel_replay as orp

    messages = _Messages()
    logging.getLogger("otel_replay").addHandler(messages)
    logging.getLogger("otel_replay").setLevel(logging.WARNING)
    state: dict = {}
    if mode == "clickhouse":
        os.environ["OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS"] = "0.2"
        orp.configure(home=home, store=url, exporter="clickhouse")
    else:
        if mode == "otlp-hang":
            url, state = _hanging_collector()
        # Refused: a short timeout, so the exporter gives up on a batch at once instead of backing off.
        # Hanging: one longer than the whole test, so the exporter thread stays stuck in its request until the
        # Collector lets it go, however long the rounds take (with a shorter one, a busy machine would see the
        # request time out mid-test and the exporter take another batch out of the queue).
        os.environ.update(
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=url,
            OTEL_EXPORTER_OTLP_TRACES_TIMEOUT="600" if state else "0.5",
            OTEL_BSP_MAX_QUEUE_SIZE="512",
            OTEL_BSP_MAX_EXPORT_BATCH_SIZE="128",
        )
        orp.configure(home=home, exporter="otlp")

    if state:  # one run, handed to the exporter by a flush: from then on its thread is held in that request, so
        # every span recorded below waits in the queue (and none leaves with an earlier batch of some size)
        fault_agent("<warmup>", tools=0)
        orp.flush(300)
        state["held"].wait()
    runs: list[Expected] = []
    flushed: list[bool] = []
    sizes: list[int] = []
    tracemalloc.start()
    for index in range(rounds):
        for i in range(per_round):
            tools = i % 4
            marker = f"<{mode}{index}-{i}>"
            out = fault_agent(marker, tools=tools, pad=PAD)  # must return normally
            runs.append(Expected(out["trace_id"], marker, spans_of(tools)))
        if state:  # the exporter thread is stuck in a request: nothing is flushed during the outage
            state["held"].wait()
        else:
            flushed.append(orp.flush())
        gc.collect()
        sizes.append(tracemalloc.get_traced_memory()[0])
    tracemalloc.stop()
    result: dict = {"sizes": sizes, "flushed": flushed, "recorded_per_round": per_round * 3 * len(PAD)}
    if state:  # flush() during the outage gives up after its timeout (the SDK's own force_flush would not)
        flushing = threading.Thread(target=lambda: result.update(flush_during_outage=orp.flush(300)))
        flushing.start()
        # Joined while the Collector still holds every request: a flush that waited for it would never return
        # (the test's bound on this process would end it), so returning here is the proof, whatever the clock.
        flushing.join()
        result["flush_returned_during_outage"] = not flushing.is_alive()
        state["mode"] = "fail"
        state["release"].set()
        result["flush_after_outage"] = orp.flush()
        state["mode"] = "ok"
        fault_agent("<back>", tools=0)
        result["flush_after_recovery"] = orp.flush()
    orp.configure(home=home, exporter="spool")  # shuts the exporter down
    result["warnings"] = messages.lines
    result["runs"] = [run.__dict__ for run in runs]
    return result


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(main(args[0], args[1], int(args[2]), int(args[3]), *args[4:])))
