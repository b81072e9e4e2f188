"""Approvals a live replay was given, counted per execution: ``NAME`` is one call, ``NAME:N`` N calls, ``NAME:*`` all.

The person replaying is the only source of approvals (``--approve``, ``approvals=``); an approval recorded in
the original run never counts. Each spec is parsed and validated here and nowhere else, so the CLI and the
Python API accept and refuse exactly the same texts. An :class:`Approvals` object is a budget: the session
takes one unit per real execution, and a budget shared by the turns of a conversation replay counts across
them.

This module must never grant an execution the specs do not cover, and never read an approval from recorded
data.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Final

from ...errors import OtelReplayError

_SPEC: Final = re.compile(r"(?P<name>[^:\s][^:]*?)(?::(?P<count>\*|[0-9]+))?")
_MAX_COUNT: Final = 1_000_000


class InvalidApproval(OtelReplayError, ValueError):
    """An approval spec is not ``NAME``, ``NAME:N`` (N >= 1) or ``NAME:*`` (CLI exit code 2)."""


class Approvals:
    """The execution budget of one replay (or of the turns of one conversation replay), per tool name.

    Thread-safe: tools run in worker threads take units under one lock."""

    def __init__(self, specs: Iterable[str] = ()) -> None:
        """Parse ``specs``; raises :class:`InvalidApproval` naming the first bad one."""
        if isinstance(specs, str):
            specs = (specs,)
        self.specs: tuple[str, ...] = tuple(str(s) for s in specs)
        """The specs as given (what the audit records)."""
        self._limits: dict[str, int | None] = parse_approvals(self.specs)
        self._used: dict[str, int] = dict.fromkeys(self._limits, 0)
        self._lock = threading.Lock()

    @classmethod
    def of(cls, approvals: Approvals | Iterable[str] | None) -> Approvals:
        """``approvals`` itself when it already is a budget (shared), else a new budget parsed from specs."""
        if isinstance(approvals, Approvals):
            return approvals
        return cls(approvals or ())

    def names(self) -> tuple[str, ...]:
        """Tool names with an approval, in the order first given."""
        return tuple(self._limits)

    def limit(self, name: str) -> int | None:
        """How many executions of ``name`` are approved in all (None: every call); 0 when not approved."""
        return self._limits.get(name, 0)

    def take(self, name: str) -> str | None:
        """Take one execution of ``name``: None when it may run, else why not (``missing`` or ``used up``)."""
        with self._lock:
            if name not in self._limits:
                return "missing"
            limit = self._limits[name]
            if limit is not None and self._used[name] >= limit:
                return "used up"
            self._used[name] += 1
            return None


def parse_approvals(specs: Iterable[str]) -> dict[str, int | None]:
    """Approved executions per tool name (None: unlimited) from ``NAME`` / ``NAME:N`` / ``NAME:*`` specs.

    Specs naming the same tool add up (``a`` and ``a`` allow two calls; any ``a:*`` allows all). Raises
    :class:`InvalidApproval` for an empty name, a count that is not a whole number >= 1, or anything else."""
    limits: dict[str, int | None] = {}
    for raw in specs:
        if not isinstance(raw, str):
            raise InvalidApproval(f"approval {raw!r} is not text: give tool names as NAME, NAME:N or NAME:*")
        spec = raw.strip()
        match = _SPEC.fullmatch(spec)
        if match is None:
            raise InvalidApproval(
                f"approval {raw!r} is not NAME, NAME:N (N >= 1) or NAME:*: e.g. --approve "
                "send_email (one call), --approve send_email:3, --approve send_email:*"
            )
        name, count = match.group("name").strip(), match.group("count")
        if count is None:
            n: int | None = 1
        elif count == "*":
            n = None
        else:
            n = int(count)
            if n < 1 or n > _MAX_COUNT:
                raise InvalidApproval(
                    f"approval {raw!r}: the count must be between 1 and {_MAX_COUNT} (or * for "
                    f"every call); leave {name!r} out to approve no call of it"
                )
        if name in limits:
            before = limits[name]
            limits[name] = None if before is None or n is None else before + n
        else:
            limits[name] = n
    return limits


def executions_of(approvals: Approvals, counted: Mapping[str, int]) -> dict[str, int]:
    """``counted`` with every approved name present (0 when it never ran), in the order approved."""
    return {name: int(counted.get(name, 0)) for name in approvals.names()} | {
        name: int(n) for name, n in counted.items() if name not in approvals.names()
    }
