"""Values read from a trace, made ready for the report's templates: text with its redaction markers found,
payloads as pretty-printed JSON tokens, numbers, durations, money and token counts as display strings.

Everything here is data for the templates, never HTML: the templates escape every string (autoescape), so a
value from a trace cannot become markup. Must never decode, restore or look up a redacted value: a marker is
shown as the marker it is.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from .. import semconv
from ..records import stored_int
from ..runs import Run, Step
from ..snapshots import REDACTED_TAG, TRUNCATED_TAG

MAX_PAYLOAD_CHARS: Final = 200_000
"""Characters of one snapshot shown in a report; the rest is left out with a note (``show --json`` has all)."""

_INLINE_MARKER: Final = re.compile(r"\[REDACTED:[A-Za-z0-9_.\-]+(?::(?:hmac-sha256:[0-9a-f]{16}|error))?\]")
"""The inline form of a redaction (``[REDACTED:<rule>:<fingerprint>]``, ``[REDACTED:error]``) in a string."""

_REDACTED_TITLE: Final = (
    "Redacted when recorded: a secret was replaced by a keyed fingerprint{where}. The "
    "original value was never stored and cannot be shown. Equal fingerprints mean equal "
    "secrets on this installation."
)
_TRUNCATED_TITLE: Final = "Truncated when recorded: the payload was larger than the snapshot size cap."


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of text; with a ``title`` it is an inline redaction marker (shown marked, the title explaining)."""

    text: str
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Token:
    """One piece of a pretty-printed payload.

    ``cls`` None: punctuation and layout. ``k`` / ``s`` / ``n``: a key, a string, another scalar; a key or a
    string holding inline markers has ``pieces``. ``redacted`` / ``truncated``: a marker object, with ``title``.
    ``cut``: the note that the rest of the payload is not shown.
    """

    text: str = ""
    cls: str | None = None
    title: str | None = None
    pieces: tuple[Piece, ...] = ()


def pieces(text: str) -> tuple[Piece, ...]:
    """``text`` split at its inline redaction markers (each a :class:`Piece` with a title)."""
    if "[REDACTED:" not in text:
        return (Piece(text),)
    out: list[Piece] = []
    pos = 0
    for m in _INLINE_MARKER.finditer(text):
        if m.start() > pos:
            out.append(Piece(text[pos : m.start()]))
        inner = m.group(0)[len("[REDACTED:") : -1]
        rule, _, fingerprint = inner.partition(":")
        where = f" by the {rule} rule" if fingerprint else ""
        out.append(Piece(m.group(0), _REDACTED_TITLE.format(where=where)))
        pos = m.end()
    if pos < len(text) or not out:
        out.append(Piece(text[pos:]))
    return tuple(out)


def _is_redaction(value: dict[str, Any]) -> bool:
    return REDACTED_TAG in value and len(value) <= 2 and set(value) <= {REDACTED_TAG, "scope"}


def marker_title(scope: Any) -> str:
    """The explanation shown over a redaction marker object found at ``scope``."""
    return _REDACTED_TITLE.format(where=f" (found at {scope})" if scope else "")


class _JsonTokens:
    """Pretty-printed JSON as tokens: redaction and truncation markers kept apart, cut at a budget."""

    def __init__(self, budget: int) -> None:
        self.out: list[Token] = []
        self.plain: list[str] = []
        self.left = budget
        self.cut = False

    def tokens(self, value: Any) -> tuple[Token, ...]:
        self._value(value, 0)
        if self.cut:
            self._plain("\n")
            self._token(Token(cls="cut"))
        self._flush()
        return tuple(self.out)

    def _flush(self) -> None:
        if self.plain:
            self.out.append(Token("".join(self.plain)))
            self.plain.clear()

    def _plain(self, text: str) -> None:
        self.plain.append(text)

    def _token(self, token: Token) -> None:
        self._flush()
        self.out.append(token)

    def _spend(self, cost: int) -> bool:
        if self.cut:
            return False
        if cost > self.left:
            self.cut = True
            return False
        self.left -= cost
        return True

    def _text(self, cls: str, text: str) -> None:
        found = pieces(text)
        if len(found) == 1 and found[0].title is None:
            self._token(Token(text, cls))
        else:
            self._token(Token(cls=cls, pieces=found))

    def _value(self, value: Any, depth: int) -> None:  # noqa: C901 - one flat dispatch over JSON value kinds
        if self.cut:
            return
        pad = "  " * (depth + 1)
        if isinstance(value, dict):
            if _is_redaction(value):
                if self._spend(40):
                    self._token(
                        Token(f"redacted · {value.get(REDACTED_TAG)}", "redacted", marker_title(value.get("scope")))
                    )
                return
            if value.get(TRUNCATED_TAG) is True:
                text = json.dumps(value, ensure_ascii=False)
                if self._spend(len(text)):
                    self._token(Token(text, "truncated", _TRUNCATED_TITLE))
                return
            if not value:
                if self._spend(2):
                    self._plain("{}")
                return
            if self._spend(1):
                self._plain("{")
            for i, (key, item) in enumerate(value.items()):
                key_text = json.dumps(str(key), ensure_ascii=False)
                if not self._spend(len(key_text) + 4):
                    return
                self._plain(f"\n{pad}")
                self._text("k", key_text)
                self._plain(": ")
                self._value(item, depth + 1)
                if i < len(value) - 1 and self._spend(1):
                    self._plain(",")
            if self._spend(depth * 2 + 2):
                self._plain(f"\n{'  ' * depth}}}")
        elif isinstance(value, list):
            if not value:
                if self._spend(2):
                    self._plain("[]")
                return
            if self._spend(1):
                self._plain("[")
            for i, item in enumerate(value):
                if not self._spend(len(pad) + 1):
                    return
                self._plain(f"\n{pad}")
                self._value(item, depth + 1)
                if i < len(value) - 1 and self._spend(1):
                    self._plain(",")
            if self._spend(depth * 2 + 2):
                self._plain(f"\n{'  ' * depth}]")
        elif isinstance(value, str):
            text = json.dumps(value, ensure_ascii=False)
            if self._spend(len(text)):
                self._text("s", text)
        else:
            try:
                text = json.dumps(value, ensure_ascii=False)
            except (TypeError, ValueError):
                text = repr(value)
            if self._spend(len(text)):
                self._token(Token(text, "n"))


def json_tokens(value: Any, budget: int = MAX_PAYLOAD_CHARS) -> tuple[Token, ...]:
    """``value`` pretty-printed (two-space indent) as tokens, at most about ``budget`` characters of it."""
    return _JsonTokens(budget).tokens(value)


def preview(value: Any, limit: int = 110) -> tuple[Piece, ...]:
    """One line of a payload for a summary (markers shown by their JSON text, inline markers marked)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        text = repr(value)
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return pieces(text)


def contains_redaction(value: Any) -> bool:
    """Whether ``value`` holds a redaction marker object or an inline marker anywhere."""
    if isinstance(value, dict):
        return _is_redaction(value) or any(contains_redaction(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_redaction(v) for v in value)
    return isinstance(value, str) and _INLINE_MARKER.search(value) is not None


# ------------------------------------------------------------------------------------------------ numbers


def _float(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def ms(value: float | None) -> str:
    """A duration in milliseconds for people: ``0.250 ms``, ``12.5 ms``, ``—`` when unknown."""
    if value is None:
        return "—"
    return f"{value:,.3f} ms" if abs(value) < 1 else f"{value:,.1f} ms"


def usd(value: float | None) -> str:
    """A cost in US dollars for people: ``$0.00125``, ``$0``, ``—`` when unknown."""
    if value is None:
        return "—"
    if value == 0:
        return "$0"
    text = f"{value:,.6f}".rstrip("0").rstrip(".")
    return f"${text}" if text not in ("0", "-0") else f"${value:.2e}"


def tokens(tokens_in: int | None, tokens_out: int | None) -> str:
    """Input / output tokens for people: ``1,200 / 30``, ``—`` when neither is known."""
    if tokens_in is None and tokens_out is None:
        return "—"
    return f"{'—' if tokens_in is None else f'{tokens_in:,}'} / {'—' if tokens_out is None else f'{tokens_out:,}'}"


def step_cost(step: Step) -> float | None:
    """The step's cost in US dollars, when it reported one."""
    return _float(step.attributes.get(semconv.MODEL_COST_USD))


def step_tokens(step: Step) -> tuple[int | None, int | None]:
    """The step's input and output tokens, when it reported them."""
    return (
        stored_int(step.attributes.get(semconv.GEN_AI_USAGE_INPUT_TOKENS)),
        stored_int(step.attributes.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS)),
    )


def run_usage(run: Run) -> tuple[float | None, int | None, int | None]:
    """Cost and input / output tokens of a run: the root's totals, else the sum over its model steps."""

    def summed(values: Iterable[Any]) -> Any:
        present = [v for v in values if v is not None]
        return sum(present) if present else None

    cost = _float(run.attributes.get(semconv.RUN_COST_USD))
    tokens_in = stored_int(run.attributes.get(semconv.RUN_INPUT_TOKENS))
    tokens_out = stored_int(run.attributes.get(semconv.RUN_OUTPUT_TOKENS))
    models = [s for s in run.steps if s.kind == semconv.StepKind.MODEL.value]
    if cost is None:
        cost = summed(step_cost(s) for s in models)
    if tokens_in is None:
        tokens_in = summed(step_tokens(s)[0] for s in models)
    if tokens_out is None:
        tokens_out = summed(step_tokens(s)[1] for s in models)
    return cost, tokens_in, tokens_out


def when(moment: _dt.datetime) -> str:
    """A moment in UTC to the millisecond: ``2026-01-02 03:04:05.678 UTC``."""
    return moment.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
