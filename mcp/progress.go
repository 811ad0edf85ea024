package mcp

import "bytes"

// progressToken returns a copy of a progressToken value when it is a string
// or a number, the two types MCP allows; nil otherwise.
func progressToken(raw []byte) []byte {
	if !isString(raw) && !isNumber(raw) {
		return nil
	}
	return bytes.Clone(raw)
}

// Progress is one progress report for a call: Progress and Total are JSON
// numbers as the Tool Service wrote them (Total nil when unknown), Message
// nil when there is none.
type Progress struct {
	Progress []byte
	Total    []byte
	Message  *string
}

// ProgressEvent is the server-sent event carrying a notifications/progress
// message for c's progress token (MCP basic/utilities/progress):
//
//	event: message
//	data: {"jsonrpc":"2.0","method":"notifications/progress","params":{…}}
func ProgressEvent(c *Call, p Progress) []byte {
	b := make([]byte, 0, 128+len(c.ProgressToken))
	b = append(b, "event: message\ndata: "...)
	b = append(b, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
	b = append(b, c.ProgressToken...)
	b = append(b, `,"progress":`...)
	b = append(b, p.Progress...)
	if p.Total != nil {
		b = append(b, `,"total":`...)
		b = append(b, p.Total...)
	}
	if p.Message != nil {
		b = append(b, `,"message":`...)
		b = appendString(b, *p.Message)
	}
	return append(b, "}}\n\n"...)
}

// ResultEvent is the server-sent event carrying a JSON-RPC response body
// (CallResult, ToolError or ErrorReply output). A body spread over several
// lines becomes several data lines, which the client joins back.
func ResultEvent(body []byte) []byte {
	b := make([]byte, 0, len(body)+32)
	b = append(b, "event: message\n"...)
	for line := range bytes.SplitSeq(bytes.TrimRight(body, "\r\n"), []byte("\n")) {
		b = append(b, "data: "...)
		b = append(b, bytes.TrimSuffix(line, []byte("\r"))...)
		b = append(b, '\n')
	}
	return append(b, '\n')
}
