// Package envoy holds toolmesh's Envoy bootstrap configurations,
// gateway.yaml (Envoy as an edge gateway), gateway-tls.yaml (the same, with
// mutual TLS to toolmesh's control plane) and sidecar.yaml (Envoy beside
// toolmesh in one pod), and the test that checks them against the xDS server
// and cmd/toolmesh's defaults. The local data plane that stands in for Envoy
// in `toolmesh run` and the tests is in the dataplane package below.
package envoy
