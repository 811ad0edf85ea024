package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/toolmesh/toolmesh/internal/oauthclient"
)

// maxDocBytes bounds a metadata document or JWKS read from the network.
const maxDocBytes = 1 << 20

// minRSABits is the smallest RSA modulus accepted (RFC 7518 section 3.3).
const minRSABits = 2048

// keySet is one fetched JWKS: signature keys by kid, and all of them for
// tokens that name no kid. Immutable once stored.
type keySet struct {
	byKID   map[string][]*jose.JSONWebKey
	all     []*jose.JSONWebKey
	fetched time.Time
}

// keySource keeps one issuer's verification keys. The request path only
// loads the current set (no I/O, no lock); fetches run one at a time
// (single flight) and no more often than minInterval, however many
// requests name an unknown kid.
type keySource struct {
	issuer, jwksURL, file string
	client                *http.Client
	log                   *slog.Logger
	fetchTimeout          time.Duration
	refreshEvery          time.Duration // a set older than this is refreshed in the background
	minInterval           time.Duration // between two fetches
	now                   func() time.Time

	keys        atomic.Pointer[keySet] // nil: never fetched
	lastAttempt atomic.Int64           // unix nanoseconds of the last fetch start

	mu       sync.Mutex                    // serializes starting a fetch
	inflight atomic.Pointer[chan struct{}] // closed when the running fetch ends; nil: none
	// discovered is the jwks_uri found in the issuer's metadata. Only the
	// fetch in flight reads or writes it.
	discovered string
}

// current returns the keys in force, starting a background refresh when
// they are older than refreshEvery. It never blocks.
func (s *keySource) current() *keySet {
	ks := s.keys.Load()
	if ks != nil && s.now().Sub(ks.fetched) > s.refreshEvery {
		s.refresh()
	}
	return ks
}

// refresh starts a fetch unless one is running or the last one started less
// than minInterval ago. It returns a channel closed when the fetch ends, or
// nil when none runs (rate limited). Only starting a fetch takes the lock.
func (s *keySource) refresh() <-chan struct{} {
	if p := s.inflight.Load(); p != nil {
		return *p
	}
	now := s.now()
	if s.limited(now) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.inflight.Load(); p != nil {
		return *p
	}
	if s.limited(now) {
		return nil
	}
	s.lastAttempt.Store(now.UnixNano())
	ch := make(chan struct{})
	s.inflight.Store(&ch)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.fetchTimeout)
		err := s.fetch(ctx)
		cancel()
		if err != nil {
			s.log.Warn("JWKS refresh failed; the keys in force stay", slog.String("issuer", s.issuer), slog.Any("error", err))
		}
		s.inflight.Store(nil)
		close(ch)
	}()
	return ch
}

// limited reports whether the last fetch started less than minInterval
// before now.
func (s *keySource) limited(now time.Time) bool {
	last := s.lastAttempt.Load()
	return last != 0 && now.Sub(time.Unix(0, last)) < s.minInterval
}

// wait refreshes and waits for the fetch, at most until ctx ends.
func (s *keySource) wait(ctx context.Context) {
	ch := s.refresh()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// fetch reads the JWKS (file, jwksUrl, or the jwks_uri of the issuer's
// metadata) and stores it. On error the keys in force stay.
func (s *keySource) fetch(ctx context.Context) error {
	var raw []byte
	var err error
	switch {
	case s.file != "":
		raw, err = os.ReadFile(s.file)
		if err != nil {
			return fmt.Errorf("jwksFile: %w", err)
		}
	default:
		u := s.jwksURL
		if u == "" {
			if s.discovered == "" {
				if s.discovered, err = s.discover(ctx); err != nil {
					return err
				}
			}
			u = s.discovered
		}
		raw, err = s.get(ctx, u)
		if err != nil {
			if s.jwksURL == "" {
				s.discovered = "" // the metadata may have moved it: discover again next time
			}
			return fmt.Errorf("JWKS: %w", err)
		}
	}
	ks, err := parseJWKS(raw, s.log, s.issuer)
	if err != nil {
		return err
	}
	ks.fetched = s.now()
	s.keys.Store(ks)
	return nil
}

// discover finds jwks_uri in the issuer's metadata. The metadata must name
// the configured issuer exactly (RFC 8414 section 3.3), or it is not the
// issuer's.
func (s *keySource) discover(ctx context.Context) (string, error) {
	urls, err := oauthclient.MetadataURLs(s.issuer)
	if err != nil {
		return "", err
	}
	var errs []error
	for _, u := range urls {
		raw, err := s.get(ctx, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var md struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(raw, &md); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		if md.Issuer != s.issuer {
			errs = append(errs, fmt.Errorf("%s names issuer %q, not %q", u, md.Issuer, s.issuer))
			continue
		}
		if err := checkURL(md.JWKSURI); err != nil {
			errs = append(errs, fmt.Errorf("%s: jwks_uri: %w", u, err))
			continue
		}
		return md.JWKSURI, nil
	}
	return "", fmt.Errorf("issuer metadata: %w", errors.Join(errs...))
}

func (s *keySource) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	c := *s.client
	c.CheckRedirect = sameOriginRedirects
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocBytes))
		return nil, fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(b) > maxDocBytes {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", u, maxDocBytes)
	}
	return b, nil
}

// parseJWKS keeps the set's public signature keys. A key that does not
// parse, is private or symmetric, or is for encryption is skipped (logged):
// one odd key must not take the others down. A set with no usable key is an
// error, so it never replaces a good one.
func parseJWKS(raw []byte, log *slog.Logger, issuer string) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	ks := &keySet{byKID: make(map[string][]*jose.JSONWebKey, len(doc.Keys))}
	for i, r := range doc.Keys {
		k := new(jose.JSONWebKey)
		if err := k.UnmarshalJSON(r); err != nil {
			log.Warn("JWKS key skipped", slog.String("issuer", issuer), slog.Int("index", i), slog.Any("error", err))
			continue
		}
		if !usableKey(k) {
			log.Debug("JWKS key skipped: not a public signature key", slog.String("issuer", issuer), slog.String("kid", k.KeyID))
			continue
		}
		ks.all = append(ks.all, k)
		ks.byKID[k.KeyID] = append(ks.byKID[k.KeyID], k)
	}
	if len(ks.all) == 0 {
		return nil, errors.New("JWKS has no usable public signature key")
	}
	return ks, nil
}

func usableKey(k *jose.JSONWebKey) bool {
	if k.Use != "" && k.Use != "sig" {
		return false
	}
	switch pk := k.Key.(type) {
	case *rsa.PublicKey:
		return pk.N.BitLen() >= minRSABits
	case *ecdsa.PublicKey, ed25519.PublicKey:
		return true
	}
	return false // private, symmetric ([]byte) or unknown
}

// keyFits reports whether key k may verify a signature of algorithm alg:
// its alg (when it has one) is alg, and its type and curve are the ones alg
// is defined for (RFC 7518 section 3.1, RFC 8037). This, not the library,
// is what stops a token whose header claims another algorithm family than
// the key's.
func keyFits(k *jose.JSONWebKey, alg string) bool {
	if k.Algorithm != "" && k.Algorithm != alg {
		return false
	}
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		_, ok := k.Key.(*rsa.PublicKey)
		return ok
	case "ES256":
		return curve(k) == elliptic.P256()
	case "ES384":
		return curve(k) == elliptic.P384()
	case "ES512":
		return curve(k) == elliptic.P521()
	case "EdDSA":
		_, ok := k.Key.(ed25519.PublicKey)
		return ok
	}
	return false
}

func curve(k *jose.JSONWebKey) elliptic.Curve {
	if pk, ok := k.Key.(*ecdsa.PublicKey); ok {
		return pk.Curve
	}
	return nil
}

// maxRedirects is how many redirects a JWKS or metadata fetch follows, as
// net/http's default.
const maxRedirects = 10

// sameOriginRedirects follows a redirect only within the origin (scheme,
// host and port) of the first request: an https jwksUrl or metadata URL
// must not hand the gateway's trust in an issuer's keys to plain http or to
// another host, which a redirect would do silently.
func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return fmt.Errorf("redirect from %s://%s to %s://%s refused: a key source must stay on its origin",
			first.Scheme, first.Host, req.URL.Scheme, req.URL.Host)
	}
	return nil
}
