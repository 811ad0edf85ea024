package extproc

import (
	"net/http"
	"slices"
	"testing"

	"github.com/toolmesh/toolmesh/extproc/session"
)

// serveDELETE ends the session a DELETE names: 204, or 404 for one it does
// not know; deleteStatus, when set, is the answer instead.
func (ss *statefulServer) serveDELETE(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.deletes = append(ss.deletes, id)
	switch {
	case ss.deleteStatus != 0:
		w.WriteHeader(ss.deleteStatus)
	case ss.sessions[id] == nil:
		w.WriteHeader(http.StatusNotFound)
	default:
		delete(ss.sessions, id)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (ss *statefulServer) deleted() []string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Clone(ss.deletes)
}

// endClientSession sends a client's DELETE with the session token tok and
// returns the status of the answer and whether it was an ImmediateResponse.
func endClientSession(t *testing.T, env *testEnv, path, tok string) int {
	t.Helper()
	v := env.open(t)
	r := v.send(reqHeaders(true, ":method", "DELETE", ":path", path, ":scheme", "http", ":authority", "localhost:10000",
		"mcp-session-id", tok, "mcp-protocol-version", "2025-11-25", "x-request-id", "req-del"))
	v.close()
	ir := r.GetImmediateResponse()
	if ir == nil {
		t.Fatalf("DELETE answered %v, want an ImmediateResponse", r)
	}
	return int(ir.GetStatus().GetCode())
}

// TestClientSessionEnd: a legacy client's DELETE with the session token
// the gateway issued ends the upstream sessions the token names, one
// DELETE each with that session's id, never the shared session of
// sessionless clients; the client gets 204 whatever the server answered;
// its later calls on this replica go the shared way; a token that does not
// open is 404, and a DELETE without one is 405 as before.
func TestClientSessionEnd(t *testing.T) {
	ss := newStatefulServer(t)
	env := newTestEnv(t, Config{}, statefulRoutes(t, ss.URL))

	tok := immediateHeader(ask(t, env, "/mcp/fed", initBody), "mcp-session-id") // opens up1
	if !session.Is(tok) {
		t.Fatalf("initialize answer without a session token: %q", tok)
	}
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"legacy_tool","arguments":{}}}`
	shared := setOf(t, ask(t, env, "/mcp/fed", call).GetRequestBody().GetResponse().GetHeaderMutation())["mcp-session-id"]
	if shared == "" || shared == "up1" {
		t.Fatalf("a sessionless call went on session %q, want the shared one", shared)
	}

	if got := endClientSession(t, env, "/mcp/fed", tok); got != http.StatusNoContent {
		t.Fatalf("DELETE: status %d, want 204", got)
	}
	if got := ss.deleted(); !slices.Equal(got, []string{"up1"}) {
		t.Fatalf("the server saw DELETEs of %v, want the client's up1 alone", got)
	}
	ss.mu.Lock()
	_, sharedAlive := ss.sessions[shared]
	ss.mu.Unlock()
	if !sharedAlive {
		t.Errorf("the shared session %q was ended", shared)
	}
	if up := setOf(t, ask(t, env, "/mcp/fed", call, "mcp-session-id", tok).GetRequestBody().GetResponse().GetHeaderMutation())["mcp-session-id"]; up == "up1" || up == "" {
		t.Errorf("a call after the DELETE went on session %q, want the shared one", up)
	}

	// A server that refuses or fails the DELETE does not fail the
	// client's: its session ends on the server's expiry.
	for _, status := range []int{http.StatusMethodNotAllowed, http.StatusInternalServerError} {
		tok2 := immediateHeader(ask(t, env, "/mcp/fed", initBody), "mcp-session-id")
		ss.mu.Lock()
		ss.deleteStatus = status
		ss.mu.Unlock()
		if got := endClientSession(t, env, "/mcp/fed", tok2); got != http.StatusNoContent {
			t.Errorf("DELETE answered %d upstream: status %d, want 204", status, got)
		}
	}
	if got := ss.deleted(); len(got) != 3 || slices.Contains(got[1:], shared) || slices.Contains(got[1:], "up1") {
		t.Errorf("the server saw DELETEs of %v: want one per client session, never the shared %q", got, shared)
	}

	for name, bad := range map[string]string{
		"forged":        tok[:len(tok)-4] + "AAAA",
		"another route": mintFor(t, env, "plain"),
	} {
		if got := endClientSession(t, env, "/mcp/fed", bad); got != http.StatusNotFound {
			t.Errorf("%s token: status %d, want 404", name, got)
		}
	}
	if got := endClientSession(t, env, "/mcp/fed", "not-a-token"); got != http.StatusMethodNotAllowed {
		t.Errorf("DELETE without a session token: status %d, want 405", got)
	}
	if got := ss.deleted(); len(got) != 3 {
		t.Errorf("the server saw DELETEs of %v after refused tokens, want none more", got)
	}
}
