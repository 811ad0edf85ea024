// Checks JSON-RPC messages against the official MCP TypeScript SDK's own
// zod schemas, for e2e/validate_test.go.
//
//   node validate.mjs < lines
//
// Each input line is {"dir": "up"|"down", "method": m, "msg": message}: "up"
// is a message toolmesh sent to an MCP server (as a client), "down" one it
// sent to a client (as a server); method names the request a response
// answers. Every message must be a JSON-RPC 2.0 message
// (JSONRPCMessageSchema); a request or notification whose method the SDK
// knows must match the SDK's schema for it (ClientRequestSchema,
// ClientNotificationSchema, ServerRequestSchema, ServerNotificationSchema);
// a result must match the SDK's result schema of its method. Methods the
// SDK does not know (the 2026-07-28 era's server/discover) are checked as
// JSON-RPC only. One output line per input line: "ok", or the schema's
// complaint.
import * as readline from 'node:readline';
import * as t from '@modelcontextprotocol/sdk/types.js';

const results = {
  initialize: t.InitializeResultSchema,
  'tools/list': t.ListToolsResultSchema,
  'tools/call': t.CallToolResultSchema,
  'resources/list': t.ListResourcesResultSchema,
  'resources/templates/list': t.ListResourceTemplatesResultSchema,
  'resources/read': t.ReadResourceResultSchema,
  'prompts/list': t.ListPromptsResultSchema,
  'prompts/get': t.GetPromptResultSchema,
  'completion/complete': t.CompleteResultSchema,
  ping: t.EmptyResultSchema,
};

// methods are the methods a schema union knows, read from the union itself.
const methods = (union) => new Set(union.options.map((o) => o.shape.method.value));
const known = {
  upRequest: [t.ClientRequestSchema, methods(t.ClientRequestSchema)],
  upNotification: [t.ClientNotificationSchema, methods(t.ClientNotificationSchema)],
  downRequest: [t.ServerRequestSchema, methods(t.ServerRequestSchema)],
  downNotification: [t.ServerNotificationSchema, methods(t.ServerNotificationSchema)],
};

const check = (schema, value, what) => {
  const r = schema.safeParse(value);
  return r.success ? null : `${what}: ${r.error.message.replace(/\s+/g, ' ')}`;
};

function validate({ dir, method, msg }) {
  const bad = check(t.JSONRPCMessageSchema, msg, 'JSONRPCMessageSchema');
  if (bad) return bad;
  const side = dir === 'up' ? 'up' : 'down';
  if ('method' in msg) {
    const kind = side + ('id' in msg ? 'Request' : 'Notification');
    const [schema, names] = known[kind];
    if (names.has(msg.method)) {
      return check(schema, { method: msg.method, params: msg.params }, `${kind} ${msg.method}`);
    }
    return null;
  }
  if ('result' in msg && results[method]) {
    return check(results[method], msg.result, `result of ${method}`);
  }
  return null;
}

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (line.trim() === '') continue;
  let out;
  try {
    out = validate(JSON.parse(line)) ?? 'ok';
  } catch (err) {
    out = `not JSON: ${err.message}`;
  }
  console.log(out);
}
