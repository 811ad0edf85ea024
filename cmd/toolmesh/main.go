// Command toolmesh is the MCP tool gateway for Envoy meshes: the Portal
// registry, the ext_proc server, the xDS control plane and, for development,
// a local data plane, in one binary. See `toolmesh help`; the application
// is internal/app.
package main

import (
	"os"

	"github.com/toolmesh/toolmesh/internal/app"
)

func main() { os.Exit(app.Main()) }
