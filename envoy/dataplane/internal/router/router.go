// Package router is the local data plane's router filter and upstream
// calls (source/common/router/router.cc, config_impl.cc,
// retry_state_impl.cc): the route's request and response header changes,
// the upstream attempts over net/http with retries, per-try and route
// timeouts and circuit breakers, and the local replies their failures are.
// The rules it follows are in the rules package (rules_upstream.go,
// "Router rules").
package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// Call is one request through the router filter to a cluster.
type Call struct {
	// Downstream is the downstream request's context, which ends when the
	// client goes away.
	Downstream context.Context
	Log        *slog.Logger
	// Headers are the request headers as the filters left them
	// (FinalizeRequestHeaders applied).
	Headers *headers.Map
	// Body is the buffered request body; Rest, when not nil, the unread
	// remainder of a body over the buffer limit.
	Body []byte
	Rest io.Reader

	// Flags are the response flags the call raised, and Host the upstream
	// host of its last attempt ("" before one), for the access log and
	// the local reply's format.
	Flags rules.ResponseFlags
	Host  string
}

// Context bounds the whole upstream exchange, retries included, by the
// route timeout (0 disables it).
func Context(parent context.Context, rt *xdsconfig.Route) (context.Context, context.CancelFunc) {
	if rt.Timeout > 0 {
		return context.WithTimeout(parent, rt.Timeout)
	}
	return context.WithCancel(parent)
}

// upstreamFailure describes an attempt that ended before response headers.
type upstreamFailure struct {
	flag      rules.ResponseFlags
	reason    string // Envoy reset reason (Utility::resetReasonToString)
	transport string // transport failure reason, if any
	refused   bool
	// beforeSend: the request cannot have reached the upstream (a connect
	// failure, or a pooled connection the server had already closed).
	beforeSend bool
	perTry     bool // per_try_timeout fired
	noHealthy  bool
	overflow   bool
}

// FinalizeRequestHeaders is RouteEntryImplBase::finalizeRequestHeaders plus
// the router's own headers: headers_to_remove/add at route, virtual host and
// route configuration level (in that order, so the outermost level has the
// final say), host_rewrite_literal, path rewrites (keeping the original in
// x-envoy-original-path) and x-envoy-expected-rq-timeout-ms.
func FinalizeRequestHeaders(h *headers.Map, rt *xdsconfig.Route, c *xdsconfig.FmtContext, suppressEnvoyHeaders bool) {
	for _, o := range []*xdsconfig.HeaderOps{&rt.HeaderOps, &rt.VH.HeaderOps, &rt.Table.HeaderOps} {
		for _, d := range o.ReqDel {
			if !strings.HasPrefix(d, ":") && d != "host" {
				h.Del(d)
			}
		}
		xdsconfig.ApplyHeadersToAdd(h, o.ReqAdd, c)
	}
	if rt.HostRewrite != "" {
		h.Set(":authority", rt.HostRewrite)
	}
	orig := h.Value(":path")
	rt.RewritePath(h)
	if p := h.Value(":path"); p != orig {
		h.Set("x-envoy-original-path", orig)
	}
	timeout := rt.Timeout
	if rt.Retry != nil && rt.Retry.PerTry > 0 && (timeout == 0 || rt.Retry.PerTry < timeout) {
		timeout = rt.Retry.PerTry
	}
	if timeout > 0 && !suppressEnvoyHeaders {
		h.Set("x-envoy-expected-rq-timeout-ms", strconv.FormatInt(timeout.Milliseconds(), 10))
	}
}

// FinalizeResponseHeaders applies response_headers_to_remove/add of the
// route, virtual host and route configuration.
func FinalizeResponseHeaders(h *headers.Map, rt *xdsconfig.Route, c *xdsconfig.FmtContext) {
	c.RespH = h
	for _, o := range []*xdsconfig.HeaderOps{&rt.HeaderOps, &rt.VH.HeaderOps, &rt.Table.HeaderOps} {
		for _, d := range o.RespDel {
			if !strings.HasPrefix(d, ":") {
				h.Del(d)
			}
		}
		xdsconfig.ApplyHeadersToAdd(h, o.RespAdd, c)
	}
}

// Forward sends the request upstream with the route's retry policy. It
// returns the response, or a local reply, or neither when the downstream is
// gone.
func (x *Call) Forward(ctx context.Context, rt *xdsconfig.Route, cl *xdsconfig.Cluster) (*http.Response, *xdsconfig.LocalReply) {
	rp := rt.Retry
	// Retries need the whole body; a body over the buffer limit disables them.
	canRetry := x.Rest == nil
	for attempt := 1; ; attempt++ {
		retrying := attempt > 1
		resp, fail := x.attempt(ctx, rt, cl)
		if retrying {
			cl.RT.Retries.Add(-1)
		}
		if x.Downstream.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return nil, nil
		}
		if ctx.Err() != nil && (fail != nil || resp == nil) {
			return nil, x.routeTimeout()
		}
		switch {
		case fail != nil && fail.noHealthy:
			x.Flags |= rules.FlagUH
			return nil, &xdsconfig.LocalReply{Code: 503, Body: rules.BodyNoHealthyUpstream, Details: rules.DetailsNoHealthyUpstream}
		case fail != nil && fail.overflow:
			x.Flags |= rules.FlagUO
			return nil, x.resetReply(fail, retrying)
		}
		// done is this attempt's outcome, when it is not retried.
		done := func() (*http.Response, *xdsconfig.LocalReply) {
			if fail != nil {
				return nil, x.resetReply(fail, retrying)
			}
			return resp, nil
		}
		switch {
		case rp == nil, fail != nil && !rp.RetryReset(fail.flag, fail.beforeSend, fail.refused), fail == nil && !rp.RetryStatus(resp.StatusCode):
			return done()
		case attempt > rp.NumRetries:
			x.Flags |= rules.FlagURX
			return done()
		case !canRetry:
			return done()
		case cl.RT.Retries.Add(1) > cl.Limits.MaxRetries:
			// The circuit breaker's max_retries: a retry overflow.
			cl.RT.Retries.Add(-1)
			x.Flags |= rules.FlagUO
			return done()
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		}
		if !x.sleepBackoff(ctx, rp, attempt) {
			cl.RT.Retries.Add(-1)
			if x.Downstream.Err() != nil {
				return nil, nil
			}
			return nil, x.routeTimeout()
		}
	}
}

func (x *Call) sleepBackoff(ctx context.Context, rp *xdsconfig.RetryPolicy, attempt int) bool {
	t := time.NewTimer(rp.Backoff(attempt))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (x *Call) routeTimeout() *xdsconfig.LocalReply {
	x.Flags |= rules.FlagUT
	return &xdsconfig.LocalReply{Code: 504, Body: rules.BodyUpstreamTimeout, Details: rules.DetailsUpstreamTimeout}
}

// resetReply is the local reply for an attempt that ended before response
// headers (Router::onUpstreamReset / onPerTryTimeout).
func (x *Call) resetReply(f *upstreamFailure, retried bool) *xdsconfig.LocalReply {
	if f.perTry {
		x.Flags |= rules.FlagUT
		return &xdsconfig.LocalReply{Code: 504, Body: rules.BodyUpstreamTimeout, Details: rules.DetailsPerTryTimeout}
	}
	x.Flags |= f.flag
	body := "upstream connect error or disconnect/reset before headers. "
	if retried {
		body += "retried and the latest "
	}
	body += "reset reason: " + f.reason
	return &xdsconfig.LocalReply{Code: 503, Body: body, Details: f.details(rules.DetailsResetBeforeStarted)}
}

// details are the response code details of a reset: prefix{reason}, with
// the transport failure reason in them (only there since 1.39: rules.go,
// "Router rules").
func (f *upstreamFailure) details(prefix string) string {
	d := prefix + "{" + rules.ResponseDetails(f.reason)
	if f.transport != "" {
		d += "|" + rules.ResponseDetails(f.transport)
	}
	return d + "}"
}

// BodyAbort is the router's answer to an upstream failure after the
// response headers arrived (Router::onResponseTimeout and onUpstreamReset
// reach onUpstreamAbort whatever the response state): the route timeout
// (ctx expired) is 504 "upstream request timeout" with flag UT; a reset is
// 503 with the reset's flag and the "after response started" details,
// since the router already passed the headers on. sendLocalReply then
// decides: a direct local reply while the headers are still held by a
// filter, a downstream reset once they went out.
func (x *Call) BodyAbort(ctx context.Context, err error) xdsconfig.LocalReply {
	if ctx.Err() != nil && x.Downstream.Err() == nil {
		return *x.routeTimeout()
	}
	f := classifyUpstreamError(err)
	x.Flags |= f.flag
	body := "upstream connect error or disconnect/reset before headers. reset reason: " + f.reason
	return xdsconfig.LocalReply{Code: 503, Body: body, Details: f.details(rules.DetailsResetAfterStarted)}
}

// attempt is one upstream try.
func (x *Call) attempt(ctx context.Context, rt *xdsconfig.Route, cl *xdsconfig.Cluster) (*http.Response, *upstreamFailure) {
	addr, ok := cl.Pick()
	if !ok {
		return nil, &upstreamFailure{noHealthy: true, flag: rules.FlagUH}
	}
	release, overflow, err := cl.Acquire(ctx, x.Log)
	if overflow {
		return nil, &upstreamFailure{overflow: true, flag: rules.FlagUO, reason: "overflow"}
	}
	if err != nil {
		return nil, &upstreamFailure{flag: rules.FlagUC, reason: "local reset"}
	}
	tctx, tcancel := ctx, context.CancelFunc(func() {})
	if rt.Retry != nil && rt.Retry.PerTry > 0 {
		tctx, tcancel = context.WithTimeout(ctx, rt.Retry.PerTry)
	}
	req, err := x.upstreamRequest(tctx, cl, addr)
	if err != nil {
		release()
		tcancel()
		return nil, &upstreamFailure{flag: rules.FlagUPE, reason: "protocol error", transport: err.Error()}
	}
	x.Host = addr
	resp, err := cl.Transport.RoundTrip(req)
	if err != nil {
		release()
		perTry := tctx.Err() != nil && ctx.Err() == nil
		tcancel()
		if perTry {
			return nil, &upstreamFailure{perTry: true, flag: rules.FlagUT}
		}
		return nil, classifyUpstreamError(err)
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release, cancel: tcancel}
	return resp, nil
}

// releasingBody releases the circuit-breaker slot and ends the try's
// context when the body is closed.
type releasingBody struct {
	io.ReadCloser
	release func()
	cancel  context.CancelFunc
	done    bool
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	if !b.done {
		b.done = true
		b.release()
		b.cancel()
	}
	return err
}

// classifyUpstreamError maps a transport error to Envoy's reset reasons and
// response flags.
func classifyUpstreamError(err error) *upstreamFailure {
	var de *xdsconfig.DialError
	if errors.As(err, &de) {
		f := &upstreamFailure{flag: rules.FlagUF, reason: "remote connection failure", transport: "delayed connect error: " + de.Err.Error()}
		if de.Timeout {
			f.reason, f.transport = "connection timeout", ""
		}
		if strings.HasPrefix(de.Err.Error(), "TLS error") {
			f.reason, f.transport = "connection failure", de.Err.Error()
		}
		return f
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return &upstreamFailure{flag: rules.FlagUF, reason: "remote connection failure", transport: "delayed connect error: " + oe.Err.Error()}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "server closed idle connection"):
		// Go's errServerClosedIdle: nothing of the request was written.
		return &upstreamFailure{flag: rules.FlagUC, reason: "connection termination", beforeSend: true}
	case strings.Contains(msg, "response headers exceeded"), strings.Contains(msg, "header list too large"):
		// Over max_response_headers_kb: a codec error, 503 (rules.go,
		// maxResponseHeadersH1).
		return &upstreamFailure{flag: rules.FlagUPE, reason: "protocol error"}
	case strings.Contains(msg, "REFUSED_STREAM"):
		return &upstreamFailure{flag: rules.FlagUR, reason: "remote refused stream reset", refused: true}
	case strings.Contains(msg, "stream error"):
		return &upstreamFailure{flag: rules.FlagUR, reason: "remote reset"}
	}
	return &upstreamFailure{flag: rules.FlagUC, reason: "connection termination"}
}

// upstreamRequest builds the request Envoy's codec would send: the mutated
// headers without pseudo and hop-by-hop headers, :authority as Host, the
// body with its content-length (chunked when there is none).
func (x *Call) upstreamRequest(ctx context.Context, cl *xdsconfig.Cluster, addr string) (*http.Request, error) {
	path := x.Headers.Value(":path")
	u := &url.URL{Scheme: cl.Scheme, Host: addr}
	p, q, _ := strings.Cut(path, "?")
	if strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") {
		u.Opaque, u.RawQuery = p, q
	} else {
		pu, err := url.ParseRequestURI(path)
		if err != nil {
			return nil, fmt.Errorf("invalid :path %q: %w", path, err)
		}
		u.Path, u.RawPath, u.RawQuery = pu.Path, pu.RawPath, pu.RawQuery
	}
	var body io.Reader
	length := int64(0)
	switch {
	case x.Rest != nil:
		body, length = io.MultiReader(bytes.NewReader(x.Body), x.Rest), -1
	case len(x.Body) > 0:
		body, length = bytes.NewReader(x.Body), -1
	}
	if v, ok := x.Headers.Get("content-length"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			length = n
		}
	}
	if body == nil && length > 0 {
		body = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, x.Headers.Value(":method"), "http://placeholder/", body)
	if err != nil {
		return nil, err
	}
	req.URL = u
	req.Host = x.Headers.Value(":authority")
	req.Header = x.Headers.HTTPHeader()
	req.Header.Del("Content-Length")
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // Go would add its own
	}
	req.ContentLength = length
	if length == 0 {
		req.Body = nil
	}
	return req, nil
}
