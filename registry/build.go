package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// BuildSnapshot builds a route's snapshot from the manifests of all its Tool
// Services (keyed by Tool Service name). It is pure and all-or-nothing: a
// missing manifest or an invalid route is an error and yields no snapshot.
// Within a manifest, an entry that fails validation is left out and listed in
// Snapshot.Rejected; inactive entries are left out silently; a name claimed
// by two or more active entries (across Tool Services, or two versions in one)
// is left out and listed in Snapshot.Ambiguous. The version is a content hash
// of the route definition and the canonical manifests, so equal inputs give
// equal versions.
func BuildSnapshot(route Route, manifests map[string]*Manifest, fetchedAt time.Time) (*Snapshot, error) {
	canon, err := canonicalizeAll(route, manifests)
	if err != nil {
		return nil, err
	}
	in, err := prepare(route, canon)
	if err != nil {
		return nil, err
	}
	return in.build(fetchedAt, builder{}), nil
}

// Canonical is a Tool Service manifest in canonical form (raw JSON fields
// compacted) with the digest of its encoding. The refresher computes it
// once per fetched manifest and shares it among every route that uses the
// service, so a refresh canonicalizes and hashes each manifest once, not
// once per route.
type Canonical struct {
	m      *Manifest
	digest [sha256.Size]byte
}

// Canonicalize returns m's canonical form and digest. m is not modified
// and not referenced by the result.
func Canonicalize(m *Manifest) (*Canonical, error) {
	c := canonicalManifest(m)
	d, err := manifestDigest(c)
	if err != nil {
		return nil, err
	}
	return &Canonical{m: canonManifests.intern(d, c), digest: d}, nil
}

// needsHTMLEscape reports whether b holds a byte json.HTMLEscape may
// change: <, >, & or the first byte of U+2028 and U+2029 (IndexByte is
// vectorized; ContainsAny with runes is not).
func needsHTMLEscape(b []byte) bool {
	return bytes.IndexByte(b, '<') >= 0 || bytes.IndexByte(b, '>') >= 0 ||
		bytes.IndexByte(b, '&') >= 0 || bytes.IndexByte(b, 0xE2) >= 0
}

// manifestCache finds a live canonical manifest by digest, so that routes
// restored from a store (each stored with its own copy of a shared
// service's manifest) and refreshes that fetch an unchanged manifest again
// hold one copy. Like schemaCache it holds manifests weakly.
type manifestCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]weak.Pointer[Manifest]
}

// canonManifests is the process-wide cache.
var canonManifests = &manifestCache{m: map[[sha256.Size]byte]weak.Pointer[Manifest]{}}

// intern returns the live manifest of digest d, or c, which becomes it.
func (c *manifestCache) intern(d [sha256.Size]byte, m *Manifest) *Manifest {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[d]; ok {
		if live := wp.Value(); live != nil {
			return live
		}
	}
	c.m[d] = weak.Make(m)
	runtime.AddCleanup(m, c.drop, d)
	return m
}

func (c *manifestCache) drop(d [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[d]; ok && wp.Value() == nil {
		delete(c.m, d)
	}
}

// manifestDigest hashes canonical manifest c: every field of every tool,
// each length-prefixed, then the invalid entries and the MCP part
// (json.Marshal escapes it the same way whichever spelling it had). It
// writes the compact raw fields as they are rather than encoding the
// manifest, which would compact every schema a second time.
func manifestDigest(c *Manifest) ([sha256.Size]byte, error) {
	h := sha256.New()
	var n [8]byte
	num := func(v int) {
		binary.BigEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	str := func(s string) {
		num(len(s))
		io.WriteString(h, s)
	}
	var esc bytes.Buffer
	raw := func(b []byte) {
		// A store may re-encode a snapshot with json.Marshal, which
		// escapes <, >, &, U+2028 and U+2029 in raw fields; hash that form,
		// so that either spelling gives one version.
		if needsHTMLEscape(b) {
			esc.Reset()
			json.HTMLEscape(&esc, b)
			b = esc.Bytes()
		}
		num(len(b))
		h.Write(b)
	}
	io.WriteString(h, "toolmesh-manifest/1\n")
	num(len(c.Tools))
	for _, t := range c.Tools {
		str(t.Name)
		str(t.Version)
		switch {
		case t.Active == nil:
			str("")
		case *t.Active:
			str("true")
		default:
			str("false")
		}
		str(t.Title)
		str(t.Description)
		raw(t.InputSchema)
		raw(t.OutputSchema)
		raw(t.Annotations)
		raw(t.Icons)
		str(t.Path)
	}
	num(len(c.Invalid))
	for _, e := range c.Invalid {
		num(e.Index)
		str(e.Name)
		str(e.Reason)
	}
	b, err := json.Marshal(c.MCP) // small: resources, templates and prompts
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("encode mcp listing: %w", err)
	}
	raw(b)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d, nil
}

// canonicalizeAll canonicalizes the manifests of route's Tool Services.
// A missing manifest is left for prepare to report.
func canonicalizeAll(route Route, manifests map[string]*Manifest) (map[string]*Canonical, error) {
	out := make(map[string]*Canonical, len(route.ToolServices))
	for _, s := range route.ToolServices {
		m := manifests[s.Name]
		if m == nil || out[s.Name] != nil {
			continue
		}
		c, err := Canonicalize(m)
		if err != nil {
			return nil, fmt.Errorf("build snapshot of route %q: hash manifest of %q: %w", route.Key, s.Name, err)
		}
		out[s.Name] = c
	}
	return out, nil
}

// inputs are a route's normalized definition and canonical manifests, with
// their content hash. Computing them is cheap next to compiling schemas, so
// the refresher compares versions before building.
type inputs struct {
	route     Route
	manifests map[string]*Manifest
	canon     map[string]*Canonical
	version   string
	// rank is each service's place in the route's precedence order
	// (priority, then Portal order): 0 wins every name it claims.
	rank map[string]int
}

// prepare normalizes the route and hashes it with its manifests' digests.
func prepare(route Route, canon map[string]*Canonical) (*inputs, error) {
	r := route
	r.ToolServices = slices.Clone(route.ToolServices)
	if errs := r.normalize(0); len(errs) > 0 {
		return nil, fmt.Errorf("build snapshot of route %q: %w", route.Key, errors.Join(errs...))
	}
	in := &inputs{route: r, manifests: make(map[string]*Manifest, len(r.ToolServices)), canon: canon, rank: serviceRanks(r)}
	var missing []string
	for _, s := range r.ToolServices {
		c := canon[s.Name]
		if c == nil {
			missing = append(missing, s.Name)
			continue
		}
		in.manifests[s.Name] = c.m
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("build snapshot of route %q: no manifest for tool service(s) %s", r.Key, strings.Join(missing, ", "))
	}
	v, err := in.hash()
	if err != nil {
		return nil, fmt.Errorf("build snapshot of route %q: %w", r.Key, err)
	}
	in.version = v
	return in, nil
}

// hash is the snapshot version: sha256 over the route definition and, in
// the route's Tool Service order, each service's name and manifest digest,
// truncated to 16 bytes. json.Marshal escapes <, > and & in the definition,
// and manifestDigest in raw fields, the same way whether they were spelled
// literally or as \u003c, so a snapshot re-encoded by a store hashes the
// same.
func (in *inputs) hash() (string, error) {
	h := sha256.New()
	h.Write([]byte("toolmesh-snapshot/2\n"))
	def, err := json.Marshal(in.route)
	if err != nil {
		return "", fmt.Errorf("hash route definition: %w", err)
	}
	h.Write(def)
	for _, s := range in.route.ToolServices {
		fmt.Fprintf(h, "\n%q %x", s.Name, in.canon[s.Name].digest)
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// hashV1 is the version of snapshot formats 1 and 2: sha256 over the
// route definition and each canonical manifest's encoding. It costs a
// manifest encoding per route, so only a restore of those formats uses it.
func (in *inputs) hashV1() (string, error) {
	h := sha256.New()
	h.Write([]byte("toolmesh-snapshot/1\n"))
	def, err := json.Marshal(in.route)
	if err != nil {
		return "", fmt.Errorf("hash route definition: %w", err)
	}
	h.Write(def)
	for _, s := range in.route.ToolServices {
		b, err := json.Marshal(in.manifests[s.Name])
		if err != nil {
			return "", fmt.Errorf("hash manifest of %q: %w", s.Name, err)
		}
		fmt.Fprintf(h, "\n%q %d\n", s.Name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// canonicalManifest returns a copy of m whose raw JSON fields are compacted.
// An entry with a raw field that is not valid JSON (possible only for a
// manifest built in code) moves to Invalid, so the copy always encodes.
func canonicalManifest(m *Manifest) *Manifest {
	c := &Manifest{Tools: make([]ManifestTool, 0, len(m.Tools)), Invalid: slices.Clone(m.Invalid), MCP: m.MCP.canonical()}
	for i, t := range m.Tools {
		var bad []string
		for _, f := range []struct {
			name string
			raw  *json.RawMessage
		}{
			{"inputSchema", &t.InputSchema},
			{"outputSchema", &t.OutputSchema},
			{"annotations", &t.Annotations},
			{"icons", &t.Icons},
		} {
			if len(*f.raw) == 0 {
				continue
			}
			var buf bytes.Buffer
			buf.Grow(len(*f.raw)) // compact is never longer
			if err := json.Compact(&buf, *f.raw); err != nil {
				bad = append(bad, f.name)
				continue
			}
			*f.raw = buf.Bytes()
		}
		if len(bad) > 0 {
			c.Invalid = append(c.Invalid, InvalidEntry{Index: i, Name: t.Name, Reason: "invalid JSON in " + strings.Join(bad, ", ")})
			continue
		}
		c.Tools = append(c.Tools, t)
	}
	return c
}

// builder holds how a build treats input schemas. A fresh build compiles
// every schema and rejects the entries whose schema fails. A restore
// (lazy) compiles nothing: the snapshot was validated when it was built, and
// schemaErrs, persisted with it, names the entries that were rejected for
// their schema then; every other schema compiles on its tool's first call.
type builder struct {
	lazy       bool
	schemaErrs map[string]map[int]string // service → manifest tool index → reason
}

// toolJob is one active manifest entry to validate.
type toolJob struct {
	service, basePath string
	index             int // in the service's canonical manifest
	mt                ManifestTool
	mcp               bool   // the service is a federated MCP server
	prefix            string // its toolPrefix
	trusted           bool   // its annotations are trusted (trustAnnotations)
}

// toolResult is a validated tool, or the reason its entry is rejected.
// schemaErr is set when the input schema failed to compile, which is the one
// outcome a restore cannot recompute without compiling.
type toolResult struct {
	tool      *Tool
	reason    string
	schemaErr string
}

// parallelMinTools is the smallest job count worth spreading over cores:
// below it, goroutines cost more than they save.
const parallelMinTools = 64

// serviceBuild is the validated active entries of one Tool Service
// definition at one manifest digest. They are the same on every route that
// uses the service, so they are built once and shared: routes' snapshots
// point at the same immutable Tools (with their schemas), and only what is
// the route's own (its tool index, ambiguity, list encoding) is per route.
type serviceBuild struct {
	prep    sync.Once
	jobs    []toolJob
	entries []serviceEntry // active entries, in manifest order
	// The entries are validated in chunks, claimed through next by every
	// goroutine that needs the build, so that routes built or restored in
	// parallel help with a service they share instead of waiting idle;
	// left counts entries not yet done, and done closes when none is.
	b    builder
	n    int64 // len(jobs), which is dropped once done
	next atomic.Int64
	left atomic.Int64
	done chan struct{}
}

// serviceChunk is how many entries a goroutine claims at a time.
const serviceChunk = 8

// serviceEntry is one active manifest entry and its outcome.
type serviceEntry struct {
	index int    // in the service's canonical manifest
	name  string // as declared
	res   toolResult
}

// serviceKey names a serviceBuild: the service definition, its manifest's
// digest, and how schemas are treated (a restore's persisted schema
// rejections; empty for a fresh build).
type serviceKey struct {
	def     string
	digest  [sha256.Size]byte
	restore string
}

// serviceCache finds a live serviceBuild by key. Like schemaCache it holds
// builds weakly: a build lives as long as a snapshot (or a build in
// progress) holds it, so the cache holds nothing the snapshots do not.
type serviceCache struct {
	mu sync.Mutex
	m  map[serviceKey]weak.Pointer[serviceBuild]
}

// services is the process-wide cache.
var services = &serviceCache{m: map[serviceKey]weak.Pointer[serviceBuild]{}}

// get returns the build of key, creating it unbuilt when there is none.
func (c *serviceCache) get(key serviceKey) *serviceBuild {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[key]; ok {
		if sb := wp.Value(); sb != nil {
			return sb
		}
	}
	sb := &serviceBuild{}
	c.m[key] = weak.Make(sb)
	runtime.AddCleanup(sb, c.drop, key)
	return sb
}

func (c *serviceCache) drop(key serviceKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[key]; ok && wp.Value() == nil {
		delete(c.m, key)
	}
}

// service returns the shared build of svc's entries under b.
func (in *inputs) service(svc ToolService, b builder) (*serviceBuild, error) {
	def, err := json.Marshal(svc.SharedDefinition()) // priority is the route's
	if err != nil {
		return nil, fmt.Errorf("encode tool service %q: %w", svc.Name, err)
	}
	key := serviceKey{def: string(def), digest: in.canon[svc.Name].digest}
	if b.lazy {
		key.restore = restoreKey(b.schemaErrs[svc.Name])
	}
	sb := services.get(key)
	sb.build(svc, in.manifests[svc.Name], b)
	return sb, nil
}

// restoreKey encodes a restore's schema rejections of one service.
func restoreKey(errs map[int]string) string {
	idx := slices.Sorted(maps.Keys(errs))
	var sb strings.Builder
	sb.WriteString("restore")
	for _, i := range idx {
		fmt.Fprintf(&sb, "\n%d %q", i, errs[i])
	}
	return sb.String()
}

// build validates every active entry of m, in manifest order, and
// returns when all are done. The first caller lists the entries and, for a
// large manifest, starts helpers on the other cores (compiling schemas
// dominates a large build); every caller claims chunks until none is left.
func (sb *serviceBuild) build(svc ToolService, m *Manifest, b builder) {
	first := false
	sb.prep.Do(func() {
		first = true
		_, _, _, basePath, _ := svc.Endpoint() // normalize already checked the URL
		for j, mt := range m.Tools {
			if mt.Active != nil && !*mt.Active {
				continue
			}
			sb.jobs = append(sb.jobs, toolJob{service: svc.Name, basePath: basePath, index: j, mt: mt,
				mcp: svc.IsMCP(), prefix: svc.ToolPrefix, trusted: !svc.IsMCP() || svc.TrustAnnotations})
		}
		sb.entries = make([]serviceEntry, len(sb.jobs))
		sb.b = b
		sb.n = int64(len(sb.jobs))
		sb.left.Store(sb.n)
		sb.done = make(chan struct{})
		if len(sb.jobs) == 0 {
			close(sb.done)
		}
	})
	if first && sb.n >= parallelMinTools {
		for range min(runtime.GOMAXPROCS(0), int(sb.n)/parallelMinTools) - 1 {
			go sb.help()
		}
	}
	sb.help()
	<-sb.done
}

// help validates chunks of entries until none is left to claim.
func (sb *serviceBuild) help() {
	n := sb.n
	for {
		start := sb.next.Add(serviceChunk) - serviceChunk
		if start >= n {
			return
		}
		end := min(start+serviceChunk, n)
		for i := start; i < end; i++ {
			job := sb.jobs[i]
			sb.entries[i] = serviceEntry{index: job.index, name: job.mt.Name, res: sb.b.tool(job)}
		}
		if sb.left.Add(start-end) == 0 {
			// Every claimed entry is done, so nothing reads jobs any more;
			// the entries hold what is needed.
			sb.jobs, sb.b = nil, builder{}
			close(sb.done)
		}
	}
}

// build assembles the snapshot from the shared builds of its services. The
// result is assembled in manifest order, so it does not depend on timing.
func (in *inputs) build(fetchedAt time.Time, b builder) *Snapshot {
	s := &Snapshot{
		Route:      in.route.Key,
		Version:    in.version,
		inputs:     in.version,
		FetchedAt:  fetchedAt,
		Tools:      []*Tool{},
		Ambiguous:  []string{},
		Shadowed:   []Shadowed{},
		Rejected:   []RejectedTool{},
		byName:     map[string]*Tool{},
		ambiguous:  map[string]bool{},
		def:        in.route,
		manifests:  in.manifests,
		schemaErrs: map[string][]schemaError{},
		lazy:       b.lazy,
	}
	searchMode := false
	if c := in.route.Catalog; c != nil {
		s.pageSize = c.PageSize
		searchMode = c.Mode == ModeSearch
	}
	s.tag = cursorTag(in.version)

	c := s.collectClaims(in, b, searchMode)
	s.resolveClaims(in, c)
	s.applyOverrides(in, b.lazy)
	slices.Sort(s.Ambiguous)
	slices.SortFunc(s.Tools, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	list := make([]mcp.Tool, len(s.Tools))
	for i, t := range s.Tools {
		list[i] = t.Tool
	}
	// Every raw field was compacted and checked, so encoding cannot fail.
	toolsJSON, _ := mcp.EncodeTools(list)
	s.toolsJSON = mcp.NewSharedItems(toolsJSON)
	s.federate(in)
	s.sortShadowed()
	s.instructions = routeInstructions(in)
	if searchMode {
		s.search = newSearchMode(s, in.route.Catalog.Shortlist, in.route.Catalog.Synonyms)
		// A fresh build runs off the request path, so the index is built
		// now; a restore (lazy) builds it on the first search, so a warm
		// start of many routes stays cheap.
		if !b.lazy {
			s.search.ranker()
		}
	}
	return s
}

// toolClaims are the valid tools of a route by name, before the rank rule.
type toolClaims struct {
	byName    map[string][]*Tool
	order     []string // names in manifest order
	heldTools map[*Tool]HeldTool
}

// collectClaims gathers every service's valid tools, recording the rejected
// entries and schema errors in s.
func (s *Snapshot) collectClaims(in *inputs, b builder, searchMode bool) toolClaims {
	c := toolClaims{byName: map[string][]*Tool{}, heldTools: map[*Tool]HeldTool{}}
	held := in.route.Surface.heldSet() // pinning (surface_build.go)
	for _, svc := range in.route.ToolServices {
		for _, bad := range in.manifests[svc.Name].Invalid {
			s.Rejected = append(s.Rejected, RejectedTool{Service: svc.Name, Name: bad.Name, Reason: bad.Reason})
		}
		sb, err := in.service(svc, b)
		if err != nil { // cannot happen: prepare encoded the route
			s.Rejected = append(s.Rejected, RejectedTool{Service: svc.Name, Reason: err.Error()})
			continue
		}
		s.builds = append(s.builds, sb)
		for _, e := range sb.entries {
			res := e.res
			if res.schemaErr != "" {
				s.schemaErrs[svc.Name] = append(s.schemaErrs[svc.Name], schemaError{Index: e.index, Reason: res.schemaErr})
			}
			if res.reason == "" && searchMode && mcp.IsMetaToolName(res.tool.Name) {
				// One name means one thing on a route: in search mode the
				// meta-tool's.
				res.reason = reservedName
			}
			if res.reason != "" {
				s.Rejected = append(s.Rejected, RejectedTool{Service: svc.Name, Name: e.name, Reason: res.reason})
				continue
			}
			t := res.tool
			if h, ok := held[[2]string{svc.Name, e.name}]; ok {
				c.heldTools[t] = h
			}
			if _, seen := c.byName[t.Name]; !seen {
				c.order = append(c.order, t.Name)
			}
			c.byName[t.Name] = append(c.byName[t.Name], t)
		}
	}
	return c
}

// resolveClaims applies the rank rule to each name: the top-ranked service
// wins, the others are shadowed; two active versions of the winner make the
// name ambiguous; a held tool is quarantined.
func (s *Snapshot) resolveClaims(in *inputs, c toolClaims) {
	s.byName = make(map[string]*Tool, len(c.order))
	for _, name := range c.order {
		ts := c.byName[name]
		top := ts[0].Service
		for _, t := range ts {
			if in.rank[t.Service] < in.rank[top] {
				top = t.Service
			}
		}
		var mine []*Tool
		for _, t := range ts {
			if t.Service == top {
				mine = append(mine, t)
			} else {
				s.shadow("tool", name, t.Service, top)
			}
		}
		if len(mine) > 1 {
			// The winning service contradicts itself (two active versions):
			// no order the operator sets can pick one.
			s.ambiguous[name] = true
			s.Ambiguous = append(s.Ambiguous, name)
			continue
		}
		if h, ok := c.heldTools[mine[0]]; ok {
			s.quarantine(name, mine[0], h)
			continue
		}
		s.byName[name] = mine[0]
		s.Tools = append(s.Tools, mine[0])
	}
}

// tool validates one active manifest entry.
func (b builder) tool(job toolJob) toolResult {
	mt := job.mt
	name := job.prefix + mt.Name // clients see a federated tool under its prefixed name
	if !mcp.ValidToolName(name) {
		return toolResult{reason: "invalid name: want 1-128 characters of A-Z a-z 0-9 _ . -"}
	}
	if len(mt.InputSchema) == 0 || string(mt.InputSchema) == "null" {
		return toolResult{reason: "inputSchema is required"}
	}
	var schema *schemaEntry
	if b.lazy {
		if reason, bad := b.schemaErrs[job.service][job.index]; bad {
			return toolResult{reason: "inputSchema: " + reason, schemaErr: reason}
		}
		schema = schemas.entry(mt.InputSchema)
	} else {
		schema = schemas.entry(mt.InputSchema)
		if err := schema.check(); err != nil {
			return toolResult{reason: "inputSchema: " + err.Error(), schemaErr: err.Error()}
		}
	}
	params, err := mcp.ParamHeadersOf(mt.InputSchema)
	if err != nil {
		return toolResult{reason: "inputSchema: " + err.Error()}
	}
	if len(mt.OutputSchema) > 0 && !isJSONKind(mt.OutputSchema, '{') {
		return toolResult{reason: "outputSchema must be a JSON object"}
	}
	if len(mt.Annotations) > 0 && !isJSONKind(mt.Annotations, '{') {
		return toolResult{reason: "annotations must be a JSON object"}
	}
	if len(mt.Icons) > 0 && !isJSONKind(mt.Icons, '[') {
		return toolResult{reason: "icons must be a JSON array"}
	}
	path, protocol, upstreamName := mt.Path, "", ""
	if job.mcp {
		// Called with tools/call on the MCP endpoint, under its upstream name.
		path, protocol, upstreamName = "", ProtocolMCP, mt.Name
	} else {
		if path == "" {
			path = "/tools/" + mt.Name
		}
		if err := checkRequestPath(path, true); err != nil {
			return toolResult{reason: "path: " + err.Error()}
		}
	}
	return toolResult{tool: &Tool{
		Tool: mcp.Tool{
			Name:         name,
			Title:        mt.Title,
			Description:  mt.Description,
			InputSchema:  mt.InputSchema,
			OutputSchema: mt.OutputSchema,
			Annotations:  mt.Annotations,
			Icons:        mt.Icons,
		},
		Version:              mt.Version,
		Service:              job.service,
		Cluster:              wire.ClusterName(job.service),
		Path:                 path,
		BasePath:             job.basePath,
		ParamHeaders:         params,
		Protocol:             protocol,
		UpstreamName:         upstreamName,
		UntrustedAnnotations: !job.trusted,
		schema:               schema,
	}}
}

// isJSONKind reports whether compact JSON raw starts with open ('{' for an
// object, '[' for an array).
func isJSONKind(raw json.RawMessage, open byte) bool {
	return len(raw) > 0 && raw[0] == open
}
