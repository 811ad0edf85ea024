package filters

import (
	"context"
	"errors"
	"fmt"
	"path"
)

// toolACL allows or denies tools by name. Patterns are path.Match globs
// ("get_*", "db.?", "[a-c]*"); tool names contain no "/", so "*" matches any
// run of characters. A tool is refused when it matches a deny pattern, or
// when allow patterns are given and it matches none. The same answer hides
// the tool from tools/list (ToolLister).
//
// Configuration:
//
//	allow: ["weather_*"]     # optional
//	deny:  ["*_admin"]       # optional; one of allow and deny is required
//	denyAs: rpc_error        # default rpc_error: the tool looks unknown
//	code: -32602             # with rpc_error
//	reason: "..."            # optional client-visible reason
type toolACL struct {
	name        string
	allow, deny []string
	spec        denySpec
	reason      string
}

var (
	_ StageFilter = (*toolACL)(nil)
	_ ToolLister  = (*toolACL)(nil)
)

func newToolACL(_ *builder, d Definition) (Filter, error) {
	var cfg struct {
		Allow  []string `json:"allow"`
		Deny   []string `json:"deny"`
		Reason string   `json:"reason"`
		denySpec
	}
	if err := decodeStrict(d.Config, &cfg); err != nil {
		return nil, err
	}
	if len(cfg.Allow) == 0 && len(cfg.Deny) == 0 {
		return nil, errors.New("at least one allow or deny pattern is required")
	}
	for _, p := range append(append([]string(nil), cfg.Allow...), cfg.Deny...) {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return nil, fmt.Errorf("bad glob %q: %w", p, errors.Join(err, path.ErrBadPattern))
		}
	}
	if err := cfg.denySpec.check(RPCError); err != nil {
		return nil, err
	}
	return &toolACL{name: d.Name, allow: cfg.Allow, deny: cfg.Deny, spec: cfg.denySpec, reason: cfg.Reason}, nil
}

// Name implements [Filter.Name].
func (f *toolACL) Name() string { return f.name }

// Runs implements [StageFilter.Runs].
func (f *toolACL) Runs(s Stage) bool { return s == StageRequest }

// ToolAllowed implements [ToolLister.ToolAllowed].
func (f *toolACL) ToolAllowed(tool string) bool {
	for _, p := range f.deny {
		if ok, _ := path.Match(p, tool); ok {
			return false
		}
	}
	if len(f.allow) == 0 {
		return true
	}
	for _, p := range f.allow {
		if ok, _ := path.Match(p, tool); ok {
			return true
		}
	}
	return false
}

// OnRequest implements [Filter.OnRequest].
func (f *toolACL) OnRequest(_ context.Context, r *Request) (Decision, error) {
	if f.ToolAllowed(r.Tool) {
		return Decision{}, nil
	}
	reason := f.reason
	if reason == "" {
		reason = fmt.Sprintf("tool %q is not allowed on route %q", r.Tool, r.Route)
	}
	return f.spec.decision(reason, RPCError), nil
}

// OnResult implements [Filter.OnResult].
func (f *toolACL) OnResult(context.Context, *Result) (Decision, error) { return Decision{}, nil }
