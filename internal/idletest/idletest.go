// Package idletest checks that an HTTP server closes an idle keep-alive
// connection, for the tests of the servers' idle timeouts.
package idletest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// ExpectClose sends one keep-alive GET of path to addr and waits for the
// server to close the connection once it is idle; the 30 s deadline only
// bounds a hang.
func ExpectClose(t testing.TB, addr, path string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: toolmesh\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatalf("%s answered %d with Connection: close; want a kept-alive connection", path, resp.StatusCode)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the idle connection is still open after 30s")
		}
		t.Fatalf("read on the idle connection: %v, want EOF", err)
	}
}
