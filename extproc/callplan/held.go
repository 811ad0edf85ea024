package callplan

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// Held is a routed call as its Reply sent it, kept while the call carries
// a token the gateway obtained, so that the gateway can send it once more
// itself should the Tool Service refuse the token with a 401
// (docs/identity.md, "When the upstream answers 401").
type Held struct {
	// Path is the upstream :path, Body the arguments.
	Path string
	Body []byte

	set    []*corev3.HeaderValueOption // the headers the reply set
	remove []string                    // and removed
}

// Hold keeps the call of t with args that r, its Reply, sends.
func Hold(t *registry.Tool, args []byte, r *extprocv3.ProcessingResponse) *Held {
	m := r.GetRequestBody().GetResponse().GetHeaderMutation()
	return &Held{Path: t.BasePath + t.Path, Body: args, set: m.GetSetHeaders(), remove: m.GetRemoveHeaders()}
}

// notResent are client headers a call sent again never copies: the
// connection's and the framing's (the HTTP client sets its own), and the
// client's token (not the Tool Service's, ADR 0010).
var notResent = map[string]bool{
	"host": true, "content-length": true, "connection": true, "keep-alive": true, "proxy-connection": true,
	"te": true, "trailer": true, "transfer-encoding": true, "upgrade": true, "accept-encoding": true, "authorization": true,
}

// Header is the call's headers when sent again: the client's headers
// (client) the routed request kept, then the ones the reply set, then
// creds (the new token). Envoy's routing headers are not the Tool
// Service's.
func (h *Held) Header(client *corev3.HeaderMap, creds map[string]string) http.Header {
	out := http.Header{}
	for _, hv := range client.GetHeaders() {
		k := strings.ToLower(hv.GetKey())
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "x-envoy-") || strings.HasPrefix(k, wire.HeaderPrefix) ||
			notResent[k] || slices.Contains(h.remove, k) {
			continue
		}
		out.Add(k, procmsg.HeaderValue(hv))
	}
	for _, o := range h.set {
		k := strings.ToLower(o.GetHeader().GetKey())
		if strings.HasPrefix(k, ":") || k == "content-length" || k == wire.ClusterHeader {
			continue
		}
		out.Set(k, procmsg.HeaderValue(o.GetHeader()))
	}
	for k, v := range creds {
		out.Set(k, v)
	}
	return out
}

// URL is the call's URL on the Tool Service whose URL is serviceURL, as
// Envoy's cluster reaches it (scheme and authority, then Path); "" when
// serviceURL does not parse.
func (h *Held) URL(serviceURL string) string {
	u, err := url.Parse(serviceURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host + h.Path
}
