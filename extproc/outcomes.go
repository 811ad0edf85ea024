package extproc

import (
	"fmt"
	"strings"

	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
)

// What a call came to: its outcome label, and the texts of the answers that
// end it here.

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// upstreamOutcome is the call outcome of a Tool Service reply.
func upstreamOutcome(u mcp.Upstream) string {
	switch {
	case u.Failure == mcp.FailureTooLarge:
		return callTooLarge
	case u.Failure != mcp.FailureNone:
		return callNoResponse
	case u.Status >= 200 && u.Status <= 299:
		return callOK
	case u.Status >= 400 && u.Status <= 499:
		return callUpstream4xx
	case u.Status >= 500 && u.Status <= 599:
		return callUpstream5xx
	}
	return callToolError
}

// denyOutcome is the outcome of a call a filter denied: a failed inputSchema
// is invalid arguments, as without filters; anything else is a denial.
func denyOutcome(out *filters.Outcome) string {
	if out.SchemaInvalid {
		return callInvalidArgs
	}
	return callDenied
}

// denyDetails is the ImmediateResponse details of a denied call.
func denyDetails(outcome string) string {
	if outcome == callInvalidArgs {
		return detailsInvalidArguments
	}
	return detailsDenied
}

// invalidArgsText is the isError text of arguments that failed the tool's
// inputSchema, the same with filters (the input_schema filter) and without.
func invalidArgsText(tool string, msgs []string) string {
	return mcp.ToolFailed(tool, "invalid arguments: "+strings.Join(msgs, "; "))
}

// denyText is the isError text of a call (or result) a filter denied.
func denyText(tool string, out *filters.Outcome) string {
	if out.SchemaInvalid {
		return mcp.ToolFailed(tool, out.Reason) // "invalid arguments: ..."
	}
	return mcp.ToolFailed(tool, "denied: "+out.Reason)
}
