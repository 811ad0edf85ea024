package extproc

import (
	"log/slog"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Gateway-side human approval (docs/decisions/0011-gateway-approval.md):
// the step's decisions are package approval's (Approver.Step); this file
// applies them to the request, audits and counts them.

// outcomeApproval is the request and call outcome of a tools/call the
// approval step answered (asked, or refused); a granted call is routed and
// ends with its call's outcome.
const (
	outcomeApproval = "approval"
	detailsApproval = "toolmesh_approval"
)

// mayNeedApproval reports whether a stateless call of t, known by its
// headers only, may need approval under the request's Runtime: a rule
// whose when condition reads the arguments or the caller counts as "may",
// so the call is not routed early. The body phase decides with the same
// Runtime.
func (x *request) mayNeedApproval(t *registry.Tool) bool {
	a := x.rt.Approval
	if a == nil {
		return false // no approval configured: nothing to build per call
	}
	v := strings.TrimSpace(x.req.ProtocolVersion)
	need, _ := a.Needs(x.routeKey, approvalTool(t),
		approval.Call{HeadersOnly: true, Era: v, EraKind: mcp.EraOf(v).String()})
	return need
}

func approvalTool(t *registry.Tool) approval.Tool {
	return approval.Tool{Name: t.Name, Service: t.Service, Title: t.Title, Annotations: t.Annotations,
		Untrusted: t.UntrustedAnnotations}
}

// approve is the approval step of a resolved, validated call: nil means
// route it (granted when a rule asked and the user approved); otherwise
// the answer. It runs before anything is sent to a Tool Service.
func (x *request) approve(call *mcp.Call, t *registry.Tool) (_ *extprocv3.ProcessingResponse, granted bool) {
	a := x.rt.Approval
	if a == nil {
		return nil, false
	}
	v := a.Step(x.ctx, x.s.proto, approval.StepCall{Route: x.routeKey, Tool: approvalTool(t), Call: call,
		Caller: x.policyCaller, CallerKey: approval.CallerKey(x.caller)})
	if v.Decision == "" {
		return nil, false
	}
	x.auditApproval(t, v.Decision, v.Reason)
	if v.LedgerErr != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "approval ledger failed", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("tool", t.Name), slog.Any("error", v.LedgerErr))
	}
	if v.Reply == nil { // granted
		return nil, true
	}
	x.callOutcome = outcomeApproval
	r := v.Reply
	if r.Headers == nil {
		r.Headers = []mcp.Header{{Key: "content-type", Value: procmsg.ContentTypeJSON}}
	}
	return x.answer(r, outcomeApproval, detailsApproval), false
}

// auditApproval records one approval decision: a structured audit event and
// toolmesh_approvals_total.
func (x *request) auditApproval(t *registry.Tool, decision, reason string) {
	x.s.metrics.Approvals.WithLabelValues(x.routeKey, decision).Inc()
	x.s.log.LogAttrs(x.ctx, slog.LevelInfo, "audit",
		slog.String("event", "approval"),
		slog.String("caller", x.caller.String()),
		slog.String("route", x.routeKey),
		slog.String("tool", t.Name),
		slog.String("service", t.Service),
		slog.String("decision", decision),
		slog.String("reason", reason),
		slog.String("request_id", x.requestID))
}
