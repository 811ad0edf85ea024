package wasmtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// tempModule writes a module with two guests: g imports package lib, h
// imports nothing of the module; package other is imported by neither.
func tempModule(t *testing.T) (root string, write func(rel, content string)) {
	t.Helper()
	root = t.TempDir()
	write = func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/guests\n\ngo 1.26\n")
	write("lib/lib.go", "package lib\n\nfunc V() int { return 1 }\n")
	write("other/other.go", "package other\n")
	write("g/main.go", "package main\n\nimport \"example.com/guests/lib\"\n\nvar V = lib.V()\n\nfunc main() {}\n")
	write("h/main.go", "package main\n\nfunc main() {}\n")
	return root, write
}

func goVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestKeysFollowSources checks that a guest's key changes with what its
// build reads, and only with that: a changed key is a rebuild, an unchanged
// one reuses the cached module.
func TestKeysFollowSources(t *testing.T) {
	root, write := tempModule(t)
	gv := goVersion(t)
	keys := func(goVersion string) map[string]string {
		t.Helper()
		b := &builder{root: root, goVersion: goVersion, guests: map[string]string{"g": "g", "h": "h"}}
		k, err := b.guestKeys()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	prev := keys(gv)
	for _, tc := range []struct {
		name         string
		change       func() map[string]string
		wantG, wantH bool // key changed
	}{
		{"unrelated package", func() map[string]string { write("other/other.go", "package other\n\nvar X = 1\n"); return keys(gv) }, false, false},
		{"test file of the guest", func() map[string]string { write("g/main_test.go", "package main\n"); return keys(gv) }, false, false},
		{"file excluded by build constraint", func() map[string]string {
			write("lib/lib_linux.go", "//go:build linux\n\npackage lib\n")
			return keys(gv)
		}, false, false},
		{"imported package", func() map[string]string {
			write("lib/lib.go", "package lib\n\nfunc V() int { return 2 }\n")
			return keys(gv)
		}, true, false},
		{"new file in the imported package", func() map[string]string { write("lib/more.go", "package lib\n"); return keys(gv) }, true, false},
		{"guest itself", func() map[string]string {
			write("h/main.go", "package main\n\nfunc main() { println() }\n")
			return keys(gv)
		}, false, true},
		{"go.mod", func() map[string]string { write("go.mod", "module example.com/guests\n\ngo 1.26.0\n"); return keys(gv) }, true, true},
		{"Go version", func() map[string]string { return keys(gv + "-other") }, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := tc.change()
			if got := next["g"] != prev["g"]; got != tc.wantG {
				t.Errorf("g's key changed: %v, want %v", got, tc.wantG)
			}
			if got := next["h"] != prev["h"]; got != tc.wantH {
				t.Errorf("h's key changed: %v, want %v", got, tc.wantH)
			}
			prev = keys(gv)
		})
	}
}

// TestBuildOnceAndShare builds one guest from two builders at once (as two
// test binaries would): both get the same read-only module, built once,
// and a later builder reuses it until a source changes.
func TestBuildOnceAndShare(t *testing.T) {
	root, write := tempModule(t)
	gv := goVersion(t)
	dir := t.TempDir()
	newBuilder := func() *builder {
		return &builder{root: root, goVersion: gv, dir: dir, guests: map[string]string{"g": "g"}}
	}
	var wg sync.WaitGroup
	paths := make([]string, 2)
	errs := make([]error, 2)
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = newBuilder().build("g") })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if paths[0] != paths[1] {
		t.Fatalf("two paths for one build: %v", paths)
	}
	bin, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bin, []byte("\x00asm")) {
		t.Fatalf("%s is not a WebAssembly module", paths[0])
	}
	st, err := os.Stat(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o222 != 0 {
		t.Errorf("%s is writable (%v)", paths[0], st.Mode())
	}
	wasms, _ := filepath.Glob(filepath.Join(dir, "*.wasm"))
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(wasms) != 1 || len(tmps) != 0 {
		t.Errorf("cache holds %v and %v, want one module and no temporary file", wasms, tmps)
	}

	if p, err := newBuilder().build("g"); err != nil || p != paths[0] {
		t.Errorf("rebuild of unchanged sources: %s, %v; want %s", p, err, paths[0])
	}
	write("lib/lib.go", "package lib\n\nfunc V() int { return 3 }\n")
	p, err := newBuilder().build("g")
	if err != nil {
		t.Fatal(err)
	}
	if p == paths[0] {
		t.Errorf("after a source change the builder returned the old module %s", p)
	}
	if _, err := newBuilder().build("nope"); err == nil {
		t.Error("unknown guest: no error")
	}
}
