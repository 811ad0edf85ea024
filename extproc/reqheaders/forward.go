package reqheaders

import (
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// Client request headers reach an upstream through an allow-list:
// registry.DefaultForwardHeaders plus the service's forwardHeaders. The
// routed request's header mutation removes every other header the client
// sent, so Cookie, Proxy-Authorization, X-Api-Key or a client's
// X-Forwarded-Client-Cert never reach a Tool Service or an MCP server.
//
// It is enforced in ext_proc, because that is the one place that
// knows the service and holds on real Envoy: a route's
// request_headers_to_remove can only name headers, not keep a list. Envoy
// applies remove_headers before set_headers
// (MutationUtils::applyHeaderMutations,
// source/extensions/filters/common/mutation_rules/ and
// source/extensions/filters/http/ext_proc/mutation_utils.cc) and lets an
// ext_proc server remove any header but host and ":" pseudo-headers, and
// x-envoy-* only with allow_envoy (Checker in mutation_rules.cc); those
// are left out here: the first belong to the connection, the last are
// Envoy's and a client's are removed before routing
// (internal_address_config, docs/security.md). The local data plane applies
// the same mutation under the same rules.

// handledElsewhere are client headers other code decides about: the
// client's token (forwardAuthorization, upstreamAuth), accept-encoding
// (always removed: replies are rewritten) and the connection's framing.
var handledElsewhere = map[string]bool{
	"authorization": true, "accept-encoding": true, "host": true,
	"connection": true, "keep-alive": true, "proxy-connection": true, "te": true,
	"trailer": true, "transfer-encoding": true, "upgrade": true,
}

// Dropped returns the client's request headers hm that service (of snap)
// does not accept, lower case, each once; nil in the common case of a
// client sending only default headers.
func Dropped(hm *corev3.HeaderMap, snap *registry.Snapshot, service string) []string {
	var out []string
	var allow []string
	loaded := false
	for _, h := range hm.GetHeaders() {
		k := strings.ToLower(h.GetKey())
		if registry.ForwardedByDefault(k) || handledElsewhere[k] || strings.HasPrefix(k, ":") ||
			strings.HasPrefix(k, "x-envoy-") || strings.HasPrefix(k, wire.HeaderPrefix) {
			continue
		}
		if !loaded && snap != nil {
			allow, loaded = snap.ForwardHeaders(service), true
		}
		if !slices.Contains(allow, k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
