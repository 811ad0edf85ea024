package app

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/internal/config"
)

// ApprovalConfig is the approval key: gateway-side human approval of risky
// tool calls (docs/decisions/0011-gateway-approval.md, docs/operators.md
// "Approval").
type ApprovalConfig struct {
	// Keys are the HMAC keys of the requestState, each read from a file or
	// an environment variable: the first signs, every one verifies.
	Keys []ApprovalKey `json:"keys,omitempty"`
	// TTL is how long an approval request can be answered; its approval
	// runs one call (default 5m, 10s..1h).
	TTL config.Duration `json:"ttl,omitempty"`
	// Routes gives a route its own rule, replacing Default as a whole.
	Routes map[string]ApprovalRule `json:"routes,omitempty"`
	// Default is the rule of every route without an entry; unset: none.
	Default *ApprovalRule `json:"default,omitempty"`
}

// ApprovalKey says where one key's secret is read; exactly one of File and
// Env. A file's trailing line breaks are dropped.
type ApprovalKey struct {
	ID   string `json:"id"`
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
}

// ApprovalRule selects the calls of a route that need approval.
type ApprovalRule struct {
	// Annotations: a tool with one of these annotations true needs
	// approval. Unset (with tools and when unset too): every tool that does
	// not declare readOnlyHint: true.
	Annotations []string `json:"annotations,omitempty"`
	// Tools are tool name patterns (path.Match) that need approval.
	Tools []string `json:"tools,omitempty"`
	// Exempt are tool name patterns that never need approval.
	Exempt []string `json:"exempt,omitempty"`
	// When is a CEL condition with the variables of authorization policies
	// (docs/authorization.md): the selected calls need approval only when
	// it is true, or when it cannot be evaluated (fail safe). Alone, it
	// selects among every tool of the route.
	When string `json:"when,omitempty"`
}

// maxApprovalKeyBytes bounds a key file read.
const maxApprovalKeyBytes = 4 << 10

// build reads the keys and builds the Approver; nil for an unset block.
// ledger remembers used approvals (nil: a new in-process one).
func (c *ApprovalConfig) build(ledger approval.Ledger) (*approval.Approver, error) {
	if c == nil {
		return nil, nil
	}
	cfg := approval.Config{TTL: c.TTL.D(), Routes: make(map[string]approval.Rule, len(c.Routes)), Ledger: ledger}
	for i, k := range c.Keys {
		secret, err := k.read()
		if err != nil {
			return nil, fmt.Errorf("approval.keys[%d] (id %s): %w", i, k.ID, err)
		}
		cfg.Keys = append(cfg.Keys, approval.Key{ID: k.ID, Secret: secret})
	}
	for route, r := range c.Routes {
		cfg.Routes[route] = r.rule()
	}
	if c.Default != nil {
		d := c.Default.rule()
		cfg.Default = &d
	}
	return approval.New(cfg)
}

func (r ApprovalRule) rule() approval.Rule {
	return approval.Rule{Annotations: r.Annotations, Tools: r.Tools, Exempt: r.Exempt, When: r.When}
}

func (k ApprovalKey) read() ([]byte, error) {
	switch {
	case k.File == "" && k.Env == "":
		return nil, errors.New("one of file and env is required")
	case k.File != "" && k.Env != "":
		return nil, errors.New("file and env are exclusive")
	case k.Env != "":
		v, ok := os.LookupEnv(k.Env)
		if !ok {
			return nil, fmt.Errorf("environment variable %s is not set", k.Env)
		}
		return []byte(v), nil
	}
	st, err := os.Stat(k.File)
	if err != nil {
		return nil, fmt.Errorf("read key file: %w", err)
	}
	if st.Size() > maxApprovalKeyBytes {
		return nil, fmt.Errorf("key file %s is larger than %d bytes", k.File, maxApprovalKeyBytes)
	}
	b, err := os.ReadFile(k.File)
	if err != nil {
		return nil, fmt.Errorf("read key file: %w", err)
	}
	return []byte(strings.TrimRight(string(b), "\r\n")), nil
}
