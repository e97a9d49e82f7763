package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/thanos-io/objstore"

	"github.com/tessera-tsdb/tessera/dbnode/snapshot"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// ErrDamaged is wrapped by the error of a part whose bytes are not what
// the manifest says (missing, wrong size, wrong hash, failing its own
// checks, or naming another shard or block).
var ErrDamaged = errors.New("damaged backup object")

// Damage names one damaged part and what it costs.
type Damage struct {
	Key        string `json:"key"`
	Shard      uint32 `json:"shard"`
	Namespace  string `json:"namespace"`
	Kind       string `json:"kind"`
	BlockStart int64  `json:"blockStart,omitempty"`
	Err        string `json:"error"`
	// SourceNumShards is set by a restore into another shard count: Shard
	// is then the backup's shard (of SourceNumShards), and what is lost is
	// the series of it that hash to the shards the node restores.
	SourceNumShards uint32 `json:"sourceNumShards,omitempty"`
}

func (d Damage) String() string {
	what := fmt.Sprintf("unflushed samples of shard %d (%s)", d.Shard, d.Namespace)
	if d.Kind == KindBlock {
		what = fmt.Sprintf("block %d of shard %d (%s)", d.BlockStart, d.Shard, d.Namespace)
	}
	if d.SourceNumShards > 0 {
		what = fmt.Sprintf("the series of this node's shards in the %s of %d in the backup", what, d.SourceNumShards)
	}
	return fmt.Sprintf("%s: %s lost: %s", d.Key, what, d.Err)
}

// fetchPart downloads one part and checks it against its reference:
// size, SHA-256, the part's own CRC and layout, and that it holds the
// shard (and block) the manifest says. A bucket error that is not a
// missing object is returned as is (retryable); everything else wraps
// ErrDamaged.
func fetchPart(ctx context.Context, b objstore.Bucket, shard uint32, o ObjectRef) ([]byte, error) {
	rc, err := b.Get(ctx, o.Key)
	if b.IsObjNotFoundErr(err) {
		return nil, fmt.Errorf("%w: %s: missing", ErrDamaged, o.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", o.Key, err)
	}
	defer rc.Close()
	buf, err := io.ReadAll(io.LimitReader(rc, o.Size+1))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", o.Key, err)
	}
	if int64(len(buf)) != o.Size {
		return nil, fmt.Errorf("%w: %s: %d bytes, manifest says %d", ErrDamaged, o.Key, len(buf), o.Size)
	}
	if got := Sum(buf); got != o.SHA256 {
		return nil, fmt.Errorf("%w: %s: sha256 %s, manifest says %s", ErrDamaged, o.Key, got, o.SHA256)
	}
	var h snapshot.PartHeader
	switch o.Kind {
	case KindBlock:
		h, _, err = snapshot.DecodeBlock(buf)
	case KindUnflushed:
		h, _, err = snapshot.DecodeUnflushed(buf)
	default:
		err = fmt.Errorf("unknown kind %q", o.Kind)
	}
	if err == nil && (h.Shard != shard || h.Namespace != o.Namespace || h.BlockStart != o.BlockStart) {
		err = fmt.Errorf("holds shard %d block %d of %s, manifest says shard %d block %d of %s",
			h.Shard, h.BlockStart, h.Namespace, shard, o.BlockStart, o.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDamaged, o.Key, err)
	}
	return buf, nil
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Fraction of the parts to check, 0 < Fraction <= 1 (1: all). The
	// sample is the parts whose hash falls in the first Fraction of the
	// hash space, so two runs check the same parts.
	Fraction    float64
	Concurrency int
	Progress    func(done, total int)
}

// VerifyResult is what Verify checked and found.
type VerifyResult struct {
	Checked int      `json:"checked"`
	Bytes   int64    `json:"bytes"`
	Damaged []Damage `json:"damaged"` // sorted by shard, then block
}

// Verify downloads the parts of backup m (or a sample) and checks every
// checksum. Damage is reported in the result, not as an error; the error
// is for a bucket that could not be read.
func Verify(ctx context.Context, b objstore.Bucket, m *Manifest, o VerifyOptions) (VerifyResult, error) {
	if o.Fraction <= 0 || o.Fraction > 1 {
		return VerifyResult{}, fmt.Errorf("verify: fraction must be in (0, 1], got %v", o.Fraction)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	type job struct {
		shard uint32
		ref   ObjectRef
	}
	var jobs []job
	for _, s := range m.Shards {
		for _, r := range s.Objects {
			if o.Fraction < 1 && hashFraction(r.SHA256) >= o.Fraction {
				continue
			}
			jobs = append(jobs, job{s.Shard, r})
		}
	}
	var (
		res   VerifyResult
		mu    sync.Mutex
		errs  []error
		wg    sync.WaitGroup
		next  atomic.Int64
		done  atomic.Int64
		total = len(jobs)
	)
	for range o.Concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) || ctx.Err() != nil {
					return
				}
				j := jobs[i]
				_, err := fetchPart(ctx, b, j.shard, j.ref)
				mu.Lock()
				switch {
				case errors.Is(err, ErrDamaged):
					res.Damaged = append(res.Damaged, damageOf(j.shard, j.ref, err))
				case err != nil:
					errs = append(errs, err)
				}
				res.Checked++
				res.Bytes += j.ref.Size
				mu.Unlock()
				if o.Progress != nil {
					o.Progress(int(done.Add(1)), total)
				}
			}
		})
	}
	wg.Wait()
	sortDamage(res.Damaged)
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("verify backup %s: %w", m.ID, err)
	}
	return res, ctx.Err()
}

func damageOf(shard uint32, r ObjectRef, err error) Damage {
	return Damage{Key: r.Key, Shard: shard, Namespace: r.Namespace, Kind: r.Kind, BlockStart: r.BlockStart, Err: err.Error()}
}

func sortDamage(d []Damage) {
	sort.Slice(d, func(i, j int) bool {
		if d[i].Shard != d[j].Shard {
			return d[i].Shard < d[j].Shard
		}
		return d[i].BlockStart < d[j].BlockStart
	})
}

// hashFraction maps a hex hash to [0, 1) by its first 8 hex digits.
func hashFraction(sum string) float64 {
	var v uint64
	for i := 0; i < 8 && i < len(sum); i++ {
		c := sum[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		}
		v = v<<4 | uint64(d)
	}
	return float64(v) / float64(1<<32)
}

// decodedPart is a fetched, checked part ready to load.
type decodedPart struct {
	block  *storage.StreamedBlock
	ns     string
	stream []storage.SeriesStream
}

func decodePart(buf []byte, shard uint32, r ObjectRef) decodedPart {
	if r.Kind == KindBlock {
		h, series, _ := snapshot.DecodeBlock(buf) // checked by fetchPart
		return decodedPart{ns: h.Namespace, block: &storage.StreamedBlock{Shard: shard, BlockStart: h.BlockStart, Series: series}}
	}
	h, streams, _ := snapshot.DecodeUnflushed(buf)
	return decodedPart{ns: h.Namespace, stream: streams}
}
