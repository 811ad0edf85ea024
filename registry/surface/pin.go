package surface

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Mode is how a route or Tool Service treats a changed definition.
type Mode string

// Pinning modes.
const (
	// ModeOff records nothing and serves every definition as it comes.
	ModeOff Mode = "off"
	// ModeWarn serves a changed definition and records it for review.
	ModeWarn Mode = "warn"
	// ModeEnforce holds a changed definition back (quarantine) until an
	// operator accepts it; the last accepted one is not served instead.
	ModeEnforce Mode = "enforce"
)

// Policy is the pinning setting of one route or Tool Service.
type Policy struct {
	Mode Mode `json:"mode,omitempty"`
	// QuarantineNew holds back, under enforce, a tool the server did not
	// have when it was first pinned, until an operator accepts it. Off, a
	// new tool is accepted on first sight.
	QuarantineNew bool `json:"quarantineNew,omitempty"`
	// Accepted are hashes accepted in review outside the gateway (the
	// Portal, for operators who review in git), by upstream tool name.
	Accepted map[string][]string `json:"accepted,omitempty"`
}

// Validate checks the policy; errors name the field.
func (p Policy) Validate() error {
	switch p.Mode {
	case "", ModeOff, ModeWarn, ModeEnforce:
	default:
		return fmt.Errorf("mode: %q is not one of off, warn, enforce", p.Mode)
	}
	for tool, hs := range p.Accepted {
		for _, h := range hs {
			if !strings.HasPrefix(h, "sha256:") || len(h) != len("sha256:")+64 {
				return fmt.Errorf("accepted.%s: %q is not a sha256:<64 hex> definition hash", tool, h)
			}
		}
	}
	return nil
}

// Key names one pinned tool: the route, the Tool Service and the tool's
// name on that service.
type Key struct {
	Route   string `json:"route"`
	Service string `json:"service"`
	Tool    string `json:"tool"`
}

func (k Key) String() string { return k.Route + "/" + k.Service + "/" + k.Tool }

// Pin is an accepted definition.
type Pin struct {
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition"` // canonical JSON
	AcceptedAt time.Time       `json:"acceptedAt"`
	// By says who accepted it: "first-seen", "portal", or the operator's
	// name given to the admin API.
	By string `json:"by"`
}

// Candidate is a definition seen but not accepted.
type Candidate struct {
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition"`
	SeenAt     time.Time       `json:"seenAt"`
	Rejected   bool            `json:"rejected,omitempty"`
}

// Record is what a store holds for one key.
type Record struct {
	Key       Key        `json:"key"`
	Accepted  *Pin       `json:"accepted,omitempty"`
	Candidate *Candidate `json:"candidate,omitempty"`
}

// Store keeps pins and candidates. The Redis store shares them among
// replicas and across restarts; MemStore keeps them per process.
type Store interface {
	Get(ctx context.Context, k Key) (Record, error)
	// FirstAccept records p as accepted unless the key has an accepted
	// definition already, and returns the record as it then stands: two
	// replicas that see a tool first at the same time agree on one pin.
	FirstAccept(ctx context.Context, k Key, p Pin) (Record, error)
	// Propose records c as the key's candidate (replacing an older one
	// unless it has the same hash).
	Propose(ctx context.Context, k Key, c Candidate) error
	// Accept makes the candidate with this hash the accepted definition.
	// It fails with ErrNoCandidate when the key's candidate has another
	// hash (the upstream changed again since the operator looked).
	Accept(ctx context.Context, k Key, hash, by string, now time.Time) (Pin, error)
	// Reject marks the candidate with this hash rejected: it stays
	// quarantined, and is no longer listed for review.
	Reject(ctx context.Context, k Key, hash string) error
	// List returns every record of a route ("" for all), sorted by key.
	List(ctx context.Context, route string) ([]Record, error)
}

// ErrNoCandidate is Accept's and Reject's answer when the key has no
// candidate of the given hash.
var ErrNoCandidate = fmt.Errorf("no pending definition with that hash")

// Verdict is what the gateway does with one tool definition.
type Verdict struct {
	Serve bool // list it and route its calls
	// Changed: the definition differs from the accepted one (served under
	// warn, held back under enforce).
	Changed bool
	// New: the tool had no accepted definition (held back only under
	// enforce with QuarantineNew).
	New  bool
	Hash string
	// Accepted is the hash accepted before, when there is one.
	Accepted string
}

// Decide returns what to do with definition d of key k under policy p,
// recording a first pin or a candidate in s as needed. A store error
// fails closed under enforce (the tool is held back) and open otherwise.
func Decide(ctx context.Context, s Store, p Policy, k Key, d Definition, now time.Time) (Verdict, error) {
	if p.Mode == "" || p.Mode == ModeOff {
		return Verdict{Serve: true}, nil
	}
	hash, err := d.Hash()
	if err != nil {
		return Verdict{Serve: p.Mode != ModeEnforce}, err
	}
	v := Verdict{Hash: hash}
	canon, _ := d.Canonical()
	rec, err := s.Get(ctx, k)
	if err != nil {
		v.Serve = p.Mode != ModeEnforce
		return v, fmt.Errorf("pin of %s: %w", k, err)
	}
	if slices.Contains(p.Accepted[k.Tool], hash) && (rec.Accepted == nil || rec.Accepted.Hash != hash) {
		pin, err := acceptReviewed(ctx, s, k, Candidate{Hash: hash, Definition: canon, SeenAt: now})
		if err != nil {
			v.Serve = p.Mode != ModeEnforce
			return v, fmt.Errorf("pin of %s: %w", k, err)
		}
		rec.Accepted, rec.Candidate = &pin, nil
	}
	if rec.Accepted != nil {
		v.Accepted = rec.Accepted.Hash
	}
	switch {
	case rec.Accepted == nil && p.Mode == ModeEnforce && p.QuarantineNew:
		v.New = true
		return v, proposeOnce(ctx, s, k, rec, Candidate{Hash: hash, Definition: canon, SeenAt: now})
	case rec.Accepted == nil:
		rec, err = s.FirstAccept(ctx, k, Pin{Hash: hash, Definition: canon, AcceptedAt: now, By: "first-seen"})
		if err != nil {
			v.Serve = p.Mode != ModeEnforce
			return v, fmt.Errorf("pin of %s: %w", k, err)
		}
		if rec.Accepted.Hash == hash {
			v.Serve = true
			return v, nil
		}
		v.Accepted = rec.Accepted.Hash // another replica pinned another definition first
	case rec.Accepted.Hash == hash:
		v.Serve = true
		return v, nil
	}
	v.Changed = true
	v.Serve = p.Mode == ModeWarn
	return v, proposeOnce(ctx, s, k, rec, Candidate{Hash: hash, Definition: canon, SeenAt: now})
}

// acceptReviewed records a definition whose hash the Portal lists as
// accepted.
func acceptReviewed(ctx context.Context, s Store, k Key, c Candidate) (Pin, error) {
	if err := s.Propose(ctx, k, c); err != nil {
		return Pin{}, err
	}
	return s.Accept(ctx, k, c.Hash, "portal", c.SeenAt)
}

// proposeOnce records c unless it is the candidate already, so a refresh
// that sees the same change again writes nothing.
func proposeOnce(ctx context.Context, s Store, k Key, rec Record, c Candidate) error {
	if rec.Candidate != nil && rec.Candidate.Hash == c.Hash {
		return nil
	}
	if err := s.Propose(ctx, k, c); err != nil {
		return fmt.Errorf("pin of %s: %w", k, err)
	}
	return nil
}

// MemStore is a Store in this process's memory: pins are lost on restart
// and not shared among replicas.
type MemStore struct {
	mu   sync.Mutex
	recs map[Key]Record
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{recs: map[Key]Record{}} }

// Get implements Store.
func (m *MemStore) Get(_ context.Context, k Key) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recs[k]
	r.Key = k
	return r, nil
}

// FirstAccept implements Store.
func (m *MemStore) FirstAccept(_ context.Context, k Key, p Pin) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recs[k]
	r.Key = k
	if r.Accepted == nil {
		r.Accepted = &p
		m.recs[k] = r
	}
	return r, nil
}

// Propose implements Store.
func (m *MemStore) Propose(_ context.Context, k Key, c Candidate) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recs[k]
	r.Key = k
	if r.Candidate == nil || r.Candidate.Hash != c.Hash {
		r.Candidate = &c
	}
	m.recs[k] = r
	return nil
}

// Accept implements Store.
func (m *MemStore) Accept(_ context.Context, k Key, hash, by string, now time.Time) (Pin, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recs[k]
	if r.Candidate == nil || r.Candidate.Hash != hash {
		return Pin{}, ErrNoCandidate
	}
	p := Pin{Hash: hash, Definition: r.Candidate.Definition, AcceptedAt: now, By: by}
	r.Key, r.Accepted, r.Candidate = k, &p, nil
	m.recs[k] = r
	return p, nil
}

// Reject implements Store.
func (m *MemStore) Reject(_ context.Context, k Key, hash string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recs[k]
	if r.Candidate == nil || r.Candidate.Hash != hash {
		return ErrNoCandidate
	}
	c := *r.Candidate
	c.Rejected = true
	r.Candidate = &c
	m.recs[k] = r
	return nil
}

// List implements Store.
func (m *MemStore) List(_ context.Context, route string) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for k, r := range m.recs {
		if route == "" || k.Route == route {
			r.Key = k
			out = append(out, r)
		}
	}
	sortRecords(out)
	return out, nil
}

func sortRecords(rs []Record) {
	slices.SortFunc(rs, func(a, b Record) int { return strings.Compare(a.Key.String(), b.Key.String()) })
}
