package filters

import (
	"context"
	"errors"
	"fmt"
)

// argumentSize denies calls whose arguments object is larger than a limit,
// before they reach a Tool Service or a WebAssembly filter.
//
// Configuration:
//
//	maxBytes: 65536          # required, > 0
//	denyAs: tool_error       # default tool_error, so a model can shorten its call
type argumentSize struct {
	name string
	max  int
	spec denySpec
}

var _ StageFilter = (*argumentSize)(nil)

func newArgumentSize(_ *builder, d Definition) (Filter, error) {
	var cfg struct {
		MaxBytes int `json:"maxBytes"`
		denySpec
	}
	if err := decodeStrict(d.Config, &cfg); err != nil {
		return nil, err
	}
	if cfg.MaxBytes <= 0 {
		return nil, errors.New("maxBytes must be a positive number of bytes")
	}
	if err := cfg.denySpec.check(ToolError); err != nil {
		return nil, err
	}
	return &argumentSize{name: d.Name, max: cfg.MaxBytes, spec: cfg.denySpec}, nil
}

// Name implements [Filter.Name].
func (f *argumentSize) Name() string { return f.name }

// Runs implements [StageFilter.Runs].
func (f *argumentSize) Runs(s Stage) bool { return s == StageRequest }

// OnRequest implements [Filter.OnRequest].
func (f *argumentSize) OnRequest(_ context.Context, r *Request) (Decision, error) {
	if n := len(r.Arguments); n > f.max {
		return f.spec.decision(fmt.Sprintf("arguments of %d bytes exceed the limit of %d bytes", n, f.max), ToolError), nil
	}
	return Decision{}, nil
}

// OnResult implements [Filter.OnResult].
func (f *argumentSize) OnResult(context.Context, *Result) (Decision, error) { return Decision{}, nil }
