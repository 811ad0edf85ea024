package authn

import "slices"

// RouteView is what a route's profile in force requires of a caller, for
// the operator console: names and URLs only. Where keys come from (a JWKS
// file or URL) and the keys themselves are left out.
type RouteView struct {
	// Mode is required, optional or off; off for a route without a profile.
	Mode Mode `json:"mode"`
	// Issuers are the issuers whose tokens are accepted.
	Issuers []string `json:"issuers,omitempty"`
	// Audience is the aud a token must carry: the configured audience, else
	// the route's canonical resource URI.
	Audience string `json:"audience,omitempty"`
	// Resource is the route's canonical resource URI (resourceBase and its
	// public path), as its protected-resource metadata names it.
	Resource string `json:"resource,omitempty"`
	// Scopes are the scopes every request needs.
	Scopes []string `json:"scopes,omitempty"`
}

// View describes the profile in force for route, whose public path is
// publicPath. A nil Authenticator, or a route without a profile, is open.
func (a *Authenticator) View(route, publicPath string) RouteView {
	return a.Current().View(route, publicPath)
}

// View describes the profile of route in pr; nil pr is open.
func (pr *Profiles) View(route, publicPath string) RouteView {
	c, p := pr.profile(route)
	if p == nil {
		return RouteView{Mode: ModeOff}
	}
	v := RouteView{Mode: p.mode, Audience: p.audience, Resource: c.base + publicPath, Scopes: slices.Clone(p.scopes)}
	if v.Audience == "" {
		v.Audience = v.Resource
	}
	for _, is := range p.issuers {
		v.Issuers = append(v.Issuers, is.name)
	}
	return v
}
