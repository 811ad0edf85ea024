package main

//lint:file-ignore SA1019 roots, sampling and logging are deprecated as of protocol 2026-07-28 (SEP-2577); the conformance scenarios still call them.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Input-required results (multi round-trip requests, SEP-2322, protocol
// 2026-07-28): instead of sending elicitation/create, sampling/createMessage
// or roots/list to the client, a handler returns them as inputRequests and
// the client calls again with inputResponses. For clients of older protocol
// versions the SDK turns the same result into real server-to-client requests
// and calls the handler again, so these tools work on both endpoints.

// newStateKey returns the key that signs requestState. requestState travels
// through the client, so it is signed and checked (the
// input-required-result-tampered-state scenario changes it).
func newStateKey() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(fmt.Errorf("conformance-upstream: state key: %w", err))
	}
	return k
}

// roundState is what a tool keeps between rounds.
type roundState struct {
	Tool   string         `json:"tool"`
	Round  int            `json:"round"`
	Values map[string]any `json:"values,omitempty"`
}

func sealState(key []byte, st roundState) string {
	payload, _ := json.Marshal(st)
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// openState checks the signature and the tool name; any failure is an
// invalid-params error, as the state is a request parameter.
func openState(key []byte, tool, sealed string) (roundState, error) {
	var st roundState
	bad := func(why string) error {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState rejected: " + why}
	}
	p, s, ok := strings.Cut(sealed, ".")
	if !ok {
		return st, bad("malformed")
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	sig, err2 := base64.RawURLEncoding.DecodeString(s)
	if err1 != nil || err2 != nil {
		return st, bad("malformed")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return st, bad("integrity check failed")
	}
	if err := json.Unmarshal(payload, &st); err != nil || st.Tool != tool {
		return st, bad("issued for another request")
	}
	return st, nil
}

func askName(message string) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Message:         message,
		RequestedSchema: object{"type": "object", "properties": object{"name": object{"type": "string"}}, "required": []any{"name"}},
	}
}

func askSampling(text string, maxTokens int64) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}},
		MaxTokens: maxTokens,
	}
}

func askRoots() *mcp.ListRootsParams { return &mcp.ListRootsParams{} }

// needInput is an input-required tool result.
func needInput(reqs mcp.InputRequestMap, state string) *mcp.CallToolResult {
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: state}
}

// elicited returns the accepted content field of an elicitation answer.
func elicited(r mcp.InputResponse, field string) (string, bool) {
	e, ok := r.(*mcp.ElicitResult)
	if !ok {
		return "", false
	}
	if e.Action != "accept" {
		return "(" + e.Action + ")", true
	}
	v, ok := e.Content[field]
	if !ok {
		return "", false
	}
	return fmt.Sprint(v), true
}

// sampled returns the text of a sampling answer.
func sampled(r mcp.InputResponse) (string, bool) {
	switch s := r.(type) {
	case *mcp.CreateMessageResult:
		return contentText(s.Content), true
	case *mcp.CreateMessageWithToolsResult:
		var parts []string
		for _, c := range s.Content {
			parts = append(parts, contentText(c))
		}
		return strings.Join(parts, " "), true
	}
	return "", false
}

// rootURIs returns the URIs of a roots/list answer.
func rootURIs(r mcp.InputResponse) ([]string, bool) {
	l, ok := r.(*mcp.ListRootsResult)
	if !ok {
		return nil, false
	}
	uris := make([]string, 0, len(l.Roots))
	for _, root := range l.Roots {
		uris = append(uris, root.URI)
	}
	return uris, true
}

func addInputRequiredTools(s *mcp.Server, key []byte) {
	s.AddTool(tool("test_input_required_result_elicitation", "Asks for the user's name through an input-required result", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// A retry without a usable "user_name" answer (missing, wrong key,
			// wrong type) asks again rather than failing; extra keys are ignored.
			if name, ok := elicited(req.Params.InputResponses["user_name"], "name"); ok {
				return textResult("Hello, " + name + "!"), nil
			}
			return needInput(mcp.InputRequestMap{"user_name": askName("What is your name?")}, ""), nil
		})
	s.AddTool(tool("test_input_required_result_sampling", "Asks the client's LLM a question through an input-required result", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if answer, ok := sampled(req.Params.InputResponses["capital_question"]); ok {
				return textResult("The LLM answered: " + answer), nil
			}
			return needInput(mcp.InputRequestMap{"capital_question": askSampling("What is the capital of France?", 100)}, ""), nil
		})
	s.AddTool(tool("test_input_required_result_list_roots", "Asks for the client's roots through an input-required result", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if uris, ok := rootURIs(req.Params.InputResponses["client_roots"]); ok {
				return textResult(fmt.Sprintf("The client has %d root(s): %s", len(uris), strings.Join(uris, ", "))), nil
			}
			return needInput(mcp.InputRequestMap{"client_roots": askRoots()}, ""), nil
		})
	s.AddTool(tool("test_input_required_result_request_state", "Round-trips a signed requestState", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			const name = "test_input_required_result_request_state"
			if req.Params.RequestState != "" {
				if _, err := openState(key, name, req.Params.RequestState); err != nil {
					return nil, err
				}
				if ok, found := elicitedBool(req.Params.InputResponses["confirm"], "ok"); found {
					return textResult(fmt.Sprintf("state-ok: requestState verified, confirmed=%v", ok)), nil
				}
			}
			return needInput(mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message:         "Please confirm",
				RequestedSchema: object{"type": "object", "properties": object{"ok": object{"type": "boolean"}}, "required": []any{"ok"}},
			}}, sealState(key, roundState{Tool: name, Round: 1})), nil
		})
	s.AddTool(tool("test_input_required_result_multiple_inputs", "Asks for elicitation, sampling and roots in one input-required result", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			const name = "test_input_required_result_multiple_inputs"
			in := req.Params.InputResponses
			if req.Params.RequestState != "" {
				if _, err := openState(key, name, req.Params.RequestState); err != nil {
					return nil, err
				}
				user, ok1 := elicited(in["user_name"], "name")
				greeting, ok2 := sampled(in["greeting"])
				roots, ok3 := rootURIs(in["client_roots"])
				if ok1 && ok2 && ok3 {
					return textResult(fmt.Sprintf("name=%s; greeting=%s; roots=%s", user, greeting, strings.Join(roots, ","))), nil
				}
			}
			return needInput(mcp.InputRequestMap{
				"user_name":    askName("What is your name?"),
				"greeting":     askSampling("Generate a greeting", 50),
				"client_roots": askRoots(),
			}, sealState(key, roundState{Tool: name, Round: 1})), nil
		})
	s.AddTool(tool("test_input_required_result_multi_round", "Asks two questions in two rounds, carrying the first answer in requestState", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			const name = "test_input_required_result_multi_round"
			round1 := func() *mcp.CallToolResult {
				return needInput(mcp.InputRequestMap{"step1": askName("Step 1: What is your name?")},
					sealState(key, roundState{Tool: name, Round: 1}))
			}
			if req.Params.RequestState == "" {
				return round1(), nil
			}
			st, err := openState(key, name, req.Params.RequestState)
			if err != nil {
				return nil, err
			}
			switch st.Round {
			case 1:
				user, ok := elicited(req.Params.InputResponses["step1"], "name")
				if !ok {
					return round1(), nil
				}
				return needInput(mcp.InputRequestMap{"step2": &mcp.ElicitParams{
					Message:         "Step 2: What is your favorite color?",
					RequestedSchema: object{"type": "object", "properties": object{"color": object{"type": "string"}}, "required": []any{"color"}},
				}}, sealState(key, roundState{Tool: name, Round: 2, Values: map[string]any{"name": user}})), nil
			default:
				color, ok := elicited(req.Params.InputResponses["step2"], "color")
				if !ok {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `round 2 needs inputResponses["step2"] with a color`}
				}
				return textResult(fmt.Sprintf("name=%v, favorite color=%s (after %d rounds)", st.Values["name"], color, st.Round+1)), nil
			}
		})
	s.AddTool(tool("test_input_required_result_tampered_state", "Rejects a requestState that was changed on the way", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			const name = "test_input_required_result_tampered_state"
			if req.Params.RequestState != "" {
				if _, err := openState(key, name, req.Params.RequestState); err != nil {
					return nil, err
				}
				if v, ok := elicited(req.Params.InputResponses["user_name"], "name"); ok {
					return textResult("state verified; hello, " + v), nil
				}
			}
			return needInput(mcp.InputRequestMap{"user_name": askName("What is your name?")},
				sealState(key, roundState{Tool: name, Round: 1})), nil
		})
	s.AddTool(tool("test_input_required_result_capabilities", "Asks only for the kinds of input the client declared it supports", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			in := req.Params.InputResponses
			if len(in) > 0 {
				keys := make([]string, 0, len(in))
				for k := range in {
					keys = append(keys, k)
				}
				return textResult("received input for: " + strings.Join(keys, ", ")), nil
			}
			caps := req.ClientCapabilities()
			reqs := mcp.InputRequestMap{}
			if caps != nil && caps.Elicitation != nil {
				reqs["user_name"] = askName("What is your name?")
			}
			if caps != nil && caps.Sampling != nil {
				reqs["greeting"] = askSampling("Generate a greeting", 50)
			}
			if caps != nil && (caps.RootsV2 != nil || caps.Roots.ListChanged) {
				reqs["client_roots"] = askRoots()
			}
			if len(reqs) == 0 {
				return textResult("the client declared no capability this tool could ask through"), nil
			}
			return needInput(reqs, ""), nil
		})
}

func elicitedBool(r mcp.InputResponse, field string) (bool, bool) {
	e, ok := r.(*mcp.ElicitResult)
	if !ok {
		return false, false
	}
	v, ok := e.Content[field].(bool)
	if !ok && e.Action == "accept" {
		return false, false
	}
	return v, true
}
