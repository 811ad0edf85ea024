package extproc

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/toolmesh/toolmesh/extproc/reqheaders"
	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/xds"
)

// oldRelease turns the translated resources into those of a release before
// the route deadline, and before FULL_DUPLEX_STREAMED: the ext_proc
// grpc_service has no wire.ListenerLevelMetadata, allowed_override_modes
// lacks the FULL_DUPLEX_STREAMED entry, and no route adds
// wire.RouteTimeoutHeader. An extproc server that sent its override to
// such a listener would see it ignored (the body stays BUFFERED).
func oldRelease(t *testing.T) func(*xds.Resources) {
	return func(res *xds.Resources) {
		t.Helper()
		edited := 0
		for _, r := range res.Listeners {
			l := r.(*listenerv3.Listener)
			for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
				for _, f := range fc.GetFilters() {
					hcm := &hcmv3.HttpConnectionManager{}
					if f.GetTypedConfig().UnmarshalTo(hcm) != nil {
						continue
					}
					for _, hf := range hcm.GetHttpFilters() {
						if hf.GetName() != wire.ExtProcFilterName {
							continue
						}
						ep := &extprocfilterv3.ExternalProcessor{}
						if err := hf.GetTypedConfig().UnmarshalTo(ep); err != nil {
							t.Fatal(err)
						}
						ep.GrpcService.InitialMetadata = nil
						var modes []*extprocfilterv3.ProcessingMode
						for _, m := range ep.GetAllowedOverrideModes() {
							if m.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
								modes = append(modes, m)
							}
						}
						ep.AllowedOverrideModes = modes
						a, err := anypb.New(ep)
						if err != nil {
							t.Fatal(err)
						}
						hf.ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}
						edited++
					}
					a, err := anypb.New(hcm)
					if err != nil {
						t.Fatal(err)
					}
					f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
				}
			}
		}
		if edited == 0 {
			t.Fatal("no ext_proc filter in the listener")
		}
		for _, r := range res.Routes {
			for _, vh := range r.(*routev3.RouteConfiguration).GetVirtualHosts() {
				for _, rt := range vh.GetRoutes() {
					rt.ResponseHeadersToAdd = nil
				}
			}
		}
	}
}

// TestRouteStreamDeadline: with no setting, a federated server's event
// stream that answers a tools/call and never ends is ended, through the
// local data plane, before the route timeout (the Tool Service's
// requestTimeout, 1s here) with the progress event, the isError "timeout"
// result carrying the client's id, and a clean end; the server's request
// is closed and the call counts as timeout. This holds for a stream that
// passes unchanged and for one the gateway remaps (the shared legacy
// session); the route's timeout header never reaches the client; a server
// that sends that header itself (10 minutes) does not move the deadline;
// an SRE override of requestTimeout does (Portal 10m, override 1s). The
// controls, where the route timeout resets the stream as before: an older
// listener (no listener level, no FULL_DUPLEX_STREAMED entry, no route
// header) and federatedStreamDeadline off.
func TestRouteStreamDeadline(t *testing.T) {
	up, upClosed := stallingServer(t)
	sess := newSessionServer(t)
	nat := nativeService(t)
	sreOverride := func(d time.Duration) xds.Options {
		rd := config.Duration(d)
		return xds.Options{Overrides: &xds.Overrides{Services: map[string]xds.Tuning{"fed": {RequestTimeout: &rd}}}}
	}
	tests := []struct {
		name           string
		translated     bool // the shared legacy session (mixedStack), else a stream passed unchanged (duplexStack)
		mode           string
		requestTimeout time.Duration // in the Portal
		opts           xds.Options
		cfg            Config
		old            bool // oldRelease
		wantReset      bool
	}{
		{name: "passed unchanged", mode: "hang", requestTimeout: time.Second},
		{name: "remapped (shared legacy session)", translated: true, mode: "hang", requestTimeout: time.Second},
		{name: "the server's own header does not count", mode: "spoof", requestTimeout: time.Second},
		{name: "an SRE override moves the deadline", mode: "hang", requestTimeout: 10 * time.Minute, opts: sreOverride(time.Second)},
		{name: "older listener: reset", mode: "hang", requestTimeout: time.Second, old: true, wantReset: true},
		{name: "older listener, remapped: reset", translated: true, mode: "hang", requestTimeout: time.Second, old: true, wantReset: true},
		{name: "switched off: reset", mode: "hang", requestTimeout: time.Second, cfg: Config{FederatedStreamDeadlineOff: true}, wantReset: true},
		{name: "switched off, remapped: reset", translated: true, mode: "hang", requestTimeout: time.Second,
			cfg: Config{FederatedStreamDeadlineOff: true}, wantReset: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var edit func(*xds.Resources)
			if tt.old {
				edit = oldRelease(t)
			}
			var resp *http.Response
			var env *testEnv
			wantID, closed := "7", upClosed
			if tt.translated {
				f, e := mixedStackWith(t, sess.URL, nat.URL, tt.requestTimeout, tt.cfg, edit)
				env, wantID, closed = e, `"c-7"`, sess.closed
				resp = clientCall(t, f, mcp.EraLegacy, "slow", `{"mode":"`+tt.mode+`"}`)
			} else {
				f, e := duplexStackWith(t, up.URL, tt.requestTimeout, tt.cfg, tt.opts, edit)
				env = e
				resp = stallingCall(t, f.URL, f.Client(), tt.mode)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || !reqheaders.IsEventStream(resp.Header.Get("Content-Type")) {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if v := resp.Header.Values(wire.RouteTimeoutHeader); len(v) != 0 {
				t.Errorf("the client got %s: %q", wire.RouteTimeoutHeader, v)
			}
			events, end := sseEvents(resp.Body)
			if len(events) == 0 || !strings.Contains(events[0], "notifications/progress") {
				t.Fatalf("events %q (end %v): the progress event is not first", events, end)
			}
			if tt.wantReset {
				if end == nil || len(events) != 1 {
					t.Fatalf("events %q, end %v: want the progress event and a reset", events, end)
				}
			} else {
				if end != nil || len(events) != 2 {
					t.Fatalf("events %q, end %v: want the progress event, a result, a clean end", events, end)
				}
				var last struct {
					ID     json.RawMessage `json:"id"`
					Result struct {
						IsError bool `json:"isError"`
						Content []struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"result"`
				}
				if err := json.Unmarshal([]byte(events[1]), &last); err != nil || string(last.ID) != wantID || !last.Result.IsError ||
					len(last.Result.Content) == 0 || !strings.Contains(last.Result.Content[0].Text, "tool slow failed: timeout") {
					t.Fatalf("last event %s: want id %s, isError, \"tool slow failed: timeout\" (%v)", events[1], wantID, err)
				}
			}
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the server's request was not closed")
			}
			if !tt.wantReset {
				labels := map[string]string{"route": "core", "tool": "slow", "outcome": callTimeout}
				waitToolCallCounted(t, env, labels)
			}
		})
	}
}

// stallingCall sends stallingServer's tool "slow" a 2026-07-28 tools/call
// with id 7 and arguments {"mode": mode} through the front at url.
func stallingCall(t *testing.T, url string, client *http.Client, mode string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{"mode":"` + mode + `"},` + meta2026 + `}}`
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/mcp/core", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcp.Version20260728)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "slow")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestRouteDeadlineOldListener: with an older listener the server sets no
// FULL_DUPLEX_STREAMED override, so a federated JSON answer takes the
// BUFFERED path and keeps its content-length; with this release's listener
// the same answer is streamed back without one (the control showing the
// check tells the two apart). Were the override sent to the older listener,
// Envoy would ignore it and the held headers reply would meet the message
// timeout.
func TestRouteDeadlineOldListener(t *testing.T) {
	sess := newSessionServer(t)
	nat := nativeService(t)
	for _, tc := range []struct {
		name   string
		old    bool
		wantCL bool
	}{
		{name: "older listener", old: true, wantCL: true},
		{name: "this release's listener", old: false, wantCL: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var edit func(*xds.Resources)
			if tc.old {
				edit = oldRelease(t)
			}
			front, _ := mixedStackWith(t, sess.URL, nat.URL, time.Minute, Config{}, edit)
			resp := clientCall(t, front, mcp.EraLegacy, "slow", `{"mode":"json"}`)
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), secretText) {
				t.Fatalf("status %d, body %q (%v)", resp.StatusCode, b, err)
			}
			if got := resp.ContentLength == int64(len(b)); got != tc.wantCL {
				t.Errorf("content-length %d for %d bytes: want it kept %v", resp.ContentLength, len(b), tc.wantCL)
			}
			if v := resp.Header.Values(wire.RouteTimeoutHeader); len(v) != 0 {
				t.Errorf("the client got %s: %q", wire.RouteTimeoutHeader, v)
			}
		})
	}
}

// TestStreamDeadline: the deadline is the route timeout less routeMargin,
// or federatedStreamTimeout when sooner; none without a route timeout, and
// the route's counts only with the request-headers override in force, a
// listener that declares its level, and the deadline not switched off.
func TestStreamDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		cfg      Config
		listener int
		duplex   bool
		route    time.Duration
		want     time.Duration // after start; 0: none
	}{
		{name: "default 15s route", listener: 1, duplex: true, route: 15 * time.Second, want: 15*time.Second - 750*time.Millisecond},
		{name: "long route: 1s margin", listener: 1, duplex: true, route: time.Minute, want: time.Minute - time.Second},
		{name: "short route: 250ms margin", listener: 1, duplex: true, route: 2 * time.Second, want: 1750 * time.Millisecond},
		{name: "shorter route: half", listener: 1, duplex: true, route: 400 * time.Millisecond, want: 200 * time.Millisecond},
		{name: "tiny route: half", listener: 1, duplex: true, route: 60 * time.Millisecond, want: 30 * time.Millisecond},
		{name: "no route timeout", listener: 1, duplex: true},
		{name: "explicit sooner", cfg: Config{FederatedStreamTimeout: time.Second}, listener: 1, duplex: true, route: time.Minute, want: time.Second},
		{name: "route sooner", cfg: Config{FederatedStreamTimeout: time.Hour}, listener: 1, duplex: true, route: time.Minute, want: time.Minute - time.Second},
		{name: "older listener", listener: 0, duplex: true, route: time.Minute},
		{name: "older listener, explicit", cfg: Config{FederatedStreamTimeout: time.Second}, duplex: true, route: time.Minute, want: time.Second},
		{name: "off", cfg: Config{FederatedStreamDeadlineOff: true}, listener: 1, duplex: true, route: time.Minute},
		{name: "no override in force", listener: 1, route: time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.listener > 0 {
				ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(wire.ListenerLevelMetadata, strconv.Itoa(tc.listener)))
			}
			x := &request{s: &Server{cfg: tc.cfg}, ctx: ctx, start: start, mode: bufferedResponse{}}
			if tc.duplex {
				x.mode = &duplexResponseMode{}
			}
			got := x.streamDeadline(tc.route)
			if tc.want == 0 {
				if !got.IsZero() {
					t.Fatalf("deadline %v after start, want none", got.Sub(start))
				}
				return
			}
			if got.Sub(start) != tc.want {
				t.Fatalf("deadline %v after start, want %v", got.Sub(start), tc.want)
			}
		})
	}
}
