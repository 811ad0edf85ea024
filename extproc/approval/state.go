package approval

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/internal/hmactoken"
)

// The requestState is
//
//	tma1.<key id>.<payload>.<mac>
//
// payload the base64url (unpadded) JSON of statePayload, mac the base64url
// HMAC-SHA256 under the key, over macLabel, the key id, "." and the payload
// text: the version and key id are authenticated with the payload.
const (
	statePrefix = "tma1."
	macLabel    = "toolmesh approval state v1\x00"
	// MaxStateBytes bounds a requestState the gateway parses; its own are
	// about 300 bytes.
	MaxStateBytes = 1024
)

var b64 = base64.RawURLEncoding

// statePayload is what a state binds. Short names keep the state small.
type statePayload struct {
	Route   string `json:"r"`
	Tool    string `json:"t"`
	Service string `json:"s"`
	Args    string `json:"a"` // base64url SHA-256 of the canonical arguments
	Caller  string `json:"c"` // base64url SHA-256 of the caller key; "" anonymous
	Issued  int64  `json:"i"` // unix seconds
	Expires int64  `json:"e"` // unix seconds; accepted while now < Expires
	// Nonce makes every state distinct, so that spending one (Spend) never
	// spends another minted for the same call in the same second.
	Nonce string `json:"n,omitempty"`
}

// Binding is the call an approval is for.
type Binding struct {
	Route   string
	Tool    string
	Service string
	// Args is the arguments object as the client sent it.
	Args json.RawMessage
	// Caller names the authenticated caller (CallerKey); "" anonymous.
	Caller string
}

// Reason says why a state was refused. Values are stable: they appear in
// audit events and the error's data.reason.
type Reason string

// Reasons a state is refused.
const (
	ReasonMalformed      Reason = "malformed_state"
	ReasonUnknownKey     Reason = "unknown_key"
	ReasonBadSignature   Reason = "bad_signature"
	ReasonExpired        Reason = "expired"
	ReasonOtherRoute     Reason = "other_route"
	ReasonOtherTool      Reason = "other_tool"
	ReasonOtherService   Reason = "other_service"
	ReasonOtherArguments Reason = "other_arguments"
	ReasonOtherCaller    Reason = "other_caller"
	ReasonBadArguments   Reason = "bad_arguments"
	ReasonSpent          Reason = "spent"              // the approval already ran a call
	ReasonUnavailable    Reason = "ledger_unavailable" // the Ledger failed (Spend)
)

// Error is a refused state; Err is the Ledger's error of ReasonUnavailable.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	if e.Err != nil {
		return "approval state refused: " + string(e.Reason) + ": " + e.Err.Error()
	}
	return "approval state refused: " + string(e.Reason)
}

func refuse(r Reason) error { return &Error{Reason: r} }

// ReasonOf returns the Reason of a Verify or Mint error ("" for nil).
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	if err != nil {
		return ReasonMalformed
	}
	return ""
}

// Mint returns a requestState approving b until now + TTL, signed with the
// first key.
func (a *Approver) Mint(b Binding) (string, error) {
	h, err := ArgsHash(b.Args)
	if err != nil {
		return "", err
	}
	now := a.now()
	var nonce [12]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails
	p, err := json.Marshal(statePayload{Route: b.Route, Tool: b.Tool, Service: b.Service, Args: h,
		Caller: hmactoken.CallerHash(b.Caller), Issued: now.Unix(), Expires: now.Add(a.ttl).Unix(),
		Nonce: b64.EncodeToString(nonce[:])})
	if err != nil {
		return "", err
	}
	return statePrefix + a.keys.Seal(p), nil
}

// Verify checks that state was minted by a configured key, has not expired,
// and approves exactly b. The error is an *Error naming the first check that
// failed; authenticity is checked before anything in the payload is read.
func (a *Approver) Verify(state string, b Binding) error {
	p, err := a.open(state)
	if err != nil {
		return err
	}
	if !a.now().Before(time.Unix(p.Expires, 0)) {
		return refuse(ReasonExpired)
	}
	switch {
	case p.Route != b.Route:
		return refuse(ReasonOtherRoute)
	case p.Tool != b.Tool:
		return refuse(ReasonOtherTool)
	case p.Service != b.Service:
		return refuse(ReasonOtherService)
	case p.Caller != hmactoken.CallerHash(b.Caller):
		return refuse(ReasonOtherCaller)
	}
	h, err := ArgsHash(b.Args)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(h), []byte(p.Args)) {
		return refuse(ReasonOtherArguments)
	}
	return nil
}

// open authenticates state and decodes its payload.
func (a *Approver) open(state string) (*statePayload, error) {
	if len(state) > MaxStateBytes || !strings.HasPrefix(state, statePrefix) {
		return nil, refuse(ReasonMalformed)
	}
	raw, err := a.keys.Open(state[len(statePrefix):])
	switch {
	case errors.Is(err, hmactoken.ErrUnknownKey):
		return nil, refuse(ReasonUnknownKey)
	case errors.Is(err, hmactoken.ErrSignature):
		return nil, refuse(ReasonBadSignature)
	case err != nil:
		return nil, refuse(ReasonMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p statePayload
	if err := dec.Decode(&p); err != nil || dec.More() {
		return nil, refuse(ReasonMalformed)
	}
	return &p, nil
}

// IsGatewayState reports whether s has the shape of a state this package
// mints (whether or not it verifies): a federated MCP server's own
// requestState does not.
func IsGatewayState(s string) bool { return strings.HasPrefix(s, statePrefix) }

// CallerKey names a caller for binding: issuer, subject and mesh identity;
// "" for an anonymous caller.
func CallerKey(c *identity.Caller) string {
	if c.Anonymous() {
		return ""
	}
	var b strings.Builder
	if c.Authenticated {
		b.WriteString("iss=" + c.Issuer + "\x00sub=" + c.Subject)
	}
	b.WriteString("\x00mesh=" + c.MeshID)
	return b.String()
}

// ArgsHash is the base64url SHA-256 of the canonical form of an arguments
// object (Canonical).
func ArgsHash(args json.RawMessage) (string, error) {
	c, err := Canonical(args)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(c)
	return b64.EncodeToString(h[:]), nil
}

// Canonical re-encodes a JSON value with object members sorted by name, no
// insignificant whitespace, strings re-escaped one way and numbers kept as
// written. A value with a repeated member name is refused
// (ReasonBadArguments): readers disagree on which of the two counts, so the
// approved call and the executed one could differ.
func Canonical(v json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var out []byte
	out, err := canonical(dec, out)
	if err != nil {
		return nil, refuse(ReasonBadArguments)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, refuse(ReasonBadArguments)
	}
	return out, nil
}

func canonical(dec *json.Decoder, out []byte) ([]byte, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			type member struct {
				key string
				val []byte
			}
			var ms []member
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				val, err := canonical(dec, nil)
				if err != nil {
					return nil, err
				}
				ms = append(ms, member{k, val})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
			out = append(out, '{')
			for i, m := range ms {
				if i > 0 {
					if ms[i-1].key == m.key {
						return nil, errors.New("repeated member")
					}
					out = append(out, ',')
				}
				out = appendJSONString(out, m.key)
				out = append(out, ':')
				out = append(out, m.val...)
			}
			return append(out, '}'), nil
		case '[':
			out = append(out, '[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out = append(out, ',')
				}
				if out, err = canonical(dec, out); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return append(out, ']'), nil
		}
		return nil, errors.New("unexpected delimiter")
	case string:
		return appendJSONString(out, t), nil
	case json.Number:
		return append(out, t...), nil
	case bool:
		if t {
			return append(out, "true"...), nil
		}
		return append(out, "false"...), nil
	case nil:
		return append(out, "null"...), nil
	}
	return nil, errors.New("unexpected token")
}

func appendJSONString(out []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(out, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
}

// Summary is the arguments as the person approving reads them: canonical
// JSON cut to at most limit bytes (on a UTF-8 boundary), with a note of
// how much was left out.
func Summary(args json.RawMessage, limit int) string {
	c, err := Canonical(args)
	if err != nil {
		c = args
	}
	if len(c) <= limit {
		return string(c)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(c[cut]) {
		cut--
	}
	return string(c[:cut]) + "… (" + strconv.Itoa(len(c)-cut) + " more bytes not shown)"
}
