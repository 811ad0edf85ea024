package xds

import (
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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
