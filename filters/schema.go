package filters

import (
	"context"
	"strings"
)

// inputSchema denies calls whose arguments fail the tool's inputSchema, with
// an isError result carrying the validation messages so a model can correct
// its call (docs/contracts/mcp.md). The validator comes with the request.
//
// Configuration: none.
type inputSchema struct{ name string }

var _ StageFilter = (*inputSchema)(nil)

func newInputSchema(_ *builder, d Definition) (Filter, error) {
	var cfg struct{}
	if err := decodeStrict(d.Config, &cfg); err != nil {
		return nil, err
	}
	return &inputSchema{name: d.Name}, nil
}

// Name implements [Filter.Name].
func (f *inputSchema) Name() string { return f.name }

// Runs implements [StageFilter.Runs].
func (f *inputSchema) Runs(s Stage) bool { return s == StageRequest }

// OnRequest implements [Filter.OnRequest].
func (f *inputSchema) OnRequest(ctx context.Context, r *Request) (Decision, error) {
	if r.Validate == nil {
		return Decision{}, nil
	}
	msgs := validateTraced(ctx, r)
	if len(msgs) == 0 {
		return Decision{}, nil
	}
	// The extproc server prefixes "tool NAME failed: " (mcp.ToolFailed).
	return Deny("invalid arguments: " + strings.Join(msgs, "; ")), nil
}

// OnResult implements [Filter.OnResult].
func (f *inputSchema) OnResult(context.Context, *Result) (Decision, error) { return Decision{}, nil }
