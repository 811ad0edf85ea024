package notify

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// BenchmarkIdleListeners opens 1,000 idle streams on 127.0.0.1 and reports
// what each costs the process: heap bytes and goroutines per listener. The
// clients are raw TCP connections that wrote a request and read the
// response headers, so they add no goroutines; their few socket buffers
// are in the heap figure. Run it with -benchtime 1x:
//
//	go test -run '^$' -bench IdleListeners -benchtime 1x ./notify
func BenchmarkIdleListeners(b *testing.B) {
	const n = 1000
	src := newFakeSource()
	src.set(snap(b, "r", []string{"a"}, nil))
	s, err := New(src, Options{KeepAlive: time.Hour, MaxStreams: n, MaxStreamsPerClient: n})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	addr := strings.TrimPrefix(hs.URL, "http://")
	req := "GET " + wire.NotificationsPath + " HTTP/1.1\r\nHost: x\r\n" +
		wire.RouteHeader + ": r\r\n" + wire.NotifyHeader + ": tools\r\n\r\n"
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		conns := make([]net.Conn, 0, n)
		for range n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Write([]byte(req)); err != nil {
				b.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("stream %d: %v %v", len(conns), resp, err)
			}
			conns = append(conns, c)
		}
		if got := s.Listeners(); got != n {
			b.Fatalf("Listeners() = %d, want %d", got, n)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		g1 := runtime.NumGoroutine()
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n, "heap-B/listener")
		b.ReportMetric(float64(after.StackInuse-before.StackInuse)/n, "stack-B/listener")
		b.ReportMetric(float64(g1-g0)/n, "goroutines/listener")
		for _, c := range conns {
			c.Close()
		}
		deadline := time.Now().Add(30 * time.Second)
		for s.Listeners() != 0 {
			if time.Now().After(deadline) {
				b.Fatal("listeners did not return to zero")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
