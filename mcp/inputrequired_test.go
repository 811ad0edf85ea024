package mcp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// statelessCallBody is a 2026-07-28 tools/call of echo with extra params
// members and the given client capabilities.
func statelessCallBody(extra, caps string) string {
	if extra != "" {
		extra += ","
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{},%s`+
		`"_meta":{"%s":"2026-07-28","%s":%s}}}`, extra, MetaProtocolVersion, MetaClientCapabilities, caps)
}

func TestCallInput(t *testing.T) {
	s := NewServer(Config{})
	cases := []struct {
		name   string
		legacy bool
		body   string
		want   *CallInput
		code   int // a JSON-RPC error instead of a Call
	}{
		{name: "nothing", body: statelessCallBody("", `{}`)},
		{name: "elicitation declared", body: statelessCallBody("", `{"elicitation":{}}`), want: &CallInput{Elicitation: true}},
		{name: "form elicitation declared", body: statelessCallBody("", `{"elicitation":{"form":{},"url":{}}}`), want: &CallInput{Elicitation: true}},
		{name: "url elicitation only", body: statelessCallBody("", `{"elicitation":{"url":{}}}`)},
		{name: "elicitation not an object", body: statelessCallBody("", `{"elicitation":true}`)},
		{name: "retry", body: statelessCallBody(`"requestState":"s1","inputResponses":{"a":{"action":"accept"}}`, `{"elicitation":{}}`),
			want: &CallInput{RequestState: "s1", HasRequestState: true, Responses: json.RawMessage(`{"a":{"action":"accept"}}`), Elicitation: true}},
		{name: "empty state", body: statelessCallBody(`"requestState":""`, `{}`), want: &CallInput{HasRequestState: true}},
		{name: "null members", body: statelessCallBody(`"requestState":null,"inputResponses":null`, `{}`)},
		{name: "state not a string", body: statelessCallBody(`"requestState":1`, `{}`), code: CodeInvalidParams},
		{name: "responses not an object", body: statelessCallBody(`"inputResponses":[]`, `{}`), code: CodeInvalidParams},
		{name: "repeated requestState", body: statelessCallBody(`"requestState":"a","requestState":"b"`, `{}`), code: CodeInvalidParams},
		{name: "legacy: state read, capabilities not", legacy: true,
			body: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","requestState":"s","_meta":{"` + MetaClientCapabilities + `":{"elicitation":{}}}}}`,
			want: &CallInput{RequestState: "s", HasRequestState: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := modernReq("tools/call", "echo")
			if tc.legacy {
				r = legacyReq()
			}
			out := s.Handle(r, []byte(tc.body), testCatalog(t))
			if tc.code != 0 {
				if out.Reply == nil {
					t.Fatalf("got a call, want error %d", tc.code)
				}
				checkReply(t, out.Reply, 200, tc.code, "9")
				return
			}
			if out.Call == nil {
				t.Fatalf("no call: %s", out.Reply.Body)
			}
			if !reflect.DeepEqual(out.Call.Input, tc.want) {
				t.Fatalf("Input = %+v, want %+v", out.Call.Input, tc.want)
			}
		})
	}
}

func TestInputRequired(t *testing.T) {
	s := NewServer(Config{ServerName: "gw", ServerVersion: "1"})
	c := &Call{ID: json.RawMessage(`"c-1"`), Era: EraStateless, Tool: "drop"}
	schema := json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean"}},"required":["approve"]}`)
	body := s.InputRequired(c, "toolmesh_approval", ElicitRequest{Message: "Approve \"drop\"?\nline", Schema: schema}, "tma1.k.p.m")
	d := decodeRPC(t, body)
	if string(d.top["id"]) != `"c-1"` || string(d.result["resultType"]) != `"input_required"` || string(d.result["requestState"]) != `"tma1.k.p.m"` {
		t.Fatalf("reply: %s", body)
	}
	wantServerInfo("gw", "1")(t, d)
	var reqs map[string]struct {
		Method string `json:"method"`
		Params struct {
			Mode            string          `json:"mode"`
			Message         string          `json:"message"`
			RequestedSchema json.RawMessage `json:"requestedSchema"`
		} `json:"params"`
	}
	if err := json.Unmarshal(d.result["inputRequests"], &reqs); err != nil {
		t.Fatal(err)
	}
	r := reqs["toolmesh_approval"]
	if len(reqs) != 1 || r.Method != "elicitation/create" || r.Params.Mode != "form" || r.Params.Message != "Approve \"drop\"?\nline" ||
		string(r.Params.RequestedSchema) != string(schema) {
		t.Fatalf("inputRequests: %s", d.result["inputRequests"])
	}
}

func TestElicited(t *testing.T) {
	in := &CallInput{Responses: json.RawMessage(`{"ok":{"action":"accept","content":{"approve":true,"n":1}},` +
		`"no":{"action":"decline"},"odd":{"action":"maybe"},"str":"accept","bare":{"content":{}}}`)}
	for _, tc := range []struct {
		key     string
		ok      bool
		action  string
		approve string // "true", "false" or "" (no boolean)
	}{
		{"ok", true, "accept", "true"},
		{"no", true, "decline", ""},
		{"odd", false, "", ""},
		{"str", false, "", ""},
		{"bare", false, "", ""},
		{"missing", false, "", ""},
	} {
		r, ok := in.Elicited(tc.key)
		if ok != tc.ok || r.Action != tc.action {
			t.Errorf("%s: got %+v %v", tc.key, r, ok)
			continue
		}
		v, isBool := r.Bool("approve")
		got := ""
		if isBool {
			got = fmt.Sprint(v)
		}
		if got != tc.approve {
			t.Errorf("%s: approve %q, want %q", tc.key, got, tc.approve)
		}
	}
	if _, ok := (*CallInput)(nil).Elicited("ok"); ok {
		t.Error("nil input answered")
	}
}

func TestMissingCapability(t *testing.T) {
	r := MissingCapability(json.RawMessage("3"), json.RawMessage(`{"elicitation":{}}`), "needs elicitation")
	d := checkReply(t, r, 400, CodeMissingClientCapability, "3")
	if string(d.err.Data) != `{"requiredCapabilities":{"elicitation":{}}}` {
		t.Fatalf("data: %s", d.err.Data)
	}
}
