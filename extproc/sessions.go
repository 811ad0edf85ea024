package extproc

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/registry"
)

// Legacy sessions owned by the gateway (docs/decisions/0006-federated-mcp-servers.md):
// one per replica, MCP server, protocol version and set of client
// capabilities declared (relay.go), never per client,
// opened on the first call that needs it, shared by every later call, and
// replaced when the server answers 404 for it. Reading an open session is
// an atomic load; only opening one takes the slot's lock, so concurrent
// first calls open one session, not many.

// caps are the client capabilities the session declares (relay.go): a
// session is shared only by clients that answer the same requests.
type sessionKey struct {
	service, url, version string
	caps                  session.Caps
}

func sessionKeyOf(svc registry.ToolService, version string) sessionKey {
	return sessionKey{service: svc.Name, url: svc.URL, version: version}
}

type sessionSlot struct {
	mu sync.Mutex             // held only while opening
	id atomic.Pointer[string] // nil: none open; "" : the server issues none
}

type sessionCache struct {
	slots sync.Map // sessionKey → *sessionSlot
	ids   atomic.Uint64
	// lost are clients' own upstream sessions a server forgot
	// (clientsession.go), so that their calls go the shared way at once;
	// at most maxLost, then forgotten all together.
	lost  sync.Map // string (service + " " + upstream session id) → struct{}
	nLost atomic.Int64
}

// maxLost bounds sessionCache.lost.
const maxLost = 4096

// markLost notes that service forgot the client session id.
func (c *sessionCache) markLost(service, id string) {
	if c.nLost.Add(1) > maxLost {
		c.lost.Clear()
		c.nLost.Store(1)
	}
	c.lost.Store(service+" "+id, struct{}{})
}

// isLost reports whether service forgot the client session id.
func (c *sessionCache) isLost(service, id string) bool {
	_, ok := c.lost.Load(service + " " + id)
	return ok
}

// requestID returns a JSON-RPC id for a request sent in a shared session.
// Clients choose their ids independently (most start at 0 or 1), and a
// server refuses an id still in flight in the same session (the JSON-RPC
// 2.0 specification asks ids to be unique per connection; go-sdk answers
// -32600 "duplicate in-flight request ID"), so a request never carries its
// client's id into the gateway's session: one stuck call would otherwise
// fail every later call of another client that reuses its id. The id is
// unique per replica, as the sessions are.
func (c *sessionCache) requestID() json.RawMessage {
	return strconv.AppendQuote(nil, "toolmesh-"+strconv.FormatUint(c.ids.Add(1), 10))
}

// get returns the open session of key, opening it with open when there is
// none.
func (c *sessionCache) get(ctx context.Context, key sessionKey, open func(context.Context) (string, error)) (string, error) {
	v, _ := c.slots.LoadOrStore(key, &sessionSlot{})
	slot := v.(*sessionSlot)
	if p := slot.id.Load(); p != nil {
		return *p, nil
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if p := slot.id.Load(); p != nil {
		return *p, nil
	}
	id, err := open(ctx)
	if err != nil {
		return "", err
	}
	slot.id.Store(&id)
	return id, nil
}

// invalidate forgets the session of key if it is still stale: a call that
// already replaced it does not lose the new one.
func (c *sessionCache) invalidate(key sessionKey, stale string) {
	v, ok := c.slots.Load(key)
	if !ok {
		return
	}
	slot := v.(*sessionSlot)
	if p := slot.id.Load(); p != nil && *p == stale {
		slot.id.CompareAndSwap(p, nil)
	}
}
