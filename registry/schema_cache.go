package registry

import (
	"crypto/sha256"
	"encoding/json"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaEntry is one distinct input schema (by content) and, once compiled,
// its validator. Tools whose schemas are byte-identical share one entry, in
// one snapshot, across routes and across refreshes, so the schema compiles
// once. Compilation runs at most once, on first need: eagerly when a snapshot
// is built (an invalid schema rejects its tool), lazily on the first call
// when a snapshot is restored from a Store (it was validated when built).
type schemaEntry struct {
	raw    json.RawMessage // compact; shared with the tool's InputSchema
	once   sync.Once
	sch    *jsonschema.Schema
	err    error
	failed atomic.Bool // compiled, with an error (readable without the once)
}

// compiled returns the validator, compiling it on the first call.
func (e *schemaEntry) compiled() (*jsonschema.Schema, error) {
	e.once.Do(func() {
		e.sch, e.err = compileInputSchema(e.raw)
		e.failed.Store(e.err != nil)
	})
	return e.sch, e.err
}

// schemaCache finds the entry of a schema by the sha256 of its compact bytes.
// It holds entries weakly: an entry lives exactly as long as some snapshot's
// tool (or a build in progress) holds it, and a cleanup drops its key when it
// is collected. The cache therefore never holds more than the live snapshots
// already hold, however many schemas pass through it, which bounds it without
// a size knob and without evicting a schema that is still in use. The
// refresher keeps the current snapshot while building the next, so an
// unchanged schema is found, not recompiled.
type schemaCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]weak.Pointer[schemaEntry]
}

// schemas is the process-wide cache.
var schemas = &schemaCache{m: map[[sha256.Size]byte]weak.Pointer[schemaEntry]{}}

// entry returns the entry of raw (compact JSON), creating it uncompiled
// when the cache has none.
func (c *schemaCache) entry(raw json.RawMessage) *schemaEntry {
	key := sha256.Sum256(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[key]; ok {
		if e := wp.Value(); e != nil {
			return e
		}
	}
	e := &schemaEntry{raw: raw}
	c.m[key] = weak.Make(e)
	runtime.AddCleanup(e, c.drop, key)
	return e
}

// drop forgets key once its entry has been collected, unless a newer entry
// took the key meanwhile.
func (c *schemaCache) drop(key [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[key]; ok && wp.Value() == nil {
		delete(c.m, key)
	}
}

// len reports how many keys the cache holds (for tests).
func (c *schemaCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
