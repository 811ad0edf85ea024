// Package wasmtest builds the repository's WebAssembly guest modules for
// tests (GOOS=wasip1, Go's own toolchain) once per source state and shares
// them between test binaries, and names the shared wazero compilation cache
// that `make test` prepares.
//
// Built modules live in a cache directory under names keyed by a hash of
// everything the build reads: the Go version, the build settings, go.mod and
// go.sum, the source files of every package of this repository the guest
// imports, and the module versions of the others. A source change therefore
// picks a new name: a test never runs a stale module. Builds take a file
// lock, so concurrent test binaries build each module once.
//
// The directory is $TOOLMESH_TEST_WASM_DIR/guests when that is set (`make
// test` sets it and fills it with `go run ./internal/wasmtest/prepare`), else
// the user cache directory's toolmesh/test-wasm.
package wasmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DirEnv names the directory `make test` prepares: guests/ holds built
// modules (see Build), wazero/ a wazero compilation cache holding their
// machine code (see CompiledDir).
const DirEnv = "TOOLMESH_TEST_WASM_DIR"

// Guests maps each guest module the tests use to its package directory,
// relative to the repository root.
var Guests = map[string]string{
	"add-header":    "filters/wasm/examples/add-header",
	"deny-argument": "filters/wasm/examples/deny-argument",
	"redact-result": "filters/wasm/examples/redact-result",
	"misbehave":     "filters/wasm/testdata/misbehave",
	"rawabi":        "filters/wasm/testdata/rawabi",
}

// buildEnv and buildArgs are the guest build; both are part of the key.
var (
	buildEnv  = []string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"}
	buildArgs = []string{"build", "-buildmode=c-shared"}
)

// CompiledDir returns the wazero compilation cache directory `make test`
// shares between test binaries, or "" when DirEnv is unset. wazero keys its
// entries by the module's hash, the wazero version and the CPU's features,
// so any test binary may read what another compiled.
func CompiledDir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return filepath.Join(d, "wazero")
	}
	return ""
}

// CheckCompiledDir reports whether the test binaries could read the
// machine code prepare compiled. wazero files its cache under a
// subdirectory named after its version as the binary's build information
// gives it, which test binaries lack ("dev"); the Makefile links prepare
// with that name. Two subdirectories mean the two disagree, and every test
// binary compiled every guest again: correct, but the slowness `make test`
// prepares to avoid. Call it after the tests ran.
func CheckCompiledDir() error {
	dir := CompiledDir()
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("wazero cache %s: %w", dir, err)
	}
	var subs []string
	for _, e := range entries {
		if e.IsDir() {
			subs = append(subs, e.Name())
		}
	}
	if len(subs) > 1 {
		return fmt.Errorf("wazero cache %s holds %q: prepare and the test binaries name wazero's version differently, so the tests compiled every guest again (fix the -X flag for prepare in the Makefile)", dir, subs)
	}
	return nil
}

// TB is the part of testing.TB Module uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Module returns the path of the built guest name (a key of Guests),
// building it when no build of its current sources exists.
func Module(t TB, name string) string {
	t.Helper()
	p, err := Build(name)
	if err != nil {
		t.Fatalf("wasm guest %s: %v", name, err)
	}
	return p
}

// builder builds the guests of one module into one cache directory.
type builder struct {
	root, goVersion string            // the module's directory; `go env GOVERSION`
	dir             string            // the cache directory
	guests          map[string]string // name: package directory, relative to root
	trim            bool              // the directory outlives test runs

	keysOnce sync.Once
	keys     map[string]string
	keysErr  error
}

var (
	defaultOnce    sync.Once
	defaultBuilder *builder
	defaultErr     error
)

// Build returns the path of the built guest name, building it when needed.
// The file must not be modified: copy it to change it.
func Build(name string) (string, error) {
	defaultOnce.Do(func() { defaultBuilder, defaultErr = newDefaultBuilder() })
	if defaultErr != nil {
		return "", defaultErr
	}
	return defaultBuilder.build(name)
}

func (b *builder) build(name string) (string, error) {
	src, ok := b.guests[name]
	if !ok {
		return "", fmt.Errorf("unknown guest %q", name)
	}
	b.keysOnce.Do(func() { b.keys, b.keysErr = b.guestKeys() })
	if b.keysErr != nil {
		return "", b.keysErr
	}
	out := filepath.Join(b.dir, name+"-"+b.keys[name]+".wasm")
	if st, err := os.Stat(out); err == nil {
		if now := time.Now(); b.trim && now.Sub(st.ModTime()) > time.Hour {
			_ = os.Chtimes(out, now, now) // in use: keep it from trim
		}
		return out, nil
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return "", fmt.Errorf("wasm guest cache %s: %w", b.dir, err)
	}
	if b.trim {
		trim(b.dir)
	}
	unlock, err := lock(out + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(out); err == nil {
		return out, nil // another test binary built it while we waited
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	if err := b.goCmd(append(buildArgs, "-o", tmp, "./"+src)...); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("build %s: %w", src, err)
	}
	// Read-only: tests that change a module work on a copy.
	if err := os.Chmod(tmp, 0o444); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

// newDefaultBuilder builds Guests in the repository root (the main
// module's directory) into DirEnv's guests/ or the user cache directory.
func newDefaultBuilder() (*builder, error) {
	out, err := exec.Command("go", "env", "GOMOD", "GOVERSION").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || filepath.Base(f[0]) != "go.mod" {
		return nil, fmt.Errorf("go env GOMOD GOVERSION: %q: run the tests inside the main module", out)
	}
	b := &builder{root: filepath.Dir(f[0]), goVersion: f[1], guests: Guests}
	if d := os.Getenv(DirEnv); d != "" {
		b.dir = filepath.Join(d, "guests") // make test's: lasts one run
		return b, nil
	}
	uc, err := os.UserCacheDir()
	if err != nil {
		return nil, fmt.Errorf("no cache directory for wasm guests (set %s): %w", DirEnv, err)
	}
	b.dir, b.trim = filepath.Join(uc, "toolmesh", "test-wasm"), true
	return b, nil
}

// listed is what guestKeys reads of `go list -deps -json`.
type listed struct {
	ImportPath, Dir             string
	Standard                    bool
	Deps                        []string
	GoFiles, SFiles, EmbedFiles []string
	Module                      *struct{ Path, Version string }
	Error                       *struct{ Err string }
}

// guestKeys hashes, per guest, what its build reads (see the package
// comment), in one `go list` of every guest.
func (b *builder) guestKeys() (map[string]string, error) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range b.guests {
			if !yield(n) {
				return
			}
		}
	})
	args := []string{"list", "-deps", "-json=ImportPath,Dir,Standard,Deps,GoFiles,SFiles,EmbedFiles,Module,Error"}
	for _, n := range names {
		args = append(args, "./"+b.guests[n])
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), buildEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list the wasm guests: %w: %s", err, stderr.Bytes())
	}
	pkgs := map[string]*listed{}
	byDir := map[string]*listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		p := new(listed)
		if err := dec.Decode(p); err != nil {
			return nil, fmt.Errorf("go list the wasm guests: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs[p.ImportPath] = p
		byDir[p.Dir] = p
	}
	common := sha256.New()
	fmt.Fprintf(common, "wasmtest v1\n%s\n%q\n%q\n%q\n", b.goVersion, buildEnv, buildArgs, os.Getenv("GOFLAGS"))
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := hashFile(common, b.root, f); err != nil && !(f == "go.sum" && errors.Is(err, fs.ErrNotExist)) {
			return nil, err
		}
	}
	keys := map[string]string{}
	for _, n := range names {
		root := byDir[filepath.Join(b.root, filepath.FromSlash(b.guests[n]))]
		if root == nil {
			return nil, fmt.Errorf("go list did not list %s", b.guests[n])
		}
		h := sha256.New()
		h.Write(common.Sum(nil))
		for _, ip := range append([]string{root.ImportPath}, root.Deps...) {
			p := pkgs[ip]
			switch {
			case p == nil:
				return nil, fmt.Errorf("go list did not list %s, a dependency of %s", ip, b.guests[n])
			case p.Standard:
				continue // the Go version covers it
			case p.Module != nil && p.Module.Version != "":
				fmt.Fprintf(h, "pkg %s %s@%s\n", ip, p.Module.Path, p.Module.Version)
				continue // go.sum pins its content
			}
			fmt.Fprintf(h, "pkg %s\n", ip)
			for _, f := range slices.Concat(p.GoFiles, p.SFiles, p.EmbedFiles) {
				if err := hashFile(h, p.Dir, f); err != nil {
					return nil, err
				}
			}
		}
		keys[n] = hex.EncodeToString(h.Sum(nil))[:32]
	}
	return keys, nil
}

func hashFile(h io.Writer, dir, name string) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("hash wasm guest sources: %w", err)
	}
	fmt.Fprintf(h, "file %s %d\n", name, len(b))
	h.Write(b)
	return nil
}

// goCmd runs a guest build in the repository root. The bound is generous:
// a cold build cache on a loaded 2-core machine compiles the runtime first.
func (b *builder) goCmd(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), buildEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// lock takes an exclusive lock on path, waiting for another process that
// holds it, and returns its release.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wasm guest lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wasm guest lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// trim removes, from a cache directory that outlives test runs, the builds
// of sources no test has asked for in a week (each source change leaves
// one behind), and their lock files.
func trim(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 7*24*time.Hour {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
