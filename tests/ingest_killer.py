"""Run as a script: open the store at HOME (which ingests its spool) and SIGKILL this process the NTH time the
ingest passes checkpoint POINT (``claimed``, ``inserted_chunk``, ``inserted``, ``deleted_one``).

    python ingest_killer.py HOME POINT NTH CHUNK_ROWS

Prints a line when the ingest finished without being killed (the point was not reached NTH times).
"""

import os
import signal
import sys

from otel_replay.storage import ingest
from otel_replay.storage.store import Store

home, point, nth, chunk_rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
seen: dict[str, int] = {}


def checkpoint(name: str) -> None:
    seen[name] = seen.get(name, 0) + 1
    if name == point and seen[name] == nth:
        os.kill(os.getpid(), signal.SIGKILL)


ingest._checkpoint = checkpoint
ingest._INSERT_CHUNK_ROWS = chunk_rows
Store.open(home=home, lock_timeout=60).close()
print("finished without being killed", flush=True)
