package fetch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/registry"
)

func TestHTTPFetcher(t *testing.T) {
	doc := registrytest.ToolsDoc("a", "b")
	tests := []struct {
		name    string
		mode    string
		body    string
		max     int64
		timeout time.Duration
		want    string // error substring; "" means success
	}{
		{name: "ok", mode: registrytest.ModeOK, body: doc},
		{name: "exactly at the limit", mode: registrytest.ModeOK, body: doc, max: int64(len(doc))},
		{name: "over the limit", mode: registrytest.ModeOK, body: doc, max: int64(len(doc)) - 1, want: "larger than"},
		{name: "server error", mode: registrytest.ModeFail, want: `status 500: "upstream exploded"`},
		{name: "html", mode: registrytest.ModeHTML, want: `content type "text/html", want application/json`},
		{name: "garbage", mode: registrytest.ModeGarbage, want: "decode manifest"},
		{name: "not a manifest", mode: registrytest.ModeOK, body: `{"routes":[]}`, want: `missing "tools"`},
		{name: "hang", mode: registrytest.ModeHang, timeout: 200 * time.Millisecond, want: "context deadline exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := registrytest.NewFakeServer(t, "/base/manifest.json", doc)
			srv.Set(tc.mode, tc.body)
			ctx := t.Context()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			f := NewHTTPFetcher(srv.Client(), tc.max)
			m, err := f.Fetch(ctx, registry.ToolService{Name: "svc", URL: srv.URL + "/base/", ManifestPath: "/manifest.json"})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Fetch() = %v", err)
				}
				if len(m.Tools) != 2 {
					t.Fatalf("Fetch() tools = %+v", m.Tools)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"svc"`) {
				t.Fatalf("Fetch() = %v, want an error naming the service and containing %q", err, tc.want)
			}
		})
	}
	t.Run("default limit", func(t *testing.T) {
		big := `{"tools":[],"pad":"` + strings.Repeat("x", DefaultMaxManifestBytes) + `"}`
		srv := registrytest.NewFakeServer(t, "/manifest", big)
		_, err := NewHTTPFetcher(nil, 0).Fetch(t.Context(), registry.ToolService{Name: "big", URL: srv.URL})
		if err == nil || !strings.Contains(err.Error(), "larger than 4194304 bytes") {
			t.Fatalf("Fetch() = %v, want the 4 MiB default limit", err)
		}
	})
}
