// Command loadfaults runs the load-with-faults test of package
// e2e/loadfaults against a toolmesh binary: clients mixing tools/list and
// tools/call in both protocol eras through `toolmesh run`, while a Tool
// Service restarts, another gains and loses a tool, and the Portal file is
// rewritten. It prints throughput, latency percentiles and the answers by
// kind, and exits 1 when any answer was wrong, had no HTTP answer, or was
// "unavailable" away from every fault.
//
//	loadfaults --toolmesh bin/toolmesh [--duration 60s] [--clients 16] [--seed 1] [--gateway-log FILE]
//
// `make load` builds the binary and runs it (LOAD_DURATION, default 60s).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolmesh/toolmesh/e2e/loadfaults"
)

func main() {
	fs := flag.NewFlagSet("loadfaults", flag.ContinueOnError)
	bin := fs.String("toolmesh", "", "the toolmesh `binary` to run (required; make load builds bin/toolmesh)")
	duration := fs.Duration("duration", time.Minute, "how long the clients send")
	clients := fs.Int("clients", 16, "concurrent clients")
	seed := fs.Uint64("seed", 1, "seed of the clients' random choices")
	gwLog := fs.String("gateway-log", "", "write the gateway's log to this `file` (default: discarded)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *bin == "" || *duration <= 0 || *clients <= 0 {
		fmt.Fprintln(os.Stderr, "loadfaults: --toolmesh is required; --duration and --clients must be positive")
		os.Exit(2)
	}
	var out io.Writer = io.Discard
	if *gwLog != "" {
		f, err := os.Create(*gwLog)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadfaults: --gateway-log:", err)
			os.Exit(2)
		}
		defer f.Close()
		out = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := loadfaults.Run(ctx, loadfaults.Config{
		Toolmesh: *bin, Duration: *duration, Clients: *clients, Seed: *seed, Output: out, Progress: os.Stdout,
	})
	if rep != nil {
		fmt.Print(rep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadfaults:", err)
		os.Exit(1)
	}
	if n := rep.Failures(); n > 0 {
		fmt.Fprintf(os.Stderr, "loadfaults: %d answers failed the checks\n", n)
		os.Exit(1)
	}
}
