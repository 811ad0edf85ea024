package mcp

import (
	"cmp"
	"strconv"
)

// Defaults of Config's zero fields.
const (
	DefaultServerName    = "toolmesh"
	DefaultServerVersion = "dev"
	DefaultMaxBodyBytes  = 1 << 20
	DefaultMaxDepth      = 64
)

// Server applies the protocol rules with one Config. It is immutable and safe
// for concurrent use.
type Server struct {
	cfg     Config
	origins hostRules
	hosts   hostRules

	// Serialized once: what does not depend on the request.
	serverInfoMeta []byte            // "_meta":{"io.modelcontextprotocol/serverInfo":{…}}
	discover       []byte            // the server/discover result
	discoverHead   []byte            // the discover result up to its capabilities
	discoverRest   []byte            // and after its instructions: "ttlMs":…}
	initHead       map[string][]byte // initialize result up to its capabilities, by version
	initImpl       []byte            // ,"serverInfo":{…} after them
	listTail       []byte            // ,"ttlMs":…,"cacheScope":…,"_meta":{…}} closing a 2026 tools/list result
	initialize     map[string][]byte // legacy version → initialize result
}

// NewServer returns a Server with cfg's zero fields set to their defaults:
// ServerName "toolmesh", ServerVersion "dev", CacheScope "public" (any value
// but "private" means public), MaxBodyBytes 1 MiB, MaxDepth 64, and the
// loopback origins. A zero or negative ListTTL is ttlMs 0: clients treat
// the list as immediately stale, which is always correct.
func NewServer(cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, origins: parseRules(cfg.AllowedOrigins), hosts: parseRules(cfg.AllowedHosts)}
	if len(s.origins) == 0 {
		s.origins = loopbackRules
	}
	// AllowedHosts entries that parse to nothing must not turn the check off.
	if len(cfg.AllowedHosts) > 0 && len(s.hosts) == 0 {
		s.hosts = hostRules{{host: "\x00"}}
	}

	impl := s.appendImplementation(nil)
	s.serverInfoMeta = append(append([]byte(`"_meta":{"`+MetaServerInfo+`":`), impl...), '}')

	cache := append([]byte(`"ttlMs":`), strconv.FormatInt(cfg.ListTTL.Milliseconds(), 10)...)
	cache = append(cache, `,"cacheScope":`...)
	cache = appendString(cache, cfg.CacheScope)

	s.encodeDiscover(cache)

	t := append([]byte(","), cache...)
	t = append(t, ',')
	t = append(t, s.serverInfoMeta...)
	s.listTail = append(t, '}')

	s.encodeInitialize(impl)
	return s
}

// withDefaults is cfg with its zero values replaced by the defaults.
func (cfg Config) withDefaults() Config {
	cfg.ServerName = cmp.Or(cfg.ServerName, DefaultServerName)
	cfg.ServerVersion = cmp.Or(cfg.ServerVersion, DefaultServerVersion)
	if cfg.CacheScope != "private" {
		cfg.CacheScope = "public"
	}
	if cfg.ListTTL < 0 {
		cfg.ListTTL = 0
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = DefaultMaxDepth
	}
	return cfg
}

// encodeDiscover serializes the server/discover result once, with its
// head and tail around the capabilities, which depend on the route.
func (s *Server) encodeDiscover(cache []byte) {
	d := []byte(`{"resultType":"complete","supportedVersions":[`)
	for i, v := range supportedVersions {
		if i > 0 {
			d = append(d, ',')
		}
		d = appendString(d, v)
	}
	d = append(d, `],"capabilities":`...)
	s.discoverHead = d
	rest := append(append(cache[:len(cache):len(cache)], ','), s.serverInfoMeta...)
	s.discoverRest = append(rest, '}')
	s.discover = s.appendDiscoverTail(append(d, capabilities(false, s.cfg.ListChanged, Offers{})...), s.cfg.Instructions)
}

// encodeInitialize serializes the initialize result of each legacy
// version once, with its head and tail around the capabilities.
func (s *Server) encodeInitialize(impl []byte) {
	s.initImpl = append([]byte(`,"serverInfo":`), impl...)
	s.initialize = make(map[string][]byte)
	s.initHead = make(map[string][]byte)
	for _, v := range supportedVersions {
		if !legacyVersion(v) {
			continue
		}
		b := append([]byte(`{"protocolVersion":`), appendString(nil, v)...)
		b = append(b, `,"capabilities":`...)
		s.initHead[v] = b
		b = append(append([]byte(nil), b...), capabilities(true, s.cfg.ListChanged, Offers{})...)
		s.initialize[v] = s.appendInitTail(b, s.cfg.Instructions)
	}
}

// discoverFor is the server/discover result for a route: the one
// serialized at start unless the route offers more than tools or has
// instructions of its own.
func (s *Server) discoverFor(cat Catalog) []byte {
	off := offersOf(cat)
	if off == (Offers{}) {
		return s.discover
	}
	b := append([]byte(nil), s.discoverHead...)
	b = append(b, capabilities(false, s.cfg.ListChanged, off)...)
	return s.appendDiscoverTail(b, s.instructionsFor(off))
}

// initializeFor is the initialize result of legacy version v for a route.
func (s *Server) initializeFor(v string, cat Catalog) []byte {
	off := offersOf(cat)
	if off == (Offers{}) {
		return s.initialize[v]
	}
	b := append([]byte(nil), s.initHead[v]...)
	b = append(b, capabilities(true, s.cfg.ListChanged, off)...)
	return s.appendInitTail(b, s.instructionsFor(off))
}

// instructionsFor is the instructions of a route: the gateway's, then the
// route's own and its servers' (Offers.Instructions).
func (s *Server) instructionsFor(off Offers) string {
	switch {
	case off.Instructions == "":
		return s.cfg.Instructions
	case s.cfg.Instructions == "":
		return off.Instructions
	}
	return s.cfg.Instructions + "\n\n" + off.Instructions
}

// appendDiscoverTail closes a server/discover result after its
// capabilities: instructions (when any), ttlMs, cacheScope and _meta.
func (s *Server) appendDiscoverTail(b []byte, instructions string) []byte {
	b = append(b, ',')
	if instructions != "" {
		b = append(b, `"instructions":`...)
		b = appendString(b, instructions)
		b = append(b, ',')
	}
	return append(b, s.discoverRest...)
}

// appendInitTail closes an initialize result after its capabilities:
// serverInfo and instructions (when any).
func (s *Server) appendInitTail(b []byte, instructions string) []byte {
	b = append(b, s.initImpl...)
	if instructions != "" {
		b = append(b, `,"instructions":`...)
		b = appendString(b, instructions)
	}
	return append(b, '}')
}

// appendImplementation appends the Implementation object {name, version}.
func (s *Server) appendImplementation(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, s.cfg.ServerName)
	b = append(b, `,"version":`...)
	b = appendString(b, s.cfg.ServerVersion)
	return append(b, '}')
}

// Config returns the configuration in effect, defaults applied.
func (s *Server) Config() Config { return s.cfg }

// PeekCall reports the tool a stateless-era tools/call names in its headers
// (MCP-Protocol-Version: 2026-07-28, Mcp-Method: tools/call, Mcp-Name
// decoded), so it can be routed in the request-headers phase. ok is false
// for anything else, including every legacy request: a header that the body
// will not be checked against must not steer routing. For a request where
// PeekCall says ok, Handle either returns a Call for that same tool or a
// Reply, because it rejects an Mcp-Name that differs from params.name.
func (s *Server) PeekCall(r *HTTPRequest) (tool string, ok bool) {
	if !r.HasProtocolVersion || r.ProtocolVersion != Version20260728 ||
		!r.HasMcpMethod || r.McpMethod != "tools/call" || !r.HasMcpName {
		return "", false
	}
	name, ok := DecodeHeaderValue(r.McpName)
	if !ok || name == "" {
		return "", false
	}
	return name, true
}
