// A support agent on the official `openai` npm package, as its README writes one: chat completions with a
// tool, streamed with the SDK's stream helper, the tool run and its result sent back until the model answers.
// `file_ticket` has a real side effect: a line appended to $RW_OUTBOX/tickets.txt. The base URL comes from
// OPENAI_BASE_URL (the SDK reads it), so pointing the agent at otel-replay proxy or serve changes no code.
// AGENT_SYSTEM changes the system prompt, as a developer would.
import { appendFileSync } from "node:fs";
import OpenAI from "openai";

const client = new OpenAI({ maxRetries: 0, defaultHeaders: { "x-otel-replay-run": "ts-support-desk" } });
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

function fileTicket({ order_id, note }) {
  appendFileSync(`${process.env.RW_OUTBOX}/tickets.txt`, `${order_id}: ${note}\n`);
  return `ticket filed for ${order_id}`;
}

const messages = [
  { role: "system", content: process.env.AGENT_SYSTEM ?? "You are a support agent." },
  { role: "user", content: process.argv[2] ?? "order A-17 arrived damaged" },
];
for (;;) {
  const stream = client.chat.completions.stream({ model: "gpt-4o-mini", messages, tools });
  const message = (await stream.finalChatCompletion()).choices[0].message;
  if (!message.tool_calls?.length) {
    console.log(message.content);
    break;
  }
  messages.push(message);
  for (const call of message.tool_calls) {
    const result = fileTicket(JSON.parse(call.function.arguments));
    messages.push({ role: "tool", tool_call_id: call.id, content: result });
  }
}
