package contract

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Probes are the checks the Compose smoke run makes besides the examples,
// against the demo Tool Services of the demo Portal (package demo, and
// deploy/compose/portal.yaml): written as Exchanges so that they are built
// and matched exactly like the examples.
const (
	// ProbeRoute is the route every probe calls: clock and calc.
	ProbeRoute = "core"
	// SleepService is the Tool Service of time.sleep; its requestTimeout on
	// ProbeRoute must be shorter than SleepMillis.
	SleepService = "clock"
	// SleepMillis is how long the timeout probe asks time.sleep to sleep.
	SleepMillis = 10000
	// LargeBodyBytes is the size of the large-body probe's request: twice
	// the gateway's default 1 MiB limit.
	LargeBodyBytes = 2 << 20
)

// ProbeNames lists the probes in the order the smoke run uses them.
var ProbeNames = []string{"ping", "timeout", "large-body", "unreachable"}

// Probe returns the named probe's exchange.
func Probe(name string) (*Exchange, error) {
	ex := &Exchange{Name: name}
	ex.Request.Method = "POST"
	ex.Request.Path = "/mcp/" + ProbeRoute
	ex.Request.Headers = map[string]string{
		"content-type":         "application/json",
		"accept":               "application/json, text/event-stream",
		"mcp-protocol-version": "2025-11-25",
	}
	ex.Response.Status = 200
	ex.Response.Headers = map[string]string{"content-type": "application/json"}
	toolError := json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"<any>"}],"isError":true}}`)
	switch name {
	case "ping":
		ex.Description = "a ping answers an empty result"
		ex.Request.Body = json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		ex.Response.Body = json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	case "timeout":
		ex.Description = fmt.Sprintf("time.sleep for %d ms runs into the %s Tool Service's requestTimeout: an isError result saying timeout", SleepMillis, SleepService)
		ex.Request.Body = json.RawMessage(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"time.sleep","arguments":{"ms":%d}}}`, SleepMillis))
		ex.Response.Body = toolError
		ex.Response.BodyContains = []string{"timeout"}
	case "unreachable":
		ex.Description = "with the demo Tool Services stopped, time.now is an isError result saying unavailable"
		ex.Request.Body = json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"time.now","arguments":{}}}`)
		ex.Response.Body = toolError
		ex.Response.BodyContains = []string{"unavailable"}
	case "large-body":
		ex.Description = fmt.Sprintf("a %d-byte request body, over the 1 MiB limit, is 413", LargeBodyBytes)
		ex.Request.RawBodySize = LargeBodyBytes
		ex.Response.Status = 413
		ex.Response.Headers = nil
		ex.Response.HeadersAny = true
	default:
		return nil, fmt.Errorf("unknown probe %q (probes: %s)", name, strings.Join(ProbeNames, ", "))
	}
	if !slices.Contains(ProbeNames, name) {
		return nil, fmt.Errorf("probe %q is not in ProbeNames", name)
	}
	return ex, nil
}
