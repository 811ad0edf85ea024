package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/toolmesh/toolmesh/mcp"
)

// The call path's use of the client: the gateway owns one legacy session
// per replica and MCP server (docs/decisions/0006-federated-mcp-servers.md),
// opened with the same handshake a listing uses.

// OpenSession runs the legacy handshake (initialize at version, then
// notifications/initialized) against endpoint and returns the
// Mcp-Session-Id the server issued, "" when it issues none. The session is
// left open: the caller owns it. The session declares no client
// capabilities.
func (c *Client) OpenSession(ctx context.Context, endpoint string, headers map[string]string, version string) (string, error) {
	return c.OpenSessionWith(ctx, endpoint, headers, version, nil)
}

// OpenSessionWith is OpenSession declaring caps as the client's
// capabilities in initialize (nil: none). The caller declares only what the
// clients the session serves can answer.
func (c *Client) OpenSessionWith(ctx context.Context, endpoint string, headers map[string]string, version string, caps map[string]any) (string, error) {
	s := &session{c: c, endpoint: endpoint, headers: headers, caps: caps}
	if _, err := s.initialize(ctx, version); err != nil {
		return "", err
	}
	return s.id, nil
}

// SessionLost reports whether an answer of status with body says the server
// does not know the session the request carried, and so did not execute
// it: 404 is the Streamable HTTP transport's answer for an expired
// session; servers built on the TypeScript SDK's examples (the reference
// server-everything among them) answer 400 with a JSON-RPC error whose
// message names the session ("Bad Request: No valid session ID provided")
// instead. Any other 400 is the server refusing the request itself.
func SessionLost(status int, body []byte) bool {
	switch status {
	case http.StatusNotFound:
		return true
	case http.StatusBadRequest:
		m, err := mcp.DecodeClientResponse(body)
		return err == nil && m.Error != nil && m.Result == nil && m.Method == "" &&
			strings.Contains(strings.ToLower(m.Error.Message), "session")
	}
	return false
}

// Exchange posts one JSON-RPC request body to endpoint with exactly the
// given headers (protocol, session and credential headers included) and
// returns the HTTP status and, for a 2xx answer, the raw response message
// to id, read from a JSON body or an event stream (the events before it are
// skipped). A non-2xx answer returns its status and a *StatusError.
func (c *Client) Exchange(ctx context.Context, endpoint string, headers http.Header, body []byte, id json.RawMessage) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("build request: %w", err)
	}
	req.Header = headers.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.opts.HTTP.Do(req)
	if err != nil {
		return 0, nil, &transportError{err}
	}
	defer resp.Body.Close()
	s := &session{c: c, endpoint: endpoint}
	method := "call"
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, nil, s.statusError(method, resp)
	}
	m, err := s.readResponse(method, resp, id)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	return resp.StatusCode, m.Raw, nil
}

// EndSession sends DELETE to endpoint with exactly the given headers (the
// session's Mcp-Session-Id, protocol and credential headers included), as
// the Streamable HTTP transport ends a session ("Session Management"), and
// returns the HTTP status. A server may answer 405 (it lets no client end
// sessions) or 404 (the session is gone already); the caller decides. No
// redirect is followed unless ctx allows same-origin ones.
func (c *Client) EndSession(ctx context.Context, endpoint string, headers http.Header) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, endpoint, nil)
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	req.Header = headers.Clone()
	resp, err := c.opts.HTTP.Do(req)
	if err != nil {
		return 0, &transportError{err}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Unauthorized reports whether err is a 401 answer and returns its
// WWW-Authenticate challenges.
func Unauthorized(err error) ([]string, bool) {
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusUnauthorized {
		return se.Challenges, true
	}
	return nil, false
}

// Answer is what Post read of an HTTP answer.
type Answer struct {
	Status      int
	ContentType string
	// Body is the body, at most the max bytes Post was given; Over says
	// the body was longer (Body is then cut).
	Body []byte
	Over bool
}

// Post sends body to url with exactly the given headers and returns the
// answer, whatever its status, with its body read up to max bytes. It
// follows no redirect: a 3xx is the answer, as Envoy's router passes one
// on. The call path sends a native Tool Service's call again with it (a
// call answered 401 for the gateway's token, docs/identity.md), with the
// client that fetches the services' manifests and lists MCP servers.
func (c *Client) Post(ctx context.Context, url string, headers http.Header, body []byte, max int64) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Answer{}, fmt.Errorf("build request: %w", err)
	}
	req.Header = headers.Clone()
	hc := *c.opts.HTTP
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		return Answer{}, &transportError{err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return Answer{}, &transportError{fmt.Errorf("read the answer: %w", err)}
	}
	a := Answer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: b}
	if int64(len(b)) > max {
		a.Body, a.Over = b[:max], true
	}
	return a, nil
}
