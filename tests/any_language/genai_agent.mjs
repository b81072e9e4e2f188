// The support agents of openai_agent.mjs and anthropic_agent.mjs traced the OpenTelemetry way instead of
// through otel-replay proxy: OpenLLMetry's instrumentations for Node (`@traceloop/instrumentation-openai`,
// `@traceloop/instrumentation-anthropic`) record each model call as a GenAI-convention span with its content
// (`gen_ai.input.messages`, `gen_ai.output.messages`), the agent's own spans are `invoke_agent` and
// `execute_tool` spans, and the OpenTelemetry JS SDK exports them over OTLP/HTTP to
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (a Collector, which writes them into ClickHouse). PROVIDER=anthropic runs
// the Anthropic agent (default: OpenAI); STREAM=1 streams the OpenAI calls; AGENT_SYSTEM changes the system
// prompt.
import { appendFileSync } from "node:fs";
import { SpanStatusCode, trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import * as anthropicSdk from "@anthropic-ai/sdk";
import { AnthropicInstrumentation } from "@traceloop/instrumentation-anthropic";
import { OpenAIInstrumentation } from "@traceloop/instrumentation-openai";
import OpenAI from "openai";

const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
provider.register();
// An ES module import is not hooked: manuallyInstrument is the packages' documented way. The Anthropic one also
// wraps the legacy Completions resource, which @anthropic-ai/sdk 1.x no longer has: a stand-in class for it.
const { Messages, Beta } = anthropicSdk.Anthropic;
const anthropicModule = { ...anthropicSdk, Anthropic: { Completions: class {}, Messages, Beta } };
for (const [instrumentation, module] of [
  [new OpenAIInstrumentation({ traceContent: true }), OpenAI],
  [new AnthropicInstrumentation({ traceContent: true }), anthropicModule],
]) {
  instrumentation.setTracerProvider(provider);
  instrumentation.manuallyInstrument(module);
}
const tracer = trace.getTracer("support-desk");
const system = process.env.AGENT_SYSTEM ?? "You are a support agent.";

const client = new OpenAI({ maxRetries: 0 });
const tools = [
  {
    type: "function",
    function: {
      name: "file_ticket",
      description: "File a support ticket about an order.",
      parameters: {
        type: "object",
        properties: { order_id: { type: "string" }, note: { type: "string" } },
        required: ["order_id", "note"],
      },
    },
  },
];

function fileTicket(id, name, args) {
  return tracer.startActiveSpan(`execute_tool ${name}`, (span) => {
    span.setAttributes({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": name,
      "gen_ai.tool.call.id": id,
      "gen_ai.tool.call.arguments": JSON.stringify(args),
    });
    const { order_id, note } = args;
    appendFileSync(`${process.env.RW_OUTBOX}/tickets.txt`, `${order_id}: ${note}\n`);
    const result = `ticket filed for ${order_id}`;
    span.setAttribute("gen_ai.tool.call.result", result);
    span.end();
    return result;
  });
}

async function ask(messages) {
  const request = { model: "gpt-4o-mini", messages, tools };
  if (process.env.STREAM !== "1") return (await client.chat.completions.create(request)).choices[0].message;
  const message = { role: "assistant", content: "", tool_calls: [] };
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    const delta = chunk.choices[0]?.delta ?? {};
    message.content += delta.content ?? "";
    for (const call of delta.tool_calls ?? []) {
      const slot = (message.tool_calls[call.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
      slot.id += call.id ?? "";
      slot.function.name += call.function?.name ?? "";
      slot.function.arguments += call.function?.arguments ?? "";
    }
  }
  return message;
}

async function openaiLoop(question) {
  const messages = [
    { role: "system", content: system },
    { role: "user", content: question },
  ];
  for (;;) {
    const message = await ask(messages);
    if (!message.tool_calls?.length) return message.content;
    messages.push(message);
    for (const call of message.tool_calls) {
      const result = fileTicket(call.id, call.function.name, JSON.parse(call.function.arguments));
      messages.push({ role: "tool", tool_call_id: call.id, content: result });
    }
  }
}

async function anthropicLoop(question) {
  const anthropic = new anthropicSdk.Anthropic({ maxRetries: 0 });
  const messages = [{ role: "user", content: question }];
  for (;;) {
    const reply = await anthropic.messages.create({
      model: "claude-sonnet-4-5",
      max_tokens: 512,
      system,
      messages,
      tools: tools.map(({ function: f }) => ({ name: f.name, description: f.description, input_schema: f.parameters })),
    });
    const uses = reply.content.filter((block) => block.type === "tool_use");
    if (!uses.length) return reply.content.filter((block) => block.type === "text").map((b) => b.text).join("");
    messages.push({ role: "assistant", content: reply.content });
    messages.push({
      role: "user",
      content: uses.map((use) => ({
        type: "tool_result",
        tool_use_id: use.id,
        content: fileTicket(use.id, use.name, use.input),
      })),
    });
  }
}

const question = process.argv[2] ?? "order A-17 arrived damaged";
const answer = await tracer.startActiveSpan("invoke_agent support-desk", async (span) => {
  span.setAttributes({ "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-desk" });
  try {
    return await (process.env.PROVIDER === "anthropic" ? anthropicLoop : openaiLoop)(question);
  } catch (error) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
    throw error;
  } finally {
    span.end();
  }
});
console.log(answer);
await provider.shutdown();
