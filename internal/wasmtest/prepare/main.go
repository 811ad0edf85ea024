// Command prepare fills the directory `make test` shares between test
// binaries (wasmtest.DirEnv): it builds every guest module the tests use and
// compiles each into the wazero compilation cache there. It runs without
// the race detector, which slows wazero's compiler several-fold; the race
// tests then load the machine code from the cache. Usage: prepare DIR.
//
// wazero keys the cache directory by its version as read from the binary's
// build information, which test binaries lack ("dev"). The Makefile links
// this program with -X github.com/tetratelabs/wazero/internal/version.version=dev
// so the two agree; wasmtest.CheckCompiledDir fails the tests when not.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"

	"github.com/tetratelabs/wazero"

	"github.com/toolmesh/toolmesh/internal/wasmtest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: prepare DIR")
		os.Exit(2)
	}
	if err := prepare(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "prepare wasm test modules:", err)
		os.Exit(1)
	}
}

func prepare(dir string) error {
	if err := os.Setenv(wasmtest.DirEnv, dir); err != nil {
		return err
	}
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(wasmtest.CompiledDir())
	if err != nil {
		return fmt.Errorf("wazero cache %s: %w", wasmtest.CompiledDir(), err)
	}
	defer cache.Close(ctx)

	names := slices.Sorted(func(yield func(string) bool) {
		for n := range wasmtest.Guests {
			if !yield(n) {
				return
			}
		}
	})
	// Build one at a time (each go build uses every core), then compile
	// in parallel (each compile uses one).
	paths := map[string]string{}
	for _, n := range names {
		p, err := wasmtest.Build(n)
		if err != nil {
			return err
		}
		paths[n] = p
	}
	errs := make([]error, len(names))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = compile(ctx, cache, paths[n])
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("compile %s: %w", names[i], err)
		}
		fmt.Println(paths[names[i]])
	}
	return nil
}

// compile writes path's machine code to the cache, for the runtime settings
// filters/wasm loads modules with by default: interruptible (part of
// wazero's cache key).
func compile(ctx context.Context, cache wazero.CompilationCache, path string) error {
	bin, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(true))
	defer rt.Close(ctx)
	_, err = rt.CompileModule(ctx, bin)
	return err
}
