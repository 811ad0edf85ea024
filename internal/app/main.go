// Package app is the toolmesh application: the commands and their flags,
// the config file, the wiring of a validated configuration into the
// registry, the ext_proc and xDS servers and the local data plane, the
// admin HTTP server and console, tracing, eval-search and graceful
// shutdown. cmd/toolmesh only calls Main. See docs/architecture.md.
package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Main runs toolmesh with the process's arguments until SIGINT or SIGTERM
// and returns the exit code.
func Main() int {
	// SIGHUP's default action ends the process; until serve takes it over
	// (to reload the filters) it is caught here and dropped.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
}
