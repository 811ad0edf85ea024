package xds

import (
	"errors"
	"fmt"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"
)

// ValidateDeep checks m with its generated ValidateAll (Envoy's PGV rules)
// and then every message packed in an Any anywhere inside it (typed_config,
// typed_extension_protocol_options, …), recursively. ValidateAll alone
// stops at an Any, so the HTTP connection manager, ext_proc and TLS configs
// inside a listener or cluster would otherwise go unchecked until Envoy
// NACKs them. An Any whose type is not linked into the binary is an error
// too: Envoy would not know it either, or the test forgot an import.
// Every problem is reported, each prefixed with its field path.
func ValidateDeep(m proto.Message) error {
	var errs []error
	validateMessage(m, "", &errs)
	return errors.Join(errs...)
}

type validatorAll interface{ ValidateAll() error }

func validateMessage(m proto.Message, path string, errs *[]error) {
	if v, ok := m.(validatorAll); ok {
		if err := v.ValidateAll(); err != nil {
			*errs = append(*errs, prefixed(path, err))
		}
	}
	walkAnys(m.ProtoReflect(), path, errs)
}

// walkAnys descends into every set message field of msg and validates the
// contents of each Any it finds.
func walkAnys(msg protoreflect.Message, path string, errs *[]error) {
	msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := string(fd.Name())
		if path != "" {
			name = path + "." + name
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				return true
			}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				visit(mv.Message(), name+"["+strconv.Quote(k.String())+"]", errs)
				return true
			})
		case fd.IsList():
			if fd.Message() == nil {
				return true
			}
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				visit(l.Get(i).Message(), name+"["+strconv.Itoa(i)+"]", errs)
			}
		case fd.Message() != nil:
			visit(v.Message(), name, errs)
		}
		return true
	})
}

func visit(m protoreflect.Message, path string, errs *[]error) {
	a, ok := m.Interface().(*anypb.Any)
	if !ok {
		walkAnys(m, path, errs)
		return
	}
	inner, err := a.UnmarshalNew()
	if err != nil {
		*errs = append(*errs, prefixed(path, fmt.Errorf("unpack %s: %w", a.GetTypeUrl(), err)))
		return
	}
	validateMessage(inner, path+"<"+string(inner.ProtoReflect().Descriptor().FullName())+">", errs)
}

func prefixed(path string, err error) error {
	if path == "" {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// DeprecatedFields lists the set fields and enum values of m, and of every
// message packed in an Any inside it, that the Envoy API marks deprecated
// (the proto option `deprecated`, which go-control-plane keeps in the
// descriptors). Envoy accepts most of them with a warning but rejects them
// once they are removed, and several are ignored when their replacement is
// set. Each entry is a field path, like ValidateDeep's.
func DeprecatedFields(m proto.Message) []string {
	var out []string
	deprecatedIn(m.ProtoReflect(), "", &out)
	return out
}

func deprecatedIn(msg protoreflect.Message, path string, out *[]string) {
	if a, ok := msg.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return // ValidateDeep reports it
		}
		deprecatedIn(inner.ProtoReflect(), path+"<"+string(inner.ProtoReflect().Descriptor().FullName())+">", out)
		return
	}
	msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := string(fd.Name())
		if path != "" {
			name = path + "." + name
		}
		if isDeprecated(fd.Options()) {
			*out = append(*out, name)
		}
		switch {
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				elem := name + "[" + strconv.Quote(k.String()) + "]"
				if fd.MapValue().Message() != nil {
					deprecatedIn(mv.Message(), elem, out)
				} else if fd.MapValue().Enum() != nil {
					deprecatedEnum(fd.MapValue(), mv.Enum(), elem, out)
				}
				return true
			})
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				elem := name + "[" + strconv.Itoa(i) + "]"
				if fd.Message() != nil {
					deprecatedIn(l.Get(i).Message(), elem, out)
				} else if fd.Enum() != nil {
					deprecatedEnum(fd, l.Get(i).Enum(), elem, out)
				}
			}
		case fd.Message() != nil:
			deprecatedIn(v.Message(), name, out)
		case fd.Enum() != nil:
			deprecatedEnum(fd, v.Enum(), name, out)
		}
		return true
	})
}

func deprecatedEnum(fd protoreflect.FieldDescriptor, n protoreflect.EnumNumber, path string, out *[]string) {
	if ev := fd.Enum().Values().ByNumber(n); ev != nil && isDeprecated(ev.Options()) {
		*out = append(*out, path+"="+string(ev.Name()))
	}
}

// isDeprecated reads the `deprecated` option of a field or enum value.
func isDeprecated(opts proto.Message) bool {
	switch o := opts.(type) {
	case *descriptorpb.FieldOptions:
		return o.GetDeprecated()
	case *descriptorpb.EnumValueOptions:
		return o.GetDeprecated()
	}
	return false
}

// LegacyDNS lists the DNS settings c makes on the Cluster itself although
// Envoy wants them in the DNS cluster extension (cluster_type
// envoy.cluster.dns with DnsCluster): type STRICT_DNS or LOGICAL_DNS, and
// dns_lookup_family, which cluster.proto calls deprecated for DNS clusters
// in its comment only, so DeprecatedFields does not see it.
func LegacyDNS(c *clusterv3.Cluster) []string {
	var out []string
	switch c.GetType() {
	case clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		if c.GetClusterType() == nil {
			out = append(out, "type="+c.GetType().String())
		}
	}
	if c.GetDnsLookupFamily() != clusterv3.Cluster_AUTO {
		out = append(out, "dns_lookup_family="+c.GetDnsLookupFamily().String())
	}
	return out
}
