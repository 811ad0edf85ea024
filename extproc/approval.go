package extproc

import (
	"encoding/json"
	"log/slog"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Gateway-side human approval (docs/decisions/0011-gateway-approval.md): a
// tools/call the route's approval rules select is answered by the gateway
// with an InputRequiredResult asking the user, through an elicitation, to
// approve it; the client's retry carrying the answer and the gateway's
// requestState is verified and routed as usual. No Tool Service is called
// before a valid approval.

// approvalInputKey is the gateway's key in inputRequests/inputResponses.
const approvalInputKey = "toolmesh_approval"

// approvalSchema is the form the user answers: one required boolean.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean",` +
	`"title":"Approve this tool call","description":"true runs the call once with exactly these arguments; false refuses it"}},` +
	`"required":["approve"]}`)

// approvalSummaryBytes bounds the arguments quoted in the approval message.
const approvalSummaryBytes = 512

// outcomeApproval is the request and call outcome of a tools/call the
// approval step answered (asked, or refused); a granted call is routed and
// ends with its call's outcome.
const (
	outcomeApproval = "approval"
	detailsApproval = "toolmesh_approval"
)

// Decisions, the decision label of toolmesh_approvals_total and of the
// audit events.
const (
	approvalRequested   = "requested"   // answered with an InputRequiredResult
	approvalGranted     = "granted"     // a valid state and the user's approval: routed
	approvalDeclined    = "declined"    // the user declined, cancelled or answered approve: false
	approvalRefused     = "refused"     // the requestState failed verification, or the arguments cannot be bound
	approvalUnsupported = "unsupported" // the client cannot carry an approval (legacy era, no elicitation)
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
// route it; otherwise the answer. It runs before anything is sent to a Tool
// Service.
func (x *request) approve(call *mcp.Call, t *registry.Tool) *extprocv3.ProcessingResponse {
	a := x.rt.Approval
	if a == nil {
		return nil
	}
	need, why := a.Needs(x.routeKey, approvalTool(t), approval.Call{Caller: x.policyCaller,
		Era: call.Version, EraKind: call.Era.String(), Args: call.Arguments})
	if !need {
		return nil
	}
	b := approval.Binding{Route: x.routeKey, Tool: t.Name, Service: t.Service, Args: call.Arguments,
		Caller: approval.CallerKey(x.caller)}

	if call.Era != mcp.EraStateless {
		x.auditApproval(t, approvalUnsupported, "legacy protocol version "+call.Version)
		return x.approvalAnswer(&mcp.Reply{Status: 200, Body: x.s.proto.ToolError(call, mcp.ToolFailed(t.Name,
			"approval required: a person must approve calls of this tool at the gateway (route "+x.routeKey+
				", "+why+"), and protocol version "+call.Version+" cannot carry the approval request. "+
				"Call it with protocol version "+mcp.Version20260728+" from a client that declares the elicitation capability, "+
				"or ask the operator to exempt the tool (approval.routes."+x.routeKey+".exempt)."))})
	}

	in := call.Input
	if in != nil && in.HasRequestState {
		if err := a.Verify(in.RequestState, b); err != nil {
			reason := approval.ReasonOf(err)
			x.auditApproval(t, approvalRefused, string(reason))
			return x.approvalAnswer(mcp.ErrorReply(200, call.ID, mcp.CodeInvalidParams,
				"Invalid params: requestState rejected: "+refusalText(reason, in.RequestState),
				map[string]string{"reason": string(reason)}))
		}
		if r, ok := in.Elicited(approvalInputKey); ok {
			approve, isBool := r.Bool("approve")
			switch {
			case r.Action == "accept" && isBool && approve:
				// One approval runs one call (ADR 0011).
				if err := a.Spend(x.ctx, in.RequestState); err != nil {
					reason := approval.ReasonOf(err)
					x.auditApproval(t, approvalRefused, string(reason))
					if reason == approval.ReasonUnavailable {
						x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "approval ledger failed", slog.String("request_id", x.requestID),
							slog.String("route", x.routeKey), slog.String("tool", t.Name), slog.Any("error", err))
					}
					return x.approvalAnswer(mcp.ErrorReply(200, call.ID, mcp.CodeInvalidParams,
						"Invalid params: requestState rejected: "+refusalText(reason, in.RequestState),
						map[string]string{"reason": string(reason)}))
				}
				x.auditApproval(t, approvalGranted, why)
				x.approved = true
				return nil
			case r.Action == "accept" && isBool, r.Action == "decline", r.Action == "cancel":
				x.auditApproval(t, approvalDeclined, r.Action)
				return x.approvalAnswer(&mcp.Reply{Status: 200, Body: x.s.proto.ToolError(call, mcp.ToolFailed(t.Name,
					"not approved: the user did not approve this call ("+r.Action+"); the tool was not called"))})
			}
		}
		// A valid state without a usable answer: ask again (the MRTR
		// pattern's answer to missing input).
	}
	if in == nil || !in.Elicitation {
		x.auditApproval(t, approvalUnsupported, "no elicitation capability")
		return x.approvalAnswer(mcp.MissingCapability(call.ID, json.RawMessage(`{"elicitation":{"form":{}}}`),
			"Missing required client capability: tool "+t.Name+" needs a person's approval at the gateway, asked through "+
				"elicitation; declare the elicitation capability in _meta "+mcp.MetaClientCapabilities))
	}
	state, err := a.Mint(b)
	if err != nil {
		reason := approval.ReasonOf(err)
		x.auditApproval(t, approvalRefused, string(reason))
		return x.approvalAnswer(mcp.ErrorReply(200, call.ID, mcp.CodeInvalidParams,
			"Invalid params: the arguments cannot be approved: an object repeats a member name", map[string]string{"reason": string(reason)}))
	}
	x.auditApproval(t, approvalRequested, why)
	msg := "Approve a call of tool \"" + t.Name + "\" (Tool Service \"" + t.Service + "\", route \"" + x.routeKey + "\")?\n" +
		"Arguments: " + approval.Summary(call.Arguments, approvalSummaryBytes) + "\n" +
		"Approval is required because of " + why + ". It approves one call with these exact arguments and expires in " + a.TTL().String() + "."
	return x.approvalAnswer(&mcp.Reply{Status: 200,
		Body: x.s.proto.InputRequired(call, approvalInputKey, mcp.ElicitRequest{Message: msg, Schema: approvalSchema}, state)})
}

// refusalText is the error message of a refused state.
func refusalText(r approval.Reason, state string) string {
	switch r {
	case approval.ReasonExpired:
		return "the approval expired; call again without requestState to be asked again"
	case approval.ReasonUnknownKey:
		return "it was signed with a key this gateway does not hold (rotated out); call again without requestState"
	case approval.ReasonMalformed:
		if !approval.IsGatewayState(state) {
			return "it was not issued by this gateway's approval step (a tool that needs approval cannot also take another server's requestState)"
		}
		return "malformed"
	case approval.ReasonBadSignature:
		return "integrity check failed"
	case approval.ReasonBadArguments:
		return "the arguments repeat a member name"
	case approval.ReasonSpent:
		return "this approval was already used for a call; call again without requestState to be asked again"
	case approval.ReasonUnavailable:
		return "the gateway could not record the approval as used; call again without requestState"
	}
	return "it was issued for another call (" + string(r) + ")"
}

// approvalAnswer answers a call the approval step stopped.
func (x *request) approvalAnswer(r *mcp.Reply) *extprocv3.ProcessingResponse {
	x.callOutcome = outcomeApproval
	if r.Headers == nil {
		r.Headers = []mcp.Header{{Key: "content-type", Value: contentTypeJSON}}
	}
	return x.answer(r, outcomeApproval, detailsApproval)
}

// auditApproval records one approval decision: a structured audit event and
// toolmesh_approvals_total.
func (x *request) auditApproval(t *registry.Tool, decision, reason string) {
	x.s.metrics.approvals.WithLabelValues(x.routeKey, decision).Inc()
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
