// Command conformance-toolsvc is the native fixture Tool Service behind the
// route /mcp/conf in testdata/conformance/run.sh. It speaks the Tool Service
// wire contract (docs/contracts/toolservice.md), not MCP: GET /manifest lists
// the tools the official MCP conformance suite's server scenarios call, POST
// /tools/{name} answers with a CallToolResult-shaped object that the gateway
// hands to the client unchanged, and GET /healthz says it is up.
//
// A Tool Service sits behind a stateless JSON gateway: it never sees the
// client's _meta (progress tokens, capabilities) and has no channel for
// server-to-client requests or notifications. Tools whose scenarios need that
// channel (logging, progress, sampling, elicitation) are still listed, so the
// scenarios fail on that cause instead of "unknown tool"; --only-passable
// leaves them out.
//
// Usage: conformance-toolsvc [--only-passable] [--log] PORT
// PORT 0 picks a free port; the first line on stdout says where it listens.
// The program is a test fixture; no product package imports it.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
)

// A 1x1 PNG and a minimal WAV, base64, as the scenarios only check that data
// and the MIME type are present.
const (
	pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	wavBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

// object is a JSON object literal.
type object = map[string]any

// tool is one manifest entry and the reply it gives.
type tool struct {
	name, title, description string
	schema                   object
	// passable is false for tools whose scenario needs a server-to-client
	// channel that a Tool Service does not have.
	passable bool
	call     func(args object) object
}

func noArgs() object { return object{"type": "object", "properties": object{}} }

func text(s string) object {
	return object{"content": []any{object{"type": "text", "text": s}}}
}

func constant(s string) func(object) object { return func(object) object { return text(s) } }

// jsonSchema202012 exercises the JSON Schema 2020-12 keywords the
// json-schema-2020-12 scenario looks for in tools/list ($schema, $defs with
// $anchor, $ref, allOf/anyOf, if/then/else, additionalProperties); the
// gateway must list it exactly as written.
func jsonSchema202012() object {
	return object{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object",
		"$defs": object{
			"address": object{
				"$anchor": "addressDef",
				"type":    "object",
				"properties": object{
					"street": object{"type": "string"},
					"city":   object{"type": "string"},
				},
			},
		},
		"properties": object{
			"name":          object{"type": "string"},
			"address":       object{"$ref": "#/$defs/address"},
			"contactMethod": object{"type": "string", "enum": []any{"phone", "email"}},
			"phone":         object{"type": "string"},
			"email":         object{"type": "string"},
		},
		"allOf": []any{object{"anyOf": []any{
			object{"required": []any{"phone"}},
			object{"required": []any{"email"}},
		}}},
		"if": object{
			"properties": object{"contactMethod": object{"const": "phone"}},
			"required":   []any{"contactMethod"},
		},
		"then":                 object{"required": []any{"phone"}},
		"else":                 object{"required": []any{"email"}},
		"additionalProperties": false,
	}
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

const noChannel = "needs a server-to-client channel, which a Tool Service behind a stateless JSON gateway does not have; ran without it"

// tools is the fixture's catalog, in manifest order. test_simple_text comes
// first: the http-header-validation scenario calls the first listed tool
// with no arguments.
var tools = []tool{
	{"test_simple_text", "Simple text", "Returns one text item", noArgs(), true,
		constant("This is a simple text response for testing.")},
	{"test_image_content", "Image content", "Returns one PNG image item", noArgs(), true,
		func(object) object {
			return object{"content": []any{object{"type": "image", "data": pngBase64, "mimeType": "image/png"}}}
		}},
	{"test_audio_content", "Audio content", "Returns one WAV audio item", noArgs(), true,
		func(object) object {
			return object{"content": []any{object{"type": "audio", "data": wavBase64, "mimeType": "audio/wav"}}}
		}},
	{"test_embedded_resource", "Embedded resource", "Returns one embedded text resource", noArgs(), true,
		func(object) object {
			return object{"content": []any{object{"type": "resource", "resource": object{
				"uri": "test://embedded-resource", "mimeType": "text/plain",
				"text": "This is an embedded resource content.",
			}}}}
		}},
	{"test_multiple_content_types", "Multiple content types", "Returns text, image and embedded resource items", noArgs(), true,
		func(object) object {
			return object{"content": []any{
				object{"type": "text", "text": "Multiple content types test:"},
				object{"type": "image", "data": pngBase64, "mimeType": "image/png"},
				object{"type": "resource", "resource": object{
					"uri": "test://mixed-content-resource", "mimeType": "application/json",
					"text": compactJSON(object{"test": "data", "value": 123}),
				}},
			}}
		}},
	{"test_error_handling", "Error handling", "Always fails with a tool error (isError)", noArgs(), true,
		func(object) object {
			r := text("This tool intentionally returns an error for testing")
			r["isError"] = true
			return r
		}},
	{"json_schema_2020_12_tool", "JSON Schema 2020-12", "Takes an input schema that uses JSON Schema 2020-12 keywords", jsonSchema202012(), true,
		func(args object) object { return text("JSON Schema 2020-12 tool called with: " + compactJSON(args)) }},
	// http-custom-header-server-validation looks for a tool with a string
	// property annotated x-mcp-header (Mcp-Param-* headers, SEP-2243).
	{"test_x_mcp_header", "x-mcp-header echo", "Echoes a parameter that clients also send as the Mcp-Param-Region header",
		object{"type": "object", "properties": object{
			"region": object{"type": "string", "description": "A plain ASCII value", "x-mcp-header": "Region"},
		}}, true,
		func(args object) object { return text("region=" + compactJSON(args["region"])) }},
	// server-stateless (2026-07-28) calls these two to check negative
	// requirements: no independent request on the response stream, no log
	// message unless the request asked for a log level. A plain result
	// satisfies both.
	{"test_streaming_elicitation", "Streaming elicitation probe", "Diagnostic tool: its response stream carries no server-to-client request", noArgs(), true,
		constant("no elicitation through a stateless JSON gateway")},
	{"test_logging_tool", "Logging probe", "Diagnostic tool: no log message unless the request sets a log level", noArgs(), true,
		constant("logging tool executed")},

	{"test_tool_with_logging", "Logging", "Would send log messages while it runs", noArgs(), false,
		constant("notifications/message " + noChannel)},
	{"test_tool_with_progress", "Progress", "Would report progress while it runs", noArgs(), false,
		constant("notifications/progress " + noChannel)},
	{"test_sampling", "Sampling", "Would ask the client's LLM for a completion",
		object{"type": "object", "properties": object{"prompt": object{"type": "string", "description": "The prompt for the LLM"}}, "required": []any{"prompt"}}, false,
		constant("sampling/createMessage " + noChannel)},
	{"test_elicitation", "Elicitation", "Would ask the user for input",
		object{"type": "object", "properties": object{"message": object{"type": "string", "description": "What to ask the user"}}, "required": []any{"message"}}, false,
		constant("elicitation/create " + noChannel)},
	{"test_elicitation_sep1034_defaults", "Elicitation defaults", "Would ask the user for input with default values", noArgs(), false,
		constant("elicitation/create " + noChannel)},
	{"test_elicitation_sep1330_enums", "Elicitation enums", "Would ask the user to pick from enumerations", noArgs(), false,
		constant("elicitation/create " + noChannel)},
}

// handler serves the wire contract for the given tools.
func handler(catalog []tool, log *slog.Logger) http.Handler {
	byName := make(map[string]tool, len(catalog))
	entries := make([]object, 0, len(catalog))
	for _, t := range catalog {
		byName[t.name] = t
		entries = append(entries, object{
			"name": t.name, "version": "1", "active": true, "title": t.title,
			"description": t.description, "inputSchema": t.schema,
		})
	}
	manifest := object{"tools": entries}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, manifest)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, object{"ok": true})
	})
	mux.HandleFunc("POST /tools/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		log.Debug("call", "tool", name, "route", r.Header.Get("x-toolmesh-route"))
		t, ok := byName[name]
		if !ok {
			reply(w, http.StatusNotFound, object{"error": "unknown tool " + name})
			return
		}
		var args any
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		if err := dec.Decode(&args); err != nil && !errors.Is(err, io.EOF) {
			reply(w, http.StatusBadRequest, object{"error": "body is not JSON: " + err.Error()})
			return
		}
		if args == nil {
			args = object{}
		}
		obj, ok := args.(object)
		if !ok {
			reply(w, http.StatusBadRequest, object{"error": "arguments must be a JSON object"})
			return
		}
		reply(w, http.StatusOK, t.call(obj))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusNotFound, object{"error": "not found"})
	})
	return mux
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// catalog returns the tools to serve.
func catalog(onlyPassable bool) []tool {
	if !onlyPassable {
		return tools
	}
	var out []tool
	for _, t := range tools {
		if t.passable {
			out = append(out, t)
		}
	}
	return out
}

func main() {
	onlyPassable := flag.Bool("only-passable", false, "leave out the tools whose scenarios need a server-to-client channel")
	verbose := flag.Bool("log", false, "log each call to stderr")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: conformance-toolsvc [--only-passable] [--log] PORT")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	addr := net.JoinHostPort("127.0.0.1", strings.TrimSpace(flag.Arg(0)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("conformance-toolsvc: listen (change the PORT argument)", "addr", addr, "err", err)
		os.Exit(1)
	}
	served := catalog(*onlyPassable)
	fmt.Printf("listening on http://%s\n", ln.Addr())
	log.Info("conformance fixture Tool Service", "addr", ln.Addr().String(), "tools", len(served))
	if err := http.Serve(ln, handler(served, log)); err != nil {
		log.Error("conformance-toolsvc: serve", "err", err)
		os.Exit(1)
	}
}
