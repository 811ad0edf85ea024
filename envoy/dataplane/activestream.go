package dataplane

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/extprocfilter"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/router"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// activeStream is one HTTP stream through the HTTP connection manager
// (ConnectionManagerImpl::ActiveStream in
// source/common/http/conn_manager_impl.h): the request headers and body as
// the filters see them, the cached route, the stream's dynamic metadata and
// response flags, and the ext_proc filter instances. It lives on the stack of one ServeHTTP call.
type activeStream struct {
	d     *DataPlane
	cfg   *xdsconfig.Config
	log   *slog.Logger
	w     http.ResponseWriter
	r     *http.Request
	ctx   context.Context
	start time.Time

	reqH       *headers.Map
	reqHBuf    headers.Map      // where reqH points
	route      *xdsconfig.Route // cached route (Envoy's route cache)
	routeValid bool
	first      *xdsconfig.Route // route selected at decodeHeaders
	req        reqBody

	meta          map[string]*structpb.Struct // nil until a filter sets some
	flags         rules.ResponseFlags
	details       string
	cluster       string
	upstreamHost  string
	upstreamProto int // HTTP major version of the upstream response; 0 for none

	filters   []*extprocfilter.Filter
	filterArr [2]*extprocfilter.Filter // room for filters in the stream itself
	started   bool                     // response headers went to the client
	up        router.Call              // the router's upstream call, once routed
}

// maxBufferLimit caps configured buffer limits so they fit an int64.
const maxBufferLimit = 1 << 40

// reqBody is the request body as buffered by the filter chain.
type reqBody struct {
	buf      []byte    // buffered bytes; the whole body when rest is nil
	rest     io.Reader // the unread remainder of a body over the buffer limit
	replaced bool      // CONTINUE_AND_REPLACE replaced the body
}

func (x *activeStream) serve() {
	defer func() {
		for _, f := range x.filters {
			f.End()
		}
	}()
	hcm := x.cfg.HCM
	x.reqH = headers.FromRequest(&x.reqHBuf, x.r)
	if lr := hcm.CheckDownstream(x.reqH); lr != nil {
		x.sendLocalReply(*lr, false)
		return
	}
	if hcm.NormalizePath || hcm.MergeSlashes {
		x.reqH.Set(":path", headers.NormalizePath(x.reqH.Value(":path"), hcm.NormalizePath, hcm.MergeSlashes))
	}
	hcm.ApplyEarly(x.reqH)
	headers.SanitizeRequest(x.reqH)
	// ConnectionManagerUtility::mutateRequestHeaders: x-request-id is
	// generated when absent (generate_request_id, default true) and
	// x-forwarded-proto is set from the downstream scheme when absent.
	if hcm.GenerateRequestID && !x.reqH.Has("x-request-id") {
		x.reqH.Set("x-request-id", newRequestID())
	}
	hadXFF := x.reqH.Has("x-forwarded-for")
	if hcm.UseRemoteAddress {
		headers.AppendXFF(x.reqH, x.r)
	}
	headers.SanitizeExternal(x.reqH, x.r, hcm.UseRemoteAddress, hcm.InternalCIDRs, hadXFF)
	headers.SanitizeXFCC(x.reqH, x.r, hcm.XFCC)
	if !x.reqH.Has("x-forwarded-proto") {
		x.reqH.Set("x-forwarded-proto", x.reqH.Value(":scheme"))
	}
	x.first = x.currentRoute()
	x.filters = x.activeFilters()

	eos := x.r.Body == nil || x.r.Body == http.NoBody || (x.r.ContentLength == 0 && len(x.r.TransferEncoding) == 0)
	for _, f := range x.filters {
		if lr, err := f.DecodeHeaders(eos); x.stopped(lr, err) {
			return
		}
	}
	if !eos && !x.decodeBody() {
		return
	}
	x.router()
}

// currentRoute returns the cached route, re-matching after a
// clear_route_cache with the headers as they are now.
func (x *activeStream) currentRoute() *xdsconfig.Route {
	if !x.routeValid {
		x.routeValid = true
		x.route = nil
		if x.cfg.Routes != nil {
			x.route = x.cfg.Routes.Match(x.reqH)
		}
	}
	return x.route
}

// activeFilters instantiates the ext_proc filters that are not
// HttpFilter.disabled (only a per-route config, which is not emulated,
// could enable one).
func (x *activeStream) activeFilters() []*extprocfilter.Filter {
	out := x.filterArr[:0]
	for _, f := range x.cfg.HCM.Filters {
		if !f.DisabledByDefault {
			out = append(out, extprocfilter.New(x.ctx, x.log, x, &x.d.client, f))
		}
	}
	return out
}

// decodeBody reads and processes the request body. false means a reply was
// sent or the downstream is gone.
func (x *activeStream) decodeBody() bool {
	limit := min(x.first.DecoderLimit(x.cfg.HCM.BufferLimit), maxBufferLimit)
	if x.req.replaced {
		// onData drains the downstream body after CONTINUE_AND_REPLACE.
		_, _ = io.Copy(io.Discard, x.r.Body)
	} else {
		buf, err := readUpTo(x.r.Body, int64(limit)+1, x.r.ContentLength)
		if err != nil {
			return false
		}
		x.req.buf = buf
		if uint64(len(buf)) > limit {
			x.req.rest = x.r.Body
		}
	}
	if x.req.rest != nil {
		for _, f := range x.filters {
			if !f.Complete() && f.Mode().GetRequestBodyMode() == extprocfilterv3.ProcessingMode_BUFFERED {
				// ActiveStreamDecoderFilter::requestDataTooLarge.
				x.sendLocalReply(xdsconfig.LocalReply{Code: 413, Body: rules.BodyPayloadTooLarge, Details: rules.DetailsRequestTooLarge}, false)
				return false
			}
		}
	}
	for _, f := range x.filters {
		if f.Complete() {
			continue
		}
		var lr *xdsconfig.LocalReply
		var err error
		switch f.Mode().GetRequestBodyMode() {
		case extprocfilterv3.ProcessingMode_BUFFERED:
			x.req.buf, lr, err = f.BufferedBody(extprocfilter.Decoding, x.reqH, x.req.buf, true)
		case extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL:
			x.req.buf, lr, err = f.BufferedBody(extprocfilter.Decoding, x.reqH, x.req.buf, x.req.rest == nil)
		case extprocfilterv3.ProcessingMode_STREAMED:
			// Chunks go to the server as they are read; the processed body
			// is collected before it goes upstream (a simplification: Envoy
			// forwards each chunk as soon as it is processed).
			src := io.Reader(bytes.NewReader(x.req.buf))
			if x.req.rest != nil {
				src = io.MultiReader(src, x.req.rest)
			}
			sr := f.NewStreamReader(extprocfilter.Decoding, src)
			out, rerr := io.ReadAll(sr)
			switch {
			case sr.Failed() != nil:
				lr = sr.Failed()
			case rerr != nil:
				err = rerr
			default:
				x.req.buf, x.req.rest = out, nil
			}
		}
		if x.stopped(lr, err) {
			return false
		}
	}
	return true
}

// stopped reports whether the filter chain stops at a filter's result: the
// downstream went away (err), or the local reply lr, which it sends.
func (x *activeStream) stopped(lr *xdsconfig.LocalReply, err error) bool {
	if err == nil && lr != nil {
		x.sendLocalReply(*lr, false)
	}
	return err != nil || lr != nil
}

// router is the router filter: the route is (re)selected now. No route and
// a direct response are local replies of the router like an unknown
// cluster: callbacks_->sendLocalReply in Filter::decodeHeaders
// (source/common/router/router.cc), so they go through the encoder filters
// (rules.go, "Local replies and ext_proc").
func (x *activeStream) router() {
	rt := x.currentRoute()
	switch {
	case rt == nil:
		x.flags |= rules.FlagNR
		x.sendLocalReply(xdsconfig.LocalReply{Code: 404, Details: rules.DetailsRouteNotFound}, true)
	case rt.Kind == xdsconfig.KindDirect:
		x.sendLocalReply(xdsconfig.LocalReply{
			Code: rt.Direct.Status, Body: rt.Direct.Body, Details: rules.DetailsDirectResponse,
			Extra: func(h *headers.Map) { router.FinalizeResponseHeaders(h, rt, x.fmtCtx()) },
		}, true)
	default:
		x.routeToCluster(rt)
	}
}

// encode runs an upstream response through the encoder filters (in reverse
// order) and writes it.
func (x *activeStream) encode(ctx context.Context, rt *xdsconfig.Route, resp *http.Response) {
	h := headers.FromResponse(resp)
	x.upstreamProto = resp.ProtoMajor
	if !x.cfg.HCM.SuppressEnvoyHeaders {
		h.Set("x-envoy-upstream-service-time", strconv.FormatInt(time.Since(x.start).Milliseconds(), 10))
	}
	router.FinalizeResponseHeaders(h, rt, x.fmtCtx())
	eos := resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength == 0 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified ||
		x.r.Method == http.MethodHead
	x.encodeFilters(ctx, h, resp.Body, eos)
}

// encodeFilters runs response headers and body through the encoder filters
// (in reverse order) and writes them: FilterManager::encodeHeaders and
// encodeData for an upstream response or a local reply sent via the filter
// chain. A local reply raised on the way goes out directly.
func (x *activeStream) encodeFilters(ctx context.Context, h *headers.Map, body io.Reader, eos bool) {
	limit := min(x.cfg.HCM.BufferLimit, maxBufferLimit)
	for i := len(x.filters) - 1; i >= 0; i-- {
		f := x.filters[i]
		if f.DuplexBeforeHeaders(eos) {
			b, lr, err := f.DuplexHeaders(h, body)
			if x.stopped(lr, err) {
				return
			}
			body = b
			continue
		}
		repl, didReplace, lr, err := f.EncodeHeaders(h, eos)
		if x.stopped(lr, err) {
			return
		}
		if didReplace {
			body, eos = bytes.NewReader(repl), false
			continue
		}
		if eos || f.Complete() {
			continue
		}
		switch f.Mode().GetResponseBodyMode() {
		case extprocfilterv3.ProcessingMode_BUFFERED, extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL:
			buf, err := readUpTo(body, int64(limit)+1, contentLength(h))
			if err != nil {
				if x.ctx.Err() != nil {
					return // the downstream went away
				}
				// The filter still holds the response headers, so the
				// router's local reply goes out directly
				// (FilterManager::sendLocalReply → sendDirectLocalReply,
				// local_reply_config applied), not as a reset.
				lr := x.up.BodyAbort(ctx, err)
				x.flags |= x.up.Flags
				x.sendLocalReply(lr, false)
				return
			}
			complete := uint64(len(buf)) <= limit
			if !complete && f.Mode().GetResponseBodyMode() == extprocfilterv3.ProcessingMode_BUFFERED {
				// ActiveStreamEncoderFilter::responseDataTooLarge.
				x.sendLocalReply(xdsconfig.LocalReply{Code: 500, Body: rules.BodyInternalError, Details: rules.DetailsResponseTooLarge}, false)
				return
			}
			out, lr, err := f.BufferedBody(extprocfilter.Encoding, h, buf, complete)
			if x.stopped(lr, err) {
				return
			}
			if complete {
				body = bytes.NewReader(out)
			} else {
				body = io.MultiReader(bytes.NewReader(out), body)
			}
		case extprocfilterv3.ProcessingMode_STREAMED:
			body = f.NewStreamReader(extprocfilter.Encoding, body)
		case extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
			body = f.NewDuplexReader(body)
		}
	}
	x.write(h, body)
}

// sendLocalReply sends a reply generated by the data plane itself, shaped
// by local_reply_config. With viaFilterChain, a router's reply while no
// response headers exist (DownstreamFilterManager::sendLocalReply →
// sendLocalReplyViaFilterChain), it then goes through the encoder filters,
// so an ext_proc filter whose processing is not complete sends the reshaped
// headers and body to its server (rules.go, "Local replies and ext_proc");
// any other goes out directly. Once the response has started, a local
// reply can only reset the stream.
func (x *activeStream) sendLocalReply(l xdsconfig.LocalReply, viaFilterChain bool) {
	if x.started {
		x.Reset(errors.New("local reply after the response started"))
		return
	}
	x.details = l.Details
	h, body := x.cfg.HCM.LocalReply.Prepare(l, x.fmtCtx())
	x.log.Debug("local reply", "status", h.Value(":status"), "flags", x.flags.String(), "details", l.Details, "via_filter_chain", viaFilterChain)
	if viaFilterChain {
		x.encodeFilters(x.ctx, h, strings.NewReader(body), body == "" || x.r.Method == http.MethodHead)
	} else {
		x.write(h, bytes.NewReader(stringBytes(body)))
	}
}

// write sends the final headers and body to the client.
func (x *activeStream) write(h *headers.Map, body io.Reader) {
	code, chunked := x.writeHeaders(h, body)
	x.w.WriteHeader(code)
	x.started = true
	if x.r.Method == http.MethodHead || body == nil {
		return
	}
	flusher, _ := x.w.(http.Flusher)
	switch b := body.(type) {
	case *bytes.Reader:
		// Held whole: out with the headers, in one write (a local reply of
		// megabytes copied through a 32 KiB buffer was a syscall per piece).
		if n, err := b.WriteTo(x.w); n > 0 && err == nil && flusher != nil && !chunked {
			flusher.Flush()
		}
		return
	case *strings.Reader: // held whole: out with the headers
	default:
		if flusher != nil { // still streaming: the headers go now (rules.go)
			flusher.Flush()
		}
	}
	x.copyBody(body, flusher)
}

// writeHeaders applies the server header transformation and puts h in the
// response writer's header map; it returns the status to write, and whether
// the body goes chunked.
func (x *activeStream) writeHeaders(h *headers.Map, body io.Reader) (code int, chunked bool) {
	h.Set("server", x.cfg.HCM.ServerName) // OVERWRITE, the only transformation emulated
	status, err := strconv.Atoi(h.Value(":status"))
	if err != nil || status < 100 || status > 999 {
		status = http.StatusBadGateway
	}
	out := x.w.Header()
	if len(out) == 0 {
		h.FillHTTPHeader(out)
	} else {
		for k, v := range h.HTTPHeader() {
			out[k] = v
		}
	}
	if !h.Has("content-type") {
		out["Content-Type"] = nil // no sniffing: Envoy adds no content-type
	}
	_, canFlush := x.w.(http.Flusher)
	// A body held whole without a content-length went out chunked because
	// it was flushed before the handler returned (net/http would otherwise
	// count it and send a content-length, which Envoy does not add). Asking
	// net/http for chunking instead gives the same bytes without the flush,
	// in one write with the final chunk rather than two.
	held, _ := body.(*bytes.Reader)
	// A response with this status has a body (RFC 9110 §6.4.1).
	bodyAllowed := status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
	chunked = held != nil && held.Len() > 0 && canFlush && x.r.ProtoMajor == 1 &&
		x.r.Method != http.MethodHead && bodyAllowed && !h.Has("content-length")
	if chunked {
		out["Transfer-Encoding"] = []string{"chunked"}
	}
	return status, chunked
}

// copyBody streams a body that is not held whole, flushing each piece; a
// read error resets the downstream stream.
func (x *activeStream) copyBody(body io.Reader, flusher http.Flusher) {
	bp := writeBufs.Get().(*[]byte)
	defer writeBufs.Put(bp)
	buf := *bp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, werr := x.w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if errors.Is(rerr, io.EOF) {
			return
		}
		if rerr != nil {
			x.Reset(rerr)
			return
		}
	}
}

// writeBufs are the copy buffers of write: one per response would be the
// largest allocation of a routed call.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// Reset resets the downstream stream, as Envoy does when an error happens
// after the response started (or an upstream fails mid-body).
func (x *activeStream) Reset(err error) {
	x.log.Debug("resetting downstream stream", "error", err)
	panic(http.ErrAbortHandler)
}

func (x *activeStream) fmtCtx() *xdsconfig.FmtContext {
	proto := "HTTP/1.1"
	if x.r.ProtoMajor == 2 {
		proto = "HTTP/2"
	} else if x.r.ProtoMajor == 1 && x.r.ProtoMinor == 0 {
		proto = "HTTP/1.0"
	}
	name := ""
	if x.route != nil {
		name = x.route.Name
	}
	return &xdsconfig.FmtContext{
		ReqH: x.reqH, Flags: x.flags, Details: x.details, Meta: x.meta, Protocol: proto,
		Cluster: x.cluster, UpstreamHost: x.upstreamHost, RouteName: name, Start: x.start,
	}
}

// newRequestID returns a random UUID v4, as Envoy's default request ID
// extension generates.
func newRequestID() string { return uuid.NewString() }

// stringBytes is s as bytes without copying it, for writers that only read
// them (http.ResponseWriter.Write): a local reply's body can be megabytes.
func stringBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// readUpTo is io.ReadAll(io.LimitReader(r, n)): it reads r to its end or
// to n bytes, whichever comes first. With the length the headers announce
// (size; -1 when unknown) it reads into a buffer of that size instead of
// growing one from 512 bytes; a body longer than announced goes on the
// generic way, so the result never depends on the announcement.
func readUpTo(r io.Reader, n, size int64) ([]byte, error) {
	if size < 0 || size >= n {
		return io.ReadAll(io.LimitReader(r, n))
	}
	// One byte more than announced, so that the end is seen without
	// growing the buffer.
	buf := make([]byte, 0, size+1)
	for {
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			rest, err := io.ReadAll(io.LimitReader(r, n-int64(len(buf))))
			return append(buf, rest...), err
		}
	}
}

// contentLength is the content-length of h, -1 when absent or invalid.
func contentLength(h *headers.Map) int64 {
	v, ok := h.Get("content-length")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}
