// A support agent on the official `@anthropic-ai/sdk` npm package, as its README writes one: the Messages API
// with a tool, each tool_use run and its tool_result sent back until the model answers. `file_ticket` has a real
// side effect: a line appended to $RW_OUTBOX/tickets.txt. The base URL comes from ANTHROPIC_BASE_URL (the SDK
// reads it). AGENT_SYSTEM changes the system prompt.
import { appendFileSync } from "node:fs";
import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic({ maxRetries: 0, defaultHeaders: { "x-otel-replay-run": "ts-claude-desk" } });
const tools = [
  {
    name: "file_ticket",
    description: "File a support ticket about an order.",
    input_schema: {
      type: "object",
      properties: { order_id: { type: "string" }, note: { type: "string" } },
      required: ["order_id", "note"],
    },
  },
];

function fileTicket({ order_id, note }) {
  appendFileSync(`${process.env.RW_OUTBOX}/tickets.txt`, `${order_id}: ${note}\n`);
  return `ticket filed for ${order_id}`;
}

const messages = [{ role: "user", content: process.argv[2] ?? "order A-17 arrived damaged" }];
const system = process.env.AGENT_SYSTEM ?? "You are a support agent.";
for (;;) {
  const reply = await client.messages.create({ model: "claude-sonnet-4-5", max_tokens: 512, system, messages, tools });
  const uses = reply.content.filter((block) => block.type === "tool_use");
  if (!uses.length) {
    console.log(reply.content.filter((block) => block.type === "text").map((block) => block.text).join(""));
    break;
  }
  messages.push({ role: "assistant", content: reply.content });
  messages.push({
    role: "user",
    content: uses.map((use) => ({ type: "tool_result", tool_use_id: use.id, content: fileTicket(use.input) })),
  });
}
