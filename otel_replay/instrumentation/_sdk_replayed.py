"""A recorded SDK answer revived as what the SDK returns: raw responses and streams with no HTTP behind them.

:class:`ReplayedRawResponse` / :class:`ReplayedRequest` stand in for a ``with_raw_response`` call's exchange,
:class:`ReplayedResponse` for a replayed stream's HTTP response, and the stream mixins yield recorded chunk
objects in order (mixed into the SDK's own ``Stream`` classes so ``isinstance`` holds). ``register_models``
registers an SDK's response models so a replay rebuilds them. Part of :mod:`otel_replay.instrumentation._sdk`,
which re-exports it.

It must never send a request, import an SDK, or end a replayed step twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._sdk_api import SdkApi, log


class ReplayedRequest:
    """Stands in for the HTTP request behind a replayed raw response (none was sent)."""

    method = "POST"

    def __init__(self, url: str) -> None:
        self.url = url
        self.headers: dict[str, str] = {}
        self.content = b""


class ReplayedRawResponse:
    """Stands in for the raw response (``with_raw_response``) of a call answered from the recording.

    ``parse()`` returns the SDK object rebuilt from the recording (the same object on every call; a replayed
    stream for a streamed call); ``status_code`` is 200; ``headers`` are empty (response headers are not
    recorded: they hold request ids, dates and rate-limit counters that change with every call);
    ``http_request`` names the API path; ``content`` / ``text`` / ``json()`` are the recorded response body as
    JSON (empty for a stream). ``http_response`` is the object itself, so code reaching for the HTTP
    response finds the same fields."""

    status_code = 200
    http_version = "HTTP/1.1"
    retries_taken = 0
    is_closed = True
    request_id = None

    def __init__(self, parsed: Any, body: Any, api: SdkApi) -> None:
        import datetime

        self._parsed = parsed
        self._body = body
        self.headers: dict[str, str] = {}
        self.http_request = ReplayedRequest(api.path)
        self.url = api.path
        self.method = "POST"
        self.elapsed = datetime.timedelta(0)

    @property
    def http_response(self) -> ReplayedRawResponse:
        """This object (no HTTP response exists)."""
        return self

    def parse(self, *, to: Any = None) -> Any:
        """The recorded answer as the SDK object (``to=dict``: the recorded JSON)."""
        if to is None:
            return self._parsed
        if to is dict and isinstance(self._body, dict):
            return dict(self._body)
        raise TypeError(f"a replayed raw response parses only to its own type, not {to!r}")

    @property
    def content(self) -> bytes:
        """The recorded response body as JSON bytes (empty for a stream)."""
        return self.text.encode()

    @property
    def text(self) -> str:
        """The recorded response body as JSON text (empty for a stream)."""
        import json

        return "" if self._body is None else json.dumps(self._body)

    def json(self) -> Any:
        """The recorded response body (None for a stream)."""
        return self._body

    def read(self) -> bytes:
        """The recorded response body as JSON bytes."""
        return self.content

    def close(self) -> None:
        """Nothing to close."""


class ReplayedResponse:
    """Stands in for the HTTP response of a replayed stream (none exists): status 200, no headers; closing it
    ends the stream, as closing the real one does."""

    status_code = 200
    headers: Mapping[str, str] = {}
    http_version = "HTTP/1.1"

    def __init__(self, on_close: Callable[[], None]) -> None:
        self._on_close = on_close
        self.is_closed = False

    def close(self) -> None:
        """End the replayed stream."""
        self.is_closed = True
        self._on_close()

    async def aclose(self) -> None:
        """End the replayed stream."""
        self.close()


class ReplayedItems:
    """What the sync and async replayed streams share: the recorded items and ending the step once."""

    def __init__(self, items: Iterable[Any], on_done: Callable[[], None]) -> None:
        self._otel_replay_items = iter(list(items))
        self._otel_replay_on_done = on_done
        self._otel_replay_done = False
        self.response = ReplayedResponse(self._otel_replay_finish)

    def _otel_replay_finish(self) -> None:
        if not self._otel_replay_done:
            self._otel_replay_done = True
            self._otel_replay_on_done()


class ReplayStreamMixin(ReplayedItems):
    """A stream that yields recorded chunk objects in order, like the SDK's ``Stream`` (no HTTP behind it).

    Mixed into a subclass of the SDK's own ``Stream`` class (see :func:`replay_stream_class`) so that
    ``isinstance`` checks hold; ``response`` is a :class:`ReplayedResponse`, as no HTTP response exists.
    """

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._otel_replay_items)
        except StopIteration:
            self._otel_replay_finish()
            raise

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """End the replayed stream."""
        self._otel_replay_finish()


class AsyncReplayStreamMixin(ReplayedItems):
    """The async counterpart of :class:`ReplayStreamMixin`."""

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self._otel_replay_items)
        except StopIteration:
            self._otel_replay_finish()
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """End the replayed stream."""
        self._otel_replay_finish()


def register_models(load: Callable[[], Iterable[type]], sdk: str) -> None:
    """Register the SDK's response models that ``load`` imports (the instrumentor calls this when it
    instruments, the SDK being imported then anyway), so a recorded value holding one is rebuilt in a replay
    with ``model_validate``; never raises."""
    from ..revival import register_types

    try:
        register_types(load())
    except Exception:  # noqa: BLE001 - an SDK version without one of the models: replays get plain dicts
        log.warning("otel-replay: could not register the %s response models", sdk, exc_info=True)
