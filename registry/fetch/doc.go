// Package fetch is the I/O behind the registry's model: it reads the Portal
// listing (HTTP or a local file), fetches native Tool Service manifests and
// lists federated MCP servers, turning what it reads into the registry's
// types. The registry package holds the model and builds snapshots from what
// this package returns; the refresher drives both.
package fetch
