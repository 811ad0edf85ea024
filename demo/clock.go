package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// maxSleep bounds time.sleep so a demo call can never hold a connection for long.
const maxSleep = 60 * time.Second

// clockService tells the time and sleeps. time.now answers a bare JSON object,
// so the gateway's structuredContent mapping is exercised; time.sleep is the
// slow tool that the demo Portal's 5s request timeout cuts short.
func clockService(now func() time.Time) *service {
	return &service{name: "clock", tools: []tool{
		{
			manifestTool: manifestTool{
				Name:        "time.now",
				Version:     "1.0.0",
				Active:      true,
				Title:       "Current time",
				Description: "Returns the current time as an RFC 3339 UTC timestamp and as Unix seconds.",
				InputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {},
  "additionalProperties": false
}`),
				OutputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "utc": {"type": "string", "format": "date-time", "description": "The current time in UTC, RFC 3339."},
    "unix": {"type": "integer", "description": "Seconds since the Unix epoch."}
  },
  "required": ["utc", "unix"],
  "additionalProperties": false
}`),
				Annotations: readOnly("Current time", false),
				Path:        "/tools/time.now",
			},
			run: func(_ context.Context, args json.RawMessage) reply {
				if err := decodeArgs(args, &struct{}{}); err != nil {
					return errorReply(http.StatusBadRequest, err.Error())
				}
				t := now().UTC()
				return jsonReply(struct {
					UTC  string `json:"utc"`
					Unix int64  `json:"unix"`
				}{t.Format(time.RFC3339), t.Unix()})
			},
		},
		{
			manifestTool: manifestTool{
				Name:    "time.sleep",
				Version: "1.0.0",
				Active:  true,
				Title:   "Sleep",
				Description: "Waits for the given number of milliseconds (at most 60000), then reports how long it slept. " +
					"Useful to see the gateway's per-service request timeout at work.",
				InputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "ms": {"type": "integer", "minimum": 0, "maximum": 60000, "description": "How long to sleep, in milliseconds."}
  },
  "required": ["ms"],
  "additionalProperties": false
}`),
				OutputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "sleptMs": {"type": "integer", "description": "How long the call slept, in milliseconds."}
  },
  "required": ["sleptMs"],
  "additionalProperties": false
}`),
				Annotations: readOnly("Sleep", true),
				Path:        "/tools/time.sleep",
			},
			run: sleep,
		},
	}}
}

// sleep runs time.sleep. It returns as soon as the caller goes away (the
// gateway's timeout closes the upstream request), so no goroutine outlives it.
func sleep(ctx context.Context, args json.RawMessage) reply {
	var in struct {
		MS *int64 `json:"ms"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return errorReply(http.StatusBadRequest, err.Error())
	}
	if in.MS == nil {
		return errorReply(http.StatusBadRequest, `invalid arguments: "ms" is required`)
	}
	if *in.MS < 0 || *in.MS > maxSleep.Milliseconds() {
		return errorReply(http.StatusBadRequest, fmt.Sprintf("invalid arguments: ms must be between 0 and %d", maxSleep.Milliseconds()))
	}
	timer := time.NewTimer(time.Duration(*in.MS) * time.Millisecond)
	defer timer.Stop()
	select {
	case <-timer.C:
		return jsonReply(map[string]int64{"sleptMs": *in.MS})
	case <-ctx.Done():
		// Nobody reads this reply; it is what a log or a test sees.
		return errorReply(http.StatusServiceUnavailable, fmt.Sprintf("sleep cancelled: %v", context.Cause(ctx)))
	}
}
