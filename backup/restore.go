package backup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/thanos-io/objstore"

	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// RestoreDB is the storage a restore loads into: sealed blocks as they
// were backed up, unflushed samples through the commit log.
type RestoreDB interface {
	LoadBlocks(ns string, blocks []storage.StreamedBlock) error
	LoadStreams(ns string, shard uint32, series []storage.SeriesStream) (int, error)
}

// Restorer is the backup bootstrapper: for the shards a fresh cluster's
// placement gives this node, it fetches the shard's parts of one backup,
// checks every checksum and loads them. A damaged part costs the block
// (or the unflushed samples) it holds: it is reported (Report, logs) and
// the rest of the shard is restored. It is safe for concurrent use.
type Restorer struct {
	bucket objstore.Bucket
	m      *Manifest
	// numShards is the restoring cluster's shard count; when it differs
	// from the backup's, every series is re-hashed (restoreResharded).
	numShards uint32
	db        RestoreDB
	log       *slog.Logger

	mu     sync.Mutex
	report RestoreReport
}

// RestoreReport is what a node restored so far.
type RestoreReport struct {
	Backup        string   `json:"backup"`
	ShardsDone    int      `json:"shardsDone"`
	Parts         int      `json:"parts"`
	Bytes         int64    `json:"bytes"`
	Samples       int64    `json:"samples"`
	Damaged       []Damage `json:"damaged"`
	StartedMs     int64    `json:"startedMs,omitempty"`
	LastShardDone int64    `json:"lastShardDoneMs,omitempty"`
}

// NewRestorer returns the restore source for backup m into a cluster of
// numShards shards. With the backup's own shard count each shard loads
// its own parts; with another, each shard's series are picked out of the
// parts of every source shard that can hold them (restoreResharded).
func NewRestorer(b objstore.Bucket, m *Manifest, numShards uint32, db RestoreDB, log *slog.Logger) (*Restorer, error) {
	if numShards == 0 {
		return nil, fmt.Errorf("restore backup %s: the cluster's shard count is 0", m.ID)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Restorer{bucket: b, m: m, numShards: numShards, db: db, log: log, report: RestoreReport{Backup: m.ID}}, nil
}

// Resharded reports whether the backup's shard count differs from the
// cluster's.
func (r *Restorer) Resharded() bool { return r.m.NumShards != r.numShards }

// WholeBatch tells the bootstrapper to hand over every shard it restores
// in one Restore call (bootstrap.WholeRestore): when the cluster's shard
// count does not divide the backup's, the series of one shard can be in
// any source shard, and restoring in batches would download every part
// once per batch instead of once per node.
func (r *Restorer) WholeBatch() bool {
	return r.Resharded() && r.m.NumShards%r.numShards != 0
}

// Report returns a copy of the restore's progress and damage.
func (r *Restorer) Report() RestoreReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.report
	out.Damaged = slices.Clone(r.report.Damaged)
	return out
}

// loadBatchBytes bounds the parts held in memory before LoadBlocks.
const loadBatchBytes = 64 << 20

// Restore loads the backup's parts of shards. An error (the bucket not
// answering, a load failing) leaves the shards to be retried whole
// (loading is idempotent); damage does not fail the call.
func (r *Restorer) Restore(ctx context.Context, shards []uint32) error {
	r.mu.Lock()
	if r.report.StartedMs == 0 {
		r.report.StartedMs = time.Now().UnixMilli()
	}
	r.mu.Unlock()
	for _, sh := range shards {
		if sh >= r.numShards {
			return fmt.Errorf("restore: shard %d out of range (the cluster has %d)", sh, r.numShards)
		}
	}
	if r.Resharded() {
		return r.restoreResharded(ctx, shards)
	}
	var (
		blocks  = map[string][]storage.StreamedBlock{}
		pending int64
		damaged []Damage
		parts   int
		bytes   int64
		samples int64
	)
	flush := func() error {
		for ns, bl := range blocks {
			if err := r.db.LoadBlocks(ns, bl); err != nil {
				return fmt.Errorf("restore: load blocks of %s: %w", ns, err)
			}
		}
		clear(blocks)
		pending = 0
		return nil
	}
	for _, sh := range shards {
		e, ok := r.m.Shard(sh)
		if !ok {
			continue // the shard held no data
		}
		for _, o := range e.Objects {
			buf, err := fetchPart(ctx, r.bucket, sh, o)
			if errors.Is(err, ErrDamaged) {
				d := damageOf(sh, o, err)
				r.log.Error("restore: damaged backup object; its data is lost, the rest of the shard is restored", "damage", d.String())
				damaged = append(damaged, d)
				continue
			}
			if err != nil {
				return fmt.Errorf("restore shard %d: %w", sh, err)
			}
			p := decodePart(buf, sh, o)
			parts++
			bytes += o.Size
			if p.block != nil {
				blocks[p.ns] = append(blocks[p.ns], *p.block)
				pending += o.Size
				samples += int64(o.Samples)
				if pending >= loadBatchBytes {
					if err := flush(); err != nil {
						return err
					}
				}
				continue
			}
			n, err := r.db.LoadStreams(p.ns, sh, p.stream)
			var rej *storage.RejectedError
			if err != nil && !errors.As(err, &rej) { // out of retention by now: nothing to keep
				return fmt.Errorf("restore shard %d: load unflushed samples: %w", sh, err)
			}
			samples += int64(n)
		}
	}
	if err := flush(); err != nil {
		return err
	}
	r.account(len(shards), parts, bytes, samples, damaged)
	return nil
}

// account adds a finished Restore call to the report.
func (r *Restorer) account(shards, parts int, bytes, samples int64, damaged []Damage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.ShardsDone += shards
	r.report.Parts += parts
	r.report.Bytes += bytes
	r.report.Samples += samples
	// A retried batch reports its damage once.
	for _, d := range damaged {
		if !slices.ContainsFunc(r.report.Damaged, func(x Damage) bool { return x.Key == d.Key && x.Shard == d.Shard }) {
			r.report.Damaged = append(r.report.Damaged, d)
		}
	}
	sortDamage(r.report.Damaged)
	r.report.LastShardDone = time.Now().UnixMilli()
}
