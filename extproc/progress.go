package extproc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/callplan"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/reqheaders"
	"github.com/toolmesh/toolmesh/mcp"
)

// A native Tool Service may answer a call with newline-delimited JSON
// (application/x-ndjson): progress frames, then one result or error frame
// (docs/contracts/toolservice.md, "Progress"). When the client sent
// params._meta.progressToken and accepts text/event-stream, the
// response_headers reply switches the response body to STREAMED (as for an
// event stream, response.go streamOverride) and each chunk is rewritten:
// complete lines become notifications/progress events, a partial line
// waits for the next chunk, and the result frame becomes the JSON-RPC
// result event, mapped as a buffered reply would be. Otherwise the body
// stays BUFFERED and only the final frame counts: one JSON result.

// contentTypeNDJSON is the media type of a progress stream.
const contentTypeNDJSON = "application/x-ndjson"

// isNDJSON reports whether a content type is application/x-ndjson.
func isNDJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), contentTypeNDJSON)
}

// progressStream is the per-call state of a progress stream; it lives in
// its progressCall kind, so in the stream handler.
type progressStream struct {
	events  bool   // progress frames become events (STREAMED); else dropped
	pending []byte // the start of a line whose end has not arrived
	failure string // why the stream is unusable; reported at its end
	done    bool   // the result was sent; later frames are ignored
}

// progressHeaders answers the response headers of a 2xx progress stream.
func (x *request) progressHeaders(n *nativeCall, eos bool) *extprocv3.ProcessingResponse {
	k := &progressCall{callReply: &n.callReply}
	x.kind = k // the kind from now on (kinds.go)
	if eos {
		// Headers only: a stream without a single frame.
		out := x.progressEnd(k)
		return procmsg.ResponseHeaders(&extprocv3.CommonResponse{
			Status:         extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
			HeaderMutation: callplan.ResultHeaders(),
			BodyMutation:   procmsg.ReplaceBody(out),
		})
	}
	if x.call.ProgressToken == nil || !reqheaders.AcceptsEventStream(x.req.Accept) {
		return procmsg.ResponseHeaders(&extprocv3.CommonResponse{})
	}
	k.stream.events, k.streaming = true, true
	resp := procmsg.ResponseHeaders(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
		SetHeaders: []*corev3.HeaderValueOption{
			procmsg.SetHeader(":status", "200"), procmsg.SetHeader("content-type", "text/event-stream"),
		},
		// content-length: see streamResponse. content-encoding: the
		// events are written here, never compressed.
		RemoveHeaders: []string{"content-length", "content-encoding"},
	}})
	resp.ModeOverride = procmsg.StreamOverride()
	return resp
}

// progressBody answers one response body message of a progress stream:
// the whole body when BUFFERED, one chunk when STREAMED.
func (x *request) progressBody(k *progressCall, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	p := &k.stream
	eos := b.GetEndOfStream() || !p.events // BUFFERED: the only message
	out := x.progressFeed(k, b.GetBody(), eos)
	if p.events {
		return procmsg.ResponseBody(&extprocv3.CommonResponse{BodyMutation: procmsg.ReplaceBody(out)})
	}
	return procmsg.ResponseBody(&extprocv3.CommonResponse{
		HeaderMutation: callplan.ResultHeaders(procmsg.SetHeader("content-length", strconv.Itoa(len(out)))),
		BodyMutation:   procmsg.ReplaceBody(out),
	})
}

// progressFeed takes the next bytes of the stream and returns what the
// client gets for them: events when streaming, the JSON-RPC response body
// at the end when buffered.
func (x *request) progressFeed(k *progressCall, chunk []byte, eos bool) []byte {
	p := &k.stream
	var out []byte
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			if !p.done && p.failure == "" {
				if int64(len(p.pending)+len(chunk)) > x.s.cfg.MaxResponseBytes {
					p.failure, p.pending = "too_large", nil
				} else {
					p.pending = append(p.pending, chunk...)
				}
			}
			break
		}
		line := chunk[:i]
		if len(p.pending) > 0 {
			line = append(p.pending, line...)
			p.pending = nil
		}
		out = append(out, x.progressLine(k, line)...)
		chunk = chunk[i+1:]
	}
	if !eos {
		return out
	}
	if len(p.pending) > 0 { // a last frame without its newline
		out = append(out, x.progressLine(k, p.pending)...)
		p.pending = nil
	}
	if !p.done {
		out = append(out, x.progressEnd(k)...)
	}
	return out
}

// frame is one line of a progress stream.
type frame struct {
	Progress json.RawMessage `json:"progress"`
	Total    json.RawMessage `json:"total"`
	Message  *string         `json:"message"`
	Result   json.RawMessage `json:"result"`
	Error    json.RawMessage `json:"error"`
}

// progressLine handles one complete line.
func (x *request) progressLine(k *progressCall, line []byte) []byte {
	p := &k.stream
	line = bytes.TrimSpace(line)
	if len(line) == 0 || p.done || p.failure != "" {
		return nil
	}
	var f frame
	if err := json.Unmarshal(line, &f); err != nil {
		p.failure = "the Tool Service sent a stream line that is not a JSON object: " + clipText(line)
		return nil
	}
	switch {
	case f.Result != nil:
		return x.progressResult(k, x.result(k.callReply, mcp.Upstream{Status: 200, ContentType: procmsg.ContentTypeJSON, Body: f.Result}))
	case f.Error != nil:
		k.resultSent, x.callOutcome = true, callOK // the Tool Service answered
		return x.progressResult(k, x.filtered(x.s.proto.ToolError(x.call,
			mcp.ToolFailed(x.call.Tool, "the Tool Service reported an error: "+errorText(f.Error)))))
	case f.Progress != nil:
		if !isJSONNumber(f.Progress) || (f.Total != nil && !isJSONNumber(f.Total) && string(f.Total) != "null") {
			p.failure = "the Tool Service sent a progress frame whose progress or total is not a number: " + clipText(line)
			return nil
		}
		if !p.events {
			return nil
		}
		pr := mcp.Progress{Progress: f.Progress, Message: f.Message}
		if f.Total != nil && string(f.Total) != "null" {
			pr.Total = f.Total
		}
		return mcp.ProgressEvent(x.call, pr)
	}
	p.failure = "the Tool Service sent a stream line that is neither a progress, result nor error frame: " + clipText(line)
	return nil
}

// progressResult marks the stream answered and frames the response body.
func (x *request) progressResult(k *progressCall, body []byte) []byte {
	k.stream.done = true
	if k.stream.events {
		return mcp.ResultEvent(body)
	}
	return body
}

// progressEnd is the answer to a stream that ended without a result frame.
func (x *request) progressEnd(k *progressCall) []byte {
	p := &k.stream
	if p.failure == "too_large" {
		return x.progressResult(k, x.result(k.callReply, mcp.Upstream{Status: k.up.status, ContentType: k.up.contentType, Failure: mcp.FailureTooLarge}))
	}
	why := p.failure
	if why == "" {
		why = "the Tool Service ended its stream without a result"
	}
	k.resultSent, x.callOutcome = true, callToolError
	return x.progressResult(k, x.filtered(x.s.proto.ToolError(x.call, mcp.ToolFailed(x.call.Tool, why))))
}

// errorText is the message of an error frame: the string, an object's
// "message" string, or else the value's JSON text.
func errorText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return clipText([]byte(s))
	}
	var o struct {
		Message *string `json:"message"`
	}
	if json.Unmarshal(v, &o) == nil && o.Message != nil {
		return clipText([]byte(*o.Message))
	}
	return clipText(v)
}

func isJSONNumber(v json.RawMessage) bool {
	return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
}

// clipText bounds text quoted back to the client, cut on a rune boundary.
func clipText(b []byte) string {
	const limit = 512
	if len(b) <= limit {
		return string(b)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}
