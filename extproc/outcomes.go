package extproc

import (
	"fmt"

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

// denyDetails is the ImmediateResponse details of a denied call.
func denyDetails(outcome string) string {
	if outcome == callInvalidArgs {
		return detailsInvalidArguments
	}
	return detailsDenied
}
