package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// extProcFilter is a compiled envoy.filters.http.ext_proc configuration
// (ExternalProcessor). Field defaults follow ext_proc.proto.
type extProcFilter struct {
	name              string
	disabledByDefault bool // HttpFilter.disabled
	failureModeAllow  bool
	mode              *extprocfilterv3.ProcessingMode // normalized
	configuredMode    *extprocfilterv3.ProcessingMode // processing_mode as written
	messageTimeout    time.Duration
	maxMessageTimeout time.Duration // 0: override_message_timeout is ignored
	checker           *mutationChecker
	allowModeOverride bool
	allowedOverride   []*extprocfilterv3.ProcessingMode
	receiving         []string
	forwarding        []string
	routeCacheAction  extprocfilterv3.ExternalProcessor_RouteCacheAction
	disableImmediate  bool
	allowedHeaders    []*stringMatcher
	disallowedHeaders []*stringMatcher
	statusOnError     int
	allowCL           bool
	bodyWithoutWait   bool // send_body_without_waiting_for_header_response
	initialMetadata   metadata.MD
	// callOptions are the stream's on the data plane's own connection:
	// extProcCallOptions and the :authority Envoy's gRPC client sends,
	// envoy_grpc.authority or else the cluster name
	// (source/common/grpc/async_client_impl.cc AsyncStreamImpl::initialize).
	callOptions  []grpc.CallOption
	requestAttrs []string // request_attributes the emulation evaluates
	// ignored lists configured fields the emulation ignores; Apply logs them.
	ignored []string
}

func compileExtProc(name string, disabled bool, c *extprocfilterv3.ExternalProcessor) (*extProcFilter, error) {
	if c.GetGrpcService() == nil {
		return nil, errors.New("grpc_service is required (http_service is not emulated)")
	}
	if c.GetObservabilityMode() {
		return nil, errors.New("observability_mode is not emulated")
	}
	if c.GetDisableClearRouteCache() && c.GetRouteCacheAction() != extprocfilterv3.ExternalProcessor_DEFAULT {
		// FilterConfig constructor in ext_proc.cc.
		return nil, errors.New("disable_clear_route_cache and route_cache_action can not be set to none-default at the same time")
	}
	f := &extProcFilter{
		name:              name,
		disabledByDefault: disabled,
		failureModeAllow:  c.GetFailureModeAllow(),
		mode:              normalizeMode(c.GetProcessingMode()),
		configuredMode:    c.GetProcessingMode(),
		bodyWithoutWait:   c.GetSendBodyWithoutWaitingForHeaderResponse(),
		messageTimeout:    defaultMessageTimeout,
		allowModeOverride: c.GetAllowModeOverride(),
		allowedOverride:   c.GetAllowedOverrideModes(),
		receiving:         c.GetMetadataOptions().GetReceivingNamespaces().GetUntyped(),
		forwarding:        c.GetMetadataOptions().GetForwardingNamespaces().GetUntyped(),
		routeCacheAction:  c.GetRouteCacheAction(),
		disableImmediate:  c.GetDisableImmediateResponse(),
		statusOnError:     500,
		allowCL:           c.GetAllowContentLengthHeader(),
	}
	if err := checkBodyModes(f.mode); err != nil {
		return nil, err
	}
	for _, a := range c.GetRequestAttributes() {
		if slices.Contains(emulatedAttributes, a) {
			f.requestAttrs = append(f.requestAttrs, a)
		} else {
			f.ignored = append(f.ignored, "request_attributes "+a+" (only "+strings.Join(emulatedAttributes, ", ")+" are emulated)")
		}
	}
	if len(c.GetResponseAttributes()) > 0 {
		f.ignored = append(f.ignored, "response_attributes (not emulated)")
	}
	if c.GetSendBodyWithoutWaitingForHeaderResponse() {
		f.ignored = append(f.ignored, "send_body_without_waiting_for_header_response")
	}
	if c.GetProcessingRequestModifier() != nil || c.GetOnProcessingResponse() != nil {
		f.ignored = append(f.ignored, "processing_request_modifier/on_processing_response")
	}
	if c.GetDisableClearRouteCache() {
		f.routeCacheAction = extprocfilterv3.ExternalProcessor_RETAIN
	}
	if c.GetMessageTimeout() != nil {
		f.messageTimeout = c.GetMessageTimeout().AsDuration()
	}
	if c.GetMaxMessageTimeout() != nil {
		f.maxMessageTimeout = c.GetMaxMessageTimeout().AsDuration()
	}
	if s := c.GetStatusOnError(); s != nil && s.GetCode() != 0 {
		f.statusOnError = int(s.GetCode())
	}
	var err error
	if f.checker, err = compileMutationRules(c); err != nil {
		return nil, err
	}
	if f.allowedHeaders, err = compileListMatcher(c.GetForwardRules().GetAllowedHeaders()); err != nil {
		return nil, fmt.Errorf("forward_rules: %w", err)
	}
	if f.disallowedHeaders, err = compileListMatcher(c.GetForwardRules().GetDisallowedHeaders()); err != nil {
		return nil, fmt.Errorf("forward_rules: %w", err)
	}
	authority := c.GetGrpcService().GetEnvoyGrpc().GetAuthority()
	if authority == "" {
		authority = c.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	}
	f.callOptions = extProcCallOptions
	if authority != "" {
		f.callOptions = append(extProcCallOptions[:len(extProcCallOptions):len(extProcCallOptions)], grpc.CallAuthority(authority))
	}
	f.initialMetadata = metadata.MD{}
	for _, kv := range c.GetGrpcService().GetInitialMetadata() {
		v := kv.GetValue()
		if len(kv.GetRawValue()) > 0 {
			v = string(kv.GetRawValue())
		}
		f.initialMetadata.Append(kv.GetKey(), v)
	}
	return f, nil
}

func compileMutationRules(c *extprocfilterv3.ExternalProcessor) (*mutationChecker, error) {
	r := c.GetMutationRules()
	mc := &mutationChecker{
		allowAllRouting: r.GetAllowAllRouting().GetValue(),
		allowEnvoy:      r.GetAllowEnvoy().GetValue(),
		disallowSystem:  r.GetDisallowSystem().GetValue(),
		disallowAll:     r.GetDisallowAll().GetValue(),
		disallowIsError: r.GetDisallowIsError().GetValue(),
	}
	var err error
	if r.GetAllowExpression() != nil {
		if mc.allowExpr, err = compileRegex(r.GetAllowExpression()); err != nil {
			return nil, fmt.Errorf("mutation_rules allow_expression: %w", err)
		}
	}
	if r.GetDisallowExpression() != nil {
		if mc.disallowExpr, err = compileRegex(r.GetDisallowExpression()); err != nil {
			return nil, fmt.Errorf("mutation_rules disallow_expression: %w", err)
		}
	}
	return mc, nil
}

// copyMode copies the six modes of m, which each request changes in its own
// copy; proto.Clone would walk the message by reflection every time.
func copyMode(m *extprocfilterv3.ProcessingMode) *extprocfilterv3.ProcessingMode {
	c := &extprocfilterv3.ProcessingMode{}
	copyModeInto(c, m)
	return c
}

// copyModeInto is copyMode into an existing message.
func copyModeInto(dst, m *extprocfilterv3.ProcessingMode) {
	dst.RequestHeaderMode = m.GetRequestHeaderMode()
	dst.ResponseHeaderMode = m.GetResponseHeaderMode()
	dst.RequestBodyMode = m.GetRequestBodyMode()
	dst.ResponseBodyMode = m.GetResponseBodyMode()
	dst.RequestTrailerMode = m.GetRequestTrailerMode()
	dst.ResponseTrailerMode = m.GetResponseTrailerMode()
}

// normalizeMode copies a ProcessingMode; DEFAULT header modes mean SEND and
// DEFAULT trailer modes mean SKIP (processing_mode.proto).
func normalizeMode(m *extprocfilterv3.ProcessingMode) *extprocfilterv3.ProcessingMode {
	out := &extprocfilterv3.ProcessingMode{}
	if m != nil {
		out = proto.Clone(m).(*extprocfilterv3.ProcessingMode)
	}
	if out.RequestHeaderMode == extprocfilterv3.ProcessingMode_DEFAULT {
		out.RequestHeaderMode = extprocfilterv3.ProcessingMode_SEND
	}
	if out.ResponseHeaderMode == extprocfilterv3.ProcessingMode_DEFAULT {
		out.ResponseHeaderMode = extprocfilterv3.ProcessingMode_SEND
	}
	if out.RequestTrailerMode == extprocfilterv3.ProcessingMode_DEFAULT {
		out.RequestTrailerMode = extprocfilterv3.ProcessingMode_SKIP
	}
	if out.ResponseTrailerMode == extprocfilterv3.ProcessingMode_DEFAULT {
		out.ResponseTrailerMode = extprocfilterv3.ProcessingMode_SKIP
	}
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

// effectiveOverride is effectiveModeOverride in
// source/extensions/filters/http/ext_proc/ext_proc.cc (Envoy >= 1.34): the
// server's mode_override is filled in from the filter's configured
// processing_mode (as written, not merged with per-route overrides): a
// DEFAULT header or trailer mode in the override means "the configured one";
// both body modes are taken from the override as given (an unset body mode
// is NONE). The result is both what the allow-list is checked against and
// the new mode of both directions.
func effectiveOverride(configured, o *extprocfilterv3.ProcessingMode) *extprocfilterv3.ProcessingMode {
	n := &extprocfilterv3.ProcessingMode{}
	if configured != nil {
		n = proto.Clone(configured).(*extprocfilterv3.ProcessingMode)
	}
	if o.GetRequestHeaderMode() != extprocfilterv3.ProcessingMode_DEFAULT {
		n.RequestHeaderMode = o.GetRequestHeaderMode()
	}
	if o.GetResponseHeaderMode() != extprocfilterv3.ProcessingMode_DEFAULT {
		n.ResponseHeaderMode = o.GetResponseHeaderMode()
	}
	if o.GetRequestTrailerMode() != extprocfilterv3.ProcessingMode_DEFAULT {
		n.RequestTrailerMode = o.GetRequestTrailerMode()
	}
	if o.GetResponseTrailerMode() != extprocfilterv3.ProcessingMode_DEFAULT {
		n.ResponseTrailerMode = o.GetResponseTrailerMode()
	}
	n.RequestBodyMode = o.GetRequestBodyMode()
	n.ResponseBodyMode = o.GetResponseBodyMode()
	return n
}

// overrideAllowed is the allow-list check of Filter::onReceiveMessage
// (AllowedOverrideModesSet::isModeSupported,
// source/extensions/filters/http/ext_proc/allowed_override_modes_set.h):
// with allowed_override_modes configured, the *effective* override must
// equal one entry enum for enum in every field except request_header_mode.
// Nothing is normalized: an entry that leaves a field DEFAULT only matches
// an effective override whose field is DEFAULT too, so an entry listing
// only response_body_mode: STREAMED never matches when the configured mode
// sets the other fields.
func (f *extProcFilter) overrideAllowed(eff *extprocfilterv3.ProcessingMode) bool {
	if len(f.allowedOverride) == 0 {
		return true
	}
	for _, a := range f.allowedOverride {
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

// forward is MutationUtils::headerCanBeForwarded (forward_rules).
func (f *extProcFilter) forward(key string) bool {
	if len(f.disallowedHeaders) > 0 && matchAny(f.disallowedHeaders, key) {
		return false
	}
	return len(f.allowedHeaders) == 0 || matchAny(f.allowedHeaders, key)
}

// extProcPerRoute is a compiled ExtProcPerRoute.
type extProcPerRoute struct {
	disabled         bool
	mode             *extprocfilterv3.ProcessingMode
	receiving        []string
	hasReceiving     bool
	forwarding       []string
	hasForwarding    bool
	failureModeAllow *bool
	initialMetadata  metadata.MD
}

func compilePerFilterConfig(a *anypb.Any) (*perFilterConfig, error) {
	msg, err := a.UnmarshalNew()
	if err != nil {
		return nil, err
	}
	pf := &perFilterConfig{}
	if fc, ok := msg.(*routev3.FilterConfig); ok {
		pf.disabled = fc.GetDisabled()
		if fc.GetConfig() == nil {
			return pf, nil
		}
		if msg, err = fc.GetConfig().UnmarshalNew(); err != nil {
			return nil, err
		}
	}
	pr, ok := msg.(*extprocfilterv3.ExtProcPerRoute)
	if !ok {
		return nil, fmt.Errorf("unexpected per-route config %T for ext_proc", msg)
	}
	if err := pr.ValidateAll(); err != nil {
		return nil, err
	}
	c := &extProcPerRoute{disabled: pr.GetDisabled()}
	if o := pr.GetOverrides(); o != nil {
		if o.GetProcessingMode() != nil {
			c.mode = normalizeMode(o.GetProcessingMode())
			if err := checkBodyModes(c.mode); err != nil {
				return nil, err
			}
		}
		if ns := o.GetMetadataOptions().GetReceivingNamespaces(); ns != nil {
			c.receiving, c.hasReceiving = ns.GetUntyped(), true
		}
		if ns := o.GetMetadataOptions().GetForwardingNamespaces(); ns != nil {
			c.forwarding, c.hasForwarding = ns.GetUntyped(), true
		}
		if o.GetFailureModeAllow() != nil {
			v := o.GetFailureModeAllow().GetValue()
			c.failureModeAllow = &v
		}
		if len(o.GetGrpcInitialMetadata()) > 0 {
			c.initialMetadata = metadata.MD{}
			for _, kv := range o.GetGrpcInitialMetadata() {
				c.initialMetadata.Set(kv.GetKey(), kv.GetValue())
			}
		}
	}
	pf.perRoute = c
	return pf, nil
}

// mergePerRoute is FilterConfigPerRoute's merge constructor: the more
// specific config decides disabled; the other fields fall back to the less
// specific one when unset.
func mergePerRoute(less, more *extProcPerRoute) *extProcPerRoute {
	if less == nil {
		return more
	}
	if more == nil {
		return less
	}
	out := *more
	if more.disabled {
		out.mode = nil
	} else if out.mode == nil {
		out.mode = less.mode
	}
	if !out.hasReceiving {
		out.receiving, out.hasReceiving = less.receiving, less.hasReceiving
	}
	if !out.hasForwarding {
		out.forwarding, out.hasForwarding = less.forwarding, less.hasForwarding
	}
	if out.failureModeAllow == nil {
		out.failureModeAllow = less.failureModeAllow
	}
	md := metadata.Join(less.initialMetadata, more.initialMetadata)
	for k := range more.initialMetadata {
		md[k] = more.initialMetadata[k]
	}
	out.initialMetadata = md
	return &out
}

// perFilterConfig is one typed_per_filter_config entry for an ext_proc
// filter (ExtProcPerRoute, possibly wrapped in a route FilterConfig).
type perFilterConfig struct {
	disabled bool // FilterConfig.disabled
	perRoute *extProcPerRoute
}

func compilePerFilter(m map[string]*anypb.Any, filterNames map[string]bool) (map[string]*perFilterConfig, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := map[string]*perFilterConfig{}
	for name, a := range m {
		if !filterNames[name] {
			continue // configuration for a filter that is not in the chain
		}
		pf, err := compilePerFilterConfig(a)
		if err != nil {
			return nil, fmt.Errorf("typed_per_filter_config %q: %w", name, err)
		}
		out[name] = pf
	}
	return out, nil
}
