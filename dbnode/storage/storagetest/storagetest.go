// Package storagetest opens real storage engines for other packages'
// tests and benchmarks, with the namespace a node has by default.
package storagetest

import (
	"testing"
	"time"

	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/limits"
)

// Namespace is the default node's namespace: "default", 48h retention, 2h
// blocks, 10m past and 2m future buffers, cold writes, indexed.
func Namespace() storage.NamespaceOptions {
	return storage.NamespaceOptions{Name: "default", Retention: 48 * time.Hour, BlockSize: 2 * time.Hour,
		BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: true, Index: true}
}

// Open opens a database in a temporary directory of tb with Namespace,
// numShards shards and a sync commit log, reading the clock from now (the
// wall clock when nil). It is closed when tb's cleanup runs.
func Open(tb testing.TB, numShards uint32, now func() time.Time) *storage.Database {
	tb.Helper()
	return open(tb, storage.Options{NumShards: numShards, Now: now})
}

// OpenWithLimits is Open with limits applied to writes (the active
// series limit lives in storage).
func OpenWithLimits(tb testing.TB, numShards uint32, l *limits.Limits) *storage.Database {
	tb.Helper()
	return open(tb, storage.Options{NumShards: numShards, Limits: l})
}

// Options is o with the commit log sizes and interval, and the shard
// count, taken from config.Default() where o leaves them zero, as a node
// fills them from its config: the default values are written once, in
// config.Defaults.
func Options(o storage.Options) storage.Options {
	d := config.Default()
	if o.NumShards == 0 {
		o.NumShards = uint32(d.Cluster.NumShards)
	}
	if o.CommitLogFlushEvery == 0 {
		o.CommitLogFlushEvery = d.CommitLog.FlushEvery
	}
	if o.CommitLogMaxFile == 0 {
		o.CommitLogMaxFile = d.CommitLog.MaxFileSize
	}
	if o.CommitLogMaxPending == 0 {
		o.CommitLogMaxPending = d.CommitLog.MaxPendingBytes
	}
	if o.RestartSnapshotEvery == 0 {
		o.RestartSnapshotEvery = d.Storage.RestartSnapshot.Every
	}
	if o.RestartSnapshotLogBytes == 0 {
		o.RestartSnapshotLogBytes = d.Storage.RestartSnapshot.LogBytes
	}
	return o
}

func open(tb testing.TB, o storage.Options) *storage.Database {
	tb.Helper()
	o.Dir = tb.TempDir()
	o.Namespaces = []storage.NamespaceOptions{Namespace()}
	o.CommitLogMode = commitlog.ModeSync
	db, err := storage.Open(Options(o))
	if err != nil {
		tb.Fatalf("open storage: %v", err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}
