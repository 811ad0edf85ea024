package app

import (
	"io"
	"log/slog"
)

// newLogger returns the process logger: text or JSON lines on w at the
// configured level. The config was validated, so the level parses.
func newLogger(cfg Config, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
