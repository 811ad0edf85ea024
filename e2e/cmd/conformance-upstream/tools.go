package main

//lint:file-ignore SA1019 logging, sampling and their capabilities are deprecated as of protocol 2026-07-28 (SEP-2577), but the legacy-era conformance scenarios call them, so the fixture must implement them.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Minimal media the scenarios accept: they check that data and the MIME type
// are present (a 1x1 PNG and a WAV header with two samples).
var (
	pngBytes = mustDecode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	wavBytes = mustDecode("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")
)

func mustDecode(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

type object = map[string]any

var emptySchema = object{"type": "object", "properties": object{}}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// jsonSchema202012 uses the JSON Schema 2020-12 keywords the
// json-schema-2020-12 scenarios look for in tools/list.
var jsonSchema202012 = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "$anchor": "addressDef",
      "type": "object",
      "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"},
    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
    "phone": {"type": "string"},
    "email": {"type": "string"}
  },
  "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
  "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
  "then": {"required": ["phone"]},
  "else": {"required": ["email"]},
  "additionalProperties": false
}`)

// sleep waits d unless the call is cancelled.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func tool(name, description string, schema any) *mcp.Tool {
	if schema == nil {
		schema = emptySchema
	}
	return &mcp.Tool{Name: name, Description: description, InputSchema: schema}
}

func addTools(s *mcp.Server, key []byte) {
	// test_simple_text first: http-header-validation calls the first listed
	// tool with no arguments.
	s.AddTool(tool("test_simple_text", "Returns one text item", nil),
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("This is a simple text response for testing."), nil
		})
	s.AddTool(tool("test_image_content", "Returns one PNG image item", nil),
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: pngBytes, MIMEType: "image/png"}}}, nil
		})
	s.AddTool(tool("test_audio_content", "Returns one WAV audio item", nil),
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: wavBytes, MIMEType: "audio/wav"}}}, nil
		})
	s.AddTool(tool("test_embedded_resource", "Returns one embedded text resource", nil),
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content.",
			}}}}, nil
		})
	s.AddTool(tool("test_multiple_content_types", "Returns text, image and embedded resource items", nil),
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "Multiple content types test:"},
				&mcp.ImageContent{Data: pngBytes, MIMEType: "image/png"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
					URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`,
				}},
			}}, nil
		})
	s.AddTool(tool("test_error_handling", "Always fails with a tool error (isError)", nil),
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r := textResult("This tool intentionally returns an error for testing")
			r.IsError = true
			return r, nil
		})
	s.AddTool(tool("json_schema_2020_12_tool", "Takes an input schema that uses JSON Schema 2020-12 keywords", jsonSchema202012),
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("JSON Schema 2020-12 tool called with: " + string(req.Params.Arguments)), nil
		})
	s.AddTool(tool("test_x_mcp_header", "Echoes a parameter that clients also send as the Mcp-Param-Region header",
		object{"type": "object", "properties": object{
			"region": object{"type": "string", "description": "A plain ASCII value", "x-mcp-header": "Region"},
		}}),
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Region string `json:"region"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return textResult("region=" + args.Region), nil
		})

	s.AddTool(tool("test_tool_with_logging", "Sends three log messages while it runs", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 {
					if err := sleep(ctx, 50*time.Millisecond); err != nil {
						return nil, err
					}
				}
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "conformance-upstream", Data: msg}); err != nil {
					return nil, fmt.Errorf("test_tool_with_logging: send log message: %w", err)
				}
			}
			return textResult("Tool with logging executed successfully"), nil
		})
	s.AddTool(tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 while it runs", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			token := req.Params.GetProgressToken()
			for i, p := range []float64{0, 50, 100} {
				if i > 0 {
					if err := sleep(ctx, 50*time.Millisecond); err != nil {
						return nil, err
					}
				}
				if token == nil {
					continue
				}
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: p, Total: 100, Message: fmt.Sprintf("step %d of 3", i+1),
				}); err != nil {
					return nil, fmt.Errorf("test_tool_with_progress: send progress: %w", err)
				}
			}
			if token == nil {
				return textResult("ran without a progress token: no progress sent"), nil
			}
			return textResult(fmt.Sprintf("progress 0, 50, 100 of 100 sent for token %v", token)), nil
		})
	s.AddTool(tool("test_sampling", "Asks the client's LLM to answer the prompt",
		object{"type": "object", "properties": object{"prompt": object{"type": "string", "description": "The prompt for the LLM"}}, "required": []any{"prompt"}}),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Prompt string `json:"prompt"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, fmt.Errorf("test_sampling: arguments: %w", err)
			}
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: args.Prompt}}},
				MaxTokens: 100,
			})
			if err != nil {
				return nil, fmt.Errorf("test_sampling: sampling/createMessage: %w", err)
			}
			return textResult("LLM response: " + contentText(res.Content)), nil
		})
	s.AddTool(tool("test_elicitation", "Asks the user for a username and an email address",
		object{"type": "object", "properties": object{"message": object{"type": "string", "description": "What to ask the user"}}, "required": []any{"message"}}),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Message string `json:"message"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, fmt.Errorf("test_elicitation: arguments: %w", err)
			}
			return elicit(ctx, req, "User response: ", &mcp.ElicitParams{
				Message: args.Message,
				RequestedSchema: object{"type": "object", "properties": object{
					"username": object{"type": "string", "description": "User's response"},
					"email":    object{"type": "string", "description": "User's email address"},
				}, "required": []any{"username", "email"}},
			})
		})
	s.AddTool(tool("test_elicitation_sep1034_defaults", "Asks the user for input, with a default for each primitive type", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return elicit(ctx, req, "Elicitation completed: ", &mcp.ElicitParams{
				Message: "Please review and update the form fields with defaults",
				RequestedSchema: object{"type": "object", "properties": object{
					"name":     object{"type": "string", "description": "User name", "default": "John Doe"},
					"age":      object{"type": "integer", "description": "User age", "default": 30},
					"score":    object{"type": "number", "description": "User score", "default": 95.5},
					"status":   object{"type": "string", "description": "User status", "enum": []any{"active", "inactive", "pending"}, "default": "active"},
					"verified": object{"type": "boolean", "description": "Verification status", "default": true},
				}},
			})
		})
	s.AddTool(tool("test_elicitation_sep1330_enums", "Asks the user to pick from each kind of enumeration", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return elicit(ctx, req, "Elicitation completed: ", &mcp.ElicitParams{
				Message: "Please select options from the enum fields",
				RequestedSchema: object{"type": "object", "properties": object{
					"untitledSingle": object{"type": "string", "description": "Untitled single-select", "enum": []any{"option1", "option2", "option3"}},
					"titledSingle": object{"type": "string", "description": "Titled single-select", "oneOf": []any{
						object{"const": "value1", "title": "First Option"},
						object{"const": "value2", "title": "Second Option"},
						object{"const": "value3", "title": "Third Option"},
					}},
					"legacyEnum": object{"type": "string", "description": "Legacy titled enum", "enum": []any{"opt1", "opt2", "opt3"},
						"enumNames": []any{"Option One", "Option Two", "Option Three"}},
					"untitledMulti": object{"type": "array", "description": "Untitled multi-select",
						"items": object{"type": "string", "enum": []any{"option1", "option2", "option3"}}},
					"titledMulti": object{"type": "array", "description": "Titled multi-select", "items": object{"anyOf": []any{
						object{"const": "value1", "title": "First Choice"},
						object{"const": "value2", "title": "Second Choice"},
						object{"const": "value3", "title": "Third Choice"},
					}}},
				}},
			})
		})
	// server-sse-polling (SEP-1699): close the SSE stream mid-call so the
	// client reconnects with Last-Event-ID and gets the result on the new
	// stream.
	s.AddTool(tool("test_reconnection", "Closes the response stream mid-call; the result arrives after the client reconnects", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
			// Close only where the SDK primed the stream with an event id
			// (protocol 2025-11-25): without one the client cannot resume and
			// the result would be lost, so it arrives on this stream instead.
			if req.Extra != nil && req.Extra.CloseSSEStream != nil && req.Extra.Header.Get("Mcp-Protocol-Version") >= "2025-11-25" {
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 500 * time.Millisecond})
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
			return textResult("Reconnection test completed"), nil
		})

	// Diagnostic tools of the 2026-07-28 server-stateless scenario.
	s.AddTool(tool("test_streaming_elicitation", "Diagnostic: needs input through an input-required result, never a request on the response stream", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if _, ok := req.Params.InputResponses["confirm"]; ok {
				return textResult("streaming elicitation completed"), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message:         "Continue?",
				RequestedSchema: object{"type": "object", "properties": object{"ok": object{"type": "boolean"}}, "required": []any{"ok"}},
			}}}, nil
		})
	s.AddTool(tool("test_logging_tool", "Diagnostic: logs one message, which reaches the client only at its requested log level", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "conformance-upstream", Data: "logging tool ran"}); err != nil {
				return nil, fmt.Errorf("test_logging_tool: %w", err)
			}
			return textResult("logging tool executed"), nil
		})
	s.AddTool(tool("test_missing_capability", "Diagnostic: requires the client to declare the sampling capability", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if caps := req.ClientCapabilities(); caps == nil || caps.Sampling == nil {
				data, _ := json.Marshal(mcp.MissingRequiredClientCapabilityData{
					RequiredCapabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}},
				})
				return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "this tool requires the sampling client capability", Data: data}
			}
			return textResult("client declared sampling"), nil
		})
	s.AddTool(tool("test_trigger_tool_change", "Diagnostic: adds and removes a tool, so list-changed notifications go out", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(tool("test_ephemeral_tool", "Exists only while test_trigger_tool_change runs", nil),
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return textResult("ephemeral"), nil
				})
			s.RemoveTools("test_ephemeral_tool")
			return textResult("tool list changed"), nil
		})
	s.AddTool(tool("test_trigger_prompt_change", "Diagnostic: adds and removes a prompt, so list-changed notifications go out", nil),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddPrompt(&mcp.Prompt{Name: "test_ephemeral_prompt", Description: "Exists only while test_trigger_prompt_change runs"},
				func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "ephemeral"}}}}, nil
				})
			s.RemovePrompts("test_ephemeral_prompt")
			return textResult("prompt list changed"), nil
		})

	addInputRequiredTools(s, key)
}

// elicit asks the user through elicitation/create on the session and reports
// the answer as text.
func elicit(ctx context.Context, req *mcp.CallToolRequest, prefix string, p *mcp.ElicitParams) (*mcp.CallToolResult, error) {
	res, err := req.Session.Elicit(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("%s: elicitation/create: %w", req.Params.Name, err)
	}
	content, _ := json.Marshal(res.Content)
	return textResult(fmt.Sprintf("%saction=%s, content=%s", prefix, res.Action, content)), nil
}

// contentText is the text of a text content item, or its JSON.
func contentText(c mcp.Content) string {
	if t, ok := c.(*mcp.TextContent); ok {
		return t.Text
	}
	b, _ := json.Marshal(c)
	return string(b)
}
