# Generates docs/contracts/examples/mcp/*.json, the public contract examples
# that e2e/contract_test.go replays. Run from the repo root: python3
# testdata/contracts/gen_examples.py (it rewrites the files in place).
import json, os, copy
OUT = "docs/contracts/examples/mcp"
ANY = "<any>"
H_LEG = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
H_NEW = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "example-client", "version": "1.0.0"},
        "io.modelcontextprotocol/clientCapabilities": {}}
SERVER_META = {"io.modelcontextprotocol/serverInfo": {"name": "toolmesh", "version": ANY}}
manifest = json.load(open("docs/contracts/examples/toolservice/manifest.json"))
TOOLS = []
for t in manifest["tools"]:
    if t["name"] in ("shared", "bad name with spaces") or t.get("active") is False:
        continue
    o = {"name": t["name"]}
    for k in ("title", "description", "inputSchema", "outputSchema", "annotations", "icons"):
        if k in t: o[k] = t[k]
    TOOLS.append(o)
TOOLS.sort(key=lambda o: o["name"])

def err(code, id=None, data=None):
    e = {"code": code, "message": ANY}
    if data is not None: e["data"] = data
    return {"jsonrpc": "2.0", "id": id, "error": e}

def res(id, result): return {"jsonrpc": "2.0", "id": id, "result": result}
def new_res(id, result):
    r = dict(result); r["resultType"] = "complete"; r["_meta"] = SERVER_META
    return res(id, r)
def legacy_err_reply(code, id=1, status=200): return {"status": status, "headers": {"content-type": "application/json"}, "body": err(code, id)}
def new_req(method, params=None, id=1, name=None, headers=None):
    p = dict(params or {}); p["_meta"] = META
    h = dict(H_NEW); h["mcp-method"] = method
    if name is not None: h["mcp-name"] = name
    if headers: h.update(headers)
    return {"method": "POST", "path": "/mcp/core", "headers": h, "body": {"jsonrpc": "2.0", "id": id, "method": method, "params": p}}
def leg_req(method, params=None, id=1, headers=None, drop_version=False):
    h = dict(H_LEG)
    if drop_version: del h["mcp-protocol-version"]
    if headers: h.update(headers)
    b = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None: b["params"] = params
    return {"method": "POST", "path": "/mcp/core", "headers": h, "body": b}
JSONH = {"content-type": "application/json"}
def ok(body, extra=None):
    r = {"status": 200, "headers": JSONH, "body": body}
    if extra: r.update(extra)
    return r
def iserr(id, contains, era="legacy"):
    result = {"content": [{"type": "text", "text": ANY}], "isError": True}
    body = new_res(id, result) if era == "stateless" else res(id, result)
    return ok(body, {"bodyContains": contains})

cases = {}
def add(group, name, desc, request, response):
    cases.setdefault(group, []).append((name, {"description": desc, "request": request, "response": response}))

# ---- HTTP rules (both eras)
add("http", "get-405", "GET is not served: 405 with Allow: POST and no body (no standalone SSE stream, no sessions).",
    {"method": "GET", "path": "/mcp/core", "headers": {"accept": "text/event-stream"}},
    {"status": 405, "headers": {"allow": "POST"}, "emptyBody": True})
add("http", "delete-405", "DELETE is not served either: the gateway never issues sessions.",
    {"method": "DELETE", "path": "/mcp/core", "headers": {"mcp-session-id": "abc"}},
    {"status": 405, "headers": {"allow": "POST"}, "emptyBody": True})
def not_found(path, id=None): return {"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": "no MCP route at " + path}}
add("http", "unknown-route-404", "The route key comes from the path alone; an unknown route is 404 with a JSON-RPC error that names the path and echoes the request's id.",
    dict(leg_req("ping"), path="/mcp/nope"), {"status": 404, "headers": JSONH, "body": not_found("/mcp/nope", 1)})
add("http", "content-type-415", "Content-Type must be application/json or application/json-rpc.",
    leg_req("ping", headers={"content-type": "text/plain"}), {"status": 415, "headers": JSONH, "body": err(ANY)})
add("http", "content-type-charset", "Media type parameters such as charset are accepted.",
    leg_req("ping", headers={"content-type": "application/json; charset=utf-8"}), ok(res(1, {})))
add("http", "content-type-json-rpc", "application/json-rpc is accepted too.",
    leg_req("ping", headers={"content-type": "application/json-rpc"}), ok(res(1, {})))
add("http", "accept-406", "An Accept header that allows neither application/json nor text/event-stream is 406.",
    leg_req("ping", headers={"accept": "text/html"}), {"status": 406, "headers": JSONH, "body": err(ANY)})
add("http", "accept-json-only", "Accept: application/json alone is accepted (Agent Builder sends exactly this).",
    leg_req("ping", headers={"accept": "application/json"}), ok(res(1, {})))
add("http", "accept-sse-only", "Accept: text/event-stream alone is accepted; replies are still application/json.",
    leg_req("ping", headers={"accept": "text/event-stream"}), ok(res(1, {})))
add("http", "accept-any", "Accept: */* is accepted.", leg_req("ping", headers={"accept": "*/*"}), ok(res(1, {})))
r = leg_req("ping"); del r["headers"]["accept"]
add("http", "accept-absent", "A request without Accept is accepted.", r, ok(res(1, {})))
add("http", "origin-403", "An Origin outside the allow-list is refused (DNS-rebinding protection).",
    leg_req("ping", headers={"origin": "http://evil.example.com"}), {"status": 403, "headers": JSONH, "body": err(ANY)})
add("http", "origin-localhost", "Loopback origins are allowed by default.",
    leg_req("ping", headers={"origin": "http://localhost:6274"}), ok(res(1, {})))
add("http", "version-400", "An unsupported MCP-Protocol-Version is 400 with UnsupportedProtocolVersion (-32022) listing the supported versions, echoing the request id.",
    leg_req("ping", headers={"mcp-protocol-version": "1900-01-01"}),
    {"status": 400, "headers": JSONH, "body": err(-32022, 1, {"supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"], "requested": "1900-01-01"})})
add("http", "body-413", "A body over the limit (1 MiB by default) is 413 with a JSON-RPC error.",
    dict(leg_req("ping"), body=None, rawBodySize=1100000), {"status": 413, "headers": JSONH, "body": err(-32600)})
add("http", "parse-error", "A body that is not JSON is HTTP 400 with -32700 and id null.",
    dict(leg_req("ping"), body=None, rawBody='{"jsonrpc":"2.0","id":1,'), {"status": 400, "headers": JSONH, "body": err(-32700)})
add("http", "batch-rejected", "Batches (JSON arrays) are not single request objects: HTTP 400, -32600, id null.",
    dict(leg_req("ping"), body=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]), {"status": 400, "headers": JSONH, "body": err(-32600)})
add("http", "not-jsonrpc-2", "jsonrpc must be \"2.0\".",
    dict(leg_req("ping"), body={"jsonrpc": "1.0", "id": 1, "method": "ping"}), {"status": 400, "headers": JSONH, "body": err(-32600)})
add("http", "notification-202", "A notification (no id) is accepted with 202 and an empty body.",
    dict(leg_req("notifications/initialized"), body={"jsonrpc": "2.0", "method": "notifications/initialized"}), {"status": 202, "emptyBody": True})
add("http", "client-response-202", "A client's JSON-RPC response is accepted with 202 and an empty body.",
    dict(leg_req("ping"), body={"jsonrpc": "2.0", "id": 9, "result": {}}), {"status": 202, "emptyBody": True})
add("http", "id-string", "Ids are echoed byte for byte: \"1\" stays a string.",
    dict(leg_req("ping"), body=None, rawBody='{"jsonrpc":"2.0","id":"1","method":"ping"}'), ok(res("1", {}), {"bodyContains": ['"id":"1"']}))
add("http", "id-float", "Ids are echoed byte for byte: 1.0 stays 1.0.",
    dict(leg_req("ping"), body=None, rawBody='{"jsonrpc":"2.0","id":1.0,"method":"ping"}'), ok(None, {"bodyContains": ['"id":1.0'], "body": None}))
add("http", "session-id-ignored", "An incoming Mcp-Session-Id is a correlation field only; no session id is ever issued.",
    leg_req("ping", headers={"mcp-session-id": "client-chosen-123"}), ok(res(1, {}), {"absentHeaders": ["mcp-session-id"]}))

add("http", "escaped-slash-400", "Encoded slashes in the path are refused before routing, so the route key Envoy sees is the one toolmesh sees.",
    dict(leg_req("ping"), path="/mcp/core%2F..%2Fadmin"), {"status": 400, "headers": JSONH, "body": err(-32600)})
add("http", "headers-too-large-431", "Request headers over 32 KiB are refused by Envoy's codec.",
    leg_req("ping", headers={"x-padding": "p" * 40000}), {"status": 431, "headers": JSONH, "body": err(-32600)})
add("http", "unknown-route-id-string", "The unknown-route 404 echoes the id byte for byte, in either era; the query string is not part of the path it names.",
    dict(new_req("tools/call", {"name": "add", "arguments": {}}, name="add"), path="/mcp/nope?x=1", body=None,
         rawBody='{"jsonrpc":"2.0","id":"r\\u0031","method":"tools/call","params":{"name":"add","arguments":{}}}'),
    {"status": 404, "headers": JSONH, "body": not_found("/mcp/nope", "r1"), "bodyContains": ['"id":"r\\u0031"']})
add("http", "unknown-route-not-jsonrpc", "When the body of a request to an unknown route is not a JSON-RPC request, the 404 has id null.",
    dict(leg_req("ping"), path="/mcp/nope", body=None, rawBody='{"jsonrpc":"2.0","id":1,'),
    {"status": 404, "headers": JSONH, "body": not_found("/mcp/nope")})
add("http", "unknown-route-get-404", "Any method on a path that names no route is 404 with a JSON-RPC error and id null, even outside /mcp/.",
    {"method": "GET", "path": "/favicon.ico", "headers": {"accept": "*/*"}},
    {"status": 404, "headers": JSONH, "body": not_found("/favicon.ico")})
add("http", "trailing-slash-404", "A route's public path is matched exactly: /mcp/core/ (trailing slash) is not /mcp/core and is answered like any unknown route, 404 with a JSON-RPC error, no redirect.",
    dict(leg_req("ping"), path="/mcp/core/"), {"status": 404, "headers": JSONH, "body": not_found("/mcp/core/", 1)})

# ---- legacy era
INIT = lambda v: {"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "example-client", "version": "1.0.0"}}
INIT_RES = lambda v: {"protocolVersion": v, "capabilities": {"tools": {"listChanged": False}}, "serverInfo": {"name": "toolmesh", "version": ANY}}
add("legacy", "initialize", "initialize answers with the client's version when the gateway supports it.",
    leg_req("initialize", INIT("2025-11-25"), drop_version=True), ok(res(1, INIT_RES("2025-11-25"))))
add("legacy", "initialize-2025-03-26", "An older supported version is echoed.",
    leg_req("initialize", INIT("2025-03-26"), drop_version=True), ok(res(1, INIT_RES("2025-03-26"))))
add("legacy", "initialize-unknown-version", "An unsupported requested version gets the gateway's latest legacy version.",
    leg_req("initialize", INIT("2024-01-01"), drop_version=True), ok(res(1, INIT_RES("2025-11-25"))))
add("legacy", "initialized-202", "notifications/initialized is accepted with 202.",
    dict(leg_req("x"), body={"jsonrpc": "2.0", "method": "notifications/initialized"}), {"status": 202, "emptyBody": True})
add("legacy", "ping", "ping answers an empty result.", leg_req("ping"), ok(res(1, {})))
add("legacy", "tools-list", "tools/list: the route's active, unambiguous tools sorted by name, schemas passed through unchanged; no resultType in this era.",
    leg_req("tools/list"), ok(res(1, {"tools": TOOLS})))
add("legacy", "tools-list-no-version-header", "Without MCP-Protocol-Version a request is treated as 2025-03-26.",
    leg_req("tools/list", drop_version=True), ok(res(1, {"tools": TOOLS})))
add("legacy", "tools-list-bad-cursor", "An invalid cursor is -32602.",
    leg_req("tools/list", {"cursor": "not-a-cursor"}), legacy_err_reply(-32602))
add("legacy", "tools-call-passthrough", "A 2xx JSON object with a content array is passed through as the CallToolResult.",
    leg_req("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}),
    ok(res(1, {"content": [{"type": "text", "text": "5"}], "structuredContent": {"sum": 5}})))
add("legacy", "tools-call-text", "A 2xx text reply becomes one text item.",
    leg_req("tools/call", {"name": "echo", "arguments": {"message": "hello"}}), ok(res(1, {"content": [{"type": "text", "text": "hello"}]})))
add("legacy", "tools-call-json-object", "A 2xx JSON object that is not a CallToolResult becomes structuredContent plus one text item with the JSON.",
    leg_req("tools/call", {"name": "weather", "arguments": {"city": "Oslo"}}),
    ok(res(1, {"content": [{"type": "text", "text": ANY}], "structuredContent": {"city": "Oslo", "tempC": 21}}), {"bodyContains": ["tempC"]}))
add("legacy", "tools-call-json-array", "In the legacy era structuredContent must be an object, so a JSON array is only the text item.",
    leg_req("tools/call", {"name": "series", "arguments": {}}), ok(res(1, {"content": [{"type": "text", "text": "[1,2,3]"}]})))
add("legacy", "tools-call-500", "A Tool Service 5xx is an isError result naming the status, never a JSON-RPC or HTTP error.",
    leg_req("tools/call", {"name": "fail", "arguments": {}}), iserr(1, ["tool fail failed: ", "500"]))
add("legacy", "tools-call-403", "A Tool Service 401/403 is an isError result saying permission denied.",
    leg_req("tools/call", {"name": "secret", "arguments": {}}), iserr(1, ["tool secret failed: permission denied"]))
add("legacy", "tools-call-schema-invalid", "Arguments failing the tool's inputSchema are an isError result with the validation messages; the Tool Service is not called.",
    leg_req("tools/call", {"name": "add", "arguments": {"a": "two"}}), ok(None, {"bodyContains": ['"isError":true', "tool add failed: invalid arguments"]}))
add("legacy", "tools-call-unknown", "An unknown tool is -32602.",
    leg_req("tools/call", {"name": "nope", "arguments": {}}), legacy_err_reply(-32602))
add("legacy", "tools-call-ambiguous", "A name offered by two active tools is ambiguous: -32602, and the gateway never picks one.",
    leg_req("tools/call", {"name": "shared", "arguments": {}}), legacy_err_reply(-32602))
add("legacy", "tools-call-name-not-string", "params.name must be a string.",
    leg_req("tools/call", {"name": 7, "arguments": {}}), legacy_err_reply(-32602))
add("legacy", "tools-call-arguments-array", "params.arguments must be an object or absent.",
    leg_req("tools/call", {"name": "add", "arguments": [1, 2]}), legacy_err_reply(-32602))
add("legacy", "resources-list", "Resources, prompts and other methods are -32601 with HTTP 200 in the legacy era.",
    leg_req("resources/list"), legacy_err_reply(-32601))
add("legacy", "prompts-list", "Prompts are not offered.", leg_req("prompts/list"), legacy_err_reply(-32601))
add("legacy", "discover-with-legacy-header", "server/discover sent with a legacy version header is answered as in the 2026 era, so probing clients settle quickly.",
    leg_req("server/discover"), ok(new_res(1, {"supportedVersions": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"],
        "capabilities": {"tools": {}}, "ttlMs": ANY, "cacheScope": ANY})))

# ---- stateless era
add("stateless", "server-discover", "server/discover: supported versions, capabilities, serverInfo in _meta, caching hints.",
    new_req("server/discover"), ok(new_res(1, {"supportedVersions": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"],
        "capabilities": {"tools": {}}, "ttlMs": ANY, "cacheScope": ANY})))
add("stateless", "tools-list", "tools/list carries resultType, ttlMs, cacheScope and serverInfo; tools in a deterministic order.",
    new_req("tools/list"), ok(new_res(1, {"tools": TOOLS, "ttlMs": ANY, "cacheScope": ANY})))
add("stateless", "tools-call", "A routed call's result carries resultType and serverInfo.",
    new_req("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, name="add"),
    ok(new_res(1, {"content": [{"type": "text", "text": "5"}], "structuredContent": {"sum": 5}})))
add("stateless", "tools-call-json-array", "In the 2026 era structuredContent may be any JSON value.",
    new_req("tools/call", {"name": "series", "arguments": {}}, name="series"),
    ok(new_res(1, {"content": [{"type": "text", "text": "[1,2,3]"}], "structuredContent": [1, 2, 3]})))
add("stateless", "tools-call-base64-name", "Mcp-Name may carry the =?base64?…?= sentinel; it is decoded before comparing with the body.",
    new_req("tools/call", {"name": "echo", "arguments": {"message": "hi"}}, name="=?base64?ZWNobw==?="),
    ok(new_res(1, {"content": [{"type": "text", "text": "hi"}]})))
add("stateless", "tools-call-500", "Execution failures are isError results in this era too.",
    new_req("tools/call", {"name": "fail", "arguments": {}}, name="fail"), iserr(1, ["tool fail failed: ", "500"], "stateless"))
add("stateless", "tools-call-unknown", "An unknown tool is -32602 with HTTP 200.",
    new_req("tools/call", {"name": "nope", "arguments": {}}, name="nope"), legacy_err_reply(-32602))
add("stateless", "method-header-mismatch", "Mcp-Method must equal the body's method: 400 HeaderMismatch (-32020).",
    new_req("tools/list", headers={"mcp-method": "tools/call"}), legacy_err_reply(-32020, 1, 400))
r = new_req("tools/list"); del r["headers"]["mcp-method"]
add("stateless", "method-header-missing", "Mcp-Method is required on every request: 400 HeaderMismatch.", r, legacy_err_reply(-32020, 1, 400))
add("stateless", "name-header-mismatch", "Mcp-Name must equal params.name: 400 HeaderMismatch.",
    new_req("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, name="echo"), legacy_err_reply(-32020, 1, 400))
add("stateless", "name-header-missing", "Mcp-Name is required on tools/call: 400 HeaderMismatch.",
    new_req("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}), legacy_err_reply(-32020, 1, 400))
r = new_req("tools/list"); r["body"]["params"]["_meta"] = dict(META, **{"io.modelcontextprotocol/protocolVersion": "2025-11-25"})
add("stateless", "version-meta-mismatch", "MCP-Protocol-Version must equal _meta's protocolVersion: 400 HeaderMismatch.", r, legacy_err_reply(-32020, 1, 400))
add("stateless", "initialize-404", "initialize does not exist in the stateless era: 404 with -32601.",
    new_req("initialize", INIT("2026-07-28")), legacy_err_reply(-32601, 1, 404))
add("stateless", "ping-404", "Neither does ping.", new_req("ping"), legacy_err_reply(-32601, 1, 404))
add("stateless", "resources-list-404", "Unknown methods are 404 with -32601 in this era.", new_req("resources/list"), legacy_err_reply(-32601, 1, 404))

for group, items in cases.items():
    os.makedirs(f"{OUT}/{group}", exist_ok=True)
    for i, (name, ex) in enumerate(items, 1):
        ex = {"name": name, **ex}
        if ex["request"].get("body") is None: ex["request"].pop("body", None)
        if ex["response"].get("body") is None: ex["response"].pop("body", None)
        with open(f"{OUT}/{group}/{i:02d}-{name}.json", "w") as f:
            json.dump(ex, f, indent=2, ensure_ascii=False); f.write("\n")
print({g: len(v) for g, v in cases.items()})
