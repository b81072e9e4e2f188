"""Import-linter contracts of the project's own (loaded by ``lint-imports`` through ``contract_types`` in
``pyproject.toml``; the repository root is on its path).

``private_names``: no module of the checked packages uses another module's private name (``_name``, not a
dunder) — neither ``from pkg.mod import _name`` nor ``mod._name`` on a module it imported. A private module
(``pkg/_sdk.py``) imported as a module is fine: whether a module may be imported at all is what the layer
contracts say. What one module shares with another gets a public name in the module that owns it.

``scope = "package"`` (the default) keeps Python's convention that a private name is private to its package:
the modules of one package (``pkg/a.py``, ``pkg/b.py``, ``pkg/__init__.py``) may share one, a module of any
other package (a sub-package included) may not. ``scope = "module"`` forbids every use outside the module.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck, InvalidContractOptions


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass(frozen=True)
class _Use:
    importer: str
    line: int
    owner: str
    name: str


def _files(package: str) -> dict[str, Path]:
    """Module name -> source file, for a package and everything under it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{package!r} is not an importable package")
    found: dict[str, Path] = {}
    for location in spec.submodule_search_locations:
        root = Path(location)
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _absolute(importer: str, is_package: bool, level: int, module: str | None) -> str:
    if not level:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _package(module: str, files: dict[str, Path]) -> str:
    path = files.get(module)
    return module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]


def private_uses(module: str, path: Path, modules: set[str], roots: tuple[str, ...]) -> list[_Use]:
    """The private names of other modules of ``roots`` that ``module`` (its source at ``path``) uses."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    bound: dict[str, str] = {}  # a local name -> the project module it is bound to
    uses: list[_Use] = []

    def ours(name: str) -> bool:
        return any(name == root or name.startswith(root + ".") for root in roots)

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            owner = _absolute(module, is_package, node.level, node.module)
            if not ours(owner):
                continue
            for alias in node.names:
                full = f"{owner}.{alias.name}"
                if full in modules:
                    bound[alias.asname or alias.name] = full
                elif _private(alias.name) and owner != module:
                    uses.append(_Use(module, node.lineno, owner, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if ours(alias.name) and alias.name in modules:
                    bound[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        dotted: list[str] = [node.attr]
        value: ast.expr = node.value
        while isinstance(value, ast.Attribute):
            dotted.append(value.attr)
            value = value.value
        if not isinstance(value, ast.Name) or value.id not in bound:
            continue
        owner = ".".join([bound[value.id], *reversed(dotted[1:])])
        if owner in modules and owner != module and f"{owner}.{node.attr}" not in modules:
            uses.append(_Use(module, node.lineno, owner, node.attr))
    return uses


class PrivateNameContract(Contract):
    """No module of ``containers`` uses a private name of another module of ``containers``.

    Configuration options:

        - containers: the packages whose modules are checked, and whose private names are protected.
        - scope:      ``package`` (default: the modules of the owner's package may use its private names) or
                      ``module`` (no other module may).
        - allow:      ``importer -> owner._name`` entries let through (optional; each one wants a reason next
                      to it in the configuration).
    """

    type_name = "private_names"

    containers = fields.ListField(subfield=fields.StringField())
    scope = fields.StringField(required=False, default="package")
    allow = fields.ListField(subfield=fields.StringField(), required=False, default=[])

    def validate(self) -> None:
        if self.scope not in ("package", "module"):  # type: ignore[attr-defined]
            raise InvalidContractOptions({"scope": "Use 'package' or 'module'."})

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        roots = tuple(str(c) for c in self.containers)  # type: ignore[attr-defined]
        allowed = {str(a).replace(" ", "") for a in self.allow}  # type: ignore[attr-defined]
        files: dict[str, Path] = {}
        for root in roots:
            files.update(_files(root))
        modules = set(files) | {m for m in graph.modules if m.startswith(roots)}
        by_package = self.scope == "package"  # type: ignore[attr-defined]
        found = []
        for module, path in sorted(files.items()):
            for use in private_uses(module, path, modules, roots):
                if by_package and _package(use.importer, files) == _package(use.owner, files):
                    continue
                if f"{use.importer}->{use.owner}.{use.name}" not in allowed:
                    found.append(use)
        return ContractCheck(
            kept=not found,
            metadata={"uses": [(u.importer, u.line, u.owner, u.name) for u in found]},
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        output.print_error("Modules use private names of other modules:", bold=False)
        output.new_line()
        for importer, line, owner, name in check.metadata["uses"]:
            output.print_error(f"- {importer} (l.{line}) uses {owner}.{name}", bold=False)
        output.new_line()
        output.print_error("Give the name a public spelling in the module that owns it (or move it there).", bold=False)
