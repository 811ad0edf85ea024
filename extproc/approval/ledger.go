package approval

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

// Ledger remembers the approvals that were used, so that one approval
// runs one call (ADR 0011, "Single use"). Spend records id until expires
// and reports whether it was the first to: a second Spend of the same id
// before it expires reports false. An error means the ledger could not
// tell; the call is then refused (fail closed).
type Ledger interface {
	Spend(ctx context.Context, id string, expires time.Time) (first bool, err error)
}

// MemoryLedger is a Ledger in one process. Across replicas an approval
// can then be used once per replica that sees it; a shared Ledger (the
// Redis store's) closes that. It is locked, which is fine off the hot
// path: only approved calls reach it.
type MemoryLedger struct {
	mu    sync.Mutex
	spent map[string]time.Time
	prune int // len(spent) at which expired entries are dropped next
	now   func() time.Time
}

// NewMemoryLedger returns an empty in-process ledger; now is its clock
// (time.Now when nil).
func NewMemoryLedger(now func() time.Time) *MemoryLedger {
	if now == nil {
		now = time.Now
	}
	return &MemoryLedger{spent: map[string]time.Time{}, prune: 64, now: now}
}

// Spend implements Ledger.
func (l *MemoryLedger) Spend(_ context.Context, id string, expires time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if exp, ok := l.spent[id]; ok && now.Before(exp) {
		return false, nil
	}
	l.spent[id] = expires
	if len(l.spent) >= l.prune {
		// Amortized: the map holds at most about twice the approvals
		// still within their TTL.
		for k, exp := range l.spent {
			if !now.Before(exp) {
				delete(l.spent, k)
			}
		}
		l.prune = max(64, 2*len(l.spent))
	}
	return true, nil
}

// Len is the number of ids remembered, expired ones not yet dropped
// included.
func (l *MemoryLedger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spent)
}

// Spend uses the approval that state carries: the first Spend of a state
// that verifies succeeds, every later one is refused (ReasonSpent) until
// the state expires, when Verify refuses it anyway. Call it after Verify,
// when the person's answer grants the call. A ledger error refuses the
// call (ReasonUnavailable).
func (a *Approver) Spend(ctx context.Context, state string) error {
	p, err := a.open(state)
	if err != nil {
		return err
	}
	id := sha256.Sum256([]byte(state))
	first, err := a.ledger.Spend(ctx, b64.EncodeToString(id[:]), time.Unix(p.Expires, 0))
	switch {
	case err != nil:
		return &Error{Reason: ReasonUnavailable, Err: err}
	case !first:
		return refuse(ReasonSpent)
	}
	return nil
}
