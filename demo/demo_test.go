package demo_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/demo"
	"github.com/toolmesh/toolmesh/registry"
)

func TestStartServesAndPortal(t *testing.T) {
	s, err := demo.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	for name, base := range map[string]string{"clock": s.Clock, "calc": s.Calc, "text": s.Text} {
		if !strings.HasPrefix(base, "http://127.0.0.1:") {
			t.Errorf("%s URL = %q, want http://127.0.0.1:port", name, base)
		}
		for _, path := range []string{"/healthz", "/manifest"} {
			if code := get(t, t.Context(), base+path); code != http.StatusOK {
				t.Errorf("GET %s%s = %d", base, path, code)
			}
		}
	}

	// The rendered Portal is a valid listing by the registry's own rules.
	l, err := registry.ListingDecoder{Strict: true}.Decode(demo.Portal(s))
	if err != nil {
		t.Fatalf("demo portal: %v\n%s", err, demo.Portal(s))
	}
	got := map[string][]string{}
	urls := map[string]string{}
	for _, r := range l.Routes {
		if r.Description == "" {
			t.Errorf("route %s has no description", r.Key)
		}
		for _, svc := range r.ToolServices {
			got[r.Key] = append(got[r.Key], svc.Name)
			urls[svc.Name] = svc.URL
		}
	}
	want := map[string][]string{"core": {"clock", "calc"}, "process": {"calc", "text"}}
	for k, v := range want {
		if strings.Join(got[k], ",") != strings.Join(v, ",") {
			t.Errorf("route %s serves %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("routes = %v, want %v", got, want)
	}
	if urls["clock"] != s.Clock || urls["calc"] != s.Calc || urls["text"] != s.Text {
		t.Errorf("portal URLs %v do not match the services", urls)
	}
	for _, r := range l.Routes {
		for _, svc := range r.ToolServices {
			if svc.Name == "clock" && (svc.Cluster == nil || svc.Cluster.RequestTimeout.D() != 5*time.Second) {
				t.Errorf("clock cluster = %+v, want requestTimeout 5s", svc.Cluster)
			}
		}
	}
}

func TestStopsWhenContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s, err := demo.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := get(t, t.Context(), s.Calc+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz = %d before cancel", code)
	}
	cancel()
	// Close after cancel waits for the shutdown the cancel started.
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, base := range []string{s.Clock, s.Calc, s.Text} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/healthz", nil)
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err == nil {
			_ = resp.Body.Close()
			t.Errorf("%s still answers after cancel", base)
		}
	}
}

func get(t *testing.T, ctx context.Context, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
