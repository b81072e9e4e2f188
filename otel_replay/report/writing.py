"""Writing a report page to a file: atomically, with one-line errors.

Must never leave half a file at the target path, or change a file already there when the write fails.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from ..errors import OtelReplayError

__all__ = ["ReportWriteError", "write_report"]


class ReportWriteError(OtelReplayError, OSError):
    """A report file cannot be written (the folder is missing or not writable, or the path is a folder)."""


def write_report(path: str | os.PathLike[str], html: str) -> Path:
    """Write ``html`` to ``path`` (UTF-8) atomically: a temporary file in the same folder, then ``os.replace``.

    Returns the path written. Raises :class:`ReportWriteError` (an ``OSError``) with a one-line message when
    the folder is missing or not writable or the path is a folder; a file already at ``path`` is left as it
    was on failure.
    """
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise ReportWriteError(
            f"cannot write the report to {target}: it is a folder; give a file name such as {target / 'report.html'}"
        )
    if not folder.is_dir():
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise ReportWriteError(f"cannot write the report to {target}: {folder} {problem}")
    tmp = folder / f".{target.name}.{uuid.uuid4().hex[:12]}.tmp"
    data = html.encode("utf-8")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        reason = exc.strerror or str(exc)
        raise ReportWriteError(f"cannot write the report to {target}: {reason}") from None
    return target
