package approval

import (
	"context"
	"encoding/json"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/mcp"
)

// The approval step of the call pipeline (ADR 0011): a tools/call the
// route's rule selects is answered with an InputRequiredResult asking the
// user, through an elicitation, to approve it; the client's retry carrying
// the answer and the gateway's requestState is verified and routed as
// usual. No Tool Service is called before a valid approval.

// InputKey is the gateway's key in inputRequests/inputResponses.
const InputKey = "toolmesh_approval"

// schema is the form the user answers: one required boolean.
var schema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean",` +
	`"title":"Approve this tool call","description":"true runs the call once with exactly these arguments; false refuses it"}},` +
	`"required":["approve"]}`)

// summaryBytes bounds the arguments quoted in the approval message.
const summaryBytes = 512

// Decisions of the step, the decision label of toolmesh_approvals_total and
// of the audit events.
const (
	Requested   = "requested"   // answered with an InputRequiredResult
	Granted     = "granted"     // a valid state and the user's approval: routed
	Declined    = "declined"    // the user declined, cancelled or answered approve: false
	Refused     = "refused"     // the requestState failed verification, or the arguments cannot be bound
	Unsupported = "unsupported" // the client cannot carry an approval (legacy era, no elicitation)
)

// StepCall is one resolved, validated tools/call as the step sees it.
type StepCall struct {
	Route string
	Tool  Tool
	Call  *mcp.Call
	// Caller is the caller prepared for evaluation, called only when a
	// rule's condition reads it; CallerKey binds the approval to it.
	Caller    func() *authz.Caller
	CallerKey string
}

// Verdict is what the step decided of a call.
type Verdict struct {
	// Decision is "" when the call needs no approval, else one of the
	// decisions above; Reason says why, for the audit.
	Decision, Reason string
	// Reply is the call's answer; nil: route the call.
	Reply *mcp.Reply
	// LedgerErr is the ledger's failure, when it could not record a spent
	// approval (ReasonUnavailable): the operator's to see.
	LedgerErr error
}

// Step decides one call: whether it needs approval and, if so, the
// answer that asks for it, or that the client's answer grants it (Reply
// nil, Decision Granted). proto writes the answers.
func (a *Approver) Step(ctx context.Context, proto *mcp.Server, c StepCall) Verdict {
	call, t := c.Call, c.Tool
	need, why := a.Needs(c.Route, t, Call{Caller: c.Caller,
		Era: call.Version, EraKind: call.Era.String(), Args: call.Arguments})
	if !need {
		return Verdict{}
	}
	b := Binding{Route: c.Route, Tool: t.Name, Service: t.Service, Args: call.Arguments, Caller: c.CallerKey}

	if call.Era != mcp.EraStateless {
		return Verdict{Decision: Unsupported, Reason: "legacy protocol version " + call.Version,
			Reply: &mcp.Reply{Status: 200, Body: proto.ToolError(call, mcp.ToolFailed(t.Name,
				"approval required: a person must approve calls of this tool at the gateway (route "+c.Route+
					", "+why+"), and protocol version "+call.Version+" cannot carry the approval request. "+
					"Call it with protocol version "+mcp.Version20260728+" from a client that declares the elicitation capability, "+
					"or ask the operator to exempt the tool (approval.routes."+c.Route+".exempt)."))}}
	}

	in := call.Input
	if in != nil && in.HasRequestState {
		if err := a.Verify(in.RequestState, b); err != nil {
			return refused(call, ReasonOf(err), in.RequestState)
		}
		if r, ok := in.Elicited(InputKey); ok {
			approve, isBool := r.Bool("approve")
			switch {
			case r.Action == "accept" && isBool && approve:
				// One approval runs one call (ADR 0011).
				if err := a.Spend(ctx, in.RequestState); err != nil {
					v := refused(call, ReasonOf(err), in.RequestState)
					if ReasonOf(err) == ReasonUnavailable {
						v.LedgerErr = err
					}
					return v
				}
				return Verdict{Decision: Granted, Reason: why}
			case r.Action == "accept" && isBool, r.Action == "decline", r.Action == "cancel":
				return Verdict{Decision: Declined, Reason: r.Action,
					Reply: &mcp.Reply{Status: 200, Body: proto.ToolError(call, mcp.ToolFailed(t.Name,
						"not approved: the user did not approve this call ("+r.Action+"); the tool was not called"))}}
			}
		}
		// A valid state without a usable answer: ask again (the MRTR
		// pattern's answer to missing input).
	}
	if in == nil || !in.Elicitation {
		return Verdict{Decision: Unsupported, Reason: "no elicitation capability",
			Reply: mcp.MissingCapability(call.ID, json.RawMessage(`{"elicitation":{"form":{}}}`),
				"Missing required client capability: tool "+t.Name+" needs a person's approval at the gateway, asked through "+
					"elicitation; declare the elicitation capability in _meta "+mcp.MetaClientCapabilities)}
	}
	state, err := a.Mint(b)
	if err != nil {
		reason := ReasonOf(err)
		return Verdict{Decision: Refused, Reason: string(reason), Reply: mcp.ErrorReply(200, call.ID, mcp.CodeInvalidParams,
			"Invalid params: the arguments cannot be approved: an object repeats a member name", map[string]string{"reason": string(reason)})}
	}
	msg := "Approve a call of tool \"" + t.Name + "\" (Tool Service \"" + t.Service + "\", route \"" + c.Route + "\")?\n" +
		"Arguments: " + Summary(call.Arguments, summaryBytes) + "\n" +
		"Approval is required because of " + why + ". It approves one call with these exact arguments and expires in " + a.TTL().String() + "."
	return Verdict{Decision: Requested, Reason: why, Reply: &mcp.Reply{Status: 200,
		Body: proto.InputRequired(call, InputKey, mcp.ElicitRequest{Message: msg, Schema: schema}, state)}}
}

// refused is the verdict on a requestState that failed verification.
func refused(call *mcp.Call, reason Reason, state string) Verdict {
	return Verdict{Decision: Refused, Reason: string(reason), Reply: mcp.ErrorReply(200, call.ID, mcp.CodeInvalidParams,
		"Invalid params: requestState rejected: "+refusalText(reason, state),
		map[string]string{"reason": string(reason)})}
}

// refusalText is the error message of a refused state.
func refusalText(r Reason, state string) string {
	switch r {
	case ReasonExpired:
		return "the approval expired; call again without requestState to be asked again"
	case ReasonUnknownKey:
		return "it was signed with a key this gateway does not hold (rotated out); call again without requestState"
	case ReasonMalformed:
		if !IsGatewayState(state) {
			return "it was not issued by this gateway's approval step (a tool that needs approval cannot also take another server's requestState)"
		}
		return "malformed"
	case ReasonBadSignature:
		return "integrity check failed"
	case ReasonBadArguments:
		return "the arguments repeat a member name"
	case ReasonSpent:
		return "this approval was already used for a call; call again without requestState to be asked again"
	case ReasonUnavailable:
		return "the gateway could not record the approval as used; call again without requestState"
	}
	return "it was issued for another call (" + string(r) + ")"
}
