"""Where a report links each trace: the Jaeger UI and the Grafana run dashboard, when configured.

Must never link anywhere but an http(s) URL with a host: a configured value that is not one gives no link.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, urlsplit

__all__ = ["GRAFANA_RUN_DASHBOARD_UID", "OTEL_REPLAY_GRAFANA_URL", "OTEL_REPLAY_JAEGER_URL", "Links"]

_log = logging.getLogger("otel_replay")

OTEL_REPLAY_JAEGER_URL: Final = "OTEL_REPLAY_JAEGER_URL"
"""Environment variable: base URL of the Jaeger UI as the browser sees it (e.g. ``http://localhost:16686``);
reports link each trace to ``{url}/trace/{trace id}``."""

OTEL_REPLAY_GRAFANA_URL: Final = "OTEL_REPLAY_GRAFANA_URL"
"""Environment variable: base URL of Grafana (e.g. ``http://localhost:3000``); reports link each trace to the
run dashboard (uid :data:`GRAFANA_RUN_DASHBOARD_UID`, variable ``trace_id``)."""

GRAFANA_RUN_DASHBOARD_UID: Final = "otel-replay-run"
"""Uid (and slug) of the one-run dashboard in ``dashboards/otel-replay-run.json``."""


def _base_url(value: str | None) -> str | None:
    """``value`` without trailing slashes when it is an http(s) URL with a host, else None. User info
    (``user:password@``) is left out: the link goes into a file anyone may be sent, and a browser asks for it."""
    if value is None:
        return None
    text = value.strip().rstrip("/")
    if not text:
        return None
    try:
        parts = urlsplit(text)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc or any(c in text for c in "\"'<> \t\n"):
        return None
    if "@" in parts.netloc:
        text = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    return text


@dataclass(frozen=True)
class Links:
    """Where a report links each trace: the Jaeger UI and the Grafana run dashboard, when configured."""

    jaeger_url: str | None = None
    """Base URL of the Jaeger UI (``http(s)://…``), or None for no Jaeger link."""
    grafana_url: str | None = None
    """Base URL of Grafana (``http(s)://…``), or None for no Grafana link."""

    def __post_init__(self) -> None:
        for name in ("jaeger_url", "grafana_url"):
            value = getattr(self, name)
            if value is None:
                continue
            base = _base_url(value)
            if base is None:
                raise ValueError(f"{name} must be an http(s) URL such as http://localhost:16686, got {value!r}")
            object.__setattr__(self, name, base)

    @classmethod
    def from_env(cls) -> Links:
        """Links from ``OTEL_REPLAY_JAEGER_URL`` and ``OTEL_REPLAY_GRAFANA_URL``; unset, empty or non-http(s)
        values give no link (a value that is not an http(s) URL is logged and ignored)."""
        found: dict[str, str | None] = {}
        for field_name, env in (("jaeger_url", OTEL_REPLAY_JAEGER_URL), ("grafana_url", OTEL_REPLAY_GRAFANA_URL)):
            raw = os.environ.get(env)
            base = _base_url(raw)
            if raw and raw.strip() and base is None:
                _log.warning("%s=%r is not an http(s) URL; reports will not link there", env, raw)
            found[field_name] = base
        return cls(**found)

    def for_trace(self, trace_id: str) -> list[tuple[str, str]]:
        """(label, href) of each configured link to ``trace_id``: Jaeger's trace view, Grafana's run dashboard."""
        tid = quote(trace_id, safe="")
        out: list[tuple[str, str]] = []
        if self.jaeger_url:
            out.append(("Jaeger", f"{self.jaeger_url}/trace/{tid}"))
        if self.grafana_url:
            uid = GRAFANA_RUN_DASHBOARD_UID
            out.append(("Grafana", f"{self.grafana_url}/d/{uid}/{uid}?var-trace_id={tid}"))
        return out
