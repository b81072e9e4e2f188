"""Folders otel-replay keeps private to the user who runs it.

The home holds the redaction key, the spool, the embedded store and the audit journal. This module must
never loosen a mode, and never leave a folder it was asked to make private open to other users.
"""

from __future__ import annotations

import os
from pathlib import Path


def private_dir(path: Path) -> Path:
    """Create folder ``path`` (with missing parents) readable only by its owner, or make an existing one so.

    The home holds the redaction key, the spool, the store and the audit journal: a home that existed before
    with mode 0755 (a shared ``mkdir``, an image built with another umask) is tightened to 0700, since every
    file under it is then private too. Raises ValueError naming the folder when that is not possible."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if os.name == "nt":  # pragma: no cover - POSIX permissions only
        return path
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            raise ValueError(f"{path} is open to other users (mode {mode:o}) and cannot be made private "
                             f"({exc.strerror or exc}); run: chmod 700 {path}") from None
    return path
