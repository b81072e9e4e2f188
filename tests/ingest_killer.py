"""Run as a script: open the store at HOME (which ingests its spool) in chunks of CHUNK_ROWS rows, with the
faults armed by ``OTEL_REPLAY_FAULTS`` (e.g. ``ingest.inserted_chunk@2``: SIGKILL the second time the ingest
commits a chunk; see ``otel_replay.faults``).

    OTEL_REPLAY_FAULTS=ingest.POINT@NTH python ingest_killer.py HOME CHUNK_ROWS

Prints a line when the ingest finished without being killed (the point was not reached NTH times).
"""

import sys

from otel_replay.storage import ingest
from otel_replay.storage.store import Store

home, chunk_rows = sys.argv[1], int(sys.argv[2])
ingest.INSERT_CHUNK_ROWS = chunk_rows
Store.open(home=home, lock_timeout=60).close()
print("finished without being killed", flush=True)
