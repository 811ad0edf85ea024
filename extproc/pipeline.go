package extproc

import (
	"encoding/json"
	"log/slog"
	"strconv"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/callfilter"
	"github.com/toolmesh/toolmesh/extproc/callplan"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// The call pipeline (ADR 0021): what a resolved tools/call goes through
// before it is routed, in order. Each step is a small type with one job;
// a new step is a type here (or in the file of the feature it belongs to)
// and one line in callPipeline.

// callCtx is what the steps of one tools/call share.
type callCtx struct {
	x    *request
	call *mcp.Call
	tool *registry.Tool
	body []byte
	// args are the arguments as they will be routed: a filter may
	// rewrite them.
	args json.RawMessage
	// addHeaders are headers the filters add to a native call.
	addHeaders map[string]string
	// creds are the upstream credentials of a native call, oauth the
	// OAuth token among them (nil for none).
	creds map[string]string
	oauth *upstreamcred.Token
	// approved: the approval step granted the call (approval.go).
	approved bool
}

// stepResult is a step's verdict: nil lets the call go on to the next
// step; otherwise it is the request's answer and the call ends there.
type stepResult = *extprocv3.ProcessingResponse

// callStep is one step of the call pipeline.
type callStep interface {
	run(c *callCtx) stepResult
}

// callPipeline is the order of a tools/call's steps. A call that passes
// them all is routed: to its federated MCP server (forwardCall), else to
// its Tool Service (routedCall).
var callPipeline = [...]callStep{
	authorizeStep{},     // the caller's policies (policy.go)
	bodyLimitStep{},     // the Tool Service's maxRequestBytes
	virtualRefuseStep{}, // a virtual tool's hidden and fixed arguments refused (virtual.go)
	filterStep{},        // argument validation, or the route's filter chain
	virtualArgsStep{},   // a virtual tool's arguments rewritten into the real tool's (virtual.go)
	approvalStep{},      // the user's approval (approval.go)
	rateLimitStep{},     // rate and concurrency limits (limits.go)
	credentialsStep{},   // upstream credentials of a native call (upstreamauth.go)
}

// runCallPipeline runs the steps in order and routes the call when none
// answered.
func (x *request) runCallPipeline(c *callCtx) *extprocv3.ProcessingResponse {
	for _, step := range callPipeline {
		if r := step.run(c); r != nil {
			return r
		}
	}
	if c.tool.Federated() {
		// Filter headers are for the native contract; a federated server
		// gets its Portal headers.
		return x.forwardCall(c.call, c.tool, c.body, c.args, c.approved)
	}
	return x.routedCall(c)
}

// routedCall is the request-body reply that sends the call of cc.tool to
// its Tool Service with cc.args as the body, built from the tool's plan
// (package callplan), and makes the request a nativeCall. A call already
// routed to the tool at request headers (x.headerRoute) keeps its route.
// cc.creds are the upstream credential headers of its Tool Service
// (upstreamauth.go); the client's Authorization is removed unless they
// set it.
func (x *request) routedCall(cc *callCtx) *extprocv3.ProcessingResponse {
	call, t, args, creds := cc.call, cc.tool, cc.args, cc.creds
	k := &nativeCall{oauth: cc.oauth}
	x.outcome, x.kind = outcomeRouted, k
	p := callplan.For(x.routeKey, t)
	c := &callplan.Call{Call: call, Args: args, Rerouted: x.headerRoute != t, AddHeaders: cc.addHeaders,
		Trace: x.traceHeaders(), Creds: creds, Unset: x.unsetAuthHeaders(t.Service, creds),
		Dropped: x.droppedClientHeaders(t.Service)} // forwardheaders.go
	if x.s.wire.Load() && c.Plain() {
		// The common call, prepared from the plan's encoded pieces.
		x.prepared = p.Wire(call, args, c.Rerouted)
		return sendPrepared
	}
	r := p.Reply(c)
	if k.oauth != nil {
		// Sent again should the Tool Service refuse the token (upstream401.go).
		k.held = callplan.Hold(t, args, r)
	}
	return r
}

// authorizeStep decides the call by the route's policies.
type authorizeStep struct{}

func (authorizeStep) run(c *callCtx) stepResult { return c.x.authorizeCall(c.call, c.tool) }

// bodyLimitStep answers 413 to a body over its Tool Service's limit.
type bodyLimitStep struct{}

func (bodyLimitStep) run(c *callCtx) stepResult {
	lim := c.x.rt.bodyLimit(c.tool.Service)
	if lim <= 0 || int64(len(c.body)) <= lim {
		return nil
	}
	// The same answer as a body over the deployment-wide limit
	// (docs/contracts/mcp.md): Envoy let it through because another Tool
	// Service of the route allows more.
	return c.x.answer(mcp.ErrorReply(413, nullID, mcp.CodeInvalidRequest,
		"Request body too large: the limit is "+strconv.FormatInt(lim, 10)+" bytes", nil), "", detailsBodyTooLarge)
}

// filterStep validates the arguments against the tool's inputSchema, or,
// when the server has filters, runs the route's chain at the request
// stage (which validates as its schema filter says).
type filterStep struct{}

func (filterStep) run(c *callCtx) stepResult {
	x, call, t := c.x, c.call, c.tool
	if x.rt.Filters == nil {
		if msgs := x.validate(t, c.args); len(msgs) > 0 {
			x.callOutcome = callInvalidArgs
			return x.answer(&mcp.Reply{Status: 200, Body: x.s.proto.ToolError(call, callfilter.InvalidArgsText(t.Name, msgs))},
				outcomeInvalidArgs, detailsInvalidArguments)
		}
		return nil
	}
	a := callfilter.Request(x.ctx, x.chain, x.s.proto, x.filterCall(), c.args)
	if out := a.Out; out.Err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "filter failed", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("tool", t.Name), slog.Any("error", out.Err))
	}
	if a.Reply != nil {
		x.callOutcome = a.Outcome
		x.s.log.LogAttrs(x.ctx, slog.LevelDebug, "filter denied the call", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("tool", t.Name), slog.String("filter", a.Out.Filter),
			slog.String("reason", a.Out.Reason))
		return x.answer(a.Reply, a.Outcome, denyDetails(a.Outcome))
	}
	c.args, c.addHeaders = a.Args, a.AddHeaders
	return nil
}

// filterCall is the request's call as the filter chain sees it.
func (x *request) filterCall() callfilter.Call {
	return callfilter.Call{Route: x.routeKey, Call: x.call, Tool: x.tool, Headers: x.headers, Caller: x.caller}
}

// approvalStep asks the user to approve a call whose rule says so.
type approvalStep struct{}

func (approvalStep) run(c *callCtx) stepResult {
	r, granted := c.x.approve(c.call, c.tool)
	c.approved = granted
	return r
}

// rateLimitStep checks the route's rate and concurrency limits.
type rateLimitStep struct{}

func (rateLimitStep) run(c *callCtx) stepResult { return c.x.rateLimit(c.call, c.tool) }

// credentialsStep reads what a native call carries by its Tool Service's
// upstreamAuth entry; a federated server's are added by forwardCall.
type credentialsStep struct{}

func (credentialsStep) run(c *callCtx) stepResult {
	if c.tool.Federated() {
		return nil
	}
	creds, tok, err := c.x.upstreamCredentials(c.tool.Service)
	if err != nil {
		return c.x.noCredentials(c.call, c.tool.Service, err)
	}
	c.creds, c.oauth = creds, tok
	return nil
}
