package commitlog

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/uber-go/tally/v4"
)

// Mode selects when Write returns.
type Mode int

const (
	// ModeSync: Write returns only after its batch is fsynced. Concurrent
	// writers share one write+fsync (group commit).
	ModeSync Mode = iota
	// ModeAsync: Write returns once the batch is queued; the log is written
	// and fsynced every FlushEvery, so a crash may lose up to that much.
	ModeAsync
)

func (m Mode) String() string {
	switch m {
	case ModeSync:
		return "sync"
	case ModeAsync:
		return "async"
	}
	return "unknown"
}

// Options configures a Log. The node fills the sizes and the interval
// from its config's commitlog section (config.Defaults writes their
// default values, not this package); Open refuses them zero.
type Options struct {
	Dir string
	FS  vfs.FS // vfs.OS() when nil

	// Mode: ModeSync returns from Write only after the record is fsynced;
	// concurrent writers' batches share one write+fsync.
	Mode Mode
	// FlushEvery (ModeAsync) is the fsync interval, and the longest a
	// queued async record waits before it is written (config
	// commitlog.flushEvery).
	FlushEvery time.Duration
	// MaxFileSize: the active file is rotated once it holds this many
	// bytes (config commitlog.maxFileSize). A file can exceed it by at
	// most one record.
	MaxFileSize int64
	// MaxPending bounds the bytes queued or being written; a Write that
	// would exceed it returns ErrQueueFull (config
	// commitlog.maxPendingBytes). A batch larger than MaxPending is still
	// accepted when nothing else is pending.
	MaxPending int64
	// ReplayHistogram is Open's replay callback for native histogram
	// samples, as its replay argument is for floats. With it nil, Open
	// fails on a file holding histograms (when it replays at all).
	ReplayHistogram func(HistEntry) error
	// Covered, when set, is asked at Open for each file before it is
	// replayed: a file it reports covered (storage's restart snapshot
	// already holds every entry of it) is not read, and the ranges it
	// returns stand for the file's in Files. The file is kept and removed
	// as any other (Remove).
	Covered func(seq uint64) (ranges map[string]TimeRange, covered bool)

	Logger  *slog.Logger // nil = discard
	Metrics tally.Scope  // nil = tally.NoopScope
}

// withSeams fills the seams left nil: the OS file system, a discarding
// logger, no metrics.
func (o Options) withSeams() Options {
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = tally.NoopScope
	}
	return o
}

func (o Options) validate() error {
	if o.Dir == "" {
		return errors.New("commitlog: options: Dir is required")
	}
	if o.Mode != ModeSync && o.Mode != ModeAsync {
		return errors.New("commitlog: options: Mode must be ModeSync or ModeAsync")
	}
	if o.FlushEvery <= 0 || o.MaxFileSize <= 0 || o.MaxPending <= 0 {
		return fmt.Errorf("commitlog: options: FlushEvery, MaxFileSize and MaxPending must be > 0, got %v, %d, %d",
			o.FlushEvery, o.MaxFileSize, o.MaxPending)
	}
	return nil
}
