package app

import (
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/redisstore"
)

// configReference is the page that documents every config key.
const configReference = "../../docs/config.md"

// referenceRow is one key of the reference page.
type referenceRow struct {
	key, flag, def string
	line           int
}

// readReference parses the keys table of docs/config.md.
func readReference(t *testing.T) []referenceRow {
	t.Helper()
	data, err := os.ReadFile(configReference)
	if err != nil {
		t.Fatal(err)
	}
	var rows []referenceRow
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.SplitN(line, "|", 5) // "", key, flag, default, meaning...
		if len(cells) < 5 {
			t.Fatalf("%s:%d: want | key | flag | default | meaning |", configReference, i+1)
		}
		cell := func(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }
		rows = append(rows, referenceRow{key: cell(cells[1]), flag: cell(cells[2]), def: cell(cells[3]), line: i + 1})
	}
	return rows
}

// TestConfigReference keeps docs/config.md and Config in step: the same
// keys, the default the code has, and flags that exist and set their key.
func TestConfigReference(t *testing.T) {
	rows := readReference(t)
	typ := reflect.TypeFor[Config]()
	def := reflect.ValueOf(defaultConfig())
	fields := map[string][]int{} // json key → field index
	for _, f := range configKeys() {
		fields[strings.Split(f.Tag.Get("json"), ",")[0]] = f.Index
	}
	// Zero in defaultConfig, defaulted where the value is used.
	elsewhere := map[string]string{
		"redisPrefix":  redisstore.DefaultRedisPrefix,
		"redisTimeout": redisstore.DefaultRedisOpTimeout.String(),
		// Unset fields of the listingBounds section: the built-in bounds.
		"listingBounds.tools":             strconv.Itoa(registry.DefaultListingItems),
		"listingBounds.resources":         strconv.Itoa(registry.DefaultListingItems),
		"listingBounds.resourceTemplates": strconv.Itoa(registry.DefaultListingItems),
		"listingBounds.prompts":           strconv.Itoa(registry.DefaultListingItems),
		"listingBounds.bytes":             strconv.Itoa(registry.DefaultListingBytes),
	}

	all := pflag.NewFlagSet("all", pflag.ContinueOnError)
	bindFlags(all, flagSet{portal: true, listen: true, extproc: true, xds: true, envoyListen: true})
	documentedFlags := map[string]bool{"config": true}

	seen := map[string]bool{}
	sections := map[string]bool{} // keys documented as section.key
	for _, r := range rows {
		where := configReference + ":" + strconv.Itoa(r.line) + ": " + r.key
		// A section (a pointer to a struct, off when unset) is documented
		// key by key as section.key.
		key, subKey, nested := strings.Cut(r.key, ".")
		i, ok := fields[key]
		if !ok {
			t.Errorf("%s: no such key in Config", where)
			continue
		}
		if seen[r.key] {
			t.Errorf("%s: listed twice", where)
		}
		seen[r.key], seen[key] = true, true
		var sub []int
		defVal := def.FieldByIndex(i)
		if nested {
			sections[key] = true
			st := typ.FieldByIndex(i).Type
			if st.Kind() != reflect.Pointer || st.Elem().Kind() != reflect.Struct || !def.FieldByIndex(i).IsNil() {
				t.Errorf("%s: %s is not a section that is unset by default", where, key)
				continue
			}
			sf, ok := jsonField(st.Elem(), subKey)
			if !ok {
				t.Errorf("%s: no such key in %s", where, st.Elem().Name())
				continue
			}
			sub, defVal = sf.Index, reflect.Zero(sf.Type)
		}
		if err := sameDefault(defVal, r.def, elsewhere[r.key]); err != "" {
			t.Errorf("%s: default %q, but the code's is %s", where, r.def, err)
		}
		if r.flag != "" {
			name := strings.TrimPrefix(r.flag, "--")
			documentedFlags[name] = true
			if err := flagSets(all, name, r.key, i, sub); err != "" {
				t.Errorf("%s: flag %s: %s", where, r.flag, err)
			}
		}
	}
	for key, i := range fields {
		if !seen[key] {
			t.Errorf("%s: key %q of Config is not documented", configReference, key)
		}
		if !sections[key] {
			continue
		}
		st := typ.FieldByIndex(i).Type.Elem()
		for j := range st.NumField() {
			sk := key + "." + strings.Split(st.Field(j).Tag.Get("json"), ",")[0]
			if !seen[sk] {
				t.Errorf("%s: key %q of Config is not documented", configReference, sk)
			}
		}
	}
	all.VisitAll(func(f *pflag.Flag) {
		if !documentedFlags[f.Name] {
			t.Errorf("%s: flag --%s is not listed with its key", configReference, f.Name)
		}
	})
}

// sameDefault compares a documented default with the field's value v in
// defaultConfig ("" when they agree, else the code's value). alt is the
// default applied elsewhere for a field that is zero here.
func sameDefault(v reflect.Value, doc, alt string) string {
	if v.IsZero() && alt != "" {
		if doc != alt {
			return strconv.Quote(alt)
		}
		return ""
	}
	if v.IsZero() && v.Kind() != reflect.Bool {
		if doc != "—" {
			return "unset (—)"
		}
		return ""
	}
	switch x := v.Interface().(type) {
	case config.Duration:
		if d, err := time.ParseDuration(doc); err != nil || d != x.D() {
			return x.D().String()
		}
	case string:
		if doc != x {
			return strconv.Quote(x)
		}
	case deadlineMode:
		if doc != string(x) {
			return strconv.Quote(string(x))
		}
	case int64:
		if n, err := strconv.ParseInt(doc, 10, 64); err != nil || n != x {
			return strconv.FormatInt(x, 10)
		}
	case int:
		if n, err := strconv.Atoi(doc); err != nil || n != x {
			return strconv.Itoa(x)
		}
	case bool:
		if doc != strconv.FormatBool(x) {
			return strconv.FormatBool(x)
		}
	default:
		return "of a type this test cannot compare: " + v.Type().String()
	}
	return ""
}

// jsonField is the field of struct type st whose JSON name is key.
func jsonField(st reflect.Type, key string) (reflect.StructField, bool) {
	for j := range st.NumField() {
		if f := st.Field(j); strings.Split(f.Tag.Get("json"), ",")[0] == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// configKeys are the fields of Config that are keys of the config file:
// its own and those of its inlined blocks.
func configKeys() []reflect.StructField {
	var keys []reflect.StructField
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Config]()) {
		if !f.Anonymous {
			keys = append(keys, f)
		}
	}
	return keys
}

// flagSets checks that flag name exists and that setting it changes the
// field at index i, the documented key, and no other; for a section key,
// sub is the index of its field in the section, which must be set.
func flagSets(all *pflag.FlagSet, name, key string, i []int, sub []int) string {
	f := all.Lookup(name)
	if f == nil {
		return "no such flag"
	}
	sample := map[string]string{"string": "x", "duration": "7s", "int64": "7", "stringSlice": "a,b",
		"bool": "true", "float64": "0.5", "stringToString": "a=b"}[f.Value.Type()]
	if sample == "" {
		return "a flag type this test cannot set: " + f.Value.Type()
	}
	fs := pflag.NewFlagSet("one", pflag.ContinueOnError)
	bindFlags(fs, flagSet{portal: true, listen: true, extproc: true, xds: true, envoyListen: true})
	if err := fs.Set(name, sample); err != nil {
		return err.Error()
	}
	cfg := defaultConfig()
	if err := applyFlags(fs, &cfg); err != nil {
		return err.Error()
	}
	got, want := reflect.ValueOf(cfg), reflect.ValueOf(defaultConfig())
	var changed [][]int
	for _, f := range configKeys() {
		if !reflect.DeepEqual(got.FieldByIndex(f.Index).Interface(), want.FieldByIndex(f.Index).Interface()) {
			changed = append(changed, f.Index)
		}
	}
	if len(changed) != 1 || !slices.Equal(changed[0], i) {
		return "does not set " + key + " (alone)"
	}
	if sub != nil && got.FieldByIndex(i).Elem().FieldByIndex(sub).IsZero() {
		return "does not set " + key
	}
	return ""
}
