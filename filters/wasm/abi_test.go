package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/toolmesh/toolmesh/filters/wasm/guest"
)

func TestParseDecision(t *testing.T) {
	tests := []struct {
		in      string
		want    Decision
		wantErr error
	}{
		{`{"action":"pass"}`, Decision{Action: ActionPass}, nil},
		{`{"action":"deny"}`, Decision{Action: ActionDeny, Reason: "denied by filter"}, nil},
		{`{"action":"deny","reason":"no","as":"rpc_error","code":-32001}`, Decision{Action: ActionDeny, Reason: "no", As: AsRPCError, Code: -32001}, nil},
		{`{"action":"rewrite","arguments":{"a":1},"headers":{"x-a":"b"}}`, Decision{Action: ActionRewrite, Arguments: json.RawMessage(`{"a":1}`), Headers: map[string]string{"x-a": "b"}}, nil},
		{`{"action":"rewrite","result":{"content":[]}}`, Decision{Action: ActionRewrite, Result: json.RawMessage(`{"content":[]}`)}, nil},
		{`{"action":"error","reason":"panic: boom"}`, Decision{}, ErrGuest},
		{`{"action":"allow"}`, Decision{}, ErrABI},
		{`{"action":"deny","as":"http_403"}`, Decision{}, ErrABI},
		{`{"action":"rewrite","arguments":[1]}`, Decision{}, ErrABI},
		{`{"action":"rewrite","result":"text"}`, Decision{}, ErrABI},
		{`{"action":"pass"} {}`, Decision{}, ErrABI},
		{`{"action":`, Decision{}, ErrABI},
		{``, Decision{}, ErrABI},
		{`{"action":"pass","headers":{"x":1}}`, Decision{}, ErrABI},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDecision([]byte(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(tt.want)
			if !bytes.Equal(g, w) {
				t.Fatalf("decision = %s, want %s", g, w)
			}
		})
	}
}

func FuzzParseDecision(f *testing.F) {
	for _, s := range []string{
		`{"action":"pass"}`,
		`{"action":"deny","reason":"r","as":"tool_error"}`,
		`{"action":"rewrite","arguments":{},"result":{},"headers":{"a":"b"}}`,
		`{"action":"error","reason":"x"}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDecision(b)
		if err != nil {
			if !errors.Is(err, ErrABI) && !errors.Is(err, ErrGuest) {
				t.Fatalf("error %v wraps neither ErrABI nor ErrGuest", err)
			}
			return
		}
		switch d.Action {
		case ActionPass, ActionDeny, ActionRewrite:
		default:
			t.Fatalf("accepted action %q", d.Action)
		}
	})
}

// echo answers with everything it decoded, so the round trip through the
// host's encoder and the SDK's decoder can be checked field by field.
func echo(req guest.Request) guest.Decision {
	d := guest.Rewrite().
		WithHeader("stage", string(req.Stage)).
		WithHeader("filter", req.Filter).
		WithHeader("route", req.Route).
		WithHeader("era", req.Era).
		WithHeader("version", req.Version).
		WithHeader("method", req.Method).
		WithHeader("tool", req.Tool).
		WithHeader("toolVersion", req.ToolVersion)
	for k, v := range req.Headers() {
		d = d.WithHeader("h:"+k, v)
	}
	if req.Stage == guest.StageResult {
		return d.WithResult(req.Result)
	}
	return d.WithArguments(req.Arguments)
}

// FuzzEnvelopeRoundTrip drives the host's envelope encoder into the guest
// SDK's decoder (run natively) and back through the decision path.
func FuzzEnvelopeRoundTrip(f *testing.F) {
	f.Add(false, "core", "get_weather", "Paris", "x-tenant", "acme")
	f.Add(true, "r-1", "tool.with.dots", "quote \" and \\ and \n", "x-h", "\u2028\x00")
	f.Add(false, "", "", "", "", "")
	f.Add(true, "é", "ü", "\xff\xfe", "k", "}")
	guest.Handle(echo)
	f.Fuzz(func(t *testing.T, result bool, route, tool, arg, hname, hvalue string) {
		payload, _ := json.Marshal(map[string]string{"v": arg, "}": "{"})
		in := &Input{Stage: StageRequest, Route: route, Era: "legacy", Version: "2025-11-25",
			Method: "tools/call", Tool: tool, ToolVersion: arg, Arguments: payload}
		if result {
			in.Stage, in.Arguments, in.Result = StageResult, nil, payload
		}
		if hname != "" {
			in.Headers = map[string]string{hname: hvalue}
		}
		env := appendEnvelope(nil, "fuzz", in)
		if !json.Valid(env) && utf8.ValidString(route+tool+arg+hname+hvalue) {
			t.Fatalf("envelope is not JSON: %s", env)
		}
		d, err := ParseDecision(guest.Process(env))
		if err != nil {
			t.Fatalf("round trip of %s: %v", env, err)
		}
		// Only valid UTF-8 survives JSON unchanged; the rest is replaced.
		same := func(got, want string) bool { return got == want || !utf8.ValidString(want) }
		for k, want := range map[string]string{
			"stage": in.Stage, "filter": "fuzz", "route": route, "era": "legacy",
			"version": "2025-11-25", "method": "tools/call", "tool": tool, "toolVersion": arg,
		} {
			if !same(d.Headers[k], want) {
				t.Fatalf("%s = %q, want %q", k, d.Headers[k], want)
			}
		}
		if hname != "" && utf8.ValidString(hname) && !same(d.Headers["h:"+hname], hvalue) {
			t.Fatalf("header %q = %q, want %q", hname, d.Headers["h:"+hname], hvalue)
		}
		got := d.Arguments
		if result {
			got = d.Result
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("payload = %s, want %s", got, payload)
		}
	})
}
