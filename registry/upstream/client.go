// Package upstream is toolmesh's MCP client for the servers it federates
// behind a route: it discovers what an MCP server offers the way a
// dual-era client would (server/discover first, initialize as the
// fallback) and lists its tools, resources, resource templates and
// prompts. It speaks Streamable HTTP: a POST per message, answered with
// application/json or a text/event-stream. The message shapes are the mcp
// package's; this package does the I/O.
package upstream

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/mcp"
)

// Defaults of Options' zero fields.
const (
	DefaultMaxBytes = 4 << 20
	DefaultMaxPages = 100
	// DefaultMaxItems bounds each kind of item (tools, resources, resource
	// templates, prompts) of one server's listing, across all its pages.
	DefaultMaxItems = 10000
	// DefaultMaxListingBytes bounds the results of one server's listing,
	// all methods and pages together.
	DefaultMaxListingBytes = 32 << 20
)

// Options configures a [Client].
type Options struct {
	// HTTP carries the requests (default: a client with a 30 s timeout).
	// Callers bound each Discover with its context.
	HTTP *http.Client
	// MaxBytes bounds every response body, JSON or event stream
	// (default 4 MiB). A larger answer is an error, never a truncation.
	MaxBytes int64
	// MaxPages bounds the pages followed per list method (default 100).
	MaxPages int
	// MaxItems bounds each kind of item of one listing, across its pages
	// (default DefaultMaxItems); MaxListingBytes bounds the bytes of all
	// its results (default DefaultMaxListingBytes). A listing past either
	// fails with a *BoundError: a hostile or broken server cannot grow the
	// gateway's memory page after page.
	// Both are the defaults of a Discover's [Bounds].
	MaxItems        int
	MaxListingBytes int64
	// ClientInfo is the Implementation toolmesh names itself with.
	ClientInfo mcp.Implementation
}

// Client lists MCP servers. It is safe for concurrent use.
type Client struct {
	opts Options
}

// New returns a Client with opts' zero fields defaulted.
func New(opts Options) *Client {
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	// A copy: the caller's client may serve other uses, whose redirect
	// policy stays theirs.
	hc := *opts.HTTP
	hc.CheckRedirect = checkRedirect
	opts.HTTP = &hc
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxPages <= 0 {
		opts.MaxPages = DefaultMaxPages
	}
	if opts.MaxItems <= 0 {
		opts.MaxItems = DefaultMaxItems
	}
	if opts.MaxListingBytes <= 0 {
		opts.MaxListingBytes = DefaultMaxListingBytes
	}
	if opts.ClientInfo.Name == "" {
		opts.ClientInfo = mcp.Implementation{Name: mcp.DefaultServerName, Version: mcp.DefaultServerVersion}
	}
	return &Client{opts: opts}
}

// Listing is what one discovery found. Items are kept as the server wrote
// them.
type Listing struct {
	Era             mcp.Era
	ProtocolVersion string
	Server          mcp.Implementation // may be empty: serverInfo is optional in the stateless era
	Instructions    string
	Capabilities    mcp.ServerCapabilities

	Tools             []json.RawMessage
	Resources         []json.RawMessage
	ResourceTemplates []json.RawMessage
	Prompts           []json.RawMessage

	// TTL is the smallest ttlMs among the stateless-era results (discover
	// and every page); HasTTL is false when no result carried one (every
	// legacy listing).
	TTL    time.Duration
	HasTTL bool
	// CacheScope is "private" when any result said so, "public" when some
	// said public and none private, "" when none said.
	CacheScope string
	// ListChanged is true when the server declared listChanged for any of
	// the capabilities that were listed.
	ListChanged bool
	// Session is the legacy-era Mcp-Session-Id the listing ran in ("" for
	// none); the session is deleted before Discover returns.
	Session string
}

// Bounds bound one listing across all its pages: the items of each kind
// and the bytes of all results. A zero field takes the Client's default
// (Options.MaxItems, Options.MaxListingBytes).
type Bounds struct {
	Tools, Resources, ResourceTemplates, Prompts int
	Bytes                                        int64
}

// Discover lists the MCP server at endpoint (its MCP endpoint URL, path
// included), sending headers on every request. It probes server/discover
// in the 2026-07-28 era first and falls back to initialize (2025-11-25,
// 2025-06-18, 2025-03-26) when the answer is not a recognised modern one,
// then lists each capability the server declares, following nextCursor.
// Errors name the method that failed.
func (c *Client) Discover(ctx context.Context, endpoint string, headers map[string]string) (*Listing, error) {
	return c.DiscoverWithin(ctx, endpoint, headers, Bounds{})
}

// DiscoverWithin is Discover with the listing bounds b, for a server whose
// bounds are not the Client's.
func (c *Client) DiscoverWithin(ctx context.Context, endpoint string, headers map[string]string, b Bounds) (*Listing, error) {
	s := &session{c: c, endpoint: endpoint, headers: headers, bounds: c.bounds(b)}
	l, err := s.discover(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close(ctx)
	if err := s.listAll(ctx, l); err != nil {
		return nil, err
	}
	l.Session = s.id
	return l, nil
}

// session is one discovery's conversation with the server.
type session struct {
	c        *Client
	endpoint string
	headers  map[string]string
	era      mcp.Era
	version  string // MCP-Protocol-Version once negotiated
	id       string // legacy Mcp-Session-Id
	nextID   int64
	ttl      *time.Duration
	scope    string
	caps     map[string]any // client capabilities declared in initialize; nil: none
	listed   int64          // bytes of the list results so far
	bounds   Bounds         // every field set (Client.bounds)
}

// bounds is b with its zero fields defaulted.
func (c *Client) bounds(b Bounds) Bounds {
	for _, n := range []*int{&b.Tools, &b.Resources, &b.ResourceTemplates, &b.Prompts} {
		if *n <= 0 {
			*n = c.opts.MaxItems
		}
	}
	if b.Bytes <= 0 {
		b.Bytes = c.opts.MaxListingBytes
	}
	return b
}

// items is the bound of m's items and the config field that sets it.
func (b Bounds) items(m mcp.ListMethod) (int, string) {
	switch m.Method {
	case mcp.ListResources.Method:
		return b.Resources, "resources"
	case mcp.ListResourceTemplates.Method:
		return b.ResourceTemplates, "resourceTemplates"
	case mcp.ListPrompts.Method:
		return b.Prompts, "prompts"
	}
	return b.Tools, "tools"
}

// BoundError is a listing refused at one of the Client's bounds.
type BoundError struct {
	Method string
	Bound  string // what was bounded: "tools", "resources", …, or "bytes"
	Limit  int64
	// Field is the listingBounds field that sets the bound ("tools",
	// "bytes", ...), named in the error so an operator knows what to raise.
	Field string
}

func (e *BoundError) Error() string {
	return fmt.Sprintf("%s: the server lists more than %d %s (toolmesh's listing bound listingBounds.%s; the listing is refused)", e.Method, e.Limit, e.Bound, e.Field)
}

// discover settles the era: server/discover, else initialize.
func (s *session) discover(ctx context.Context) (*Listing, error) {
	s.era, s.version = mcp.EraStateless, mcp.Version20260728
	raw, derr := s.call(ctx, "server/discover", s.params(""))
	legacyVersion := mcp.LatestLegacyVersion
	if derr == nil {
		var d mcp.DiscoverResult
		if err := json.Unmarshal(raw, &d); err != nil {
			derr = fmt.Errorf("server/discover: result: %w", err)
		} else if err := checkResultType(d.ResultType); err != nil {
			return nil, fmt.Errorf("server/discover: %w", err)
		} else if slices.Contains(d.SupportedVersions, mcp.Version20260728) {
			s.noteCache(d.CacheFields)
			l := &Listing{Era: mcp.EraStateless, ProtocolVersion: mcp.Version20260728,
				Capabilities: d.Capabilities, Instructions: d.Instructions}
			if d.Meta.ServerInfo != nil {
				l.Server = *d.Meta.ServerInfo
			}
			return l, nil
		} else if v := bestLegacy(d.SupportedVersions); v != "" {
			// A server that answers the probe but speaks only legacy
			// versions (as toolmesh's own endpoint does for a probe).
			legacyVersion = v
		} else {
			return nil, fmt.Errorf("server/discover: the server supports %q, none of %q", d.SupportedVersions, mcp.SupportedVersions())
		}
	}
	if derr != nil {
		if !fallBack(derr) {
			return nil, derr
		}
		var rpc *mcp.RPCError
		if errors.As(derr, &rpc) && rpc.Code == mcp.CodeUnsupportedProtocolVersion {
			var data mcp.UnsupportedVersionData
			_ = json.Unmarshal(rpc.Data, &data)
			if v := bestLegacy(data.Supported); v != "" {
				legacyVersion = v
			}
		}
	}
	l, err := s.initialize(ctx, legacyVersion)
	if err != nil && derr != nil {
		return nil, fmt.Errorf("%w (after server/discover failed: %v)", err, derr)
	}
	return l, err
}

// fallBack reports whether a failed server/discover means "try the legacy
// handshake": anything but a transport failure, a timeout, a 401, or an error by
// which a modern server refuses the request (an unsupported version is
// handled by the caller: it falls back only when the server lists a
// legacy version).
func fallBack(err error) bool {
	var te *transportError
	if errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	if _, ok := Unauthorized(err); ok {
		return false // the server asks for a token, whatever its era
	}
	var rpc *mcp.RPCError
	if errors.As(err, &rpc) && mcp.IsModernError(rpc) {
		if rpc.Code != mcp.CodeUnsupportedProtocolVersion {
			return false
		}
		var data mcp.UnsupportedVersionData
		_ = json.Unmarshal(rpc.Data, &data)
		return bestLegacy(data.Supported) != ""
	}
	return true
}

// bestLegacy is the newest legacy version toolmesh speaks among versions.
func bestLegacy(versions []string) string {
	for _, v := range mcp.SupportedVersions() {
		if mcp.EraOf(v) == mcp.EraLegacy && slices.Contains(versions, v) {
			return v
		}
	}
	return ""
}

// initialize runs the legacy handshake: initialize, then
// notifications/initialized.
func (s *session) initialize(ctx context.Context, version string) (*Listing, error) {
	s.era, s.version = mcp.EraLegacy, ""
	caps := s.caps
	if caps == nil {
		caps = map[string]any{}
	}
	raw, err := s.call(ctx, "initialize", mcp.InitializeParams{
		ProtocolVersion: version, Capabilities: caps, ClientInfo: s.c.opts.ClientInfo,
	})
	if err != nil {
		return nil, err
	}
	var ir mcp.InitializeResult
	if err := json.Unmarshal(raw, &ir); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("initialize: result: %w", err)
	}
	if !mcp.IsSupportedVersion(ir.ProtocolVersion) || mcp.EraOf(ir.ProtocolVersion) != mcp.EraLegacy {
		s.close(ctx)
		return nil, fmt.Errorf("initialize: the server chose protocol version %q, which toolmesh does not speak in the legacy era", ir.ProtocolVersion)
	}
	s.version = ir.ProtocolVersion
	if err := s.notify(ctx, "notifications/initialized"); err != nil {
		s.close(ctx)
		return nil, err
	}
	return &Listing{Era: mcp.EraLegacy, ProtocolVersion: ir.ProtocolVersion, Server: ir.ServerInfo,
		Capabilities: ir.Capabilities, Instructions: ir.Instructions}, nil
}

// listAll lists every capability the server declares.
func (s *session) listAll(ctx context.Context, l *Listing) error {
	caps := l.Capabilities
	var err error
	if caps.Tools != nil {
		if l.Tools, err = s.list(ctx, mcp.ListTools); err != nil {
			return err
		}
		l.ListChanged = l.ListChanged || caps.Tools.ListChanged
	}
	if caps.Resources != nil {
		if l.Resources, err = s.list(ctx, mcp.ListResources); err != nil {
			return err
		}
		if l.ResourceTemplates, err = s.list(ctx, mcp.ListResourceTemplates); err != nil {
			return err
		}
		l.ListChanged = l.ListChanged || caps.Resources.ListChanged
	}
	if caps.Prompts != nil {
		if l.Prompts, err = s.list(ctx, mcp.ListPrompts); err != nil {
			return err
		}
		l.ListChanged = l.ListChanged || caps.Prompts.ListChanged
	}
	if s.ttl != nil {
		l.TTL, l.HasTTL = *s.ttl, true
	}
	l.CacheScope = s.scope
	return nil
}

// list follows one list method's pages.
func (s *session) list(ctx context.Context, m mcp.ListMethod) ([]json.RawMessage, error) {
	items := []json.RawMessage{}
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		if page == s.c.opts.MaxPages {
			return nil, fmt.Errorf("%s: more than %d pages", m.Method, s.c.opts.MaxPages)
		}
		raw, err := s.call(ctx, m.Method, s.params(cursor))
		if err != nil {
			return nil, err
		}
		if s.listed += int64(len(raw)); s.listed > s.bounds.Bytes {
			return nil, &BoundError{Method: m.Method, Bound: "bytes of list results", Limit: s.bounds.Bytes, Field: "bytes"}
		}
		var r mcp.ListResult
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%s: result: %w", m.Method, err)
		}
		if err := checkResultType(r.ResultType); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Method, err)
		}
		s.noteCache(r.CacheFields)
		items = append(items, m.Items(&r)...)
		if limit, field := s.bounds.items(m); len(items) > limit {
			return nil, &BoundError{Method: m.Method, Bound: m.Kind, Limit: int64(limit), Field: field}
		}
		if r.NextCursor == nil || *r.NextCursor == "" {
			return items, nil
		}
		if seen[*r.NextCursor] {
			return nil, fmt.Errorf("%s: nextCursor %q repeats", m.Method, clip(*r.NextCursor))
		}
		seen[*r.NextCursor] = true
		cursor = *r.NextCursor
	}
}

func checkResultType(t string) error {
	if t != "" && t != mcp.ResultComplete {
		return fmt.Errorf("resultType %q, want %q", clip(t), mcp.ResultComplete)
	}
	return nil
}

// noteCache folds one result's ttlMs and cacheScope into the session's.
func (s *session) noteCache(f mcp.CacheFields) {
	if f.TTLMs != nil {
		d := time.Duration(max(*f.TTLMs, 0)) * time.Millisecond
		if s.ttl == nil || d < *s.ttl {
			s.ttl = &d
		}
	}
	switch f.CacheScope {
	case "private":
		s.scope = "private"
	case "public":
		s.scope = cmp.Or(s.scope, "public")
	}
}

// params are a request's params: the cursor, and _meta in the stateless era;
// nil (no params member) when there are none.
func (s *session) params(cursor string) any {
	p := map[string]any{}
	if cursor != "" {
		p["cursor"] = cursor
	}
	if s.era == mcp.EraStateless {
		p["_meta"] = mcp.StatelessMeta(s.c.opts.ClientInfo)
	}
	if len(p) == 0 {
		return nil
	}
	return p
}

// sameOriginKey marks a context whose requests may follow same-origin
// redirects.
type sameOriginKey struct{}

// AllowSameOriginRedirects returns ctx with same-origin redirects allowed
// for the requests made with it (a service's allowSameOriginRedirects).
func AllowSameOriginRedirects(ctx context.Context) context.Context {
	return context.WithValue(ctx, sameOriginKey{}, true)
}

// maxRedirects bounds the same-origin redirects one request follows.
const maxRedirects = 5

// checkRedirect refuses every redirect, unless the request's context
// allows same-origin ones (AllowSameOriginRedirects) and this one stays on
// the origin (scheme, host and port) of the first request. A redirect
// elsewhere would carry the service's credential headers and the
// gateway's session to a host the operator never named.
func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if allowed, _ := req.Context().Value(sameOriginKey{}).(bool); !allowed {
		return fmt.Errorf("the server redirects to %s: toolmesh follows no redirect of an MCP server unless its service sets allowSameOriginRedirects", clip(req.URL.Redacted()))
	}
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return fmt.Errorf("the server redirects to %s, another origin than %s://%s: toolmesh follows same-origin redirects only", clip(req.URL.Redacted()), first.Scheme, first.Host)
	}
	if len(via) > maxRedirects {
		return fmt.Errorf("more than %d redirects", maxRedirects)
	}
	return nil
}

// transportError is a request that got no HTTP answer.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// StatusError is a non-2xx answer; RPC is its JSON-RPC error body, if any.
type StatusError struct {
	Method string
	Status int
	RPC    *mcp.RPCError
	Body   string
	// Challenges are the WWW-Authenticate values of a 401: where an
	// OAuth-protected server names its resource metadata (RFC 9728
	// section 5.1).
	Challenges []string
	// sessionLost: the answer says the server does not know the session
	// the request carried (SessionLost).
	sessionLost bool
}

func (e *StatusError) Error() string {
	side := "the server failed"
	if e.Status/100 == 4 {
		side = "the server refused toolmesh's request"
	}
	switch {
	case e.RPC != nil:
		return fmt.Sprintf("%s: status %d: %v (%s)", e.Method, e.Status, e.RPC, side)
	case e.Body != "":
		return fmt.Sprintf("%s: status %d: %q (%s)", e.Method, e.Status, e.Body, side)
	}
	return fmt.Sprintf("%s: status %d (%s)", e.Method, e.Status, side)
}

// rpcFailure wraps the JSON-RPC error a server answered method with, saying
// which side it blames: the request-shape codes mean the server refused
// what toolmesh sent (a defect of toolmesh's or a server that speaks
// another dialect), the others are the server's own failure.
func rpcFailure(method string, e *mcp.RPCError) error {
	switch e.Code {
	case mcp.CodeParseError, mcp.CodeInvalidRequest, mcp.CodeInvalidParams:
		return fmt.Errorf("%s: %w (the server refused toolmesh's request)", method, e)
	}
	return fmt.Errorf("%s: %w", method, e)
}

// Unwrap lets errors.As find the JSON-RPC error.
func (e *StatusError) Unwrap() error {
	if e.RPC == nil {
		return nil
	}
	return e.RPC
}

// call sends one request and returns its result, or the JSON-RPC error.
// When the server has lost the legacy session (restarted between two
// pages), the handshake runs again and the request is sent once more: the
// server's answer says it did not execute it (SessionLost).
func (s *session) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	raw, err := s.callOnce(ctx, method, params)
	var se *StatusError
	if s.id != "" && method != "initialize" && errors.As(err, &se) && se.sessionLost {
		version := s.version
		s.id = ""
		if _, ierr := s.initialize(ctx, version); ierr != nil {
			return nil, fmt.Errorf("%w; opening a new session failed: %v", err, ierr)
		}
		return s.callOnce(ctx, method, params)
	}
	return raw, err
}

func (s *session) callOnce(ctx context.Context, method string, params any) (json.RawMessage, error) {
	s.nextID++
	req := mcp.NewClientRequest(s.nextID, method, params)
	resp, err := s.post(ctx, method, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if method == "initialize" {
		s.id = resp.Header.Get(mcp.HeaderSessionID)
	}
	if resp.StatusCode/100 != 2 {
		return nil, s.statusError(method, resp)
	}
	msg, err := s.readResponse(method, resp, req.ID)
	if err != nil {
		return nil, err
	}
	if msg.Error != nil {
		return nil, rpcFailure(method, msg.Error)
	}
	return msg.Result, nil
}

// notify sends a notification; the server answers 202 (any 2xx is taken).
func (s *session) notify(ctx context.Context, method string) error {
	resp, err := s.post(ctx, method, mcp.NewClientRequest(0, method, nil))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return s.statusError(method, resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, s.c.opts.MaxBytes))
	return nil
}

func (s *session) post(ctx context.Context, method string, msg mcp.ClientRequest) (*http.Response, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: build request: %w", method, err)
	}
	s.setHeaders(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.era == mcp.EraStateless {
		req.Header.Set(mcp.HeaderMethod, method)
	}
	resp, err := s.c.opts.HTTP.Do(req)
	if err != nil {
		return nil, &transportError{fmt.Errorf("%s: %w", method, err)}
	}
	return resp, nil
}

// setHeaders sets the configured headers, then the protocol's own.
func (s *session) setHeaders(req *http.Request) {
	for k, v := range s.headers {
		req.Header.Set(k, v)
	}
	if s.version != "" {
		req.Header.Set(mcp.HeaderProtocolVersion, s.version)
	}
	if s.id != "" {
		req.Header.Set(mcp.HeaderSessionID, s.id)
	}
}

// close ends a legacy session with DELETE, as the Streamable HTTP transport
// asks of a client that no longer needs it. It is best effort: a server may
// answer 405 (it does not let clients end sessions), and an expired context
// skips it (the session then times out on the server).
func (s *session) close(ctx context.Context) {
	if s.id == "" || ctx.Err() != nil {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.endpoint, nil)
	if err != nil {
		return
	}
	s.setHeaders(req)
	resp, err := s.c.opts.HTTP.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}

func (s *session) statusError(method string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, min(s.c.opts.MaxBytes, 64<<10)))
	e := &StatusError{Method: method, Status: resp.StatusCode, sessionLost: s.id != "" && SessionLost(resp.StatusCode, b)}
	if resp.StatusCode == http.StatusUnauthorized {
		e.Challenges = resp.Header.Values("WWW-Authenticate")
	}
	if m, err := mcp.DecodeClientResponse(b); err == nil && m.Error != nil {
		e.RPC = m.Error
	} else {
		e.Body = clip(strings.TrimSpace(string(b)))
	}
	return e
}

// readResponse reads the response to the request with id from a JSON body
// or an event stream.
func (s *session) readResponse(method string, resp *http.Response, id json.RawMessage) (*mcp.ClientResponse, error) {
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	limited := &countingReader{r: io.LimitReader(resp.Body, s.c.opts.MaxBytes+1)}
	switch mt {
	case "application/json":
		b, err := io.ReadAll(limited)
		if err != nil {
			return nil, fmt.Errorf("%s: read response: %w", method, err)
		}
		if limited.n > s.c.opts.MaxBytes {
			return nil, fmt.Errorf("%s: response larger than %d bytes", method, s.c.opts.MaxBytes)
		}
		m, err := mcp.DecodeClientResponse(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %q", method, err, clip(string(b)))
		}
		if !m.IsResponseTo(id) {
			return nil, fmt.Errorf("%s: the answer is not the response to request id %s", method, id)
		}
		return m, nil
	case "text/event-stream":
		return s.readStream(method, limited, id)
	}
	return nil, fmt.Errorf("%s: status %d with content type %q, want application/json or text/event-stream", method, resp.StatusCode, ct)
}

// readStream reads server-sent events until the response with id. Events
// before it (progress, log messages, requests a legacy server sends on the
// stream) are skipped: a listing answers none of them.
func (s *session) readStream(method string, r *countingReader, id json.RawMessage) (*mcp.ClientResponse, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), int(min(s.c.opts.MaxBytes+1, 1<<30)))
	var data bytes.Buffer
	event := ""
	dispatch := func() (*mcp.ClientResponse, error) {
		defer func() { data.Reset(); event = "" }()
		if data.Len() == 0 || (event != "" && event != "message") {
			return nil, nil
		}
		m, err := mcp.DecodeClientResponse(data.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s: event stream: %w", method, err)
		}
		if m.IsResponseTo(id) {
			return m, nil
		}
		return nil, nil
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if m, err := dispatch(); m != nil || err != nil {
				return m, err
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		case "event":
			event = value
		}
	}
	if r.n > s.c.opts.MaxBytes {
		return nil, fmt.Errorf("%s: event stream larger than %d bytes", method, s.c.opts.MaxBytes)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: event stream: %w", method, err)
	}
	// A final event without its blank line still counts.
	if m, err := dispatch(); m != nil || err != nil {
		return m, err
	}
	return nil, fmt.Errorf("%s: the event stream ended without the response to request id %s", method, id)
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// clip shortens a server-supplied string quoted in an error.
func clip(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
