package registry

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
)

// The Portal fields of a federated MCP server (protocol mcp) and the
// credentials its headers name. See docs/contracts/portal.md.

// MaxToolPrefixLen bounds toolPrefix, so that prefix plus an upstream name
// has room within the 128 characters of a tool name.
const MaxToolPrefixLen = 32

var (
	// toolPrefixRE admits only characters a tool name may contain.
	toolPrefixRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)
	// headerNameRE is an HTTP field name (RFC 9110 token).
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// reservedHeaders are the headers toolmesh sets itself on a request to an
// MCP server, or that belong to the connection: a Portal header must not
// replace them.
var reservedHeaders = []string{
	"accept", "connection", "content-length", "content-type", "host", "keep-alive",
	"last-event-id", "mcp-method", "mcp-name", "mcp-protocol-version", "mcp-session-id",
	"proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
}

// checkProtocol returns the problems of the protocol-dependent fields of a
// Tool Service; each error starts with the field name.
func (s ToolService) checkProtocol() []error {
	var errs []error
	switch s.Protocol {
	case "", ProtocolMCP:
	case ProtocolToolService:
		// The native contract is the default; spelling it out would give
		// the same service two definitions (and two snapshot versions).
		errs = append(errs, fmt.Errorf("protocol: %q is the default; leave protocol out", s.Protocol))
	default:
		errs = append(errs, fmt.Errorf("protocol: %q is not %q (leave it out for the Tool Service contract)", s.Protocol, ProtocolMCP))
	}
	if !s.IsMCP() {
		if len(s.Headers) > 0 {
			errs = append(errs, errors.New("headers: only allowed with protocol mcp"))
		}
		if s.ToolPrefix != "" {
			errs = append(errs, errors.New("toolPrefix: only allowed with protocol mcp"))
		}
		if s.ForwardAuthorization {
			errs = append(errs, errors.New("forwardAuthorization: only allowed with protocol mcp"))
		}
		if s.AllowSameOriginRedirects {
			errs = append(errs, errors.New("allowSameOriginRedirects: only allowed with protocol mcp"))
		}
		if s.TrustAnnotations {
			errs = append(errs, errors.New("trustAnnotations: only allowed with protocol mcp (a Tool Service's manifest is trusted)"))
		}
		if s.ListingBounds != nil {
			errs = append(errs, errors.New("listingBounds: only allowed with protocol mcp (a manifest has the manifest size limit)"))
		}
		return errs
	}
	if s.ManifestPath != "" {
		errs = append(errs, errors.New("manifestPath: not allowed with protocol mcp (url is the MCP endpoint)"))
	}
	errs = append(errs, s.ListingBounds.Check("listingBounds")...)
	if s.ToolPrefix != "" && !toolPrefixRE.MatchString(s.ToolPrefix) {
		errs = append(errs, fmt.Errorf("toolPrefix: %q must be 1-%d characters of A-Z a-z 0-9 _ . -", s.ToolPrefix, MaxToolPrefixLen))
	}
	for _, name := range sortedHeaderNames(s.Headers) {
		h := s.Headers[name]
		switch {
		case !headerNameRE.MatchString(name):
			errs = append(errs, fmt.Errorf("headers: %q is not a valid HTTP header name", name))
		case slices.Contains(reservedHeaders, strings.ToLower(name)):
			errs = append(errs, fmt.Errorf("headers.%s: set by toolmesh itself; not configurable", name))
		case strings.HasPrefix(strings.ToLower(name), wire.HeaderPrefix):
			errs = append(errs, fmt.Errorf("headers.%s: the %s prefix is toolmesh's own", name, wire.HeaderPrefix))
		}
		if !config.ValidCredentialName(h.Credential) {
			errs = append(errs, fmt.Errorf("headers.%s.credential: %q must match %s (the name of a credential in the toolmesh config file, never the secret)", name, h.Credential, config.CredentialNamePattern))
		}
		if h.Value != "" {
			errs = append(errs, fmt.Errorf("headers.%s.value: inline header values are not accepted, the Portal must not carry secrets; name a credential of the toolmesh config file instead", name))
		}
		if !config.ValidHeaderText(h.Prefix) {
			errs = append(errs, fmt.Errorf("headers.%s.prefix: must not contain control characters", name))
		}
	}
	if s.ForwardAuthorization {
		for name := range s.Headers {
			if strings.EqualFold(name, "authorization") {
				errs = append(errs, fmt.Errorf("forwardAuthorization: conflicts with headers.%s (the client's Authorization would be replaced); choose one", name))
			}
		}
	}
	// Two spellings of one header name would be sent as one header.
	seen := map[string]string{}
	for _, name := range sortedHeaderNames(s.Headers) {
		if other, dup := seen[strings.ToLower(name)]; dup {
			errs = append(errs, fmt.Errorf("headers: %q and %q name the same header", other, name))
		}
		seen[strings.ToLower(name)] = name
	}
	return errs
}

func sortedHeaderNames(h map[string]HeaderValue) []string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
