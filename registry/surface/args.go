package surface

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Arguments rewrites the arguments of a call to a virtual tool into the
// arguments the real tool receives. It is immutable and safe for
// concurrent use.
type Arguments struct {
	hidden   map[string]bool // refused when a client sends them (hidden and fixed)
	fixed    []member        // always sent
	defaults []member        // sent when the client leaves them out
}

type member struct {
	name  string
	value []byte // compact JSON
}

// ArgumentError is a call's argument that the virtual tool refuses; the
// gateway answers it as invalid params naming Name.
type ArgumentError struct {
	Name   string
	Reason string
}

func (e *ArgumentError) Error() string {
	if e.Name == "" {
		return "arguments: " + e.Reason
	}
	return fmt.Sprintf("argument %q: %s", e.Name, e.Reason)
}

// Hidden reports the arguments a client may not send, sorted.
func (a *Arguments) Hidden() []string { return sortedNames(a.hidden) }

// Rewrite returns args (a JSON object, or empty or null for none) with the
// fixed arguments and the missing defaults added. A client's argument that
// the override hides or fixes is refused, as is a name given twice: the
// upstream must receive exactly what the gateway checked.
func (a *Arguments) Rewrite(args json.RawMessage) (json.RawMessage, error) {
	if a == nil {
		return args, nil
	}
	members, err := splitObject(args)
	if err != nil {
		return nil, err
	}
	present := make(map[string]bool, len(members))
	for _, m := range members {
		if present[m.name] {
			return nil, &ArgumentError{Name: m.name, Reason: "given more than once"}
		}
		present[m.name] = true
		if a.hidden[m.name] {
			return nil, &ArgumentError{Name: m.name, Reason: "not accepted by this tool"}
		}
	}
	out := members
	out = append(out, a.fixed...)
	for _, d := range a.defaults {
		if !present[d.name] {
			out = append(out, d)
		}
	}
	return joinObject(out), nil
}

// splitObject returns the members of a JSON object in order, values as
// written (compacted).
func splitObject(raw json.RawMessage) ([]member, error) {
	if b := bytes.TrimSpace(raw); len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, &ArgumentError{Reason: "must be a JSON object"}
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, &ArgumentError{Reason: "invalid JSON: " + err.Error()}
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, &ArgumentError{Name: name, Reason: "invalid JSON: " + err.Error()}
		}
		out = append(out, member{name, compactJSON(v)})
	}
	if _, err := dec.Token(); err != nil {
		return nil, &ArgumentError{Reason: "invalid JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &ArgumentError{Reason: "more than one JSON value"}
	}
	return out, nil
}

func joinObject(ms []member) json.RawMessage {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := marshalCompact(m.name)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(m.value)
	}
	buf.WriteByte('}')
	return buf.Bytes()
}
