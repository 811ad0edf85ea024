package registry

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The validator cache is bounded: with room for two validators, a route of
// six tools keeps two, every call still validates correctly (an evicted
// validator compiles again), and a schema that does not compile is still
// rejected when the snapshot is built.
func TestValidatorCacheBounded(t *testing.T) {
	validators.resize(2)
	t.Cleanup(func() { validators.resize(defaultValidators) })
	before := validators.evicted.Load()

	var tools []string
	for i := range 6 {
		tools = append(tools, fmt.Sprintf(`{"name":"t%d","inputSchema":{"type":"object","properties":{"n%d":{"type":"integer"}},"required":["n%d"]}}`, i, i, i))
	}
	tools = append(tools, `{"name":"bad","inputSchema":`+badSchema+`}`)
	m := mustManifest(t, `{"tools":[`+strings.Join(tools, ",")+`]}`)
	s := mustBuild(t, Route{Key: "v", ToolServices: []ToolService{{Name: "bounded", URL: "http://v"}}}, map[string]*Manifest{"bounded": m})
	if len(s.Tools) != 6 || len(s.Rejected) != 1 || s.Rejected[0].Name != "bad" || !strings.HasPrefix(s.Rejected[0].Reason, "inputSchema: ") {
		t.Fatalf("tools %d rejected %+v; want 6 tools and bad rejected for its schema", len(s.Tools), s.Rejected)
	}
	for round := range 3 {
		for i := range 6 {
			tool, _ := s.Lookup(fmt.Sprintf("t%d", i))
			if msgs := tool.ValidateArguments(json.RawMessage(fmt.Sprintf(`{"n%d":1}`, i))); msgs != nil {
				t.Errorf("round %d t%d valid args: %q", round, i, msgs)
			}
			if msgs := tool.ValidateArguments(json.RawMessage(`{}`)); len(msgs) != 1 || !strings.Contains(msgs[0], fmt.Sprintf("n%d", i)) {
				t.Errorf("round %d t%d missing property: %q", round, i, msgs)
			}
		}
	}
	if n := validators.len(); n != 2 {
		t.Errorf("validators cached = %d, want the bound 2", n)
	}
	if validators.evicted.Load() == before {
		t.Error("no validator was evicted: the bound is not enforced")
	}
	cached := 0
	for _, tool := range s.Tools {
		if tool.schema.sch.Load() != nil {
			cached++
		}
	}
	if cached != 2 {
		t.Errorf("%d tools hold a validator, want 2", cached)
	}
}

// resize sets the bound (tests), dropping every cached validator.
func (c *validatorCache) resize(max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.ring {
		e.sch.Store(nil)
	}
	c.ring, c.hand, c.max = nil, 0, max
}

// len reports how many validators are cached (for tests).
func (c *validatorCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ring)
}

// len reports how many keys the cache holds (for tests).
func (c *schemaCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
