package dataplane

import (
	"crypto/tls"
	"maps"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/router"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// The stream as its ext_proc filters see it (extprocfilter.Callbacks), and
// the router filter's call (package router).

func (x *activeStream) RequestHeaders() *headers.Map { return x.reqH }

func (x *activeStream) HeaderLimits(h *headers.Map) (count, kb int) {
	if h == x.reqH {
		return x.cfg.HCM.MaxHeaders, x.cfg.HCM.MaxHeadersBytes >> 10
	}
	return rules.ResponseHeaderLimits(x.upstreamProto)
}

func (x *activeStream) ReplaceRequestBody(body []byte) { x.req = reqBody{buf: body, replaced: true} }

func (x *activeStream) ClearRouteCache() { x.routeValid = false }

func (x *activeStream) TLS() *tls.ConnectionState { return x.r.TLS }

// StreamIdleTimeout is the stream idle timeout: the matched route's
// idle_timeout, else the connection manager's stream_idle_timeout
// (rules.go, "Stream idle timeout").
func (x *activeStream) StreamIdleTimeout() time.Duration {
	if rt := x.currentRoute(); rt != nil && rt.IdleTimeout != nil {
		return *rt.IdleTimeout
	}
	return x.cfg.HCM.StreamIdleTimeout
}

func (x *activeStream) OnStreamIdleTimeout() {
	x.flags |= rules.FlagSI
	x.details = rules.DetailsStreamIdleTimeout
}

// SetDynamicMetadata merges one namespace into the stream's dynamic
// metadata (StreamInfo::setDynamicMetadata uses MergeFrom).
func (x *activeStream) SetDynamicMetadata(ns string, st *structpb.Struct) {
	if st == nil {
		return
	}
	cur, ok := x.meta[ns]
	if !ok {
		// The received struct itself, never written to: a later merge
		// into the namespace makes a new one.
		if x.meta == nil {
			x.meta = map[string]*structpb.Struct{}
		}
		x.meta[ns] = st
		return
	}
	merged := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(cur.GetFields())+len(st.GetFields()))}
	maps.Copy(merged.Fields, cur.GetFields())
	maps.Copy(merged.Fields, st.GetFields())
	x.meta[ns] = merged
}

// routeToCluster runs the router filter for a route with a cluster action
// (source/common/router/router.cc).
func (x *activeStream) routeToCluster(rt *xdsconfig.Route) {
	name := rt.PickCluster(x.reqH)
	cl := x.cfg.Clusters[name]
	if cl == nil {
		x.flags |= rules.FlagNC
		x.sendLocalReply(xdsconfig.LocalReply{Code: rt.NotFound, Details: rules.DetailsClusterNotFound}, true)
		return
	}
	x.cluster = name
	router.FinalizeRequestHeaders(x.reqH, rt, x.fmtCtx(), x.cfg.HCM.SuppressEnvoyHeaders)
	ctx, cancel := router.Context(x.ctx, rt)
	defer cancel()
	x.up = router.Call{Downstream: x.ctx, Log: x.log, Headers: x.reqH, Body: x.req.buf, Rest: x.req.rest}
	resp, lr := x.up.Forward(ctx, rt, cl)
	x.flags |= x.up.Flags
	x.upstreamHost = x.up.Host
	if lr != nil {
		x.sendLocalReply(*lr, true)
		return
	}
	if resp == nil {
		return // downstream went away
	}
	defer resp.Body.Close()
	x.encode(ctx, rt, resp)
}
