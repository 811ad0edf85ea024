package filters

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Outcome is what a chain decided for one call.
type Outcome struct {
	// Action is ActionPass when no filter changed anything, ActionRewrite
	// when at least one did, ActionDeny when one denied.
	Action Action
	// Filter names the filter that denied.
	Filter string
	// SchemaInvalid is set on a deny of an input_schema filter: the
	// arguments failed the tool's inputSchema (reported apart from policy
	// denials).
	SchemaInvalid bool
	// Reason, DenyAs and Code describe a deny (Code is set for RPCError).
	Reason string
	DenyAs DenyKind
	Code   int
	// Arguments holds the rewritten arguments, when a filter rewrote them
	// (Request.Arguments holds them too).
	Arguments json.RawMessage
	// Result holds the rewritten result, when a filter rewrote it
	// (Result.Body holds it too).
	Result json.RawMessage
	// AddHeaders are the headers to set on the upstream request, merged in
	// chain order (a later filter wins). Kept on a deny too, but unused.
	AddHeaders map[string]string
	// Err is the failure behind a fail-closed deny, or the failures of
	// fail-open filters that were skipped. Log it; clients see Reason.
	Err error
}

// Denied reports whether the call was denied.
func (o *Outcome) Denied() bool { return o.Action == ActionDeny }

// Chain is the ordered list of filters of one route. It is immutable and
// safe for concurrent use. A nil *Chain is an empty chain.
type Chain struct {
	route   string
	entries []*entry
	listers []ToolLister
}

type entry struct {
	f        Filter
	name     string
	failOpen bool
	request  bool // runs on StageRequest
	result   bool // runs on StageResult
	log      *slog.Logger
	mReq     *stageMetrics
	mRes     *stageMetrics
}

// Route returns the route the chain was built for ("" for the defaults).
func (c *Chain) Route() string {
	if c == nil {
		return ""
	}
	return c.route
}

// Names returns the filter names in execution order.
func (c *Chain) Names() []string {
	if c == nil {
		return nil
	}
	out := make([]string, len(c.entries))
	for i, e := range c.entries {
		out[i] = e.name
	}
	return out
}

// Len returns the number of filters.
func (c *Chain) Len() int {
	if c == nil {
		return 0
	}
	return len(c.entries)
}

// FiltersResults reports whether any filter runs on StageResult, that is
// whether a tool's result must be complete before it can go to the client.
func (c *Chain) FiltersResults() bool {
	if c == nil {
		return false
	}
	for _, e := range c.entries {
		if e.result {
			return true
		}
	}
	return false
}

// HidesTools reports whether the chain refuses some tools by name, so that
// tools/list must be filtered with ToolAllowed.
func (c *Chain) HidesTools() bool { return c != nil && len(c.listers) > 0 }

// ToolAllowed reports whether every ToolLister in the chain lets tool be
// called; tools/list leaves out the tools it refuses.
func (c *Chain) ToolAllowed(tool string) bool {
	if c == nil {
		return true
	}
	for _, l := range c.listers {
		if !l.ToolAllowed(tool) {
			return false
		}
	}
	return true
}

// RunRequest runs the request stage. Filters run in order; a rewrite of the
// arguments updates r.Arguments before the next filter runs; a deny stops
// the chain. A filter error denies the call (fail-closed, the default) or is
// skipped (fail-open), as the filter is configured.
func (c *Chain) RunRequest(ctx context.Context, r *Request) Outcome {
	out := Outcome{Action: ActionPass}
	if c == nil {
		return out
	}
	var skipped []error
	for _, e := range c.entries {
		if !e.request {
			continue
		}
		start := time.Now()
		fctx, span := e.startSpan(ctx, StageRequest)
		d, err := e.f.OnRequest(fctx, r)
		if err == nil {
			err = checkRequestDecision(&d)
		}
		endSpan(span, d.Action, err)
		e.mReq.observe(start, d.Action, err)
		if err != nil {
			if err = e.failed(ctx, StageRequest, r.Tool, err); e.failOpen {
				skipped = append(skipped, err)
				continue
			}
			return failClosed(e.name, err, out.AddHeaders)
		}
		switch d.Action {
		case ActionDeny:
			o := denied(e.name, d, out.AddHeaders, errors.Join(skipped...))
			_, o.SchemaInvalid = e.f.(*inputSchema)
			return o
		case ActionRewrite:
			out.Action = ActionRewrite
			if d.Arguments != nil {
				r.Arguments, out.Arguments = d.Arguments, d.Arguments
			}
			for k, v := range d.AddHeaders {
				if out.AddHeaders == nil {
					out.AddHeaders = make(map[string]string, len(d.AddHeaders))
				}
				out.AddHeaders[k] = v
			}
		}
	}
	out.Err = errors.Join(skipped...)
	return out
}

// RunResult runs the result stage, with the same rules as RunRequest; a
// rewrite updates r.Body.
func (c *Chain) RunResult(ctx context.Context, r *Result) Outcome {
	out := Outcome{Action: ActionPass}
	if c == nil {
		return out
	}
	var skipped []error
	for _, e := range c.entries {
		if !e.result {
			continue
		}
		start := time.Now()
		fctx, span := e.startSpan(ctx, StageResult)
		d, err := e.f.OnResult(fctx, r)
		if err == nil {
			err = checkResultDecision(&d)
		}
		endSpan(span, d.Action, err)
		e.mRes.observe(start, d.Action, err)
		if err != nil {
			if err = e.failed(ctx, StageResult, r.Tool, err); e.failOpen {
				skipped = append(skipped, err)
				continue
			}
			return failClosed(e.name, err, nil)
		}
		switch d.Action {
		case ActionDeny:
			return denied(e.name, d, nil, errors.Join(skipped...))
		case ActionRewrite:
			if d.Result != nil {
				out.Action = ActionRewrite
				r.Body, out.Result = d.Result, d.Result
			}
		}
	}
	out.Err = errors.Join(skipped...)
	return out
}

// failed names the filter in err and logs what the chain does about it:
// skip the filter (fail-open) or deny the call (fail-closed).
func (e *entry) failed(ctx context.Context, stage Stage, tool string, err error) error {
	err = Error(e.name, err)
	if e.failOpen {
		e.log.WarnContext(ctx, "filter failed; passing (fail-open)", "stage", stage.String(), "tool", tool, "error", err)
	} else {
		e.log.WarnContext(ctx, "filter failed; denying (fail-closed)", "stage", stage.String(), "tool", tool, "error", err)
	}
	return err
}

func denied(name string, d Decision, headers map[string]string, err error) Outcome {
	o := Outcome{Action: ActionDeny, Filter: name, Reason: d.Reason, DenyAs: d.DenyAs, AddHeaders: headers, Err: err}
	if o.Reason == "" {
		o.Reason = fmt.Sprintf("denied by filter %q", name)
	}
	if o.DenyAs == RPCError {
		o.Code = cmp.Or(d.Code, CodeInvalidParams)
	}
	return o
}

// failClosed denies a call whose filter could not decide. The client learns
// which filter failed, not why: the cause may hold guest output or paths.
func failClosed(name string, err error, headers map[string]string) Outcome {
	return Outcome{
		Action: ActionDeny, Filter: name, DenyAs: ToolError, AddHeaders: headers, Err: err,
		Reason: fmt.Sprintf("the call was blocked because filter %q failed", name),
	}
}

var errBadDecision = errors.New("invalid decision")

func checkRequestDecision(d *Decision) error {
	switch d.Action {
	case ActionPass, ActionDeny:
		return nil
	case ActionRewrite:
	default:
		return fmt.Errorf("%w: unknown action %d", errBadDecision, d.Action)
	}
	if d.Result != nil {
		return fmt.Errorf("%w: a request-stage decision cannot rewrite the result", errBadDecision)
	}
	if d.Arguments != nil && !isObject(d.Arguments) {
		return fmt.Errorf("%w: rewritten arguments are not a JSON object", errBadDecision)
	}
	for k, v := range d.AddHeaders {
		if err := checkUpstreamHeader(k, v); err != nil {
			return fmt.Errorf("%w: %w", errBadDecision, err)
		}
	}
	return nil
}

func checkResultDecision(d *Decision) error {
	switch d.Action {
	case ActionPass, ActionDeny:
		return nil
	case ActionRewrite:
	default:
		return fmt.Errorf("%w: unknown action %d", errBadDecision, d.Action)
	}
	if d.Arguments != nil || len(d.AddHeaders) > 0 {
		return fmt.Errorf("%w: a result-stage decision can only rewrite the result", errBadDecision)
	}
	if d.Result != nil && !isObject(d.Result) {
		return fmt.Errorf("%w: rewritten result is not a JSON object", errBadDecision)
	}
	return nil
}

// isObject is a cheap shape check; the whole document is validated where it
// is parsed (the extproc server re-serializes the body it sends).
func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) >= 2 && t[0] == '{' && t[len(t)-1] == '}'
}

// reservedHeaders may not be set by filters: they would break HTTP framing
// or the gateway's own routing (x-toolmesh-* picks the upstream cluster).
var reservedHeaders = map[string]bool{
	"host": true, "content-length": true, "content-type": true, "transfer-encoding": true,
	"connection": true, "keep-alive": true, "proxy-connection": true, "te": true,
	"trailer": true, "upgrade": true, "expect": true,
}

var reservedPrefixes = []string{"x-toolmesh-", "x-envoy-", ":"}

// checkUpstreamHeader checks a header a filter wants to add.
func checkUpstreamHeader(name, value string) error {
	if err := checkHeaderName(name); err != nil {
		return err
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c == '\r' || c == '\n' || c == 0 {
			return fmt.Errorf("header %q: value has a control character", name)
		}
	}
	return nil
}

func checkHeaderName(name string) error {
	if name == "" {
		return errors.New("empty header name")
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("header %q is reserved for the gateway", name)
		}
	}
	if reservedHeaders[name] {
		return fmt.Errorf("header %q is reserved for the gateway", name)
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return fmt.Errorf("header %q: invalid name (lowercase token characters only)", name)
		}
	}
	return nil
}

// isTokenChar reports whether c may appear in a lowercase HTTP header name
// (RFC 9110 token, minus uppercase letters).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
