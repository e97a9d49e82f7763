package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/thanos-io/objstore"

	"github.com/tessera-tsdb/tessera/dbnode/snapshot"
	"github.com/tessera-tsdb/tessera/internal/pace"
)

// UploadOptions say which shards of a snapshot to upload and how fast.
type UploadOptions struct {
	Shards []uint32
	// BytesPerSecond bounds the upload (0: unbounded).
	BytesPerSecond int64
	// Concurrency is how many parts are read and uploaded at once (> 0).
	Concurrency int
	// Progress, when set, is called once the parts are listed and after
	// every part (from several goroutines at once; it must be safe for
	// that).
	Progress func(Progress)
	// Previous, when set, is the bucket's latest complete backup: a
	// sealed block whose volume it recorded from this node with the same
	// checkpoint digest is referenced as it was (after checking that the
	// object is still in the bucket), without reading the block.
	Previous *Manifest
}

// Progress counts an upload's parts so far.
type Progress struct {
	Parts    int `json:"parts"`    // known to do
	Done     int `json:"done"`     // handled (uploaded or found)
	Uploaded int `json:"uploaded"` // stored by this run
	Skipped  int `json:"skipped"`  // already in the bucket
	// Reused are the skipped parts referenced from the previous backup
	// without reading their sealed volume (UploadOptions.Previous).
	Reused          int   `json:"reused"`
	BytesUploaded   int64 `json:"bytesUploaded"`
	BytesTotal      int64 `json:"bytesTotal"` // of the parts handled
	SamplesUploaded int64 `json:"samplesUploaded"`
}

type counters struct {
	parts, done, uploaded, skipped, reused atomic.Int64
	bytesUp, bytesTotal, samplesUp         atomic.Int64
}

func (c *counters) progress() Progress {
	return Progress{Parts: int(c.parts.Load()), Done: int(c.done.Load()), Uploaded: int(c.uploaded.Load()),
		Skipped: int(c.skipped.Load()), Reused: int(c.reused.Load()), BytesUploaded: c.bytesUp.Load(), BytesTotal: c.bytesTotal.Load(),
		SamplesUploaded: c.samplesUp.Load()}
}

type partJob struct {
	shard     uint32
	block     *snapshot.BlockEntry
	unflushed *snapshot.UnflushedEntry
}

// Upload stores the parts of the given shards of snapshot s in the
// bucket and returns their manifest entries. A part already in the
// bucket with the same size is not uploaded again: parts are named by
// their hash, so it holds the same bytes (a torn upload from a killed
// run has another size and is replaced). Every part is read through the
// fileset's checksums before it is hashed, so damage on the node is
// reported here, naming the block, rather than copied into the backup.
func Upload(ctx context.Context, b objstore.Bucket, s *snapshot.Snapshot, o UploadOptions) ([]ShardEntry, Progress, error) {
	if o.Concurrency <= 0 {
		return nil, Progress{}, fmt.Errorf("upload: concurrency must be > 0, got %d", o.Concurrency)
	}
	want := map[uint32]bool{}
	for _, sh := range o.Shards {
		if sh >= s.Meta.NumShards {
			return nil, Progress{}, fmt.Errorf("upload: shard %d out of range (snapshot has %d shards)", sh, s.Meta.NumShards)
		}
		want[sh] = true
	}
	var jobs []partJob
	for i := range s.Meta.Blocks {
		if e := &s.Meta.Blocks[i]; want[e.Shard] {
			jobs = append(jobs, partJob{shard: e.Shard, block: e})
		}
	}
	for i := range s.Meta.Unflushed {
		if e := &s.Meta.Unflushed[i]; want[e.Shard] {
			jobs = append(jobs, partJob{shard: e.Shard, unflushed: e})
		}
	}
	prev := previousParts(o.Previous, s.Meta.NodeID)
	var c counters
	c.parts.Store(int64(len(jobs)))
	// The parts to do are known now: said before the first one ends, so
	// a slow first part shows 0 of n rather than nothing.
	if o.Progress != nil {
		o.Progress(c.progress())
	}
	limiter := pace.New(o.BytesPerSecond)
	refs := make([]ObjectRef, len(jobs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range o.Concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) || ctx.Err() != nil {
					return
				}
				ref, err := uploadPart(ctx, b, s, jobs[i], prev, limiter, &c)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					cancel()
					return
				}
				refs[i] = ref
				if o.Progress != nil {
					o.Progress(c.progress())
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, c.progress(), err
	}
	if err := ctx.Err(); err != nil {
		return nil, c.progress(), err
	}
	byShard := map[uint32]*ShardEntry{}
	for i, j := range jobs {
		e := byShard[j.shard]
		if e == nil {
			e = &ShardEntry{Shard: j.shard, Source: s.Meta.NodeID, Snapshot: s.Meta.ID}
			byShard[j.shard] = e
		}
		e.Objects = append(e.Objects, refs[i])
	}
	out := make([]ShardEntry, 0, len(o.Shards))
	for _, sh := range o.Shards {
		if e := byShard[sh]; e != nil {
			out = append(out, *e)
		} else {
			out = append(out, ShardEntry{Shard: sh, Source: s.Meta.NodeID, Snapshot: s.Meta.ID}) // no data
		}
	}
	slices.SortFunc(out, func(a, b ShardEntry) int { return int(a.Shard) - int(b.Shard) })
	return out, c.progress(), nil
}

// sealedKey identifies a block part by the sealed volume it was read from.
type sealedKey struct {
	ns         string
	shard      uint32
	blockStart int64
	blockSize  int64
	volume     int
	checkpoint string
}

// previousParts indexes the block parts of m read from node's volumes.
func previousParts(m *Manifest, node string) map[sealedKey]ObjectRef {
	if m == nil {
		return nil
	}
	out := map[sealedKey]ObjectRef{}
	for _, e := range m.Shards {
		for _, o := range e.Objects {
			if o.Kind != KindBlock || o.From == nil || o.From.Node != node || o.From.Checkpoint == "" {
				continue
			}
			out[sealedKey{o.Namespace, e.Shard, o.BlockStart, o.BlockSize, o.From.Volume, o.From.Checkpoint}] = o
		}
	}
	return out
}

func uploadPart(ctx context.Context, b objstore.Bucket, s *snapshot.Snapshot, j partJob, prev map[sealedKey]ObjectRef,
	limiter *pace.Limiter, c *counters) (ObjectRef, error) {
	var (
		part []byte
		ref  ObjectRef
		err  error
		from *PartSource
	)
	if j.block != nil {
		d, ok, err := s.VolumeDigest(*j.block)
		if err != nil {
			return ObjectRef{}, fmt.Errorf("upload shard %d: %w", j.shard, err)
		}
		if ok {
			from = &PartSource{Node: s.Meta.NodeID, Volume: j.block.Volume, Checkpoint: d.String()}
			k := sealedKey{j.block.Namespace, j.shard, j.block.BlockStart, j.block.BlockSize, from.Volume, from.Checkpoint}
			if old, ok := prev[k]; ok {
				// The volume is the one the previous backup read: its part
				// is the same, if the bucket still holds it.
				attrs, err := b.Attributes(ctx, old.Key)
				switch {
				case err == nil && attrs.Size == old.Size:
					c.bytesTotal.Add(old.Size)
					c.skipped.Add(1)
					c.reused.Add(1)
					c.done.Add(1)
					return old, nil
				case err != nil && !b.IsObjNotFoundErr(err):
					return ObjectRef{}, fmt.Errorf("upload shard %d: look up %s: %w", j.shard, old.Key, err)
				}
				// Gone (pruned) or torn: read the block and upload it again.
			}
		}
		var series, samples int
		part, series, samples, err = s.BlockPart(*j.block)
		ref = ObjectRef{Kind: KindBlock, Namespace: j.block.Namespace, BlockStart: j.block.BlockStart,
			BlockSize: j.block.BlockSize, Series: series, Samples: samples, From: from}
		if err != nil {
			return ObjectRef{}, fmt.Errorf("upload shard %d: %w", j.shard, err)
		}
	} else {
		part, err = s.UnflushedPart(*j.unflushed)
		ref = ObjectRef{Kind: KindUnflushed, Namespace: j.unflushed.Namespace, Series: j.unflushed.Series}
		if err != nil {
			return ObjectRef{}, fmt.Errorf("upload shard %d: %w", j.shard, err)
		}
	}
	ref.SHA256 = Sum(part)
	ref.Key = ObjectKey(ref.SHA256)
	ref.Size = int64(len(part))
	c.bytesTotal.Add(ref.Size)
	attrs, err := b.Attributes(ctx, ref.Key)
	switch {
	case err == nil && attrs.Size == ref.Size:
		c.skipped.Add(1)
		c.done.Add(1)
		return ref, nil
	case err != nil && !b.IsObjNotFoundErr(err):
		return ObjectRef{}, fmt.Errorf("upload shard %d: look up %s: %w", j.shard, ref.Key, err)
	}
	if err := limiter.Wait(ctx, ref.Size); err != nil {
		return ObjectRef{}, err
	}
	if err := b.Upload(ctx, ref.Key, bytes.NewReader(part)); err != nil {
		return ObjectRef{}, fmt.Errorf("upload shard %d: %s: %w", j.shard, ref.Key, err)
	}
	c.uploaded.Add(1)
	c.done.Add(1)
	c.bytesUp.Add(ref.Size)
	c.samplesUp.Add(int64(ref.Samples))
	return ref, nil
}
