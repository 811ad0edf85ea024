// Package refresher owns the Registry: it keeps the Portal's routes and a
// snapshot per route current (ADR 0005) and serves them to the extproc and
// xDS servers without locking.
//
//   - refresher.go: Options, New, Start, Run, Refresh, the refresh cycle
//     (Portal listing, manifest fetches, snapshot builds through
//     registry.RebuildCanonical) and the retry backoff;
//   - store.go: the refresher's use of the Store: warm start, the saved
//     listing, persisting snapshots, handing snapshots to the embedding
//     services;
//   - fetch.go: each Tool Service's latest fetch, the re-listing schedule of
//     federated MCP servers and their health lines;
//   - read.go: the read side (Lookup, Snapshot, Routes, Subscribe, Ready)
//     and the /health detail;
//   - metrics.go, tracing.go: toolmesh_registry_* metrics and the spans of a
//     refresh cycle.
//
// It imports registry (the model, snapshots, the Store interfaces) and
// registry/memstore (the default Store); registry never imports it.
package refresher
