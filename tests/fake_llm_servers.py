"""The fake OpenAI / Anthropic servers live in the package (the demo uses them too); tests import them here."""

from otel_replay.demo.fake_llm import CREATED, MISSING_MODEL, TOOL_ARGS, TOOL_NAME, FakeLLMServer

__all__ = ["CREATED", "MISSING_MODEL", "TOOL_ARGS", "TOOL_NAME", "FakeLLMServer"]
