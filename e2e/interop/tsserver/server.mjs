// An MCP server written with the official TypeScript SDK, as most public
// MCP servers are, for e2e/interop_test.go. It listens on 127.0.0.1:$PORT:
//   /mcp        stateful (legacy era): a session per initialize; a request
//               with a session id it does not know gets 404, as the spec says
//   /stateless  sessionIdGenerator: undefined, a server per request
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { completable } from "@modelcontextprotocol/sdk/server/completable.js";
import { z } from "zod";

function newServer(kind) {
  const server = new McpServer({ name: `ts-${kind}`, version: "1.0.0" }, { instructions: `The ${kind} TypeScript SDK server.` });
  const text = (t) => ({ content: [{ type: "text", text: t }] });
  server.registerTool("echo", { description: "Echoes its message.", inputSchema: { message: z.string() } },
    async ({ message }) => text(`${kind}:${message}`));
  server.registerTool("add", {
    description: "Adds two numbers.",
    inputSchema: { a: z.number(), b: z.number() },
    outputSchema: { sum: z.number() },
  }, async ({ a, b }) => ({ ...text(String(a + b)), structuredContent: { sum: a + b } }));
  server.registerTool("progress", { description: "Reports progress three times, then answers.", inputSchema: {} },
    async (_args, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= 3; i++) {
        if (token !== undefined) {
          await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: i, total: 3, message: `step ${i}` } });
        }
      }
      return text(`${kind}:done`);
    });
  server.registerTool("fail", { description: "Throws.", inputSchema: {} }, async () => {
    throw new Error(`${kind} tool failed on purpose`);
  });
  server.registerResource("readme", `${kind}://readme`, { mimeType: "text/plain" },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: `${kind} readme` }] }));
  server.registerResource("item", new ResourceTemplate(`${kind}://items/{id}`, {
    list: undefined,
    complete: { id: (value) => ["alpha", "beta", "gamma"].filter((v) => v.startsWith(value)) },
  }), { mimeType: "text/plain" }, async (uri, { id }) => {
    if (id === "missing") {
      throw new Error(`no item ${id}`);
    }
    return { contents: [{ uri: uri.href, mimeType: "text/plain", text: `${kind} item ${id}` }] };
  });
  server.registerPrompt("greet", {
    description: "Greets someone.",
    argsSchema: { name: completable(z.string(), (value) => ["alice", "alfred", "bob"].filter((v) => v.startsWith(value))) },
  }, ({ name }) => ({ messages: [{ role: "user", content: { type: "text", text: `${kind} says hello to ${name}` } }] }));
  return server;
}

const sessions = new Map();

async function stateful(req, res) {
  const id = req.headers["mcp-session-id"];
  if (id) {
    const transport = sessions.get(id);
    if (!transport) {
      res.writeHead(404, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
      return;
    }
    await transport.handleRequest(req, res);
    return;
  }
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (sid) => sessions.set(sid, transport),
  });
  transport.onclose = () => sessions.delete(transport.sessionId);
  await newServer("stateful").connect(transport);
  await transport.handleRequest(req, res);
}

async function stateless(req, res) {
  const server = newServer("stateless");
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
}

const port = Number(process.env.PORT);
if (!port) {
  console.error("server.mjs: set PORT");
  process.exit(2);
}
createServer((req, res) => {
  const path = new URL(req.url, "http://127.0.0.1").pathname;
  const handle = path === "/mcp" ? stateful : path === "/stateless" ? stateless : null;
  if (!handle) {
    res.writeHead(404).end();
    return;
  }
  handle(req, res).catch((err) => {
    console.error(err);
    if (!res.headersSent) {
      res.writeHead(500, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32603, message: "Internal server error" }, id: null }));
    }
  });
}).listen(port, "127.0.0.1", () => console.error(`ts server listening on 127.0.0.1:${port}`));
