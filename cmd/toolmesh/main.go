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
	// SIGHUP's default action ends the process; until serve takes it over
	// (to reload the filters) it is caught here and dropped.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
