package storage

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/index"
	"github.com/tessera-tsdb/tessera/internal/xtime"
)

// namespace holds the shards and tag index of one namespace.
type namespace struct {
	// hadHist is set once the namespace has taken a native histogram
	// sample: from then on a float write checks its series for a
	// histogram at the same timestamp (admit.floats), which a namespace of
	// floats alone never pays for.
	hadHist atomic.Bool
	// flushedHist is set once a fileset served for the namespace records
	// a series holding histograms (index version 4): from then on a query
	// declining histograms looks them up in the range's filesets' indexes
	// (Database.holdsHistograms) before reading.
	flushedHist atomic.Bool
	// num is this namespace's number, no other namespace of the process
	// has it: a series keeps it (Series.ns) to check a caller's ref in 4
	// bytes instead of a pointer's 8.
	num       uint32
	opts      NamespaceOptions
	blockSize int64        // ms
	index     *index.Index // nil when the namespace is not indexed

	// shards by number, nil until first used; read lock-free on the write
	// path (one atomic load per sample instead of a shared RWMutex).
	shards []atomic.Pointer[shard]
	mu     sync.Mutex // serialises creating and dropping shards
	// active counts the node's in-memory series, all namespaces (shared
	// with the Database).
	active *atomic.Int64
	// vols is the volume bookkeeping per block start (volumes.go),
	// guarded by Database.tickMu.
	vols map[int64]*blockVolumes
	// released is, per shard dropped from this node and block, the
	// highest volume whose section of the shard must not be served again
	// (fileset.Released, persisted by DropShard). Guarded by tickMu.
	released map[releaseKey]int
	// rollup is a rollup namespace's progress (rollup.go).
	rollup rollupProgress
}

type releaseKey struct {
	shard uint32
	bs    int64
}

func newNamespace(opts NamespaceOptions, numShards uint32, active *atomic.Int64) *namespace {
	ns := &namespace{
		num:       nextNamespaceNum(),
		active:    active,
		opts:      opts,
		blockSize: opts.BlockSize.Milliseconds(),
		shards:    make([]atomic.Pointer[shard], numShards),
		vols:      map[int64]*blockVolumes{},
		released:  map[releaseKey]int{},
	}
	if opts.Index {
		ns.index = index.New(ns.blockSize)
	}
	return ns
}

// namespaceNums numbers the namespaces of the process as they are made.
var namespaceNums atomic.Uint64

// nextNamespaceNum is a number no namespace made before has. It panics
// after 2^32-1 namespaces rather than give a number twice (a stale ref of
// a dropped namespace would then pass for one of the new one's series).
func nextNamespaceNum() uint32 {
	n := namespaceNums.Add(1)
	if n > math.MaxUint32 {
		panic("storage: 2^32 namespaces made in one process")
	}
	return uint32(n)
}

func (ns *namespace) blockStart(t int64) int64 { return xtime.BlockStart(t, ns.blockSize) }

// shard returns shard i, creating it on first use.
func (ns *namespace) shard(i uint32) *shard {
	if sh := ns.shards[i].Load(); sh != nil {
		return sh
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if sh := ns.shards[i].Load(); sh != nil {
		return sh
	}
	sh := newShard(i, ns.active)
	ns.shards[i].Store(sh)
	return sh
}

func (ns *namespace) existingShard(i uint32) *shard { return ns.shards[i].Load() }

// dropShard detaches shard i and returns it (nil if it did not exist).
func (ns *namespace) dropShard(i uint32) *shard {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.shards[i].Swap(nil)
}

func (ns *namespace) allShards() []*shard {
	out := make([]*shard, 0, len(ns.shards))
	for i := range ns.shards {
		if sh := ns.shards[i].Load(); sh != nil {
			out = append(out, sh)
		}
	}
	return out
}

// window is the range of sample times [from, to] (ms) that check accepts
// at now, with cold writes taken when bootstrap (as admit.refusal takes
// them): the write path compares a sample's time with it, and calls check
// only for one outside, to say why.
func (ns *namespace) window(now time.Time, bootstrap bool) (from, to int64) {
	nowMs := now.UnixMilli()
	from = nowMs - ns.opts.Retention.Milliseconds()
	if !ns.opts.ColdWrites && !bootstrap {
		from = max(from, nowMs-ns.opts.BufferPast.Milliseconds())
	}
	return from, nowMs + ns.opts.BufferFuture.Milliseconds()
}

// check applies the namespace's time rules to a sample at t, now being
// the wall clock; it returns 0 when the sample is accepted.
func (ns *namespace) check(t int64, now time.Time) (Reason, string) {
	nowMs := now.UnixMilli()
	if limit := nowMs + ns.opts.BufferFuture.Milliseconds(); t > limit {
		return ReasonTooFarFuture, "sample at " + fmtMs(t) +
			" is too far in the future: " + fmtAgeMs(t, limit) +
			" past now+bufferFuture (" + ns.opts.BufferFuture.String() + ")"
	}
	if limit := nowMs - ns.opts.Retention.Milliseconds(); t < limit {
		return ReasonTooOld, "sample at " + fmtMs(t) +
			" is out of retention: " + fmtAgeMs(limit, t) +
			" older than now-retention (" + ns.opts.Retention.String() + ")"
	}
	if !ns.opts.ColdWrites {
		if limit := nowMs - ns.opts.BufferPast.Milliseconds(); t < limit {
			return ReasonColdDisabled, "sample at " + fmtMs(t) +
				" is too far in the past: " + fmtAgeMs(limit, t) +
				" older than now-bufferPast (" + ns.opts.BufferPast.String() + ") and cold writes are disabled"
		}
	}
	return 0, ""
}
