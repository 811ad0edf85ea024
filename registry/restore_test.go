package registry

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/mcp"
)

const badSchema = `{"type":"object","properties":5}`

// schemaRoute is a route whose manifest has a good tool, a tool whose schema
// fails to compile, and a second good tool with the first one's schema.
func schemaRoute(t testing.TB, key string) (Route, map[string]*Manifest) {
	t.Helper()
	good := `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`
	m := mustManifest(t, `{"tools":[
		{"name":"good","inputSchema":`+good+`},
		{"name":"bad","inputSchema":`+badSchema+`},
		{"name":"twin","inputSchema":`+good+`}
	]}`)
	return Route{Key: key, ToolServices: []ToolService{{Name: "s", URL: "http://s"}}}, map[string]*Manifest{"s": m}
}

func buildSchemaRoute(t testing.TB, key string) *Snapshot {
	t.Helper()
	r, ms := schemaRoute(t, key)
	return mustBuild(t, r, ms)
}

func storedForm(t testing.TB, s *Snapshot) map[string]json.RawMessage {
	t.Helper()
	data, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]json.RawMessage
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func fromStored(t testing.TB, st map[string]json.RawMessage) (*Snapshot, error) {
	t.Helper()
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return UnmarshalSnapshot(data)
}

func TestUnmarshalSnapshotKeepsSchemaRejections(t *testing.T) {
	orig := buildSchemaRoute(t, "r")
	if len(orig.Rejected) != 1 || orig.Rejected[0].Name != "bad" || !strings.Contains(orig.Rejected[0].Reason, "inputSchema: ") {
		t.Fatalf("fixture: rejected = %+v", orig.Rejected)
	}
	st := storedForm(t, orig)
	if got := string(st["schemaErrors"]); !strings.Contains(got, `"s":[{"index":1,`) {
		t.Errorf("stored schemaErrors = %s, want entry 1 of service s", got)
	}
	got, err := fromStored(t, st)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Rejected, orig.Rejected) || !slices.Equal(toolNames(got), []string{"good", "twin"}) {
		t.Errorf("restored rejected %+v tools %q", got.Rejected, toolNames(got))
	}
	good, _ := got.Lookup("good")
	if msgs := good.ValidateArguments(json.RawMessage(`{"n":"x"}`)); !slices.Equal(msgs, []string{"arguments/n: got string, want integer"}) {
		t.Errorf("restored validator: %q", msgs)
	}
}

// A snapshot restored from a store compiles no schema: an entry that the
// stored form does not list as rejected is served even if its schema would
// not compile, and a call to it is answered with a validation message.
func TestUnmarshalSnapshotLazySchemaFailure(t *testing.T) {
	st := storedForm(t, buildSchemaRoute(t, "r"))
	delete(st, "schemaErrors") // as if this build disagreed with the one that stored it
	got, err := fromStored(t, st)
	if err != nil {
		t.Fatalf("UnmarshalSnapshot() = %v", err)
	}
	bad, res := got.Lookup("bad")
	if res != mcp.ToolFound || len(got.Rejected) != 0 {
		t.Fatalf("restore compiled the schema: bad = %v, rejected %+v", res, got.Rejected)
	}
	var wg sync.WaitGroup
	msgs := make([][]string, 8)
	for i := range msgs {
		wg.Go(func() { msgs[i] = bad.ValidateArguments(json.RawMessage(`{}`)) })
	}
	wg.Wait()
	for _, m := range msgs {
		if len(m) != 1 || !strings.HasPrefix(m[0], "arguments cannot be checked: the tool's inputSchema does not compile: ") {
			t.Fatalf("ValidateArguments = %q", m)
		}
	}

	// The refresh rebuilds it although its inputs did not change, and the
	// rebuilt snapshot rejects the entry.
	r, ms := schemaRoute(t, "r")
	out, err := Rebuild(r, got, ms, t0)
	if err != nil || out == nil || out.Version != got.Version {
		t.Fatalf("Rebuild() = %v, %v; want a rebuild of the same version", out, err)
	}
	if _, res := out.Lookup("bad"); res != mcp.ToolUnknown || len(out.Rejected) != 1 {
		t.Errorf("rebuilt snapshot serves the bad entry: %+v", out.Rejected)
	}
	if again, err := Rebuild(r, out, ms, t0); again != nil || err != nil {
		t.Errorf("Rebuild() = %v, %v: a built snapshot with unchanged inputs must be kept", again, err)
	}
	ok := mustUnmarshal(t, mustMarshal(t, out))
	if again, err := Rebuild(r, ok, ms, t0); again != nil || err != nil {
		t.Errorf("Rebuild() = %v, %v: a restored snapshot whose schemas compile must be kept", again, err)
	}
}

// oldForm is s's stored form as formats 1 and 2 wrote it: the version
// hashed from the manifests' encodings.
func oldForm(t testing.TB, s *Snapshot, format int) map[string]json.RawMessage {
	t.Helper()
	st := storedForm(t, s)
	in, err := prepare(s.def, mustCanonical(t, s))
	if err != nil {
		t.Fatal(err)
	}
	v1, err := in.hashV1()
	if err != nil {
		t.Fatal(err)
	}
	st["version"], _ = json.Marshal(v1)
	st["format"], _ = json.Marshal(format)
	if format == 1 {
		delete(st, "schemaErrors")
	}
	return st
}

func mustCanonical(t testing.TB, s *Snapshot) map[string]*Canonical {
	t.Helper()
	c, err := canonicalizeAll(s.def, s.manifests)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestUnmarshalSnapshotFormats(t *testing.T) {
	orig := buildSchemaRoute(t, "r")
	r, ms := schemaRoute(t, "r")

	for _, format := range []int{1, 2} {
		// Format 1 carried no schema errors; it is rebuilt in full. Format 2
		// is restored lazily. Both keep their stored version (a store's
		// version field names it), are written back in format 2, and are
		// kept by a refresh with the same inputs: an upgrade rebuilds nothing.
		old := oldForm(t, orig, format)
		got, err := fromStored(t, old)
		if err != nil {
			t.Fatalf("format %d: %v", format, err)
		}
		if !reflect.DeepEqual(got.Rejected, orig.Rejected) {
			t.Errorf("format %d restored rejected = %+v", format, got.Rejected)
		}
		if want := string(old["version"]); `"`+got.Version+`"` != want || got.Version == orig.Version {
			t.Errorf("format %d restored version %s, want the stored %s", format, got.Version, want)
		}
		again := storedForm(t, got)
		if string(again["format"]) != "2" || string(again["version"]) != string(old["version"]) {
			t.Errorf("format %d written back as format %s version %s", format, again["format"], again["version"])
		}
		if _, err := fromStored(t, again); err != nil {
			t.Errorf("format %d written back does not restore: %v", format, err)
		}
		if out, err := Rebuild(r, got, ms, t0); out != nil || err != nil {
			t.Errorf("format %d: Rebuild() = %v, %v: unchanged inputs must keep the restored snapshot", format, out, err)
		}
		// A format-3 entry is hashed the new way: the old version is refused.
		old["format"] = json.RawMessage(`3`)
		if _, err := fromStored(t, old); err == nil {
			t.Errorf("format 3 with a format %d version accepted", format)
		}
	}

	for name, errs := range map[string]string{
		"index out of range": `{"s":[{"index":3,"reason":"x"}]}`,
		"negative index":     `{"s":[{"index":-1,"reason":"x"}]}`,
		"empty reason":       `{"s":[{"index":0,"reason":""}]}`,
		"unknown service":    `{"t":[{"index":0,"reason":"x"}]}`,
		"not an object":      `[1]`,
	} {
		st := storedForm(t, orig)
		st["schemaErrors"] = json.RawMessage(errs)
		if _, err := fromStored(t, st); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSchemaCacheSharesCompiledSchemas(t *testing.T) {
	a := buildSchemaRoute(t, "a")
	b := buildSchemaRoute(t, "b")
	ga, _ := a.Lookup("good")
	ta, _ := a.Lookup("twin")
	gb, _ := b.Lookup("good")
	if ga.schema == nil || ga.schema != ta.schema || ga.schema != gb.schema {
		t.Fatal("identical schemas in one snapshot and across routes must share one compiled entry")
	}
	if ga.schema.sch.Load() == nil {
		t.Fatal("a built snapshot's schemas are compiled")
	}
	restored := mustUnmarshal(t, mustMarshal(t, a))
	gr, _ := restored.Lookup("good")
	if gr.schema != ga.schema {
		t.Error("a restored snapshot must find the live entry of its schema")
	}

	// A restored schema compiles on first use and keeps its validator.
	fresh := `{"type":"object","description":"only here"}`
	m := mustManifest(t, `{"tools":[{"name":"only","inputSchema":`+fresh+`}]}`)
	r := Route{Key: "c", ToolServices: []ToolService{{Name: "s", URL: "http://s"}}}
	lazy := mustUnmarshal(t, mustMarshal(t, mustBuild(t, r, map[string]*Manifest{"s": m})))
	only, _ := lazy.Lookup("only")
	if msgs := only.ValidateArguments(json.RawMessage(`{}`)); msgs != nil {
		t.Errorf("ValidateArguments = %q", msgs)
	}
	if only.schema.sch.Load() == nil {
		t.Error("the validator was not kept after first use")
	}
	if schemas.len() == 0 {
		t.Error("cache is empty while snapshots hold schemas")
	}
}

func mustMarshal(t testing.TB, s *Snapshot) []byte {
	t.Helper()
	data, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Rebuild is RebuildCanonical from manifests not yet canonicalized.
func Rebuild(route Route, cur *Snapshot, manifests map[string]*Manifest, fetchedAt time.Time) (*Snapshot, error) {
	canon, err := canonicalizeAll(route, manifests)
	if err != nil {
		return nil, err
	}
	return RebuildCanonical(route, cur, canon, fetchedAt)
}
