package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/internal/parallel"
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
	in, err := prepare(route, manifests)
	if err != nil {
		return nil, err
	}
	return in.build(fetchedAt, builder{}), nil
}

// inputs are a route's normalized definition and canonical manifests, with
// their content hash. Computing them is cheap next to compiling schemas, so
// the refresher compares versions before building.
type inputs struct {
	route     Route
	manifests map[string]*Manifest
	version   string
}

// prepare normalizes the route, canonicalizes its manifests and hashes both.
func prepare(route Route, manifests map[string]*Manifest) (*inputs, error) {
	r := route
	r.ToolServices = slices.Clone(route.ToolServices)
	if errs := r.normalize(0); len(errs) > 0 {
		return nil, fmt.Errorf("build snapshot of route %q: %w", route.Key, errors.Join(errs...))
	}
	in := &inputs{route: r, manifests: make(map[string]*Manifest, len(r.ToolServices))}
	var missing []string
	for _, s := range r.ToolServices {
		m := manifests[s.Name]
		if m == nil {
			missing = append(missing, s.Name)
			continue
		}
		in.manifests[s.Name] = canonicalManifest(m)
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

// hash is the snapshot version: sha256 over the route definition and each
// canonical manifest in the route's Tool Service order, truncated to 16 bytes.
// json.Marshal escapes <, > and & the same way whether a schema spelled them
// literally or as \u003c, so a snapshot re-encoded by a store hashes the same.
func (in *inputs) hash() (string, error) {
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

// build validates every entry and assembles the snapshot. Entries are
// validated on all cores (compiling schemas dominates a large build); the
// result is assembled in manifest order, so it does not depend on timing.
func (in *inputs) build(fetchedAt time.Time, b builder) *Snapshot {
	s := &Snapshot{
		Route:      in.route.Key,
		Version:    in.version,
		FetchedAt:  fetchedAt,
		Tools:      []*Tool{},
		Ambiguous:  []string{},
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
	var jobs []toolJob
	for _, svc := range in.route.ToolServices {
		_, _, _, basePath, _ := svc.Endpoint() // normalize already checked the URL
		for j, mt := range in.manifests[svc.Name].Tools {
			if mt.Active != nil && !*mt.Active {
				continue
			}
			jobs = append(jobs, toolJob{service: svc.Name, basePath: basePath, index: j, mt: mt,
				mcp: svc.IsMCP(), prefix: svc.ToolPrefix})
		}
	}
	results := make([]toolResult, len(jobs))
	workers := 1
	if len(jobs) >= parallelMinTools {
		workers = min(runtime.GOMAXPROCS(0), len(jobs)/parallelMinTools)
	}
	forEach(len(jobs), workers, func(i int) { results[i] = b.tool(jobs[i]) })

	claims := map[string][]*Tool{}
	var order []string
	next := 0
	for _, svc := range in.route.ToolServices {
		for _, bad := range in.manifests[svc.Name].Invalid {
			s.Rejected = append(s.Rejected, RejectedTool{Service: svc.Name, Name: bad.Name, Reason: bad.Reason})
		}
		for ; next < len(jobs) && jobs[next].service == svc.Name; next++ {
			res, job := results[next], jobs[next]
			if res.schemaErr != "" {
				s.schemaErrs[svc.Name] = append(s.schemaErrs[svc.Name], schemaError{Index: job.index, Reason: res.schemaErr})
			}
			if res.reason == "" && searchMode && mcp.IsMetaToolName(res.tool.Name) {
				// One name means one thing on a route: in search mode the
				// meta-tool's.
				res.reason = reservedName
			}
			if res.reason != "" {
				s.Rejected = append(s.Rejected, RejectedTool{Service: svc.Name, Name: job.mt.Name, Reason: res.reason})
				continue
			}
			t := res.tool
			if _, seen := claims[t.Name]; !seen {
				order = append(order, t.Name)
			}
			claims[t.Name] = append(claims[t.Name], t)
		}
	}
	for _, name := range order {
		if ts := claims[name]; len(ts) > 1 {
			s.ambiguous[name] = true
			s.Ambiguous = append(s.Ambiguous, name)
			continue
		}
		t := claims[name][0]
		s.byName[name] = t
		s.Tools = append(s.Tools, t)
	}
	slices.Sort(s.Ambiguous)
	slices.SortFunc(s.Tools, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	list := make([]mcp.Tool, len(s.Tools))
	for i, t := range s.Tools {
		list[i] = t.Tool
	}
	// Every raw field was compacted and checked, so encoding cannot fail.
	s.toolsJSON, _ = mcp.EncodeTools(list)
	s.federate(in)
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
		Version:      mt.Version,
		Service:      job.service,
		Cluster:      ClusterName(job.service),
		Path:         path,
		BasePath:     job.basePath,
		ParamHeaders: params,
		Protocol:     protocol,
		UpstreamName: upstreamName,
		schema:       schema,
	}}
}

// forEach runs fn(0..n-1) on at most workers goroutines and waits.
func forEach(n, workers int, fn func(i int)) { parallel.ForEach(n, workers, fn) }

// isJSONKind reports whether compact JSON raw starts with open ('{' for an
// object, '[' for an array).
func isJSONKind(raw json.RawMessage, open byte) bool {
	return len(raw) > 0 && raw[0] == open
}
