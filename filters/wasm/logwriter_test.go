package wasm

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// recorder keeps the "line" attribute of every record.
type recorder struct {
	mu    sync.Mutex
	lines []string
	msgs  []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			r.lines = append(r.lines, a.Value.String())
		}
		return true
	})
	return nil
}

func TestLineLogger(t *testing.T) {
	rec := &recorder{}
	l := newLineLogger(slog.New(rec), slog.LevelWarn)
	_, _ = l.Write([]byte("first "))
	_, _ = l.Write([]byte("line\nsecond\n" + strings.Repeat("x", 3000) + "\n"))
	for range 40 {
		_, _ = l.Write([]byte("flood\n"))
	}
	if len(rec.lines) != linesPerSecond {
		t.Fatalf("logged %d lines, want the per-second cap %d", len(rec.lines), linesPerSecond)
	}
	if rec.lines[0] != "first line" || rec.lines[1] != "second" || len(rec.lines[2]) != maxLineBytes {
		t.Fatalf("lines = %q, %q, %d bytes", rec.lines[0], rec.lines[1], len(rec.lines[2]))
	}
}
