package storage

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/limits"
	"github.com/uber-go/tally/v4"
)

// NamespaceOptions are the time rules of one namespace.
type NamespaceOptions struct {
	Name         string
	Retention    time.Duration
	BlockSize    time.Duration
	BufferPast   time.Duration
	BufferFuture time.Duration
	ColdWrites   bool
	Index        bool
	// RollupOf names the namespace this one is the rollup of (empty: a
	// raw namespace). Its blocks are computed from the source's at flush
	// (rollup.go), at Resolution; nothing writes samples to it.
	RollupOf   string
	Resolution time.Duration
}

// Options configure a Database.
type Options struct {
	// Dir is the data directory: commit log under Dir/commitlog, filesets
	// under Dir/data.
	Dir string
	// FS is the file-system seam; vfs.OS() when nil.
	FS         vfs.FS
	Namespaces []NamespaceOptions
	// NumShards is the number of virtual shards (the node passes
	// config's cluster.numShards). Required.
	NumShards uint32
	// CommitLogMode, CommitLogFlushEvery, ... configure the commit log
	// (commitlog.Options: the node passes its config's commitlog section;
	// the sizes and interval are required).
	CommitLogMode       commitlog.Mode
	CommitLogFlushEvery time.Duration
	CommitLogMaxFile    int64
	CommitLogMaxPending int64
	// TickEvery is how often the background loop flushes sealed blocks,
	// expires data and deletes flushed commit logs. 0 disables the loop
	// (tests call Tick themselves).
	TickEvery time.Duration
	// RestartSnapshot writes a restart snapshot of memory (memsnap.go)
	// from the background loop when the last one is RestartSnapshotEvery
	// old and the commit log has grown by RestartSnapshotLogBytes since,
	// and loads it at Open in place of the commit log files it covers
	// (config storage.restartSnapshot; the node passes its defaults,
	// required when on). Off: snapshots left by an earlier run are removed
	// at Open and the whole log is replayed.
	RestartSnapshot         bool
	RestartSnapshotEvery    time.Duration
	RestartSnapshotLogBytes int64
	// Now is the clock; time.Now when nil. A seam for tests.
	Now func() time.Time
	// Limits: WriteBatch refuses to create a series past
	// MaxActiveSeries (replay and LoadBatch never refuse: that data was
	// acknowledged already). nil: no limit.
	Limits  *limits.Limits
	Logger  *slog.Logger
	Metrics tally.Scope
}

// check refuses what the node's config always fills and fills the seams
// left nil (file system, clock, logger, metrics).
func (o *Options) check() error {
	if o.Dir == "" {
		return fmt.Errorf("storage: options: Dir is empty")
	}
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	if o.NumShards == 0 {
		return fmt.Errorf("storage: options: NumShards is 0")
	}
	if len(o.Namespaces) == 0 {
		return fmt.Errorf("storage: options: no namespaces")
	}
	seen := map[string]bool{}
	for _, n := range o.Namespaces {
		if n.BlockSize <= 0 || n.Retention < n.BlockSize || n.BufferPast <= 0 || n.BufferFuture <= 0 {
			return fmt.Errorf("storage: namespace %q: bad time options %+v", n.Name, n)
		}
		if seen[n.Name] {
			return fmt.Errorf("storage: namespace %q defined twice", n.Name)
		}
		seen[n.Name] = true
	}
	if o.RestartSnapshot && (o.RestartSnapshotEvery <= 0 || o.RestartSnapshotLogBytes <= 0) {
		return fmt.Errorf("storage: options: restart snapshot on with interval %v and log bytes %d", o.RestartSnapshotEvery, o.RestartSnapshotLogBytes)
	}
	if err := checkRollups(o.Namespaces); err != nil {
		return err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = tally.NoopScope
	}
	return nil
}
