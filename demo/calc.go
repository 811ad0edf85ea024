package demo

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
)

// calcService adds and multiplies. math.add answers a complete
// CallToolResult (content + structuredContent) that the gateway passes
// through; math.multiply answers a bare JSON number, the "any other JSON
// value" row of the reply mapping.
func calcService() *service {
	return &service{name: "calc", tools: []tool{
		{
			manifestTool: manifestTool{
				Name:        "math.add",
				Version:     "1.0.0",
				Active:      true,
				Title:       "Add two numbers",
				Description: "Adds two numbers and returns their sum.",
				InputSchema: pairSchema("The first addend.", "The second addend."),
				OutputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "sum": {"type": "number", "description": "a + b"}
  },
  "required": ["sum"],
  "additionalProperties": false
}`),
				Annotations: readOnly("Add two numbers", true),
				Path:        "/tools/math.add",
			},
			run: func(_ context.Context, args json.RawMessage) reply {
				return binary(args, func(a, b float64) float64 { return a + b }, func(v float64) reply {
					return jsonReply(callToolResult{
						Content:           []textContent{{Type: "text", Text: formatNumber(v)}},
						StructuredContent: map[string]float64{"sum": v},
					})
				})
			},
		},
		{
			manifestTool: manifestTool{
				Name:        "math.multiply",
				Version:     "1.0.0",
				Active:      true,
				Title:       "Multiply two numbers",
				Description: "Multiplies two numbers and returns their product as a JSON number.",
				InputSchema: pairSchema("The first factor.", "The second factor."),
				Annotations: readOnly("Multiply two numbers", true),
				Path:        "/tools/math.multiply",
			},
			run: func(_ context.Context, args json.RawMessage) reply {
				return binary(args, func(a, b float64) float64 { return a * b }, func(v float64) reply { return jsonReply(v) })
			},
		},
	}}
}

// callToolResult is the MCP CallToolResult shape, which the gateway passes
// through as it is.
type callToolResult struct {
	Content           []textContent `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
}

// textContent is an MCP text content item.
type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// pairSchema is the input schema of a tool that takes two numbers a and b.
func pairSchema(aDesc, bDesc string) json.RawMessage {
	return json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "a": {"type": "number", "description": ` + strconv.Quote(aDesc) + `},
    "b": {"type": "number", "description": ` + strconv.Quote(bDesc) + `}
  },
  "required": ["a", "b"],
  "additionalProperties": false
}`)
}

// binary decodes {a, b}, applies op and hands a finite result to answer.
func binary(args json.RawMessage, op func(a, b float64) float64, answer func(float64) reply) reply {
	var in struct {
		A *float64 `json:"a"`
		B *float64 `json:"b"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return errorReply(http.StatusBadRequest, err.Error())
	}
	if in.A == nil || in.B == nil {
		return errorReply(http.StatusBadRequest, `invalid arguments: "a" and "b" are required`)
	}
	v := op(*in.A, *in.B)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		// JSON has no infinity; say so instead of failing to encode.
		return errorReply(http.StatusUnprocessableEntity, "the result is not a finite number")
	}
	return answer(v)
}

// formatNumber writes v the way JSON would: 5, not 5.000000.
func formatNumber(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}
