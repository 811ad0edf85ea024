// Command conformance-upstream is an MCP server, written with the official Go
// SDK (github.com/modelcontextprotocol/go-sdk), that implements every tool,
// resource, resource template and prompt the server scenarios of the official
// MCP conformance suites call (@modelcontextprotocol/conformance 0.1.16 and
// 0.2.0-alpha.12). It is the upstream for running a real MCP server behind a
// toolmesh route, and testdata/conformance/run.sh --direct runs both suites
// against it with nothing in between.
//
// It serves Streamable HTTP on one loopback port with two endpoints, because
// the SDK serves the two protocol eras with two transports:
//
//	/mcp        stateful (sessions, SSE, server-to-client requests); protocol
//	            versions up to 2025-11-25 (the 0.1.16 suite)
//	/stateless  stateless (a fresh session per POST, per-request _meta,
//	            input-required results); protocol 2026-07-28 (the
//	            0.2.0-alpha.12 suite with --spec-version 2026-07-28)
//	/healthz    200 once the listener is up
//
// Usage: conformance-upstream [--addr 127.0.0.1:PORT] [--log]
// The program is a test fixture; no product package imports it.
package main

//lint:file-ignore SA1019 roots, sampling and logging are deprecated as of protocol 2026-07-28 (SEP-2577); the conformance scenarios still call them.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback; port 0 picks one and prints it)")
	verbose := flag.Bool("log", false, "log SDK transport events to stderr")
	flag.Parse()

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance-upstream: listen on %s (change --addr): %v\n", *addr, err)
		os.Exit(1)
	}
	// The only line on stdout: where it listens, for scripts and tests.
	fmt.Printf("listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: newHandler(log), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "conformance-upstream: serve: %v\n", err)
		os.Exit(1)
	}
}

// newHandler returns the HTTP handler with both endpoints. Each endpoint has
// its own *mcp.Server: list-changed notifications and subscriptions are per
// server, and the eras must not see each other's sessions.
func newHandler(log *slog.Logger) http.Handler {
	key := newStateKey()
	statefulServer := newServer(log, key)
	stateful := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return statefulServer },
		&mcp.StreamableHTTPOptions{
			Logger: log,
			// Resumable SSE streams (SEP-1699): server-sse-polling closes a
			// stream mid-call and reconnects with Last-Event-ID.
			EventStore: mcp.NewMemoryEventStore(nil),
		})
	statelessServer := newServer(log, key)
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return statelessServer },
		&mcp.StreamableHTTPOptions{Logger: log, Stateless: true})

	mux := http.NewServeMux()
	mux.Handle("/mcp", stateful)
	mux.Handle("/stateless", stateless)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
	})
	return mux
}

// newServer builds one MCP server with the whole fixture catalog.
func newServer(log *slog.Logger, key []byte) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "toolmesh-conformance-upstream", Version: "1.0.0"}, &mcp.ServerOptions{
		Logger: log,
		Capabilities: &mcp.ServerCapabilities{
			Logging:     &mcp.LoggingCapabilities{},
			Completions: &mcp.CompletionCapabilities{},
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Prompts:     &mcp.PromptCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
		},
		CompletionHandler:  complete,
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	addTools(s, key)
	addResources(s)
	addPrompts(s)
	return s
}
