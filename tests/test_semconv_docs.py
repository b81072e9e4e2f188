"""docs/semconv.md and otel_replay/semconv.py describe the same convention.

``semconv.py`` is the single source of names; the document is what users read. These tests fail when a name
is added to the code without a row in the document, when the document describes a key the code does not
have, when an enum value is missing from its section, when a documented type disagrees with the constant's
docstring, or when a constant has no docstring.

``semconv`` is loaded from its file so these tests do not depend on the rest of the package importing.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from enum import Enum
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SEMCONV_PATH = ROOT / "otel_replay" / "semconv.py"
DOC_PATH = ROOT / "docs" / "semconv.md"

TYPES = ("string[]", "string", "int", "double", "boolean")
"""Attribute types of the convention; a typed constant's docstring starts with one of them."""

ENUMS = ("RunKind", "StepKind", "SnapshotKind", "Risk", "ApprovalStatus", "ReplayMode")

_NAME_VALUE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)*\.?")
"""Shape of an attribute key, event name or span-name prefix (``SCHEMA_VERSION = "1.0"`` is not one)."""

_KEY_TOKEN = re.compile(r"otel_replay\.[a-z0-9_.]*[a-z0-9_](?![:\w.])")
"""An ``otel_replay.*`` key in text; ``module:qualname`` entrypoints (``otel_replay.demo.agent:f``) are not keys."""


def _load_semconv() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_semconv_under_test", SEMCONV_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclass / enum machinery may look the module up
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


SEMCONV = _load_semconv()
DOC = DOC_PATH.read_text(encoding="utf-8")


def _module_docstrings() -> dict[str, str | None]:
    """UPPER_CASE module-level constant → the string literal right after its assignment (None if missing)."""
    tree = ast.parse(SEMCONV_PATH.read_text(encoding="utf-8"))
    found: dict[str, str | None] = {}
    body = tree.body
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        else:
            continue
        nxt = body[i + 1] if i + 1 < len(body) else None
        doc = (
            nxt.value.value
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)
            else None
        )
        for name in names:
            if name.isupper():
                found[name] = doc
    return found


DOCSTRINGS = _module_docstrings()

NAME_CONSTANTS: dict[str, str] = {
    name: value
    for name, value in vars(SEMCONV).items()
    if name.isupper() and isinstance(value, str) and _NAME_VALUE.fullmatch(value)
}
"""Every constant that names something: attribute keys, event names, span-name prefixes."""


def _declared_type(doc: str | None) -> str | None:
    if not doc:
        return None
    for type_name in TYPES:
        if doc.startswith((type_name + ".", type_name + ",")):
            return type_name
    return None


ATTRIBUTE_KEYS: dict[str, str] = {
    value: declared
    for name, value in NAME_CONSTANTS.items()
    if (declared := _declared_type(DOCSTRINGS.get(name))) is not None
}
"""Attribute key → declared type (constants whose docstring starts with a type)."""

ENUM_CLASSES: dict[str, type[Enum]] = {name: getattr(SEMCONV, name) for name in ENUMS}


_FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```", flags=re.DOTALL | re.MULTILINE)


def _without_fences(text: str) -> str:
    return re.sub(_FENCE, "", text)


def _fenced_blocks(text: str) -> list[str]:
    return _FENCE.findall(text)


def _inline_code(text: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", _without_fences(text)))


ATTRIBUTE_HEADER = ["key", "type", "meaning", "example"]


def _attribute_rows(text: str) -> list[list[str]]:
    """Cells of every row of every ``| key | type | meaning | example |`` table of the document."""
    rows: list[list[str]] = []
    header: list[str] | None = None
    for line in _without_fences(text).splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif header == ATTRIBUTE_HEADER and not set(line) <= set("|-: "):
            rows.append(cells)
    return rows


def _section(text: str, heading: str) -> str:
    """Body under the markdown heading whose text is exactly ``heading``, up to the next heading."""
    match = re.search(rf"^#+ {re.escape(heading)}[ \t]*$", text, flags=re.MULTILINE)
    assert match, f"docs/semconv.md has no section headed {heading!r}"
    rest = text[match.end() :]
    nxt = re.search(r"^#+ ", rest, flags=re.MULTILINE)
    return rest[: nxt.start()] if nxt else rest


INLINE = _inline_code(DOC)
ROWS = _attribute_rows(DOC)


def _row_key(cells: list[str]) -> str | None:
    match = re.fullmatch(r"`([^`]+)`", cells[0])
    return match.group(1) if match else None


ROWS_BY_KEY: dict[str, list[list[str]]] = {}
for _cells in ROWS:
    ROWS_BY_KEY.setdefault(_row_key(_cells) or _cells[0], []).append(_cells)


# ------------------------------------------------------------------------------------------- the code


def test_the_constants_were_found() -> None:
    # Guards the tests below against passing vacuously (a broken filter would find nothing).
    assert len(ATTRIBUTE_KEYS) > 50
    assert {"invoke_agent", "execute_tool", "chat", "retrieval", "exception"} <= set(NAME_CONSTANTS.values())
    assert SEMCONV.RUN_ID in ATTRIBUTE_KEYS and SEMCONV.SNAPSHOT_EVENT_PREFIX in NAME_CONSTANTS.values()


def test_every_constant_has_a_docstring() -> None:
    missing = sorted(name for name, doc in DOCSTRINGS.items() if not (doc and doc.strip()))
    assert not missing, f"constants without a docstring in semconv.py: {missing}"
    for name in ENUMS:
        assert (ENUM_CLASSES[name].__doc__ or "").strip(), f"enum {name} has no docstring"


def test_every_attribute_constant_declares_a_known_type() -> None:
    """A constant that is not an event name or span-name prefix must start its docstring with a type."""
    untyped = sorted(
        name
        for name, value in NAME_CONSTANTS.items()
        if value not in ATTRIBUTE_KEYS
        and not (DOCSTRINGS.get(name) or "").startswith(
            ("Event name", "Span name", "Prefix of", "Instrumentation scope")
        )
    )
    assert not untyped, f"constants whose docstring gives neither a type nor 'Event name'/'Span name': {untyped}"


# ---------------------------------------------------------------------------------- code → document


def test_every_name_constant_is_documented_in_backticks() -> None:
    missing = sorted(f"{name} = {value!r}" for name, value in NAME_CONSTANTS.items() if value not in INLINE)
    assert not missing, f"names in semconv.py that docs/semconv.md never shows in backticks: {missing}"


def test_every_attribute_key_has_exactly_one_table_row_with_its_type() -> None:
    missing = sorted(key for key in ATTRIBUTE_KEYS if key not in ROWS_BY_KEY)
    assert not missing, f"attribute keys without a `| key | type | meaning | example |` row: {missing}"
    wrong = []
    for key, declared in ATTRIBUTE_KEYS.items():
        rows = ROWS_BY_KEY[key]
        assert len(rows) == 1, f"{key} has {len(rows)} rows; each key belongs to exactly one table"
        cells = rows[0]
        assert len(cells) == 4, f"row of {key} should have 4 cells (key, type, meaning, example): {cells}"
        if cells[1] != declared:
            wrong.append(f"{key}: doc says {cells[1]!r}, semconv.py says {declared!r}")
        assert cells[2] and cells[3] and cells[3] != "``", f"row of {key} has an empty meaning or example"
    assert not wrong, "documented types disagree with semconv.py: " + "; ".join(wrong)


def test_every_enum_value_is_documented_in_its_section() -> None:
    for name, enum_class in ENUM_CLASSES.items():
        section = _section(DOC, name)
        shown = _inline_code(section)
        missing = [member.value for member in enum_class if member.value not in shown]
        assert not missing, f"{name} values missing from its section of docs/semconv.md: {missing}"


def test_every_snapshot_kind_has_its_event_name_and_payload_section() -> None:
    for kind in ENUM_CLASSES["SnapshotKind"]:
        event = SEMCONV.snapshot_event_name(kind)
        assert event in INLINE, f"snapshot event {event} is not documented"
        section = _section(DOC, f"`{kind.value}`")
        assert "```json" in section, f"payload section of {kind.value} has no JSON example"


def test_schema_version_is_documented() -> None:
    assert SEMCONV.SCHEMA_VERSION in INLINE
    assert f"SCHEMA_MAJOR = {SEMCONV.SCHEMA_MAJOR}" in DOC


# ---------------------------------------------------------------------------------- document → code


def _known_names() -> set[str]:
    known = set(NAME_CONSTANTS.values())
    known |= {SEMCONV.snapshot_event_name(kind) for kind in ENUM_CLASSES["SnapshotKind"]}
    return known


def test_every_documented_otel_replay_key_exists_in_the_code() -> None:
    known = _known_names()
    tokens: set[str] = set()
    for code in INLINE:
        tokens.update(_KEY_TOKEN.findall(code))
    for block in _fenced_blocks(DOC):  # JSON / SQL examples quote keys too
        tokens.update(_KEY_TOKEN.findall(block))
    # A placeholder such as `otel_replay.snapshot.<kind>` leaves its literal prefix, which must be a known one.
    prefixes = {t for t in tokens if t + "." in known or any(k.startswith(t + ".") for k in known)}
    unknown = sorted(t for t in tokens if t not in known and t not in prefixes)
    assert not unknown, f"docs/semconv.md documents otel_replay keys that semconv.py lacks: {unknown}"


def test_every_attribute_row_names_a_key_of_the_code_with_a_convention_type() -> None:
    """Each row of an attribute table (``otel_replay.*``, ``gen_ai.*``, ``exception.*`` keys alike)."""
    assert ROWS, "no `| key | type | meaning | example |` tables found in docs/semconv.md"
    unknown = sorted(_row_key(cells) or cells[0] for cells in ROWS if _row_key(cells) not in ATTRIBUTE_KEYS)
    assert not unknown, f"attribute rows for keys semconv.py does not define: {unknown}"
    bad_types = sorted(f"{cells[0]}: {cells[1]}" for cells in ROWS if len(cells) < 2 or cells[1] not in TYPES)
    assert not bad_types, f"types outside {TYPES}: {bad_types}"
