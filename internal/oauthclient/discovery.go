package oauthclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxMetadataBytes bounds a metadata document.
const maxMetadataBytes = 1 << 20

// CheckURL returns an error unless u is an absolute https URL, or http to a
// loopback host (development and tests), without user info or fragment.
func CheckURL(u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return err
	}
	switch {
	case p.Host == "":
		return fmt.Errorf("%q is not an absolute URL", u)
	case p.User != nil:
		return fmt.Errorf("%q: user info is not allowed", u)
	case p.Fragment != "":
		return fmt.Errorf("%q: a fragment is not allowed", u)
	case p.Scheme == "https":
		return nil
	case p.Scheme == "http" && isLoopback(p.Hostname()):
		return nil
	}
	return fmt.Errorf("%q: only https is allowed (http only for loopback hosts)", u)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func origin(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

// HTTPClient returns a copy of base (nil: a new client) that follows a
// redirect only within the origin of the first request, and only to a URL
// CheckURL accepts: a token request never carries a secret, an assertion or
// a subject token to another origin.
func HTTPClient(base *http.Client) *http.Client {
	c := &http.Client{}
	if base != nil {
		*c = *base
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("stopped after 5 redirects")
		}
		if origin(req.URL) != origin(via[0].URL) {
			return fmt.Errorf("redirect from %s to another origin %s refused", origin(via[0].URL), origin(req.URL))
		}
		return CheckURL(req.URL.String())
	}
	return c
}

// getJSON fetches u into v: status 200, at most maxMetadataBytes.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	if err := CheckURL(u); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadataBytes))
		return fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if len(b) > maxMetadataBytes {
		return fmt.Errorf("GET %s: larger than %d bytes", u, maxMetadataBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// ServerMetadata is the part of an authorization server's metadata (RFC
// 8414 section 2) the client uses.
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	GrantTypesSupported               []string `json:"grant_types_supported,omitempty"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported,omitempty"`
}

// MetadataURLs are where issuer's metadata may be, in the order the MCP
// authorization specification (2025-11-25, "Authorization Server Metadata
// Discovery") gives: RFC 8414 with the well-known suffix inserted before the
// issuer's path, then OpenID Connect Discovery inserted, then appended.
func MetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, err
	}
	path := strings.TrimSuffix(u.Path, "/")
	at := func(p string) string {
		c := *u
		c.Path, c.RawPath = p, ""
		return c.String()
	}
	if path == "" {
		return []string{at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")}, nil
	}
	return []string{
		at("/.well-known/oauth-authorization-server" + path),
		at("/.well-known/openid-configuration" + path),
		at(path + "/.well-known/openid-configuration"),
	}, nil
}

// DiscoverServer reads issuer's metadata from the first of its well-known
// URLs that answers. Its issuer must equal issuer exactly (RFC 8414 section
// 3.3) and its token endpoint must pass CheckURL.
func DiscoverServer(ctx context.Context, hc *http.Client, issuer string) (ServerMetadata, error) {
	if err := CheckURL(issuer); err != nil {
		return ServerMetadata{}, fmt.Errorf("issuer: %w", err)
	}
	urls, err := MetadataURLs(issuer)
	if err != nil {
		return ServerMetadata{}, fmt.Errorf("issuer: %w", err)
	}
	var errs []error
	for _, u := range urls {
		var m ServerMetadata
		if err := getJSON(ctx, hc, u, &m); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if m.Issuer != issuer {
			return ServerMetadata{}, fmt.Errorf("metadata at %s names issuer %q, not %q", u, m.Issuer, issuer)
		}
		if err := CheckURL(m.TokenEndpoint); err != nil {
			return ServerMetadata{}, fmt.Errorf("metadata at %s: token_endpoint: %w", u, err)
		}
		return m, nil
	}
	return ServerMetadata{}, fmt.Errorf("no authorization server metadata for %s: %w", issuer, errors.Join(errs...))
}

// ResourceMetadata is the part of a protected resource's metadata (RFC 9728
// section 2) the client uses.
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported,omitempty"`
}

// DiscoverResource reads the protected resource metadata at metadataURL
// for the resource at resourceURL (the MCP server's URL). Its resource must
// be resourceURL or a path-segment prefix of it on the same origin (RFC 9728
// section 3.3), and it must name at least one authorization server.
func DiscoverResource(ctx context.Context, hc *http.Client, metadataURL, resourceURL string) (ResourceMetadata, error) {
	var m ResourceMetadata
	if err := getJSON(ctx, hc, metadataURL, &m); err != nil {
		return ResourceMetadata{}, err
	}
	if !resourceMatches(m.Resource, resourceURL) {
		return ResourceMetadata{}, fmt.Errorf("resource metadata at %s is for %q, not %s", metadataURL, m.Resource, resourceURL)
	}
	if len(m.AuthorizationServers) == 0 {
		return ResourceMetadata{}, fmt.Errorf("resource metadata at %s names no authorization server", metadataURL)
	}
	for _, as := range m.AuthorizationServers {
		if err := CheckURL(as); err != nil {
			return ResourceMetadata{}, fmt.Errorf("resource metadata at %s: authorization_servers: %w", metadataURL, err)
		}
	}
	return m, nil
}

func resourceMatches(resource, target string) bool {
	r, err1 := url.Parse(resource)
	t, err2 := url.Parse(target)
	if err1 != nil || err2 != nil || r.Host == "" || origin(r) != origin(t) || r.RawQuery != "" {
		return false
	}
	rp := strings.TrimSuffix(r.Path, "/")
	return rp == "" || t.Path == rp || strings.HasPrefix(t.Path, rp+"/") || t.Path == rp+"/"
}

// BearerChallenge returns the parameters of the Bearer challenge in a
// WWW-Authenticate value (RFC 6750 section 3, RFC 9110 section 11.6.1),
// names lower-cased, and whether there is one. Other challenges in the same
// value are skipped.
func BearerChallenge(h string) (map[string]string, bool) {
	s := h
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return nil, false
		}
		scheme, rest := cutToken(s)
		if scheme == "" {
			return nil, false
		}
		params, rest, ok := authParams(rest)
		if !ok {
			return nil, false
		}
		if strings.EqualFold(scheme, "bearer") {
			return params, true
		}
		s = rest
	}
}

func isTokenChar(c byte) bool {
	return c > ' ' && c < 0x7f && !strings.ContainsRune("\"(),/:;<=>?@[\\]{}", rune(c))
}

func cutToken(s string) (string, string) {
	i := 0
	for i < len(s) && isTokenChar(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// authParams reads name=value pairs separated by commas until the next
// challenge's scheme (a token not followed by "=") or the end. A token68
// value is skipped.
func authParams(s string) (map[string]string, string, bool) {
	params := map[string]string{}
	for {
		t := strings.TrimLeft(s, " \t,")
		if t == "" {
			return params, "", true
		}
		name, after := cutToken(t)
		if name == "" {
			return nil, "", false
		}
		a := strings.TrimLeft(after, " \t")
		if !strings.HasPrefix(a, "=") {
			return params, t, true // the next challenge
		}
		a = strings.TrimLeft(a[1:], " \t")
		var val string
		if strings.HasPrefix(a, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(a) && a[i] != '"'; i++ {
				if a[i] == '\\' && i+1 < len(a) {
					i++
				}
				b.WriteByte(a[i])
			}
			if i >= len(a) {
				return nil, "", false
			}
			val, a = b.String(), a[i+1:]
		} else {
			val, a = cutToken(a)
			for strings.HasPrefix(a, "=") { // token68 padding
				a = a[1:]
			}
		}
		params[strings.ToLower(name)] = val
		s = a
	}
}

// ResourceFromChallenge reads the protected resource metadata of the
// resource at resourceURL that answered 401 with the WWW-Authenticate
// values challenges: from the Bearer challenge's resource_metadata (RFC
// 9728 section 5.1), else from the well-known URL of resourceURL (section
// 3.1). The challenge's scope, when there is one, is returned too.
func ResourceFromChallenge(ctx context.Context, hc *http.Client, challenges []string, resourceURL string) (ResourceMetadata, []string, error) {
	var metaURL string
	var scopes []string
	for _, h := range challenges {
		if p, ok := BearerChallenge(h); ok {
			metaURL = p["resource_metadata"]
			scopes = strings.Fields(p["scope"])
			break
		}
	}
	if metaURL == "" {
		u, err := url.Parse(resourceURL)
		if err != nil {
			return ResourceMetadata{}, nil, err
		}
		c := *u
		c.Path, c.RawPath, c.RawQuery = "/.well-known/oauth-protected-resource"+strings.TrimSuffix(u.Path, "/"), "", ""
		metaURL = c.String()
	}
	m, err := DiscoverResource(ctx, hc, metaURL, resourceURL)
	return m, scopes, err
}
