package filters

import (
	"encoding/json"
	"slices"
)

// Filter types. The built-ins are implemented in this package; "wasm" loads
// a WebAssembly module (see package filters/wasm).
const (
	TypeInputSchema       = "input_schema"       // validate arguments against the tool's inputSchema
	TypeToolACL           = "tool_acl"           // allow/deny tool names by glob
	TypeArgumentSize      = "argument_size"      // limit the size of the arguments object
	TypeHeaderPropagation = "header_propagation" // copy client headers to the Tool Service
	TypeRedact            = "redact"             // redact result fields by JSON pointer or regexp
	TypeWasm              = "wasm"               // a WebAssembly filter module
)

// filterType builds one kind of filter from its definition. b is nil when
// the configuration is only being validated: build must then parse and check
// everything but load nothing.
type filterType func(b *builder, d Definition) (Filter, error)

// types is the table of filter types. It is the only registry: there is no
// init-time registration, so nothing depends on import order.
var types = map[string]filterType{
	TypeInputSchema:       newInputSchema,
	TypeToolACL:           newToolACL,
	TypeArgumentSize:      newArgumentSize,
	TypeHeaderPropagation: newHeaderPropagation,
	TypeRedact:            newRedact,
	TypeWasm:              newWasmFilter,
}

func (t filterType) validate(raw json.RawMessage) error {
	_, err := t(nil, Definition{Name: "validate", Config: raw})
	return err
}

// Types returns the known filter types, sorted.
func Types() []string {
	out := make([]string, 0, len(types))
	for t := range types {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}
