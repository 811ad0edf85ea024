// Package registry owns toolmesh's model of the world and keeps it current:
//
//   - the model: the Portal listing of routes and Tool Services, Tool
//     Service manifests, and the immutable per-route snapshots the extproc
//     server answers from (model.go, listing.go, manifest.go, snapshot*.go),
//     with the listing decoder that reports problems by line and column
//     (decode*.go);
//   - snapshot building: validation, ambiguity and input-schema compilation
//     with a cache shared across snapshots (build.go, schema*.go), and the
//     snapshot side of federated MCP servers (federation*.go);
//   - the large-catalog views of a snapshot (ADR 0004): tools/list paging
//     and the search-mode meta-tools (catalog.go, page.go, searchmode.go);
//   - the names the extproc server and the xDS translator must agree on
//     (naming.go), so they can never drift apart;
//   - the Registry: the refresher that lists, fetches, builds and swaps
//     snapshots atomically and keeps them in a Store (refresher*.go), its
//     read side and health detail (registry.go, registry_read.go), and its
//     toolmesh_registry_* metrics (metrics.go).
//
// The I/O sits behind interfaces (Source, ManifestFetcher and Store in
// registry.go, MCPLister in federation_refresh.go), so the refresher runs
// the same on any of them. The default implementations in this package are the Portal
// sources (source.go: a local file or GET /v1/routes), the HTTP manifest
// fetcher (manifest.go), the federated-server lister (federation_refresh.go)
// and the in-memory Store (store_memory.go).
//
// Sub-packages:
//
//   - registry/upstream is the MCP client for federated MCP servers;
//   - registry/search ranks a route's tools for search mode;
//   - registry/redisstore is the Redis Store (keys, pipelined operations,
//     Redis URL syntax, toolmesh_redis_* metrics).
//
// upstream and search are leaves that registry uses and that import nothing
// of registry; redisstore implements registry's Store interfaces, so it
// imports registry and registry never imports it: cmd/toolmesh wires it in.
package registry
