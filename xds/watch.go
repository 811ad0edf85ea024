package xds

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"time"
)

// DefaultOverridesInterval is how often WatchOverrides looks at the file.
const DefaultOverridesInterval = 2 * time.Second

// WatchOverrides keeps the overrides in force in step with the override
// file at path until ctx is done, polling every interval (zero means
// DefaultOverridesInterval). It reads the file at once, then whenever its
// modification time or size changed and then stayed the same for one more
// interval (so a file caught mid-write is not applied; renaming a complete
// file into place is still the safe way to write it). Content it has
// already applied is not parsed again, and content equal to the overrides
// in force changes nothing. A new file that does not parse or validate,
// that the current Portal cannot be translated with, or that is empty
// (zero bytes, as while being rewritten; write "{}" to clear every
// override) is logged, counted
// (toolmesh_xds_override_reloads_total{result="rejected"}) and shown in
// OverridesStatus; the last good overrides stay in force. A missing or
// unreadable file is treated the same way: deleting the file does not drop
// the overrides.
func (s *Server) WatchOverrides(ctx context.Context, path string, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultOverridesInterval
	}
	s.setOverridesPath(path)
	w := overridesWatch{s: s, path: path}
	w.poll(ctx)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.poll(ctx)
		}
	}
}

// fileStamp is what a poll compares to notice a change.
type fileStamp struct {
	modTime time.Time
	size    int64
}

func stampOf(fi os.FileInfo) fileStamp { return fileStamp{fi.ModTime(), fi.Size()} }

func (a fileStamp) equal(b fileStamp) bool { return a.modTime.Equal(b.modTime) && a.size == b.size }

// overridesWatch is the state of one WatchOverrides loop.
type overridesWatch struct {
	s        *Server
	path     string
	polled   bool              // a poll ran: later changes must settle
	stamp    fileStamp         // of the content last read
	read     bool              // stamp is set
	changing *fileStamp        // a change seen on the last poll, not yet settled
	statErr  string            // last stat error, logged once
	seen     [sha256.Size]byte // content last applied
	hasSeen  bool
}

func (w *overridesWatch) poll(ctx context.Context) {
	first := !w.polled
	w.polled = true
	fi, err := os.Stat(w.path)
	if err != nil {
		w.changing = nil
		if err.Error() != w.statErr { // once per distinct problem
			w.statErr = err.Error()
			w.reject(ctx, fmt.Errorf("stat overrides: %w", err))
		}
		return
	}
	st := stampOf(fi)
	if w.statErr == "" && w.read && st.equal(w.stamp) {
		w.changing = nil
		return
	}
	if !first && (w.changing == nil || !st.equal(*w.changing)) {
		w.changing = &st // wait one interval for the writer to finish
		return
	}
	w.changing, w.statErr, w.stamp, w.read = nil, "", st, true
	data, err := os.ReadFile(w.path)
	if err != nil {
		w.reject(ctx, fmt.Errorf("read overrides: %w", err))
		return
	}
	sum := sha256.Sum256(data)
	if w.hasSeen && sum == w.seen {
		return // touched, not changed
	}
	// A rejected content is tried again only when the file changes or is
	// touched (the Portal may have changed meanwhile).
	w.hasSeen = false
	if len(data) == 0 {
		w.reject(ctx, fmt.Errorf("overrides %s: the file is empty (being rewritten?); write {} to clear every override", w.path))
		return
	}
	o, err := ParseOverrides(data)
	if err != nil {
		w.reject(ctx, fmt.Errorf("overrides %s: %w", w.path, err))
		return
	}
	if st := w.s.OverridesStatus(); o.Version() == st.Version && st.LastError == "" {
		w.seen, w.hasSeen = sum, true
		return // reformatted, same overrides
	}
	// SetOverrides logs the overrides it puts in force.
	if _, err := w.s.SetOverrides(ctx, o); err != nil {
		w.reject(ctx, fmt.Errorf("overrides %s: %w", w.path, err))
		return
	}
	w.seen, w.hasSeen = sum, true
	w.s.metrics.overrideReloads.WithLabelValues("applied").Inc()
}

// reject records a file that is not applied; the overrides in force stay.
func (w *overridesWatch) reject(ctx context.Context, err error) {
	w.s.metrics.overrideReloads.WithLabelValues("rejected").Inc()
	w.s.log.ErrorContext(ctx, "xds override file rejected, the last good overrides stay in force",
		"path", w.path, "overrides", w.s.OverridesStatus().Version, "error", err)
	w.s.updateOverridesStatus(func(st *OverridesStatus) { st.LastError = err.Error() })
}

func (s *Server) setOverridesPath(path string) {
	s.updateOverridesStatus(func(st *OverridesStatus) { st.Path = path })
}

// updateOverridesStatus changes the published OverridesStatus under s.mu,
// the lock SetOverrides publishes under.
func (s *Server) updateOverridesStatus(change func(*OverridesStatus)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := *s.ovState.Load()
	change(&st)
	s.ovState.Store(&st)
}
