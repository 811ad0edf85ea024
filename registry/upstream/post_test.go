package upstream_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/registry/upstream"
)

// TestPost: Post sends exactly the given headers and body, passes any
// status back, follows no redirect, and bounds the body it reads.
func TestPost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/echo":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"got":"`+string(b)+`","x":"`+r.Header.Get("X-Set")+`"}`)
		case "/moved":
			http.Redirect(w, r, "/echo", http.StatusFound)
		case "/big":
			_, _ = io.WriteString(w, strings.Repeat("a", 100))
		case "/refused":
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	c := upstream.New(upstream.Options{})
	h := http.Header{"X-Set": {"v"}}
	for _, tc := range []struct {
		path, ct, body string
		max            int64
		status         int
		over           bool
	}{
		{"/echo", "application/json", `{"got":"hi","x":"v"}`, 100, 200, false},
		{"/moved", "", "", 10, http.StatusFound, false},
		{"/big", "text/plain; charset=utf-8", strings.Repeat("a", 10), 10, 200, true},
		{"/refused", "", "", 10, http.StatusUnauthorized, false},
	} {
		a, err := c.Post(t.Context(), srv.URL+tc.path, h, []byte("hi"), tc.max)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if a.Status != tc.status || a.Over != tc.over || string(a.Body) != tc.body ||
			(tc.ct != "" && a.ContentType != tc.ct) {
			t.Errorf("%s: %+v (body %q)", tc.path, a, a.Body)
		}
	}
	if _, err := c.Post(t.Context(), "http://127.0.0.1:1/none", h, nil, 10); err == nil {
		t.Error("no error from a server that is not there")
	}
}

// TestEndSession: EndSession sends DELETE with exactly the given headers
// and passes the status back; a redirect is not followed, so the session
// and credential headers never reach another origin.
func TestEndSession(t *testing.T) {
	var elsewhere int
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere++ }))
	defer other.Close()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.Header.Get("Mcp-Session-Id")+" "+r.Header.Get("X-Api-Key"))
		switch r.URL.Path {
		case "/mcp":
			w.WriteHeader(http.StatusNoContent)
		case "/refuses":
			w.WriteHeader(http.StatusMethodNotAllowed)
		case "/moved":
			http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
		}
	}))
	defer srv.Close()
	c := upstream.New(upstream.Options{})
	h := http.Header{"Mcp-Session-Id": {"s1"}, "X-Api-Key": {"k"}}
	for path, want := range map[string]int{"/mcp": http.StatusNoContent, "/refuses": http.StatusMethodNotAllowed} {
		if status, err := c.EndSession(t.Context(), srv.URL+path, h); err != nil || status != want {
			t.Errorf("%s: status %d, %v; want %d", path, status, err, want)
		}
	}
	if _, err := c.EndSession(t.Context(), srv.URL+"/moved", h); err == nil || elsewhere != 0 {
		t.Errorf("a redirect: error %v, %d requests to the other origin; want an error and none", err, elsewhere)
	}
	for _, g := range got {
		if g != "DELETE s1 k" {
			t.Errorf("the server saw %q, want DELETE with the session and credential headers", g)
		}
	}
}
