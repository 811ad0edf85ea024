// Drives one toolmesh route with the official MCP TypeScript SDK client and
// prints what it saw as one JSON object on stdout, for e2e/tsclient_test.go.
//
//   node client.mjs <endpoint> <plan>
//
// plan is JSON: {"calls": [{"name", "arguments", "progress": bool}],
// "resources": [uri], "prompts": [{"name", "arguments"}], "release": url}:
// on each progress notification the client GETs release (when set), which
// lets the upstream tool answer only once the progress arrived here. Every step runs
// in order; a failing step is recorded ({"error": message}) and the others
// still run, so the Go test can say exactly which one failed. Diagnostics go
// to stderr.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [endpoint, planText] = process.argv.slice(2);
if (!endpoint || !planText) {
  console.error('usage: node client.mjs <endpoint> <plan-json>');
  process.exit(2);
}
const plan = JSON.parse(planText);

const texts = (content) => (content ?? []).filter((c) => c.type === 'text').map((c) => c.text);
const errorOf = (err) => ({ error: String(err?.message ?? err) });

const client = new Client({ name: 'toolmesh-e2e-ts', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(new URL(endpoint));
const out = { calls: [], resources: [], prompts: [] };
try {
  await client.connect(transport);
  out.protocolVersion = transport.protocolVersion ?? null;
  out.server = client.getServerVersion() ?? null;
  out.capabilities = client.getServerCapabilities() ?? null;
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  for (const call of plan.calls ?? []) {
    const progress = [];
    const options = { timeout: 20000 };
    if (call.progress) {
      // The SDK sends a progressToken when onprogress is set.
      options.onprogress = (p) => {
        console.error(`progress for ${call.name}: ${JSON.stringify(p)}`);
        progress.push(p);
        if (plan.release) {
          fetch(plan.release).catch((err) => console.error('release:', err));
        }
      };
    }
    try {
      const res = await client.callTool({ name: call.name, arguments: call.arguments ?? {} }, undefined, options);
      out.calls.push({ name: call.name, isError: Boolean(res.isError), text: texts(res.content), progress });
    } catch (err) {
      out.calls.push({ name: call.name, progress, ...errorOf(err) });
    }
  }
  for (const uri of plan.resources ?? []) {
    try {
      const res = await client.readResource({ uri });
      out.resources.push({ uri, text: res.contents.map((c) => c.text) });
    } catch (err) {
      out.resources.push({ uri, ...errorOf(err) });
    }
  }
  for (const p of plan.prompts ?? []) {
    try {
      const res = await client.getPrompt({ name: p.name, arguments: p.arguments ?? {} });
      out.prompts.push({ name: p.name, text: res.messages.flatMap((m) => texts([m.content])) });
    } catch (err) {
      out.prompts.push({ name: p.name, ...errorOf(err) });
    }
  }
} catch (err) {
  Object.assign(out, errorOf(err));
  console.error(err);
} finally {
  await client.close().catch((err) => console.error('close:', err));
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(out.error ? 1 : 0);
