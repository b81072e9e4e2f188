"""Agents for ``test_adv_leaks.py``: they plant a secret inside ``bytes`` values and a store URL with a malformed
password through the public recording surface.

They live in their own module so a replay (in a subprocess, with this folder on ``PYTHONPATH``) can import them
again.
"""

from __future__ import annotations

from typing import Any

import otel_replay as orp


@orp.tool("upload_blob", risk="read")
def upload_blob(blob: bytes, name: str) -> dict[str, Any]:
    return {"stored": True, "name": name}


@orp.tool("echo_blob", risk="read")
def echo_blob(blob: bytes) -> bytes:
    return bytes(blob) if isinstance(blob, (bytes, bytearray)) else b""


@orp.agent("bytes-agent")
def bytes_agent(blob: bytes, blob16: bytes, clean: bytes) -> dict[str, Any]:
    """``blob`` holds an API key after two non-UTF-8 bytes, ``blob16`` one as UTF-16 text after a NUL: both go
    in as the run's input, a tool's arguments and a tool's result. ``clean`` is binary without a secret: it must
    come back from the recording byte for byte. ``blob`` is attached as a file too (a UTF-16 byte-order mark
    followed by ASCII)."""
    if isinstance(blob, bytes):  # a replay hands the agent the recorded input: a marker, not the bytes
        orp.attach_file(blob, name="keys.bin", store_binary=True)
    upload_blob(blob, "keys.bin")
    upload_blob(blob16, "keys16.bin")
    echo_blob(blob)
    kept = echo_blob(clean)
    return {"ok": True, "clean_back": kept == clean, "clean_size": len(kept)}


@orp.tool("connect_store", risk="read")
def connect_store(dsn: str) -> str:
    raise ConnectionError(f"cannot reach the store at {dsn}: connection refused")


@orp.agent("dsn-agent")
def dsn_agent(dsn: str) -> str:
    """Passes a store URL to a tool that fails quoting it: the URL is in the run's input, the tool's arguments
    and the recorded exception."""
    try:
        connect_store(dsn)
    except ConnectionError:
        return "store down"
    return "store up"
