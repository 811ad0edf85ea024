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

// schemaEntry is one distinct input schema (by content). Tools whose schemas
// are byte-identical share one entry, in one snapshot, across routes and
// across refreshes, so a schema is checked once. Whether the schema compiles
// is known for as long as the entry lives: a fresh build compiles it (an
// invalid schema rejects its tool); a snapshot restored from a Store was
// validated when built, so its entries compile on their first call.
//
// The compiled validator is much larger than the schema (about ten times),
// so it is not kept with the entry but in validators, a bounded cache: a
// catalog of a million tools holds only the validators of the tools that
// are called, and an evicted one compiles again on its next call.
type schemaEntry struct {
	raw json.RawMessage // compact; shared with the tool's InputSchema

	mu  sync.Mutex // serializes compiles of this entry
	ok  bool       // compiled without error at least once (under mu)
	err error      // the compile error (under mu; set once, with failed)
	// failed is set once the schema failed to compile; it never clears.
	failed atomic.Bool
	// sch is the validator while the entry is in validators, else nil; it
	// changes only under validators.mu.
	sch atomic.Pointer[jsonschema.Schema]
	// used is the validator cache's reference bit: set on a call, cleared
	// as the eviction hand passes.
	used atomic.Bool
}

// check compiles the schema unless that was done before and reports its
// error. A fresh build calls it for every tool; the validator it compiles
// goes to the bounded cache, where a small catalog keeps every validator.
func (e *schemaEntry) check() error {
	e.mu.Lock()
	ok, err := e.ok, e.err
	e.mu.Unlock()
	if ok || err != nil {
		return err
	}
	_, err = e.compiled()
	return err
}

// compiled returns the validator, compiling it when it is not cached. The
// common case, a cached validator, takes no lock.
func (e *schemaEntry) compiled() (*jsonschema.Schema, error) {
	if sch := e.sch.Load(); sch != nil {
		if !e.used.Load() {
			e.used.Store(true)
		}
		return sch, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed.Load() {
		return nil, e.err
	}
	if sch := e.sch.Load(); sch != nil { // compiled while this call waited
		return sch, nil
	}
	sch, err := compileInputSchema(e.raw)
	if err != nil {
		// A schema that compiled once compiles again; should this build
		// of the library disagree, the entry fails from now on.
		e.err = err
		e.failed.Store(true)
		return nil, err
	}
	e.ok = true
	validators.admit(e, sch)
	return sch, nil
}

// validatorCache holds at most max compiled validators, evicting with the
// CLOCK algorithm (an approximation of least recently used whose hit path
// is one atomic load): the hand passes over entries used since its last
// pass, clearing their bit, and evicts the first one that was not.
type validatorCache struct {
	mu      sync.Mutex
	max     int
	ring    []*schemaEntry
	hand    int
	evicted atomic.Int64 // for tests and benchmarks
}

// defaultValidators bounds the compiled validators kept: about 50 MB with
// input schemas of a few KB, and every validator of a catalog of a few
// thousand tools.
const defaultValidators = 4096

// validators is the process-wide validator cache.
var validators = &validatorCache{max: defaultValidators}

// admit makes sch e's cached validator, evicting another when full.
func (c *validatorCache) admit(e *schemaEntry, sch *jsonschema.Schema) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.used.Store(false)
	e.sch.Store(sch)
	if len(c.ring) < c.max {
		c.ring = append(c.ring, e)
		return
	}
	for {
		v := c.ring[c.hand]
		if v.used.Swap(false) {
			c.hand = (c.hand + 1) % len(c.ring)
			continue
		}
		v.sch.Store(nil)
		c.evicted.Add(1)
		c.ring[c.hand] = e
		c.hand = (c.hand + 1) % len(c.ring)
		return
	}
}

// schemaCache finds the entry of a schema by the sha256 of its compact bytes.
// It holds entries weakly: an entry lives exactly as long as some snapshot's
// tool (or a build in progress, or the validator cache) holds it, and a
// cleanup drops its key when it is collected. The cache therefore never
// holds more than the live snapshots already hold, however many schemas
// pass through it, which bounds it without a size knob and without
// forgetting a schema that is still in use. The refresher keeps the current
// snapshot while building the next, so an unchanged schema is found, not
// checked again.
type schemaCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]weak.Pointer[schemaEntry]
}

// schemas is the process-wide cache.
var schemas = &schemaCache{m: map[[sha256.Size]byte]weak.Pointer[schemaEntry]{}}

// entry returns the entry of raw (compact JSON), creating it unchecked
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
