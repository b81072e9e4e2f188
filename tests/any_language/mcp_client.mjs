// An MCP client on the official `@modelcontextprotocol/sdk` package: it starts the stdio server given as a JSON
// array in MCP_SERVER (the server itself, or `otel-replay mcp-proxy ... -- node mcp_server.mjs`, or
// `otel-replay mcp-serve TRACE_ID`), lists the tools and calls them as an agent's tool loop would. NOTE changes
// the ticket's note, as a changed agent would.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = JSON.parse(process.env.MCP_SERVER);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "ts-support-client", version: "1.0.0" });
await client.connect(transport);

const { tools } = await client.listTools();
console.log(`tools: ${tools.map((t) => t.name).join(", ")}`);
const text = (result) => result.content.map((c) => c.text).join("");
const order = await client.callTool({ name: "lookup_order", arguments: { order_id: "A-17" } });
console.log(text(order));
try {
  const ticket = await client.callTool({
    name: "file_ticket",
    arguments: { order_id: "A-17", note: process.env.NOTE ?? "arrived damaged" },
  });
  console.log(ticket.isError ? `tool error: ${text(ticket)}` : text(ticket));
} catch (error) {
  console.log(`mcp error: ${error.message}`);
  process.exitCode = 1;
}
await client.close();
