package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServesTheDemoServices starts the three services on loopback, reads
// each manifest, calls a tool, and stops them.
func TestServesTheDemoServices(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	addrs := map[string]string{}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-clock=127.0.0.1:0", "-calc=127.0.0.1:0", "-text=127.0.0.1:0"}, io.Discard,
			func(name, addr string) {
				mu.Lock()
				defer mu.Unlock()
				addrs[name] = addr
				if len(addrs) == 3 {
					close(ready)
				}
			})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}

	client := &http.Client{Timeout: 5 * time.Second}
	for name, tool := range map[string]string{"clock": "time.now", "calc": "math.add", "text": "text.upper"} {
		resp, err := client.Get("http://" + addrs[name] + "/manifest")
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Tools []struct{ Name string } }
		err = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s manifest: %d %v", name, resp.StatusCode, err)
		}
		found := false
		for _, tl := range m.Tools {
			found = found || tl.Name == tool
		}
		if !found {
			t.Errorf("%s manifest has no %s: %+v", name, tool, m.Tools)
		}
	}
	resp, err := client.Post("http://"+addrs["calc"]+"/tools/math.add", "application/json", strings.NewReader(`{"a":2,"b":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "5") {
		t.Errorf("math.add: %d %s", resp.StatusCode, body)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after cancel: %v", err)
	}
}

func TestRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-port=1"}, {"-clock=not-an-address"}} {
		if err := run(t.Context(), args, io.Discard, nil); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}
