package contract

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Target is what a gateway under test serves, as far as the examples care.
// TestPublicContract's gateway serves the Tool Services of
// docs/contracts/examples/toolservice on route core, so every example runs
// there; the Compose stack serves the demo Tool Services instead, so the
// examples whose answer depends on the contract's tools are skipped there.
type Target struct {
	// Routes are the route keys the gateway serves (its Portal's keys).
	Routes []string
	// ContractTools is true when the gateway serves the Tool Services of
	// docs/contracts/examples/toolservice on every route the examples use.
	ContractTools bool
}

// Skip is an example left out for a target, and why.
type Skip struct {
	Example Example
	Reason  string
}

// Select splits examples into those that can run against t and those that
// cannot, each with the reason. tools are the names of the contract's
// tools (ContractToolNames).
func Select(examples []Example, t Target, tools []string) (run []Example, skipped []Skip) {
	for _, ex := range examples {
		if reason := t.skipReason(&ex.Exchange, tools); reason != "" {
			skipped = append(skipped, Skip{Example: ex, Reason: reason})
			continue
		}
		run = append(run, ex)
	}
	return run, skipped
}

// skipReason says why ex cannot run against t, or "" when it can.
func (t Target) skipReason(ex *Exchange, tools []string) string {
	ok2xx := ex.Response.Status >= 200 && ex.Response.Status < 300
	// A route the target does not serve: fine when the example is about a
	// path the gateway refuses (an unknown route, an encoded slash), not
	// when it expects an answer from the route.
	if key := RouteKey(ex.Request.Path); ok2xx && !slices.Contains(t.Routes, key) {
		return fmt.Sprintf("expects %d from route %q, which the target does not serve (routes %v)", ex.Response.Status, key, t.Routes)
	}
	if t.ContractTools || !ok2xx {
		// A refused request (4xx) is refused before any tool is looked at.
		return ""
	}
	method, name, nameIsString := rpcMethod(ex)
	switch {
	case method == "tools/list":
		return "tools/list answers the tools of docs/contracts/examples/toolservice, which the target does not serve"
	case method == "tools/call" && nameIsString && slices.Contains(tools, name):
		return fmt.Sprintf("calls %q, a tool of docs/contracts/examples/toolservice, which the target does not serve", name)
	}
	return ""
}

// RouteKey is the route key of an MCP path /mcp/{key}: the rest of the path
// up to the next slash, as sent (an encoded slash stays encoded).
func RouteKey(path string) string {
	rest, ok := strings.CutPrefix(path, "/mcp/")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(rest, "/")
	key, _, _ = strings.Cut(key, "?")
	return key
}

// rpcMethod is the JSON-RPC method of the example's body and, for
// tools/call, params.name.
func rpcMethod(ex *Exchange) (method, name string, nameIsString bool) {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name json.RawMessage `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(ex.body(), &msg) != nil {
		return "", "", false
	}
	if json.Unmarshal(msg.Params.Name, &name) == nil {
		nameIsString = true
	}
	return msg.Method, name, nameIsString
}

// ContractToolNames are the names of every tool in the Tool Service
// manifests of dir/toolservice (dir is docs/contracts/examples), active or
// not, valid or not: a call to any of them depends on those Tool Services.
func ContractToolNames(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "toolservice", "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no Tool Service manifests in %s/toolservice: %v", dir, err)
	}
	var names []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var m struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", f, err)
		}
		for _, tool := range m.Tools {
			if !slices.Contains(names, tool.Name) {
				names = append(names, tool.Name)
			}
		}
	}
	sort.Strings(names)
	return names, nil
}
