package wasm

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"time"
)

// Options configures one WebAssembly filter module. The zero value of every
// field except Name and Path means "use the default".
type Options struct {
	// Name identifies the filter in logs and metrics and is passed to the
	// guest in every envelope.
	Name string
	// Path is the .wasm file. It is read at load, on Reload and, when
	// PollInterval is set, whenever its size or modification time changes.
	Path string
	// Config is handed to the guest's optional configure export once per
	// instance, as raw JSON.
	Config []byte
	// PoolSize bounds the number of live instances, and so the number of
	// concurrent calls into this module (default GOMAXPROCS, at least 2).
	// Callers beyond it wait for a free instance.
	PoolSize int
	// Prewarm is the number of instances created at load and after a
	// reload, before the module takes traffic (default 1, at most PoolSize).
	Prewarm int
	// CallTimeout bounds one call into the guest (default 250ms). A guest
	// that runs longer is stopped, its instance discarded, and the call
	// fails with ErrTimeout. It is wall-clock time: leave headroom for a
	// busy machine and for the guest's own garbage collector (a few ms).
	CallTimeout time.Duration
	// QueueTimeout bounds the wait for a free instance when all PoolSize
	// instances are busy (default 1s); the caller's context bounds it too.
	QueueTimeout time.Duration
	// MemoryPages caps each instance's linear memory in 64 KiB pages
	// (default 512, 32 MiB). A Go guest needs about 45 pages to start.
	MemoryPages uint32
	// MaxEnvelopeBytes refuses larger inputs before they reach the guest
	// (default 4 MiB).
	MaxEnvelopeBytes int
	// RecycleAfter replaces an instance after this many calls, because
	// linear memory never shrinks (default 0: never).
	RecycleAfter uint64
	// PollInterval, when positive, makes the module watch Path and reload
	// itself when the file changes (default 0: reload only on Reload).
	PollInterval time.Duration
	// Uninterruptible turns off the per-call time limit. Calls get faster
	// (wazero's termination checks cost several times the guest's own work
	// in loop-heavy code), but a guest that never returns then blocks its
	// caller forever. Use it only for trusted modules.
	Uninterruptible bool
}

// Defaults.
const (
	DefaultCallTimeout      = 250 * time.Millisecond
	DefaultQueueTimeout     = time.Second
	DefaultMemoryPages      = 512
	DefaultMaxEnvelopeBytes = 4 << 20
	minMemoryPages          = 64
	maxMemoryPages          = 65536
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// withDefaults returns a copy with defaults filled in, or an error naming the
// first bad field.
func (o Options) withDefaults() (Options, error) {
	if !nameRE.MatchString(o.Name) {
		return o, fmt.Errorf("invalid filter name %q: want %s", o.Name, nameRE)
	}
	if o.Path == "" {
		return o, errors.New("path is required")
	}
	if o.PoolSize < 0 || o.Prewarm < 0 || o.CallTimeout < 0 || o.QueueTimeout < 0 ||
		o.MaxEnvelopeBytes < 0 || o.PollInterval < 0 {
		return o, errors.New("negative limits are not allowed")
	}
	if o.PoolSize == 0 {
		o.PoolSize = max(2, runtime.GOMAXPROCS(0))
	}
	o.Prewarm = cmp.Or(o.Prewarm, 1)
	o.Prewarm = min(o.Prewarm, o.PoolSize)
	o.CallTimeout = cmp.Or(o.CallTimeout, DefaultCallTimeout)
	o.QueueTimeout = cmp.Or(o.QueueTimeout, DefaultQueueTimeout)
	o.MemoryPages = cmp.Or(o.MemoryPages, DefaultMemoryPages)
	if o.MemoryPages < minMemoryPages || o.MemoryPages > maxMemoryPages {
		return o, fmt.Errorf("memoryPages %d out of range [%d, %d]", o.MemoryPages, minMemoryPages, maxMemoryPages)
	}
	o.MaxEnvelopeBytes = cmp.Or(o.MaxEnvelopeBytes, DefaultMaxEnvelopeBytes)
	if o.PollInterval > 0 && o.PollInterval < 10*time.Millisecond {
		return o, fmt.Errorf("pollInterval %s is below 10ms", o.PollInterval)
	}
	return o, nil
}

// CheckOptions reports whether opts are valid, without loading anything.
func CheckOptions(opts Options) error {
	_, err := opts.withDefaults()
	return err
}
