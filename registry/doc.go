// Package registry owns toolmesh's model of the world:
//
//   - the model: the Portal listing of routes and Tool Services, Tool
//     Service manifests, and the immutable per-route snapshots the extproc
//     server answers from (model.go, listing.go, manifest.go, snapshot*.go),
//     with the listing decoder that reports problems by line and column
//     (decode*.go);
//   - snapshot building: validation, ambiguity and input-schema compilation
//     with a cache shared across snapshots (build.go, schema*.go), Rebuild,
//     which keeps a snapshot whose inputs did not change (rebuild.go), and
//     the snapshot side of federated MCP servers (federation*.go);
//   - the large-catalog views of a snapshot (ADR 0004): tools/list paging
//     and the search-mode meta-tools (catalog.go, page.go, searchmode.go),
//     and the tool embeddings of search mode (embedding.go, ADR 0007);
//   - the contracts of the I/O the refresher runs on: Source,
//     ManifestFetcher, Store (with BatchStore, ListingStore and
//     StatusReporter) and the health detail types in registry.go, MCPLister
//     and Freshness in federation_refresh.go. Their default implementations
//     (the Portal sources, the HTTP manifest fetcher and the federated-server
//     lister) are in registry/fetch.
//
// Sub-packages:
//
//   - registry/refresher is the Registry: it lists, fetches, builds and
//     swaps snapshots atomically, keeps them in a Store, and serves the read
//     side, the health detail and the toolmesh_registry_* metrics;
//   - registry/memstore is the in-memory Store, the default;
//   - registry/redisstore is the Redis Store (keys, pipelined operations,
//     Redis URL syntax, toolmesh_redis_* metrics);
//   - registry/fetch is the I/O: the Portal sources (a local file or GET
//     /v1/routes), the HTTP manifest fetcher and the federated-server lister;
//   - registry/upstream is the MCP client for federated MCP servers;
//   - registry/search ranks a route's tools for search mode;
//   - registry/argsjson decodes a call's arguments for input-schema
//     validation in one pass.
//
// search, argsjson and surface are leaves that registry uses and that
// import nothing of registry; upstream is a leaf that fetch uses. fetch,
// refresher, memstore and redisstore build on registry's types and
// interfaces, so they import registry and registry never imports them:
// internal/app wires them together.
package registry
