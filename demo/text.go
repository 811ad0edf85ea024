package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxMessageRunes is the maxLength of the message argument.
const maxMessageRunes = 4096

// textService answers plain text and fails on purpose: text.echo and
// text.upper reply text/plain, text.fail replies 500 and text.forbidden 403,
// so every row of the gateway's reply mapping has a demo.
func textService() *service {
	messageSchema := func(desc string) json.RawMessage {
		return json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "message": {"type": "string", "maxLength": ` + strconv.Itoa(maxMessageRunes) + `, "description": "` + desc + `"}
  },
  "required": ["message"],
  "additionalProperties": false
}`)
	}
	return &service{name: "text", tools: []tool{
		{
			// An inactive older version: manifests may list several versions
			// of a tool, and only the active one is served.
			manifestTool: manifestTool{
				Name:        "text.echo",
				Version:     "0.9.0",
				Active:      false,
				Title:       "Echo (old)",
				Description: "Replies with the message it is given. Superseded by version 1.0.0.",
				InputSchema: messageSchema("The text to send back."),
				Annotations: readOnly("Echo", true),
				Path:        "/tools/text.echo",
			},
		},
		{
			manifestTool: manifestTool{
				Name:        "text.echo",
				Version:     "1.0.0",
				Active:      true,
				Title:       "Echo",
				Description: "Replies with the message it is given, as plain text.",
				InputSchema: messageSchema("The text to send back."),
				Annotations: readOnly("Echo", true),
				Path:        "/tools/text.echo",
			},
			run: func(_ context.Context, args json.RawMessage) reply {
				return message(args, func(s string) string { return s })
			},
		},
		{
			manifestTool: manifestTool{
				Name:        "text.upper",
				Version:     "1.0.0",
				Active:      true,
				Title:       "Upper case",
				Description: "Replies with the message in upper case, as plain text.",
				InputSchema: messageSchema("The text to convert."),
				Annotations: readOnly("Upper case", true),
				Path:        "/tools/text.upper",
			},
			run: func(_ context.Context, args json.RawMessage) reply {
				return message(args, strings.ToUpper)
			},
		},
		{
			manifestTool: manifestTool{
				Name:        "text.fail",
				Version:     "1.0.0",
				Active:      true,
				Title:       "Always fail",
				Description: "Always fails with HTTP 500 and a JSON error body, to show how a broken Tool Service surfaces to the model.",
				InputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "reason": {"type": "string", "maxLength": 256, "description": "Text to put in the error message."}
  },
  "additionalProperties": false
}`),
				Annotations: readOnly("Always fail", true),
				Path:        "/tools/text.fail",
			},
			run: func(_ context.Context, args json.RawMessage) reply {
				var in struct {
					Reason string `json:"reason"`
				}
				if err := decodeArgs(args, &in); err != nil {
					return errorReply(http.StatusBadRequest, err.Error())
				}
				msg := "text.fail always fails"
				if in.Reason != "" {
					msg += ": " + in.Reason
				}
				return errorReply(http.StatusInternalServerError, msg)
			},
		},
		{
			manifestTool: manifestTool{
				Name:        "text.forbidden",
				Version:     "1.0.0",
				Active:      true,
				Title:       "Always forbidden",
				Description: "Always refuses with HTTP 403, to show how an authorization failure surfaces to the model.",
				InputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {},
  "additionalProperties": false
}`),
				Annotations: readOnly("Always forbidden", true),
				Path:        "/tools/text.forbidden",
			},
			run: func(_ context.Context, args json.RawMessage) reply {
				if err := decodeArgs(args, &struct{}{}); err != nil {
					return errorReply(http.StatusBadRequest, err.Error())
				}
				return errorReply(http.StatusForbidden, "the caller may not use text.forbidden")
			},
		},
	}}
}

// message decodes {message} and replies f(message) as plain text.
func message(args json.RawMessage, f func(string) string) reply {
	var in struct {
		Message *string `json:"message"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return errorReply(http.StatusBadRequest, err.Error())
	}
	if in.Message == nil {
		return errorReply(http.StatusBadRequest, `invalid arguments: "message" is required`)
	}
	if utf8.RuneCountInString(*in.Message) > maxMessageRunes {
		return errorReply(http.StatusBadRequest, fmt.Sprintf("invalid arguments: message is longer than %d characters", maxMessageRunes))
	}
	return textReply(f(*in.Message))
}
