// Command misbehave is a test-only WebAssembly filter that fails on demand.
// The "mode" argument picks the behaviour: "loop" never returns, "panic"
// panics inside the handler (the SDK recovers), "crash" kills the Go runtime
// with an unrecoverable error, "oom" allocates until linear memory runs out,
// "exit" calls os.Exit, "hold" busy-waits for "ms" milliseconds, "log"
// writes a line to stderr (a host call a test can hold), anything else
// passes. Every decision carries an instance id and a per-instance call
// count as headers, so tests can tell instances apart.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"time"

	"github.com/toolmesh/toolmesh/filters/wasm/guest"
)

func main() {}

func init() {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id = hex.EncodeToString(b)
	guest.Handle(filter)
}

var (
	id    string
	calls int
	sink  [][]byte
)

func filter(req guest.Request) guest.Decision {
	calls++
	mode, _ := req.StringArgument("mode")
	switch mode {
	case "loop":
		for {
		}
	case "panic":
		panic("boom")
	case "crash":
		var m map[string]int
		done := make(chan struct{})
		go func() { m["x"] = 1; close(done) }() // a panic outside the handler's goroutine
		<-done
	case "oom":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "exit":
		os.Exit(3)
	case "log":
		_, _ = os.Stderr.WriteString("misbehave: log\n")
	case "hold":
		ms, _ := req.StringArgument("ms")
		n, _ := strconv.Atoi(ms)
		for deadline := time.Now().Add(time.Duration(n) * time.Millisecond); time.Now().Before(deadline); {
		}
	}
	return guest.Rewrite().
		WithHeader("x-instance", id).
		WithHeader("x-calls", strconv.Itoa(calls))
}
