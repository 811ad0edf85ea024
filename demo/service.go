package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
)

// manifestPath is where every demo service serves its manifest.
const manifestPath = "/manifest"

// maxArgumentBytes bounds a tool call body; the gateway's own limit is 1 MiB.
const maxArgumentBytes = 1 << 20

// manifestTool is one manifest entry of the Tool Service wire contract
// (docs/contracts/toolservice.md). The demo keeps its own copy of the wire shape instead of
// importing the registry's, so it exercises the contract from the outside.
type manifestTool struct {
	Name         string          `json:"name"`
	Version      string          `json:"version"`
	Active       bool            `json:"active"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  annotations     `json:"annotations"`
	Path         string          `json:"path"`
}

// annotations are MCP ToolAnnotations; every hint is spelled out because the
// MCP defaults (destructive, open world) are the pessimistic ones.
type annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	DestructiveHint bool   `json:"destructiveHint"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   bool   `json:"openWorldHint"`
}

// readOnly are the annotations of a tool that only computes an answer.
func readOnly(title string, idempotent bool) annotations {
	return annotations{Title: title, ReadOnlyHint: true, IdempotentHint: idempotent}
}

// tool is one demo tool: its manifest entry and the code that runs a call.
// run gets the raw arguments object; decodeArgs turns it into a struct.
type tool struct {
	manifestTool
	run func(ctx context.Context, args json.RawMessage) reply
}

// reply is what a tool call answers: a status, a content type and a body.
type reply struct {
	status      int
	contentType string
	body        []byte
}

// jsonReply answers 200 with v as JSON.
func jsonReply(v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		return errorReply(http.StatusInternalServerError, fmt.Sprintf("encode result: %v", err))
	}
	return reply{status: http.StatusOK, contentType: "application/json", body: b}
}

// textReply answers 200 with s as plain text.
func textReply(s string) reply {
	return reply{status: http.StatusOK, contentType: "text/plain; charset=utf-8", body: []byte(s)}
}

// errorReply answers status with a JSON error body, the shape most real
// services use, so the gateway's 4xx/5xx mapping sees a realistic reply.
func errorReply(status int, message string) reply {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"status":  status,
		"message": message,
	}})
	return reply{status: status, contentType: "application/json", body: b}
}

// decodeArgs decodes a tool's arguments strictly: unknown fields are refused,
// matching the additionalProperties:false of every demo input schema, because
// a Tool Service must not trust that the gateway validated for it.
func decodeArgs(args json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	if dec.More() {
		return errors.New("invalid arguments: trailing data after the arguments object")
	}
	return nil
}

// service is one demo Tool Service: a name and its tools.
type service struct {
	name  string
	tools []tool
}

// handler serves the Tool Service wire contract for s:
// GET /manifest, POST /tools/{name} and GET /healthz.
func (s *service) handler(log *slog.Logger) http.Handler {
	byPath := make(map[string]*tool, len(s.tools))
	var entries []manifestTool
	for i := range s.tools {
		t := &s.tools[i]
		entries = append(entries, t.manifestTool)
		if t.Active {
			byPath[t.Path] = t
		}
	}
	// The manifest never changes, so it is serialized once.
	manifest, err := json.Marshal(map[string]any{"tools": entries})
	if err != nil {
		panic(fmt.Sprintf("demo: encode %s manifest: %v", s.name, err)) // static data: a bug, not a runtime condition
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET "+manifestPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(manifest)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	mux.HandleFunc("POST /tools/{name}", func(w http.ResponseWriter, r *http.Request) {
		t, ok := byPath[r.URL.Path]
		if !ok {
			writeReply(w, errorReply(http.StatusNotFound, fmt.Sprintf("unknown tool %q", r.PathValue("name"))))
			return
		}
		rep := call(r, t)
		log.LogAttrs(r.Context(), slog.LevelDebug, "tool call",
			slog.String("service", s.name), slog.String("tool", t.Name),
			slog.Int("status", rep.status), slog.String("request_id", r.Header.Get("x-request-id")))
		writeReply(w, rep)
	})
	return mux
}

// call checks the request shape and runs t.
func call(r *http.Request, t *tool) reply {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errorReply(http.StatusUnsupportedMediaType, "content-type must be application/json")
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxArgumentBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errorReply(http.StatusRequestEntityTooLarge, "arguments too large")
		}
		return errorReply(http.StatusBadRequest, fmt.Sprintf("read arguments: %v", err))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil || probe == nil {
		return errorReply(http.StatusBadRequest, "the body must be the arguments JSON object")
	}
	return t.run(r.Context(), body)
}

// writeReply writes rep to w.
func writeReply(w http.ResponseWriter, rep reply) {
	w.Header().Set("Content-Type", rep.contentType)
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}
