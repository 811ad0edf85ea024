package extproc

import (
	"errors"
	"log/slog"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/callfilter"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/surface"
)

// Virtual tools (registry/surface, docs/surface.md): the snapshot holds a
// route's virtual tool in place of the real one, so lists, search,
// policies, approval, schema validation and filters all see it. What is
// left for the call path is the way up: the real tool's name (the
// snapshot's UpstreamName for a federated tool, x-toolmesh-tool from
// ServiceToolName for a native one) and its arguments, rewritten here.

// virtualArguments returns args (the client's, after the filters) as the
// real tool receives them: the fixed arguments and the missing defaults
// added. A client argument the override hides or fixes is refused as
// invalid arguments, like a schema violation, and never reaches the
// upstream.
func (x *request) virtualArguments(call *mcp.Call, t *registry.Tool, args []byte) ([]byte, *extprocv3.ProcessingResponse) {
	out, err := t.Args.Rewrite(args)
	if err == nil {
		return out, nil
	}
	msg := err.Error()
	var ae *surface.ArgumentError
	if errors.As(err, &ae) {
		msg = ae.Error()
	}
	x.s.log.LogAttrs(x.ctx, slog.LevelDebug, "virtual tool refused an argument", slog.String("request_id", x.requestID),
		slog.String("route", x.routeKey), slog.String("tool", t.Name), slog.String("reason", msg))
	x.callOutcome = callInvalidArgs
	return nil, x.answer(&mcp.Reply{Status: 200, Body: x.s.proto.ToolError(call, callfilter.InvalidArgsText(t.Name, []string{msg}))},
		outcomeInvalidArgs, detailsInvalidArguments)
}

// virtualRefuseStep refuses a virtual tool's call that sends an argument
// the override hides or fixes, before validation, filters or approval see
// it.
type virtualRefuseStep struct{}

func (virtualRefuseStep) run(c *callCtx) stepResult {
	if c.tool.Args == nil {
		return nil
	}
	_, r := c.x.virtualArguments(c.call, c.tool, c.args)
	return r
}

// virtualArgsStep rewrites the arguments, as the filters left them, into
// the real tool's: fixed arguments and missing defaults added.
type virtualArgsStep struct{}

func (virtualArgsStep) run(c *callCtx) stepResult {
	if c.tool.Args == nil {
		return nil
	}
	args, r := c.x.virtualArguments(c.call, c.tool, c.args)
	if r == nil {
		c.args = args
	}
	return r
}
