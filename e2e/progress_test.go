package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressService is a native Tool Service whose tool "count" answers with
// a progress stream (docs/contracts/toolservice.md, "Progress"): one
// progress frame, flushed, then — only once release is closed — a second
// one and the result.
type progressService struct {
	*toolService
	release atomic.Pointer[chan struct{}]
}

func newProgressService(tb testing.TB) *progressService {
	tb.Helper()
	p := &progressService{toolService: &toolService{name: "prog"}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"tools": []map[string]any{
			{"name": "count", "version": "1", "description": "Counts to two, reporting progress.", "inputSchema": objectSchema},
		}})
	})
	mux.HandleFunc("POST /tools/count", func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		release := *p.release.Load()
		w.Header().Set("content-type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"progress":1,"total":2,"message":"first ✓"}`+"\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `{"progress":2,"total":2}`+"\n"+
			`{"result":{"content":[{"type":"text","text":"counted"}]}}`+"\n")
	})
	p.srv = httptest.NewServer(mux)
	tb.Cleanup(p.srv.Close)
	return p
}

// progressPortal writes a Portal with route "prog" listing only svc.
func progressPortal(tb testing.TB, svc *progressService) string {
	tb.Helper()
	doc := `{"routes":[{"key":"prog","toolServices":[{"name":"prog","url":"` + svc.srv.URL + `","manifestPath":"/manifest"}]}]}`
	path := filepath.Join(tb.TempDir(), "portal.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TestGoSDKProgress calls a streaming native Tool Service through `toolmesh
// run` with the official Go SDK client in both eras. With a progress token
// the client's progress handler gets the first notification while the
// Tool Service is still holding the rest back (it waits until that
// handler ran), so the answer cannot have been buffered to its end;
// without one the call gets the plain result.
func TestGoSDKProgress(t *testing.T) {
	svc := newProgressService(t)
	gw := startGateway(t, progressPortal(t, svc))
	for _, tc := range []struct {
		name, pin, wantVersion string
		token                  any
	}{
		{"stateless-default", "", "2026-07-28", "tok-2026"},
		{"legacy-pinned", "2025-11-25", "2025-11-25", "tok-legacy"},
		{"stateless-no-token", "", "2026-07-28", nil},
		{"legacy-no-token", "2025-11-25", "2025-11-25", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			release := make(chan struct{})
			var once sync.Once
			if tc.token == nil {
				close(release) // nobody will see progress: nothing to wait for
			}
			svc.release.Store(&release)
			got := make(chan *sdk.ProgressNotificationParams, 8)
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, &sdk.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
					got <- req.Params
					once.Do(func() { close(release) })
				},
			})
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint: gw.URL + "/mcp/prog", DisableStandaloneSSE: true, MaxRetries: -1,
			}, &sdk.ClientSessionOptions{ProtocolVersion: tc.pin})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if v := cs.InitializeResult().ProtocolVersion; v != tc.wantVersion {
				t.Fatalf("negotiated version = %q, want %q", v, tc.wantVersion)
			}
			params := &sdk.CallToolParams{Name: "count", Arguments: map[string]any{}}
			if tc.token != nil {
				params.SetProgressToken(tc.token)
			}
			res, err := cs.CallTool(ctx, params)
			if err != nil {
				t.Fatalf("tools/call count: %v", err)
			}
			if res.IsError || textOf(t, res) != "counted" {
				t.Fatalf("result isError=%v text=%q, want counted", res.IsError, textOf(t, res))
			}
			if tc.token == nil {
				select {
				case p := <-got:
					t.Fatalf("progress %+v without a progress token", p)
				default:
				}
				return
			}
			want := []sdk.ProgressNotificationParams{
				{ProgressToken: tc.token, Progress: 1, Total: 2, Message: "first ✓"},
				{ProgressToken: tc.token, Progress: 2, Total: 2},
			}
			for i, w := range want {
				select {
				case p := <-got:
					if p.ProgressToken != w.ProgressToken || p.Progress != w.Progress || p.Total != w.Total || p.Message != w.Message {
						t.Errorf("progress %d = %+v, want %+v", i, *p, w)
					}
				case <-ctx.Done():
					t.Fatalf("progress notification %d never arrived", i)
				}
			}
		})
	}
}
