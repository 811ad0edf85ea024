package wasm

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"time"
)

// Guest output is capped so a chatty or hostile module cannot flood the
// logs: lines are truncated and at most linesPerSecond lines are logged per
// module and stream each second.
const (
	maxLineBytes   = 1024
	linesPerSecond = 20
)

// lineLogger turns a guest's stdout or stderr into log records, one per line.
// All instances of a module share it, hence the mutex; guest output is off
// the hot path.
type lineLogger struct {
	log   *slog.Logger
	level slog.Level

	mu      sync.Mutex
	partial []byte
	window  time.Time
	lines   int
	dropped int
}

func newLineLogger(log *slog.Logger, level slog.Level) *lineLogger {
	return &lineLogger{log: log, level: level}
}

// Write implements io.Writer.
func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLineBytes - len(l.partial)
			l.partial = append(l.partial, p[:min(len(p), max(room, 0))]...)
			break
		}
		room := maxLineBytes - len(l.partial)
		l.partial = append(l.partial, p[:min(i, max(room, 0))]...)
		l.emit()
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineLogger) emit() {
	now := time.Now()
	if now.Sub(l.window) >= time.Second {
		if l.dropped > 0 {
			l.log.Warn("wasm guest output dropped", "lines", l.dropped)
		}
		l.window, l.lines, l.dropped = now, 0, 0
	}
	if l.lines < linesPerSecond {
		l.lines++
		l.log.Log(context.Background(), l.level, "wasm guest output", "line", string(l.partial))
	} else {
		l.dropped++
	}
	l.partial = l.partial[:0]
}
