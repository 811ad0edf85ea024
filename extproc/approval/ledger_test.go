package approval

import (
	"context"
	"errors"
	"testing"
	"time"
)

// failingLedger cannot tell whether a state was used.
type failingLedger struct{}

func (failingLedger) Spend(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("redis down")
}

func TestSpend(t *testing.T) {
	c := &clock{t0}
	a := newApprover(t, c, Key{"k1", secret1})
	b := binding()
	s1, err := a.Mint(b)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := a.Mint(b) // the same call, the same second: another state
	if s1 == s2 {
		t.Fatal("two states minted for one call in one second are equal; spending one would spend both")
	}
	ctx := t.Context()
	if err := a.Spend(ctx, s1); err != nil {
		t.Fatalf("first Spend = %v", err)
	}
	if r := ReasonOf(a.Spend(ctx, s1)); r != ReasonSpent {
		t.Fatalf("second Spend: reason %q, want %q", r, ReasonSpent)
	}
	if err := a.Spend(ctx, s2); err != nil {
		t.Fatalf("Spend of another state of the same call = %v", err)
	}
	if r := ReasonOf(a.Spend(ctx, s1[:len(s1)-2]+"AA")); r != ReasonBadSignature {
		t.Fatalf("Spend of a forged state: reason %q, want bad_signature", r)
	}

	f, err := New(Config{Keys: []Key{{"k1", secret1}}, TTL: time.Minute, Now: c.now, Default: &Rule{}, Ledger: failingLedger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Spend(ctx, s1); ReasonOf(err) != ReasonUnavailable || err.Error() == "" || errors.Unwrap(err) == nil {
		t.Fatalf("Spend with a failing ledger = %v, want ledger_unavailable", err)
	}
}

func TestMemoryLedgerForgetsExpired(t *testing.T) {
	c := &clock{t0}
	l := NewMemoryLedger(c.now)
	ctx := t.Context()
	for i := range 200 {
		if first, _ := l.Spend(ctx, string(rune('a'+i%26))+string(rune(i)), c.t.Add(time.Minute)); !first {
			t.Fatalf("id %d: not first", i)
		}
		c.t = c.t.Add(time.Second)
	}
	// Every id expires a minute after it was spent: at most about the
	// last minute's worth (60), twice over, is kept.
	if n := l.Len(); n > 2*61+1 {
		t.Fatalf("Len = %d after 200 spends over 200s with a 1m expiry; expired ids are not dropped", n)
	}
	if first, _ := l.Spend(ctx, "x", c.t.Add(time.Minute)); !first {
		t.Fatal("new id not first")
	}
	if first, _ := l.Spend(ctx, "x", c.t.Add(time.Minute)); first {
		t.Fatal("spent id first again")
	}
	c.t = c.t.Add(time.Minute)
	if first, _ := l.Spend(ctx, "x", c.t.Add(time.Minute)); !first {
		t.Fatal("an expired id is still spent")
	}
}
