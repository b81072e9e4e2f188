"""What the side-effect guard lets through because it is otel-replay's own: the folders it writes to (the
temp folder, its home, an embedded store elsewhere), Python's bytecode cache, and the endpoints it exports to
(the OTLP endpoint, a ClickHouse server), as the guard compares them with what an audit event names.

It must never exempt a folder or an endpoint that is not otel-replay's own, block or allow anything itself
(the guard decides), or hold state between replays.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import tempfile
from typing import Final
from urllib.parse import urlsplit

from ... import settings
from ...exporting import setup

_BYTECODE: Final = re.compile(r".+\.pyc(\.\d+)?")
"""A bytecode file, or importlib's temporary ``<name>.pyc.<id>`` it renames into place."""


def is_bytecode(path: str) -> bool:
    head, name = os.path.split(path)
    return os.path.basename(head) == "__pycache__" and _BYTECODE.fullmatch(name) is not None


def folder_of_fd(fd: int) -> str | None:
    """The folder an open directory descriptor refers to (``*at()`` calls), or None when unknown."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    try:
        import fcntl

        getpath = getattr(fcntl, "F_GETPATH", None)
        if getpath is not None:
            raw = fcntl.fcntl(fd, getpath, b"\0" * 1024)
            return os.fsdecode(raw.split(b"\0", 1)[0])
    except OSError:
        pass
    return None


def exempt_roots() -> tuple[str, ...]:
    """Folders where writes are allowed: the temp folder, otel-replay's home, an embedded store elsewhere."""
    folders = [tempfile.gettempdir(), str(settings.resolve_home())]
    rt = setup.current_runtime()
    if rt is not None:
        folders.append(str(rt.home))
    for url in (rt.store_url if rt is not None else None, os.environ.get(settings.OTEL_REPLAY_STORE)):
        if url and url.startswith("chdb://"):
            folders.append(url.removeprefix("chdb://") or "/")
    roots: list[str] = []
    for folder in folders:
        real = os.path.realpath(os.path.expanduser(folder))
        if real not in roots and real != os.sep:
            roots.append(real.rstrip(os.sep))
    return tuple(roots)


def endpoint_of(url: str | None, *, default_port: int | None = None) -> tuple[str, int] | None:
    if not url:
        return None
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port or default_port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return parts.hostname, port


def exempt_endpoints() -> tuple[tuple[str, int], ...]:
    """(host, port) of the places otel-replay itself sends to: the OTLP endpoint and a ClickHouse server."""
    found: list[tuple[str, int] | None] = [
        endpoint_of(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
        endpoint_of(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")),
    ]
    rt = setup.current_runtime()
    exporter = rt.exporter if rt is not None else None
    if exporter is not None:
        found.append(endpoint_of(getattr(exporter, "endpoint_of", None)))
        found.append(endpoint_of(getattr(exporter, "url", None) or getattr(exporter, "_url", None)))
    for url in (rt.store_url if rt is not None else None, os.environ.get(settings.OTEL_REPLAY_STORE)):
        if url and url.startswith(("http://", "https://")):
            found.append(endpoint_of(url))
    return tuple(dict.fromkeys(e for e in found if e is not None))


def normal_host(host: str) -> str:
    host = host.split("%", 1)[0]  # an IPv6 scope
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host.lower()


def resolved_endpoints(endpoints: tuple[tuple[str, int], ...]) -> set[tuple[str, int]]:
    """Each endpoint as the addresses a connection to it goes to (resolved once per guarded replay)."""
    addresses: set[tuple[str, int]] = set()
    for host, port in endpoints:
        addresses.add((normal_host(host), port))
        try:
            for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP):
                addresses.add((normal_host(str(info[4][0])), port))
        except (OSError, UnicodeError):
            pass
    return addresses
