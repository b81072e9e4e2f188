"""Sample agents on the real SDKs, for ``otel-replay demo --sdk openai`` and ``--sdk langgraph``.

Both run offline: the OpenAI agent talks to the local fake server in :mod:`otel_replay.demo.fake_llm`, the
LangGraph agent uses a scripted LangChain chat model. Neither agent's code knows about otel-replay beyond
its ``@orp.agent`` entrypoint: the SDK calls are recorded (and answered during replays) by the instrumentors.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import otel_replay as orp

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam

WEATHER_TOOL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@orp.tool("get_weather", risk="read")
def get_weather(city: str) -> dict[str, Any]:
    """The (scripted) weather service."""
    return {"city": city, "forecast": "sunny", "celsius": 21}


@orp.agent("openai-weather-agent")
def openai_weather_agent(question: str, *, base_url: str) -> str:
    """Answer a weather question with one tool round trip through the OpenAI chat completions API."""
    from openai import OpenAI

    # A placeholder key: the fake server ignores it, and the recorder never stores a key in clear anyway.
    client = OpenAI(base_url=base_url, api_key="sk-demo-" + "0" * 32, max_retries=0)
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": question}]
    first = client.chat.completions.create(model="gpt-demo", messages=messages, tools=[WEATHER_TOOL])
    call = (first.choices[0].message.tool_calls or [])[0]
    if call.type != "function":
        raise RuntimeError(f"the model asked for a {call.type} tool; this agent has only functions")
    result = get_weather(**json.loads(call.function.arguments))
    # the assistant message as its plain JSON (model_dump is typed dict[str, Any], not the message TypedDict)
    messages.append(first.choices[0].message.model_dump(exclude_none=True))  # type: ignore[arg-type]
    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    final = client.chat.completions.create(model="gpt-demo", messages=messages, tools=[WEATHER_TOOL])
    return final.choices[0].message.content or ""


def _weather_graph() -> Any:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool as lc_tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    class ScriptedChatModel(BaseChatModel):
        """A chat model that asks for the weather tool once, then answers with what it returned."""

        @property
        def _llm_type(self) -> str:
            return "scripted-demo"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            usage = {"input_tokens": 9 * len(messages), "output_tokens": 6, "total_tokens": 9 * len(messages) + 6}
            if not any(isinstance(m, ToolMessage) for m in messages):
                message = AIMessage(
                    content="",
                    usage_metadata=usage,
                    tool_calls=[{"name": "lookup_weather", "args": {"city": "Paris"}, "id": "call_1"}],
                )
            else:
                message = AIMessage(content=f"Forecast: {messages[-1].content}", usage_metadata=usage)
            return ChatResult(generations=[ChatGeneration(message=message)])

    @lc_tool
    def lookup_weather(city: str) -> str:
        """Current weather for a city."""
        return f"{city}: sunny, 21 C"

    model = ScriptedChatModel()

    # unannotated on purpose: LangGraph reads annotations at run time, and the state schema is the graph's
    def call_model(state):  # type: ignore[no-untyped-def]
        return {"messages": [model.invoke(state["messages"])]}

    def route(state):  # type: ignore[no-untyped-def]
        return "tools" if state["messages"][-1].tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([lookup_weather]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile()


@orp.agent("langgraph-weather-agent")
def langgraph_weather_agent(question: str) -> str:
    """Answer a weather question with a LangGraph model → tools → model loop."""
    result = _weather_graph().invoke({"messages": [("user", question)]})
    return str(result["messages"][-1].content)
