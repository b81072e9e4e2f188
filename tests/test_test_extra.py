"""Every package of the ``[test]`` extra imports: the suite imports them plainly (a missing one fails its modules,
``tests/allowed_skips.py`` lists none of them), and this says which one is missing or broken, by name."""

from __future__ import annotations

import importlib
import importlib.metadata
import re

import pytest

MODULES = {
    "pytest": "pytest",
    "hypothesis": "hypothesis",
    "pyyaml": "yaml",
    "openai": "openai",
    "anthropic": "anthropic",
    "langchain-core": "langchain_core",
    "langgraph": "langgraph.prebuilt",
    "langchain-openai": "langchain_openai",
    "langchain-classic": "langchain_classic.agents",
    "langgraph-supervisor": "langgraph_supervisor",
    "langgraph-swarm": "langgraph_swarm",
    "openai-agents": "agents",
    "smolagents": "smolagents",
    "llama-index-core": "llama_index.core",
    "llama-index-llms-openai": "llama_index.llms.openai",
    "pydantic-ai-slim": "pydantic_ai",
    "mcp": "mcp.server.mcpserver",
    "wrapt": "wrapt",
    "opentelemetry-instrumentation": "opentelemetry.instrumentation",
    "opentelemetry-instrumentation-openai-v2": "opentelemetry.instrumentation.openai_v2",
    "opentelemetry-util-genai": "opentelemetry.util.genai.handler",
    "openinference-instrumentation-openai": "openinference.instrumentation.openai",
    "pytest-xdist": "xdist",
    "playwright": "playwright.sync_api",
    "ray": "ray",
    "ruff": "ruff",
    "mypy": "mypy",
    "import-linter": "importlinter",
}
"""Each package of the extra and the module the suite imports from it."""


def _test_extra() -> list[str]:
    """The names of the ``[test]`` extra's packages, as the installed otel-replay declares them."""
    requires = importlib.metadata.requires("otel-replay") or []
    return [re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requires if 'extra == "test"' in r]


def test_every_package_of_the_test_extra_is_listed_here() -> None:
    assert sorted(_test_extra()) == sorted(MODULES)


@pytest.mark.parametrize("package", sorted(MODULES))
def test_the_package_imports(package: str) -> None:
    module = importlib.import_module(MODULES[package])
    assert module.__name__ == MODULES[package]
    assert importlib.metadata.version(package)
