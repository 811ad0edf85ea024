package session

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestOpenCached holds the cache of opened tokens to Open's own checks: a
// token is cached only once it passed them, and a cached one is checked
// again on every use, so it never opens past its expiry, on another route
// or for another caller, and a token that does not open never does.
func TestOpenCached(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := keysAt(t, &now, k1)
	tok, err := k.Mint(State{Route: "r", Caller: "alice", Version: "2025-11-25",
		Upstreams: []Upstream{{Service: "svc", Version: "2025-06-18", Session: "up-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Refused opens leave nothing behind.
	for _, c := range []struct{ route, caller string }{{"other", "alice"}, {"r", "bob"}} {
		if _, err := k.Open(tok, c.route, c.caller); err == nil {
			t.Fatalf("Open(%q, %q) accepted", c.route, c.caller)
		}
		if _, ok := k.opened.get(tok); ok {
			t.Fatalf("a refused Open(%q, %q) cached the token", c.route, c.caller)
		}
	}
	s, err := k.Open(tok, "r", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := k.opened.get(tok); !ok {
		t.Fatal("an accepted token was not cached")
	}
	s.Caller, s.Version = "mallory", "changed" // the caller's copy, not the cache's
	tests := []struct {
		name          string
		tok           string
		route, caller string
		at            time.Time
		want          error
	}{
		{"cached", tok, "r", "alice", now, nil},
		{"cached, a second before expiry", tok, "r", "alice", now.Add(TTL - time.Second), nil},
		{"cached, expired", tok, "r", "alice", now.Add(TTL), ErrExpired},
		{"cached, another route", tok, "other", "alice", now, ErrOtherRoute},
		{"cached, another caller", tok, "r", "bob", now, ErrOtherCaller},
		{"cached, anonymous", tok, "r", "", now, ErrOtherCaller},
		{"altered", tok[:len(tok)-2] + flip(tok[len(tok)-2:]), "r", "alice", now, ErrSealed},
		{"prefix of a cached token", tok[:len(tok)-1], "r", "alice", now, errAny},
		{"cached token with a byte more", tok + "A", "r", "alice", now, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := tt.at
			kk := *k // shares the cache
			kk.now = func() time.Time { return at }
			s, err := kk.Open(tt.tok, tt.route, tt.caller)
			if !errors.Is(err, tt.want) && (tt.want != errAny || err == nil) {
				t.Fatalf("Open: %v, want %v", err, tt.want)
			}
			if err == nil && (s.Caller != tt.caller || s.Version != "2025-11-25" || len(s.Upstreams) != 1) {
				t.Fatalf("Open = %+v", s)
			}
		})
	}
	// New keys (a rotation that removed k1) start with an empty cache.
	if _, err := keysAt(t, &now, k2).Open(tok, "r", "alice"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Open under keys without k1: %v, want ErrUnknownKey", err)
	}
}

// errAny: any error will do (how a cut token fails depends on its length).
var errAny = errors.New("any error")

// TestOpenCachedConcurrent opens more distinct tokens than the cache has
// slots, from several goroutines at once (-race): each opens to its own
// state however the slots are shared and replaced.
func TestOpenCachedConcurrent(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := keysAt(t, &now, k1)
	toks := make([]string, openedSlots+openedSlots/2)
	for i := range toks {
		var err error
		if toks[i], err = k.Mint(State{Route: "r" + strconv.Itoa(i), Version: "2025-11-25"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for n := range 2 * len(toks) {
				i := (n*7 + g*131) % len(toks)
				route := "r" + strconv.Itoa(i)
				if s, err := k.Open(toks[i], route, ""); err != nil || s.Route != route {
					errs <- errors.New("token " + strconv.Itoa(i) + " did not open to its own state")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
