package xds

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Overrides is the SRE override file: cluster tuning that wins over the
// Portal's `cluster` objects without touching the Portal. Defaults apply to
// every Tool Service, Services to one each (keyed by Tool Service name);
// the merge order is built-in defaults < Portal < Defaults < Services[name].
// An override for a Tool Service the Portal does not list is kept (the
// service may come later) and logged by the server.
//
//	defaults:
//	  connectTimeout: 2s
//	services:
//	  weather:
//	    requestTimeout: 30s
//	    retryOn: [connect-failure, refused-stream]
//	    outlierDetection: {enabled: false}
type Overrides struct {
	Defaults *Tuning           `json:"defaults,omitempty"`
	Services map[string]Tuning `json:"services,omitempty"`
}

// LoadOverrides reads and validates an override file (see ParseOverrides).
func LoadOverrides(path string) (*Overrides, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read overrides: %w", err)
	}
	o, err := ParseOverrides(data)
	if err != nil {
		return nil, fmt.Errorf("overrides %s: %w", path, err)
	}
	return o, nil
}

// ParseOverrides decodes an override file written in YAML (or JSON),
// strictly: unknown fields, duplicate keys and wrongly typed values are
// errors naming the service and field. It then runs Validate. An empty
// document is an empty Overrides (no override in force).
func ParseOverrides(data []byte) (*Overrides, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("decode yaml: %w", err)
	}
	o := &Overrides{}
	if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
		return o, nil
	}
	var top struct {
		Defaults json.RawMessage            `json:"defaults"`
		Services map[string]json.RawMessage `json:"services"`
	}
	if err := decodeFields(js, &top); err != nil {
		return nil, err
	}
	var errs []error
	if len(top.Defaults) > 0 && string(top.Defaults) != "null" {
		o.Defaults = &Tuning{}
		if err := decodeFields(top.Defaults, o.Defaults); err != nil {
			errs = append(errs, atField("defaults", err))
		}
	}
	if top.Services != nil {
		o.Services = make(map[string]Tuning, len(top.Services))
	}
	for _, name := range sortedKeys(top.Services) {
		var t Tuning
		if err := decodeFields(top.Services[name], &t); err != nil {
			errs = append(errs, atField("services."+name, err))
			continue
		}
		o.Services[name] = t
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// decodeFields decodes a JSON object into the struct v points to,
// rejecting unknown fields. On failure it finds the first field at fault,
// descending into nested objects, so the error names it
// ("healthCheck.interval: invalid duration …").
func decodeFields(data []byte, v any) error {
	err := decodeStrict(data, v)
	if err == nil || !isObject(data) {
		return friendly(err)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return friendly(err)
	}
	rt := reflect.TypeOf(v).Elem()
	for _, k := range sortedKeys(fields) {
		f, ok := fieldByJSONName(rt, k)
		if !ok {
			return fmt.Errorf("unknown field %q", k)
		}
		raw := fields[k]
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct && isObject(raw) {
			if ferr := decodeFields(raw, reflect.New(f.Type.Elem()).Interface()); ferr != nil {
				return atField(k, ferr)
			}
			continue
		}
		if ferr := decodeStrict(raw, reflect.New(f.Type).Interface()); ferr != nil {
			return atField(k, friendly(ferr))
		}
	}
	return friendly(err)
}

// decodeStrict decodes one JSON value, rejecting unknown fields.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return nil
}

// fieldError is a decoding problem at a dotted field path.
type fieldError struct {
	path string
	err  error
}

func (e *fieldError) Error() string { return e.path + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// atField puts err at the field name, in front of the path it has.
func atField(name string, err error) error {
	if fe, ok := err.(*fieldError); ok {
		return &fieldError{path: name + "." + fe.path, err: fe.err}
	}
	return &fieldError{path: name, err: err}
}

func isObject(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) > 0 && t[0] == '{'
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// friendly rewords encoding/json's errors for people editing YAML.
func friendly(err error) error {
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return fmt.Errorf("got %s, want %s", te.Value, kindName(te.Type))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return err
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Uint32:
		return "a whole number from 0 to 4294967295"
	case reflect.Uint64:
		return "a whole number from 0"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list of " + strings.TrimPrefix(kindName(t.Elem()), "a ") + "s"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// Validate reports every problem of o at once (joined), each naming where
// it is: "defaults.connectTimeout: …" or "services.weather.retryOn[1]: …".
// A nil Overrides is valid.
func (o *Overrides) Validate() error {
	if o == nil {
		return nil
	}
	var errs []error
	if o.Defaults != nil {
		for _, err := range o.Defaults.check(true) {
			errs = append(errs, fmt.Errorf("defaults.%w", err))
		}
	}
	for _, name := range sortedKeys(o.Services) {
		if !validName(name) {
			errs = append(errs, fmt.Errorf("services.%s: tool service name must match [a-z0-9][a-z0-9-]{0,62}", name))
			continue
		}
		t := o.Services[name]
		for _, err := range t.check(false) {
			errs = append(errs, fmt.Errorf("services.%s.%w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Version is a short content hash of o, "" for no overrides (nil or
// empty). Equal overrides have equal versions however the file was
// formatted.
func (o *Overrides) Version() string {
	if o.empty() {
		return ""
	}
	k := o.key()
	return hex.EncodeToString(k[:8])
}

// key is the hash of o's canonical JSON (encoding/json sorts map keys); the
// zero key for no overrides.
func (o *Overrides) key() [sha256.Size]byte {
	if o.empty() {
		return [sha256.Size]byte{}
	}
	b, err := json.Marshal(o)
	if err != nil {
		// Tuning holds only strings, numbers and bools: unreachable.
		panic(fmt.Sprintf("encode overrides: %v", err))
	}
	return sha256.Sum256(b)
}

// BodyLimits returns the maxRequestBytes the overrides set: def for every
// Tool Service (the defaults layer; 0 when unset) and services for those
// whose own entry sets it. The Portal has no such field, so these are the
// effective per-service limits, each below the deployment-wide one.
func (o *Overrides) BodyLimits() (def uint64, services map[string]uint64) {
	if o == nil {
		return 0, nil
	}
	if o.Defaults != nil && o.Defaults.MaxRequestBytes != nil {
		def = *o.Defaults.MaxRequestBytes
	}
	for name, t := range o.Services {
		if t.MaxRequestBytes != nil {
			if services == nil {
				services = map[string]uint64{}
			}
			services[name] = *t.MaxRequestBytes
		}
	}
	return def, services
}

func (o *Overrides) empty() bool {
	return o == nil || (o.Defaults == nil && len(o.Services) == 0)
}

// service returns the per-service layer for name, nil when there is none.
func (o *Overrides) service(name string) *Tuning {
	if o == nil {
		return nil
	}
	if t, ok := o.Services[name]; ok {
		return &t
	}
	return nil
}

func (o *Overrides) defaults() *Tuning {
	if o == nil {
		return nil
	}
	return o.Defaults
}

// unknownServices returns the overridden services that no route lists,
// sorted.
func (o *Overrides) unknownServices(known map[string]bool) []string {
	if o == nil {
		return nil
	}
	var out []string
	for name := range o.Services {
		if !known[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}
