package xdsconfig

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// ExtProcCallOptions lift grpc-go's 4 MiB receive limit: Envoy's gRPC
// client has none unless max_receive_message_length is set
// (api/envoy/config/core/v3/grpc_service.proto,
// GrpcService.EnvoyGrpc.max_receive_message_length: "Defaults to 0, which
// means unlimited"); math.MaxInt32 is grpc-go's largest. Made once, as
// each option is an allocation; compileExtProc adds the stream's
// :authority for the data plane's own connection.
var ExtProcCallOptions = []grpc.CallOption{grpc.MaxCallRecvMsgSize(math.MaxInt32)}

// ExtProcFilter is a compiled envoy.filters.http.ext_proc configuration
// (ExternalProcessor). Field defaults follow ext_proc.proto.
type ExtProcFilter struct {
	Name              string
	DisabledByDefault bool // HttpFilter.disabled
	FailureModeAllow  bool
	Mode              *extprocfilterv3.ProcessingMode // normalized
	ConfiguredMode    *extprocfilterv3.ProcessingMode // processing_mode as written
	MessageTimeout    time.Duration
	MaxMessageTimeout time.Duration // 0: override_message_timeout is ignored
	Checker           *rules.MutationChecker
	AllowModeOverride bool
	AllowedOverride   []*extprocfilterv3.ProcessingMode
	Receiving         []string
	RouteCacheAction  extprocfilterv3.ExternalProcessor_RouteCacheAction
	DisableImmediate  bool
	StatusOnError     int
	AllowCL           bool
	BodyWithoutWait   bool // send_body_without_waiting_for_header_response
	InitialMetadata   metadata.MD
	// CallOptions are the stream's on the data plane's own connection:
	// ExtProcCallOptions and the :authority Envoy's gRPC client sends,
	// envoy_grpc.authority or else the cluster name
	// (source/common/grpc/async_client_impl.cc AsyncStreamImpl::initialize).
	CallOptions  []grpc.CallOption
	RequestAttrs []string // request_attributes the emulation evaluates
	// Ignored lists configured fields the emulation ignores; Apply logs them.
	Ignored []string
}

func compileExtProc(name string, disabled bool, c *extprocfilterv3.ExternalProcessor) (*ExtProcFilter, error) {
	if c.GetGrpcService() == nil {
		return nil, errors.New("grpc_service is required (http_service is not emulated)")
	}
	if c.GetObservabilityMode() || c.GetForwardRules() != nil || c.GetMetadataOptions().GetForwardingNamespaces() != nil {
		return nil, errors.New("observability_mode, forward_rules and metadata_options.forwarding_namespaces are not emulated")
	}
	if c.GetDisableClearRouteCache() && c.GetRouteCacheAction() != extprocfilterv3.ExternalProcessor_DEFAULT {
		// FilterConfig constructor in ext_proc.cc.
		return nil, errors.New("disable_clear_route_cache and route_cache_action can not be set to none-default at the same time")
	}
	f := &ExtProcFilter{
		Name:              name,
		DisabledByDefault: disabled,
		FailureModeAllow:  c.GetFailureModeAllow(),
		Mode:              NormalizeMode(c.GetProcessingMode()),
		ConfiguredMode:    c.GetProcessingMode(),
		BodyWithoutWait:   c.GetSendBodyWithoutWaitingForHeaderResponse(),
		MessageTimeout:    rules.DefaultMessageTimeout,
		AllowModeOverride: c.GetAllowModeOverride(),
		AllowedOverride:   c.GetAllowedOverrideModes(),
		Receiving:         c.GetMetadataOptions().GetReceivingNamespaces().GetUntyped(),
		RouteCacheAction:  c.GetRouteCacheAction(),
		DisableImmediate:  c.GetDisableImmediateResponse(),
		StatusOnError:     500,
		AllowCL:           c.GetAllowContentLengthHeader(),
	}
	if err := checkBodyModes(f.Mode); err != nil {
		return nil, err
	}
	f.compileIgnored(c)
	if c.GetDisableClearRouteCache() {
		f.RouteCacheAction = extprocfilterv3.ExternalProcessor_RETAIN
	}
	if c.GetMessageTimeout() != nil {
		f.MessageTimeout = c.GetMessageTimeout().AsDuration()
	}
	f.MaxMessageTimeout = c.GetMaxMessageTimeout().AsDuration() // unset: 0
	if s := c.GetStatusOnError(); s != nil && s.GetCode() != 0 {
		f.StatusOnError = int(s.GetCode())
	}
	var err error
	if f.Checker, err = compileMutationRules(c); err != nil {
		return nil, err
	}
	f.compileGRPCService(c.GetGrpcService())
	return f, nil
}

// compileIgnored keeps the request attributes the data plane emulates and
// lists the fields it accepts but ignores, which Apply logs.
func (f *ExtProcFilter) compileIgnored(c *extprocfilterv3.ExternalProcessor) {
	for _, a := range c.GetRequestAttributes() {
		if slices.Contains(rules.EmulatedAttributes, a) {
			f.RequestAttrs = append(f.RequestAttrs, a)
		} else {
			f.Ignored = append(f.Ignored, "request_attributes "+a+" (only "+strings.Join(rules.EmulatedAttributes, ", ")+" are emulated)")
		}
	}
	if len(c.GetResponseAttributes()) > 0 {
		f.Ignored = append(f.Ignored, "response_attributes (not emulated)")
	}
	if c.GetSendBodyWithoutWaitingForHeaderResponse() {
		f.Ignored = append(f.Ignored, "send_body_without_waiting_for_header_response")
	}
	if c.GetProcessingRequestModifier() != nil || c.GetOnProcessingResponse() != nil {
		f.Ignored = append(f.Ignored, "processing_request_modifier/on_processing_response")
	}
}

// compileGRPCService sets the call options and initial metadata of the
// filter's gRPC streams: the :authority is the envoy_grpc authority, or the
// cluster name when that is unset (rules_extproc.go).
func (f *ExtProcFilter) compileGRPCService(g *corev3.GrpcService) {
	authority := g.GetEnvoyGrpc().GetAuthority()
	if authority == "" {
		authority = g.GetEnvoyGrpc().GetClusterName()
	}
	f.CallOptions = ExtProcCallOptions
	if authority != "" {
		f.CallOptions = append(ExtProcCallOptions[:len(ExtProcCallOptions):len(ExtProcCallOptions)], grpc.CallAuthority(authority))
	}
	f.InitialMetadata = metadata.MD{}
	for _, kv := range g.GetInitialMetadata() {
		v := kv.GetValue()
		if len(kv.GetRawValue()) > 0 {
			v = string(kv.GetRawValue())
		}
		f.InitialMetadata.Append(kv.GetKey(), v)
	}
}

func compileMutationRules(c *extprocfilterv3.ExternalProcessor) (*rules.MutationChecker, error) {
	r := c.GetMutationRules()
	mc := &rules.MutationChecker{
		AllowAllRouting: r.GetAllowAllRouting().GetValue(),
		AllowEnvoy:      r.GetAllowEnvoy().GetValue(),
		DisallowSystem:  r.GetDisallowSystem().GetValue(),
		DisallowAll:     r.GetDisallowAll().GetValue(),
		DisallowIsError: r.GetDisallowIsError().GetValue(),
	}
	var err error
	if r.GetAllowExpression() != nil {
		if mc.AllowExpr, err = compileRegex(r.GetAllowExpression()); err != nil {
			return nil, fmt.Errorf("mutation_rules allow_expression: %w", err)
		}
	}
	if r.GetDisallowExpression() != nil {
		if mc.DisallowExpr, err = compileRegex(r.GetDisallowExpression()); err != nil {
			return nil, fmt.Errorf("mutation_rules disallow_expression: %w", err)
		}
	}
	return mc, nil
}

// CopyModeInto copies the six modes of m into dst, which each request
// changes in its own copy; proto.Clone would walk the message by reflection
// every time.
func CopyModeInto(dst, m *extprocfilterv3.ProcessingMode) {
	dst.RequestHeaderMode = m.GetRequestHeaderMode()
	dst.ResponseHeaderMode = m.GetResponseHeaderMode()
	dst.RequestBodyMode = m.GetRequestBodyMode()
	dst.ResponseBodyMode = m.GetResponseBodyMode()
	dst.RequestTrailerMode = m.GetRequestTrailerMode()
	dst.ResponseTrailerMode = m.GetResponseTrailerMode()
}

// NormalizeMode copies a ProcessingMode; DEFAULT header modes mean SEND and
// DEFAULT trailer modes mean SKIP (processing_mode.proto).
func NormalizeMode(m *extprocfilterv3.ProcessingMode) *extprocfilterv3.ProcessingMode {
	out := &extprocfilterv3.ProcessingMode{}
	CopyModeInto(out, m)
	out.RequestHeaderMode = cmp.Or(out.RequestHeaderMode, extprocfilterv3.ProcessingMode_SEND)
	out.ResponseHeaderMode = cmp.Or(out.ResponseHeaderMode, extprocfilterv3.ProcessingMode_SEND)
	out.RequestTrailerMode = cmp.Or(out.RequestTrailerMode, extprocfilterv3.ProcessingMode_SKIP)
	out.ResponseTrailerMode = cmp.Or(out.ResponseTrailerMode, extprocfilterv3.ProcessingMode_SKIP)
	return out
}

func checkBodyModes(m *extprocfilterv3.ProcessingMode) error {
	for _, b := range []extprocfilterv3.ProcessingMode_BodySendMode{m.GetRequestBodyMode(), m.GetResponseBodyMode()} {
		switch b {
		case extprocfilterv3.ProcessingMode_NONE, extprocfilterv3.ProcessingMode_STREAMED,
			extprocfilterv3.ProcessingMode_BUFFERED, extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL:
		default:
			return fmt.Errorf("body mode %v is not emulated", b)
		}
	}
	return nil
}

// EffectiveOverride is effectiveModeOverride in
// source/extensions/filters/http/ext_proc/ext_proc.cc (Envoy >= 1.34): the
// server's mode_override is filled in from the filter's configured
// processing_mode (as written, not merged with per-route overrides): a
// DEFAULT header or trailer mode in the override means "the configured one";
// both body modes are taken from the override as given (an unset body mode
// is NONE). The result is both what the allow-list is checked against and
// the new mode of both directions.
func EffectiveOverride(configured, o *extprocfilterv3.ProcessingMode) *extprocfilterv3.ProcessingMode {
	n := &extprocfilterv3.ProcessingMode{}
	CopyModeInto(n, configured)
	n.RequestHeaderMode = cmp.Or(o.GetRequestHeaderMode(), n.RequestHeaderMode)
	n.ResponseHeaderMode = cmp.Or(o.GetResponseHeaderMode(), n.ResponseHeaderMode)
	n.RequestTrailerMode = cmp.Or(o.GetRequestTrailerMode(), n.RequestTrailerMode)
	n.ResponseTrailerMode = cmp.Or(o.GetResponseTrailerMode(), n.ResponseTrailerMode)
	n.RequestBodyMode = o.GetRequestBodyMode()
	n.ResponseBodyMode = o.GetResponseBodyMode()
	return n
}

// OverrideAllowed is the allow-list check of Filter::onReceiveMessage
// (AllowedOverrideModesSet::isModeSupported,
// source/extensions/filters/http/ext_proc/allowed_override_modes_set.h):
// with allowed_override_modes configured, the *effective* override must
// equal one entry enum for enum in every field except request_header_mode.
// Nothing is normalized: an entry that leaves a field DEFAULT only matches
// an effective override whose field is DEFAULT too, so an entry listing
// only response_body_mode: STREAMED never matches when the configured mode
// sets the other fields.
func (f *ExtProcFilter) OverrideAllowed(eff *extprocfilterv3.ProcessingMode) bool {
	if len(f.AllowedOverride) == 0 {
		return true
	}
	for _, a := range f.AllowedOverride {
		if a.GetResponseHeaderMode() == eff.GetResponseHeaderMode() &&
			a.GetRequestBodyMode() == eff.GetRequestBodyMode() &&
			a.GetResponseBodyMode() == eff.GetResponseBodyMode() &&
			a.GetRequestTrailerMode() == eff.GetRequestTrailerMode() &&
			a.GetResponseTrailerMode() == eff.GetResponseTrailerMode() {
			return true
		}
	}
	return false
}

// rejectPerFilter NACKs a typed_per_filter_config entry for one of the
// chain's ext_proc filters: toolmesh's routes carry none, and the
// per-route merge (Filter::mergePerRouteConfig) is not emulated. Entries
// for filters not in the chain are ignored, as Envoy ignores them.
func rejectPerFilter(m map[string]*anypb.Any, filterNames map[string]bool) error {
	for name := range m {
		if filterNames[name] {
			return fmt.Errorf("typed_per_filter_config %q: per-route ext_proc configuration is not emulated", name)
		}
	}
	return nil
}
