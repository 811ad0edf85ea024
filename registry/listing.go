package registry

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry/search"
	"github.com/toolmesh/toolmesh/registry/surface"
)

// DefaultManifestPath is the manifest path of a Tool Service that names none.
const DefaultManifestPath = "/manifest"

// nameRE is the shape of route keys and Tool Service names (docs/contracts/portal.md). Both
// end up in Envoy resource names and URL paths, so they stay DNS-label-like.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// lbPolicies are the load-balancing policies a cluster may ask for.
var lbPolicies = map[string]bool{
	"ROUND_ROBIN": true, "LEAST_REQUEST": true, "RANDOM": true, "RING_HASH": true, "MAGLEV": true,
}

// DecodeListing decodes a Portal listing, JSON or YAML, with the zero
// [ListingDecoder]: unknown fields are ignored; everything else is as
// [ListingDecoder.Decode] says.
func DecodeListing(data []byte) (*Listing, error) { return ListingDecoder{}.Decode(data) }

// Validate checks every rule of docs/contracts/portal.md and fills in the defaults
// (publicPath, manifestPath) in place. It reports every problem at once
// (joined), each naming the route, Tool Service and field. Validate is
// idempotent.
func (l *Listing) Validate() error {
	var errs []error
	keys := map[string]bool{}
	paths := map[string]string{}         // publicPath → route key
	services := map[string]ToolService{} // name → first definition seen
	owner := map[string]string{}         // service name → route of the first definition
	for i := range l.Routes {
		r := &l.Routes[i]
		errs = append(errs, r.normalize(i)...)
		where := routeLabel(i, r.Key)
		if r.Surface != nil {
			errs = append(errs, fmt.Errorf("%s: surface: is the gateway's own (the toolmesh config's surface block), not the Portal's", where))
		}
		if r.Key != "" {
			if keys[r.Key] {
				errs = append(errs, fmt.Errorf("%s: key: duplicate route key", where))
			}
			keys[r.Key] = true
		}
		if other, dup := paths[r.PublicPath]; dup && r.PublicPath != "" {
			errs = append(errs, fmt.Errorf("%s: publicPath: %q is already used by route %q", where, r.PublicPath, other))
		} else {
			paths[r.PublicPath] = r.Key
		}
		for _, s := range r.ToolServices {
			if s.Name == "" {
				continue
			}
			first, seen := services[s.Name]
			if !seen {
				services[s.Name] = s
				owner[s.Name] = r.Key
				continue
			}
			if !sameCluster(first, s) {
				errs = append(errs, fmt.Errorf("%s: tool service %q: url, protocol, manifestPath, headers, toolPrefix, forwardAuthorization, trustAnnotations, forwardHeaders, listingBounds and cluster must match its definition in route %q (one Tool Service is one cluster)",
					where, s.Name, owner[s.Name]))
			}
		}
	}
	return errors.Join(errs...)
}

// normalize validates one route on its own and fills in its defaults; i is
// its index in the listing, used to name it when the key is missing.
func (r *Route) normalize(i int) []error {
	var errs []error
	where := routeLabel(i, r.Key)
	if !nameRE.MatchString(r.Key) {
		errs = append(errs, fmt.Errorf("%s: key: must match %s", where, nameRE))
	}
	if r.PublicPath == "" && r.Key != "" {
		r.PublicPath = "/mcp/" + r.Key
	}
	if err := checkPublicPath(r.PublicPath); err != nil {
		errs = append(errs, fmt.Errorf("%s: publicPath: %w", where, err))
	}
	if r.Catalog != nil {
		for _, err := range r.Catalog.check() {
			errs = append(errs, fmt.Errorf("%s: catalog.%w", where, err))
		}
	}
	if len(r.ToolServices) == 0 {
		errs = append(errs, fmt.Errorf("%s: toolServices: at least one is required", where))
	}
	if len(r.Instructions) > MaxServerInstructions || !utf8.ValidString(r.Instructions) {
		errs = append(errs, fmt.Errorf("%s: instructions: must be valid UTF-8 of at most %d bytes, has %d", where, MaxServerInstructions, len(r.Instructions)))
	}
	names := map[string]bool{}
	for j := range r.ToolServices {
		s := &r.ToolServices[j]
		label := fmt.Sprintf("%s: tool service %q", where, s.Name)
		if s.Name == "" {
			label = fmt.Sprintf("%s: toolServices[%d]", where, j)
		}
		if !nameRE.MatchString(s.Name) {
			errs = append(errs, fmt.Errorf("%s: name: must match %s", label, nameRE))
		} else if names[s.Name] {
			errs = append(errs, fmt.Errorf("%s: name: listed twice in the route", label))
		}
		names[s.Name] = true
		if _, _, _, _, err := s.Endpoint(); err != nil {
			errs = append(errs, fmt.Errorf("%s: url: %w", label, err))
		}
		for _, err := range append(s.checkProtocol(), s.checkForwardHeaders()...) {
			errs = append(errs, fmt.Errorf("%s: %w", label, err))
		}
		if !s.IsMCP() {
			if s.ManifestPath == "" {
				// Written only when empty: a Source may hand the same
				// Listing to every refresh while the last one is read,
				// and an idempotent Validate must then write nothing.
				s.ManifestPath = DefaultManifestPath
			}
			if err := checkRequestPath(s.ManifestPath, true); err != nil {
				errs = append(errs, fmt.Errorf("%s: manifestPath: %w", label, err))
			}
		}
		if len(s.AcceptedHashes) > 0 {
			if err := (surface.Policy{Accepted: s.AcceptedHashes}).Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: acceptedHashes: %w", label, err))
			}
		}
		if s.Cluster != nil {
			for _, err := range s.Cluster.check() {
				errs = append(errs, fmt.Errorf("%s: cluster.%w", label, err))
			}
		}
	}
	return errs
}

func routeLabel(i int, key string) string {
	if key == "" {
		return fmt.Sprintf("routes[%d]", i)
	}
	return fmt.Sprintf("route %q", key)
}

// Path returns the route's public path: PublicPath, or /mcp/{key} when unset.
func (r Route) Path() string {
	if r.PublicPath != "" {
		return r.PublicPath
	}
	return "/mcp/" + r.Key
}

// checkPublicPath enforces what Envoy's path_separated_prefix match and an
// exact lookup need: an absolute, normalized path with no query, no encoded
// slash and no trailing slash.
func checkPublicPath(p string) error {
	if err := checkRequestPath(p, false); err != nil {
		return err
	}
	if strings.Contains(p, "//") {
		return errors.New("must not contain an empty segment (//)")
	}
	if strings.Contains(strings.ToLower(p), "%2f") {
		return errors.New("must not contain an encoded slash (%2F)")
	}
	if strings.HasSuffix(p, "/") {
		return errors.New("must not end with /")
	}
	return nil
}

// checkRequestPath checks a path that is sent on the wire or matched on:
// it starts with /, has no .. , no fragment, no blanks or control characters,
// and a query only where allowQuery says so.
func checkRequestPath(p string, allowQuery bool) error {
	switch {
	case p == "":
		return errors.New("required")
	case p[0] != '/':
		return fmt.Errorf("%q must start with /", p)
	case strings.Contains(p, ".."):
		return fmt.Errorf("%q must not contain \"..\"", p)
	case strings.ContainsRune(p, '#'):
		return fmt.Errorf("%q must not contain a fragment", p)
	case !allowQuery && strings.ContainsRune(p, '?'):
		return fmt.Errorf("%q must not contain a query", p)
	}
	for _, c := range p {
		if c <= ' ' || c == 0x7f {
			return fmt.Errorf("%q must not contain blanks or control characters", p)
		}
	}
	return nil
}

// Endpoint splits the Tool Service URL into what a cluster needs: scheme
// (http or https), host (without brackets for IPv6), port (the scheme's
// default when absent) and basePath (the URL's path without a trailing
// slash, "" for none). It fails for anything but an absolute http(s) URL with
// a host and no user info, query or fragment.
func (s ToolService) Endpoint() (scheme, host string, port uint32, basePath string, err error) {
	if s.URL == "" {
		return "", "", 0, "", errors.New("required")
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return "", "", 0, "", fmt.Errorf("invalid: %w", err)
	}
	switch u.Scheme {
	case "http":
		port = 80
	case "https":
		port = 443
	default:
		return "", "", 0, "", fmt.Errorf("%q: scheme must be http or https", s.URL)
	}
	host = u.Hostname()
	if host == "" {
		return "", "", 0, "", fmt.Errorf("%q: host is required", s.URL)
	}
	if u.User != nil {
		return "", "", 0, "", fmt.Errorf("%q: user info is not allowed", s.URL)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", "", 0, "", fmt.Errorf("%q: query and fragment are not allowed", s.URL)
	}
	if ps := u.Port(); ps != "" {
		n, perr := strconv.ParseUint(ps, 10, 16)
		if perr != nil || n == 0 {
			return "", "", 0, "", fmt.Errorf("%q: invalid port %q", s.URL, ps)
		}
		port = uint32(n)
	} else if strings.HasSuffix(u.Host, ":") {
		return "", "", 0, "", fmt.Errorf("%q: empty port", s.URL)
	}
	if strings.ContainsAny(host, " \t\r\n") || (strings.Contains(host, ":") && net.ParseIP(host) == nil) {
		return "", "", 0, "", fmt.Errorf("%q: invalid host", s.URL)
	}
	basePath = strings.TrimRight(u.EscapedPath(), "/")
	if basePath != "" {
		if err := checkRequestPath(basePath, false); err != nil {
			return "", "", 0, "", fmt.Errorf("path: %w", err)
		}
	}
	return u.Scheme, host, port, basePath, nil
}

// ManifestURL is where the Tool Service's manifest is fetched:
// {url}{manifestPath}, with the default manifest path when none is set.
func (s ToolService) ManifestURL() string {
	mp := s.ManifestPath
	mp = cmp.Or(mp, DefaultManifestPath)
	return strings.TrimRight(s.URL, "/") + mp
}

// sameCluster reports whether two definitions of one Tool Service name agree
// on everything that makes up its cluster.
func sameCluster(a, b ToolService) bool {
	if strings.TrimRight(a.URL, "/") != strings.TrimRight(b.URL, "/") || a.ManifestPath != b.ManifestPath ||
		a.Protocol != b.Protocol || a.ToolPrefix != b.ToolPrefix || !maps.Equal(a.Headers, b.Headers) ||
		a.ForwardAuthorization != b.ForwardAuthorization || a.AllowSameOriginRedirects != b.AllowSameOriginRedirects ||
		a.TrustAnnotations != b.TrustAnnotations || !slices.Equal(a.ForwardHeaders, b.ForwardHeaders) ||
		!a.ListingBounds.Equal(b.ListingBounds) {
		return false
	}
	var ca, cb ClusterSettings
	if a.Cluster != nil {
		ca = *a.Cluster
	}
	if b.Cluster != nil {
		cb = *b.Cluster
	}
	return reflect.DeepEqual(ca.WithDefaults(), cb.WithDefaults())
}

// Cluster defaults (docs/contracts/portal.md). Outlier detection and active health checks are
// off unless the Portal (or an override) sets them; when set, their zero
// fields take the defaults below.
const (
	DefaultConnectTimeout     = time.Second
	DefaultRequestTimeout     = 15 * time.Second
	DefaultMaxConnections     = 1024
	DefaultMaxPendingRequests = 1024
	DefaultMaxRequests        = 1024
	DefaultMaxRetries         = 3
	DefaultLBPolicy           = "ROUND_ROBIN"

	DefaultOutlierConsecutive5xx     = 5
	DefaultOutlierInterval           = 10 * time.Second
	DefaultOutlierBaseEjectionTime   = 30 * time.Second
	DefaultOutlierMaxEjectionPercent = 10

	DefaultHealthCheckPath               = "/healthz"
	DefaultHealthCheckInterval           = 5 * time.Second
	DefaultHealthCheckTimeout            = time.Second
	DefaultHealthCheckHealthyThreshold   = 1
	DefaultHealthCheckUnhealthyThreshold = 3
)

// WithDefaults returns a copy of c with every zero field set to its default.
// Outlier detection and health check stay nil when unset; when set, their
// zero fields get defaults too. The copy shares no pointers with c. The
// settings of a Tool Service whose Portal entry has no cluster object are
// ClusterSettings{}.WithDefaults(): connectTimeout 1s, requestTimeout 15s,
// maxConnections, maxPendingRequests and maxRequests 1024, maxRetries 3,
// lbPolicy ROUND_ROBIN, HTTP/1.1, no outlier detection, no health check.
func (c ClusterSettings) WithDefaults() ClusterSettings {
	c.ConnectTimeout = cmp.Or(c.ConnectTimeout, config.Duration(DefaultConnectTimeout))
	c.RequestTimeout = cmp.Or(c.RequestTimeout, config.Duration(DefaultRequestTimeout))
	c.MaxConnections = cmp.Or(c.MaxConnections, DefaultMaxConnections)
	c.MaxPendingRequests = cmp.Or(c.MaxPendingRequests, DefaultMaxPendingRequests)
	c.MaxRequests = cmp.Or(c.MaxRequests, DefaultMaxRequests)
	c.MaxRetries = cmp.Or(c.MaxRetries, DefaultMaxRetries)
	c.LBPolicy = cmp.Or(c.LBPolicy, DefaultLBPolicy)
	if c.OutlierDetection != nil {
		od := *c.OutlierDetection
		od.Consecutive5xx = cmp.Or(od.Consecutive5xx, DefaultOutlierConsecutive5xx)
		od.Interval = cmp.Or(od.Interval, config.Duration(DefaultOutlierInterval))
		od.BaseEjectionTime = cmp.Or(od.BaseEjectionTime, config.Duration(DefaultOutlierBaseEjectionTime))
		od.MaxEjectionPercent = cmp.Or(od.MaxEjectionPercent, DefaultOutlierMaxEjectionPercent)
		c.OutlierDetection = &od
	}
	if c.HealthCheck != nil {
		hc := *c.HealthCheck
		hc.Path = cmp.Or(hc.Path, DefaultHealthCheckPath)
		hc.Interval = cmp.Or(hc.Interval, config.Duration(DefaultHealthCheckInterval))
		hc.Timeout = cmp.Or(hc.Timeout, config.Duration(DefaultHealthCheckTimeout))
		hc.HealthyThreshold = cmp.Or(hc.HealthyThreshold, DefaultHealthCheckHealthyThreshold)
		hc.UnhealthyThreshold = cmp.Or(hc.UnhealthyThreshold, DefaultHealthCheckUnhealthyThreshold)
		c.HealthCheck = &hc
	}
	return c
}

// check returns the problems of a catalog setting; each error starts with
// the field name so the caller can prefix "catalog.".
func (c Catalog) check() []error {
	var errs []error
	if c.Mode != "" && c.Mode != "full" && c.Mode != "search" {
		errs = append(errs, fmt.Errorf("mode: %q is not \"full\" or \"search\"", c.Mode))
	}
	if c.PageSize < 0 || c.PageSize > MaxPageSize {
		errs = append(errs, fmt.Errorf("pageSize: %d is not in 0..%d", c.PageSize, MaxPageSize))
	}
	if c.Shortlist < 0 || c.Shortlist > MaxShortlist {
		errs = append(errs, fmt.Errorf("shortlist: %d is not in 0..%d", c.Shortlist, MaxShortlist))
	}
	for _, err := range search.ValidateSynonyms(c.Synonyms) {
		errs = append(errs, fmt.Errorf("synonyms%w", err))
	}
	if c.Embedding != "" && c.Embedding != EmbeddingNone && !config.ValidCredentialName(c.Embedding) {
		errs = append(errs, fmt.Errorf("embedding: %q must be %q or match %s (the name of an embedding service in the toolmesh config file)", c.Embedding, EmbeddingNone, config.CredentialNamePattern))
	}
	return errs
}

// check returns the problems of explicitly set cluster fields; each error
// starts with the field name so the caller can prefix "cluster.".
func (c ClusterSettings) check() []error {
	var errs []error
	if c.LBPolicy != "" && !lbPolicies[c.LBPolicy] {
		errs = append(errs, fmt.Errorf("lbPolicy: %q is not one of ROUND_ROBIN, LEAST_REQUEST, RANDOM, RING_HASH, MAGLEV", c.LBPolicy))
	}
	if od := c.OutlierDetection; od != nil && od.MaxEjectionPercent > 100 {
		errs = append(errs, fmt.Errorf("outlierDetection.maxEjectionPercent: %d is over 100", od.MaxEjectionPercent))
	}
	if hc := c.HealthCheck; hc != nil && hc.Path != "" {
		if err := checkRequestPath(hc.Path, true); err != nil {
			errs = append(errs, fmt.Errorf("healthCheck.path: %w", err))
		}
	}
	return errs
}
