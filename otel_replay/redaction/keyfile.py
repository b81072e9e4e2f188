"""The installation's HMAC key file, ``<home>/redaction.key``: read it, or create it atomically with mode
0600 on first use; a key file readable by others is tightened or refused.

It must never write a partial key, overwrite a key another process created, loosen the file's mode, or log
the key.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

from ..files import private_dir, private_file
from .rules import KEY_BYTES, KEY_FILE_NAME, MIN_KEY_BYTES, log


def _read_key_file(path: Path) -> tuple[bytes | None, bool]:
    """The key in ``path`` (None while there is none) and whether the file could still become one: absent,
    empty, or hex digits only, as a writer mid-way leaves it (:func:`_write_key` writes hex digits, then a
    newline). Anything else is malformed for good."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, True
    text = data.strip()
    if re.fullmatch(rb"[0-9a-fA-F]{32,128}", text) and len(text) % 2 == 0:
        return bytes.fromhex(text.decode("ascii")), False
    return None, re.fullmatch(rb"[0-9a-fA-F]*", data) is not None


def _write_key(fd: int, key: bytes) -> None:
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.hex().encode("ascii") + b"\n")
        fh.flush()
        os.fsync(fh.fileno())


def load_or_create_key(home: Path) -> bytes:
    """Read ``<home>/redaction.key``, creating it (0600, atomically) on first use."""
    private_dir(home)
    path = home / KEY_FILE_NAME
    if not path.exists():
        key = secrets.token_bytes(KEY_BYTES)
        tmp = home / f".{KEY_FILE_NAME}.{os.getpid()}.{secrets.token_hex(6)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            _write_key(fd, key)
            try:
                os.link(tmp, path)  # atomic and never partial: fails if another process got there first
            except FileExistsError:
                pass
            except OSError:  # filesystems without hard links: exclusive create of the final name
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                except FileExistsError:
                    pass
                else:
                    _write_key(fd, key)
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    deadline = time.monotonic() + 2.0
    while True:
        key_bytes, may_become_one = _read_key_file(path)
        if key_bytes is not None:
            break
        if not may_become_one or time.monotonic() > deadline:
            raise ValueError(
                f"redaction key {path} is not a hex-encoded key; delete it to create a new one "
                f"(fingerprints recorded with the old key will no longer match)"
            )
        time.sleep(0.01)
    if len(key_bytes) < MIN_KEY_BYTES:
        raise ValueError(f"redaction key {path} is shorter than {MIN_KEY_BYTES} bytes; delete it to create a new one")
    was = private_file(path, label="redaction key ")
    if was is not None:
        log.warning("redaction key %s had mode %o; tightened it to 600", path, was)
    return key_bytes
