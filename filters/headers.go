package filters

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// headerPropagation copies named client request headers to the request sent
// to the Tool Service, so a route states which client headers its Tool
// Services rely on. Absent headers are skipped. The client's Authorization
// is removed from every routed call (a federated server's Portal entry may
// forward it: forwardAuthorization); see docs/filters.md.
//
// Configuration:
//
//	headers: [x-tenant, x-b3-traceid]   # required; case-insensitive
type headerPropagation struct {
	name    string
	headers []string // lowercase
}

var _ StageFilter = (*headerPropagation)(nil)

func newHeaderPropagation(_ *builder, d Definition) (Filter, error) {
	var cfg struct {
		Headers []string `json:"headers"`
	}
	if err := decodeStrict(d.Config, &cfg); err != nil {
		return nil, err
	}
	if len(cfg.Headers) == 0 {
		return nil, errors.New("headers: at least one header name is required")
	}
	f := &headerPropagation{name: d.Name}
	seen := map[string]bool{}
	for _, h := range cfg.Headers {
		h = strings.ToLower(h)
		if err := checkHeaderName(h); err != nil {
			return nil, fmt.Errorf("headers: %w", err)
		}
		if seen[h] {
			return nil, fmt.Errorf("headers: %q is listed twice", h)
		}
		seen[h] = true
		f.headers = append(f.headers, h)
	}
	return f, nil
}

// Name implements [Filter.Name].
func (f *headerPropagation) Name() string { return f.name }

// Runs implements [StageFilter.Runs].
func (f *headerPropagation) Runs(s Stage) bool { return s == StageRequest }

// OnRequest implements [Filter.OnRequest].
func (f *headerPropagation) OnRequest(_ context.Context, r *Request) (Decision, error) {
	var add map[string]string
	for _, h := range f.headers {
		v, ok := r.Headers[h]
		if !ok {
			continue
		}
		if add == nil {
			add = make(map[string]string, len(f.headers))
		}
		add[h] = v
	}
	if add == nil {
		return Decision{}, nil
	}
	return Decision{Action: ActionRewrite, AddHeaders: add}, nil
}

// OnResult implements [Filter.OnResult].
func (f *headerPropagation) OnResult(context.Context, *Result) (Decision, error) {
	return Decision{}, nil
}
