// Command toolmesh is the MCP tool gateway for Envoy meshes: the Portal
// registry, the ext_proc server, the xDS control plane and, for development,
// a local data plane, in one binary. See `toolmesh help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
