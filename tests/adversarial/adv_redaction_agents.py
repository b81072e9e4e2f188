"""Agents for ``test_adv_redaction.py``: they plant secrets through the public recording surface.

They live in their own module so a replay (and a ``case run`` in a subprocess, with this folder on
``PYTHONPATH``) can import them again. ``ADV_REDACT_VARIANT=changed`` changes what the case agent passes to
its tool, as an edit of the agent would.
"""

from __future__ import annotations

import os
from typing import Any

import otel_replay as orp

VARIANT_ENV = "ADV_REDACT_VARIANT"
BASE_URL_ENV = "ADV_REDACT_BASE_URL"


# ------------------------------------------------------------------------------------------- keyed hashes


@orp.tool("verify_pin", risk="read")
def verify_pin(padding: str, pin: str) -> dict[str, Any]:
    return {"ok": pin == "0000", "padding": len(padding)}


@orp.retriever("vault_search")
def vault_search(query: str, filters: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": "d1", "content": query, "score": 1.0}]


@orp.model(provider="acme", model="acme-1")
def pin_model(prompt: str, padding: str) -> dict[str, Any]:
    return {"text": "ok", "usage": {"input_tokens": 1, "output_tokens": 1}}


PNG_HEADER = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


@orp.agent("pin-agent")
def pin_agent(padding: str, pin: str, word: str) -> str:
    """The PIN and the password reach hashes only: every payload that holds them is over the size cap (the
    padding comes first, so the stored preview ends before them), and the attachment is binary (its bytes are
    not stored)."""
    orp.attach_file(PNG_HEADER + pin.encode(), name="scan.bin")
    verify_pin(padding, pin)
    verify_pin(padding, word)
    vault_search(pin, {"padding": padding})
    pin_model(word, padding)
    return "checked"


# ------------------------------------------------------------------------------------------- cross-key case


@orp.tool("lookup_account", risk="read")
def lookup_account(account: str, pin_hint: str) -> dict[str, Any]:
    return {"account": account, "balance": 42}


@orp.model(provider="acme", model="acme-1")
def account_llm(prompt: str) -> dict[str, Any]:
    return {"text": f"balance noted: {prompt}", "usage": {"input_tokens": 3, "output_tokens": 2}}


@orp.retriever("policy_search")
def policy_search(query: str) -> list[dict[str, Any]]:
    return [{"id": "p1", "content": f"policy for {query}", "score": 0.9}]


@orp.agent("account-agent")
def account_agent(account: str) -> dict[str, Any]:
    hint = "1234" if os.environ.get(VARIANT_ENV) != "changed" else "9999"
    docs = policy_search(account)
    found = lookup_account(account, hint)
    answer = account_llm(f"{found['account']} has {found['balance']} ({docs[0]['id']})")
    return {"answer": answer["text"]}


# ------------------------------------------------------------------------------------------------ streams


def _openai() -> Any:
    import openai

    return openai.OpenAI(api_key="test-key-not-secret", base_url=os.environ[BASE_URL_ENV] + "/v1", max_retries=0)


def _anthropic() -> Any:
    import anthropic

    return anthropic.Anthropic(api_key="test-key-not-secret", base_url=os.environ[BASE_URL_ENV], max_retries=0)


_WEATHER_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


@orp.agent("stream-openai-chat")
def openai_chat_stream(question: str) -> dict[str, Any]:
    client = _openai()
    text = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(
            model="gpt-fake", messages=[{"role": "user", "content": question}], stream=True
        )
        if c.choices
    )
    arguments = "".join(
        (call.function.arguments or "")
        for c in client.chat.completions.create(
            model="gpt-fake", messages=[{"role": "user", "content": "hi"}], tools=[_WEATHER_TOOL], stream=True
        )
        if c.choices
        for call in (c.choices[0].delta.tool_calls or ())
        if call.function
    )
    return {"text": bool(text), "arguments": bool(arguments)}  # the same in a replay of redacted deltas


@orp.agent("stream-openai-responses")
def openai_responses_stream(question: str) -> dict[str, Any]:
    client = _openai()
    pieces = [
        e.delta
        for e in client.responses.create(model="gpt-fake", input=question, stream=True)
        if e.type == "response.output_text.delta"
    ]
    return {"pieces": len(pieces)}


@orp.agent("stream-anthropic")
def anthropic_stream(question: str) -> dict[str, Any]:
    client = _anthropic()
    with client.messages.stream(
        model="claude-fake", max_tokens=64, messages=[{"role": "user", "content": question}]
    ) as stream:
        text = "".join(stream.text_stream)
    events = list(
        client.messages.create(
            model="claude-fake",
            max_tokens=64,
            stream=True,
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"name": "get_weather", "input_schema": {"type": "object"}}],
        )
    )
    partial = "".join(
        e.delta.partial_json for e in events if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    )
    return {"text": bool(text), "json": bool(partial)}


def _langchain_model() -> Any:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

    class FakeServerChat(BaseChatModel):
        """A LangChain chat model over the real OpenAI SDK and the fake server, streaming its deltas."""

        @property
        def _llm_type(self) -> str:
            return "fake-server-chat"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            text = "".join(c.message.content for c in self._stream(messages))
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

        def _stream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            question = str(messages[-1].content)
            for chunk in _openai().chat.completions.create(
                model="gpt-fake", messages=[{"role": "user", "content": question}], stream=True
            ):
                if chunk.choices and chunk.choices[0].delta.content:
                    yield ChatGenerationChunk(message=AIMessageChunk(content=chunk.choices[0].delta.content))

    return FakeServerChat()


@orp.agent("stream-langchain")
def langchain_stream(question: str) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    pieces = [str(c.content) for c in _langchain_model().stream([HumanMessage(question)])]
    return {"text": bool("".join(pieces))}


# ---------------------------------------------------------------------------------- what the redactor sees


@orp.tool("notify_user", risk="write")
def notify_user(user: str) -> str:
    return "sent"
