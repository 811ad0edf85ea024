package filters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/filters/wasm"
)

// wasmFilter runs a WebAssembly module (package filters/wasm) as a filter.
//
// Configuration (durations as Go duration strings):
//
//	path: /etc/toolmesh/policy.wasm   # required
//	stages: [request, result]         # default both
//	headers: [x-tenant]               # client headers the guest sees (default none)
//	config: {...}                     # handed to the guest's configure export
//	poolSize: 4                       # max instances (default GOMAXPROCS, at least 2)
//	prewarm: 1
//	callTimeout: 250ms
//	queueTimeout: 1s
//	memoryPages: 512                  # 64 KiB pages per instance
//	maxEnvelopeBytes: 4194304
//	recycleAfter: 0                   # calls before an instance is replaced
//	pollInterval: 0s                  # > 0: reload when the file changes
//	uninterruptible: false            # trusted modules only: no time limit
type wasmFilter struct {
	name            string
	m               *wasm.Module
	request, result bool
	headers         []string
}

var _ StageFilter = (*wasmFilter)(nil)

type wasmConfig struct {
	Path             string          `json:"path"`
	Stages           []string        `json:"stages"`
	Headers          []string        `json:"headers"`
	Config           json.RawMessage `json:"config"`
	PoolSize         int             `json:"poolSize"`
	Prewarm          int             `json:"prewarm"`
	CallTimeout      duration        `json:"callTimeout"`
	QueueTimeout     duration        `json:"queueTimeout"`
	MemoryPages      uint32          `json:"memoryPages"`
	MaxEnvelopeBytes int             `json:"maxEnvelopeBytes"`
	RecycleAfter     uint64          `json:"recycleAfter"`
	PollInterval     duration        `json:"pollInterval"`
	Uninterruptible  bool            `json:"uninterruptible"`
}

func newWasmFilter(b *builder, d Definition) (Filter, error) {
	var cfg wasmConfig
	if err := decodeStrict(d.Config, &cfg); err != nil {
		return nil, err
	}
	if cfg.Path == "" {
		return nil, errors.New("path is required")
	}
	f := &wasmFilter{name: d.Name}
	if len(cfg.Stages) == 0 {
		f.request, f.result = true, true
	}
	for _, s := range cfg.Stages {
		switch s {
		case "request":
			f.request = true
		case "result":
			f.result = true
		default:
			return nil, fmt.Errorf(`stages: unknown stage %q (want "request" or "result")`, s)
		}
	}
	for _, h := range cfg.Headers {
		h = strings.ToLower(h)
		if !validHeaderToken(h) {
			return nil, fmt.Errorf("headers: invalid header name %q", h)
		}
		f.headers = append(f.headers, h)
	}
	opts := wasm.Options{
		Name: d.Name, Path: cfg.Path, Config: cfg.Config,
		PoolSize: cfg.PoolSize, Prewarm: cfg.Prewarm,
		CallTimeout: time.Duration(cfg.CallTimeout), QueueTimeout: time.Duration(cfg.QueueTimeout),
		MemoryPages: cfg.MemoryPages, MaxEnvelopeBytes: cfg.MaxEnvelopeBytes,
		RecycleAfter: cfg.RecycleAfter, PollInterval: time.Duration(cfg.PollInterval),
		Uninterruptible: cfg.Uninterruptible,
	}
	if b == nil {
		return f, wasm.CheckOptions(opts)
	}
	host, err := b.wasmHost()
	if err != nil {
		return nil, err
	}
	if f.m, err = host.Load(b.ctx, opts); err != nil {
		return nil, err
	}
	return f, nil
}

func validHeaderToken(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		if !isTokenChar(h[i]) {
			return false
		}
	}
	return true
}

// Name implements [Filter.Name].
func (f *wasmFilter) Name() string { return f.name }

// Runs implements [StageFilter.Runs].
func (f *wasmFilter) Runs(s Stage) bool {
	if s == StageRequest {
		return f.request
	}
	return f.result
}

// OnRequest implements [Filter.OnRequest].
func (f *wasmFilter) OnRequest(ctx context.Context, r *Request) (Decision, error) {
	in := wasm.Input{
		Stage: wasm.StageRequest, Route: r.Route, Era: r.Era, Version: r.Version, Method: r.Method,
		Tool: r.Tool, ToolVersion: r.ToolVersion, Arguments: r.Arguments,
	}
	for _, h := range f.headers {
		if v, ok := r.Headers[h]; ok {
			if in.Headers == nil {
				in.Headers = make(map[string]string, len(f.headers))
			}
			in.Headers[h] = v
		}
	}
	d, err := f.m.Filter(ctx, &in)
	if err != nil {
		return Decision{}, err
	}
	return fromWasm(d), nil
}

// OnResult implements [Filter.OnResult].
func (f *wasmFilter) OnResult(ctx context.Context, r *Result) (Decision, error) {
	in := wasm.Input{
		Stage: wasm.StageResult, Route: r.Route, Era: r.Era, Version: r.Version,
		Method: "tools/call", Tool: r.Tool, ToolVersion: r.ToolVersion, Result: r.Body,
	}
	d, err := f.m.Filter(ctx, &in)
	if err != nil {
		return Decision{}, err
	}
	return fromWasm(d), nil
}

// Reload re-reads the module file (see wasm.Module.Reload).
func (f *wasmFilter) Reload(ctx context.Context) error { return f.m.Reload(ctx) }

// Close releases the module after calls in flight finish.
func (f *wasmFilter) Close(ctx context.Context) error {
	if f.m == nil {
		return nil
	}
	return f.m.Close(ctx)
}

func fromWasm(d wasm.Decision) Decision {
	out := Decision{Reason: d.Reason, Code: d.Code, Arguments: d.Arguments, Result: d.Result}
	if len(d.Headers) > 0 {
		// Guests may write header names in any case; HTTP/2 wants lowercase.
		out.AddHeaders = make(map[string]string, len(d.Headers))
		for k, v := range d.Headers {
			out.AddHeaders[strings.ToLower(k)] = v
		}
	}
	switch d.Action {
	case wasm.ActionDeny:
		out.Action = ActionDeny
	case wasm.ActionRewrite:
		out.Action = ActionRewrite
	}
	if d.As == wasm.AsRPCError {
		out.DenyAs = RPCError
	}
	return out
}

// duration is a time.Duration written as a Go duration string ("50ms").
type duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"50ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}
