// A stdio MCP server on the official `@modelcontextprotocol/sdk` package (the v1 line), as its docs write one:
// `lookup_order` reads, `file_ticket` has a side effect (a line appended to $RW_OUTBOX/tickets.txt) and says so
// in its annotations. Started by the MCP client below, directly or through `otel-replay mcp-proxy`.
import { appendFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "support-desk", version: "1.0.0" });

server.registerTool(
  "lookup_order",
  {
    title: "Look an order up",
    description: "The status of an order.",
    inputSchema: { order_id: z.string() },
    annotations: { readOnlyHint: true },
  },
  async ({ order_id }) => ({ content: [{ type: "text", text: `order ${order_id}: delivered, damaged` }] }),
);

server.registerTool(
  "file_ticket",
  {
    title: "File a ticket",
    description: "File a support ticket about an order.",
    inputSchema: { order_id: z.string(), note: z.string() },
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  },
  async ({ order_id, note }) => {
    appendFileSync(`${process.env.RW_OUTBOX}/tickets.txt`, `${order_id}: ${note}\n`);
    return { content: [{ type: "text", text: `ticket filed for ${order_id}` }] };
  },
);

await server.connect(new StdioServerTransport());
