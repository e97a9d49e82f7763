// Package bootstrap brings the shards the placement gives a node up to
// date before they count: filesystem (the node's own filesets) and commit
// log replay happen when storage opens; then, per INITIALIZING shard, the
// peers bootstrapper streams the shard's data from its AVAILABLE or LEAVING
// owners, or the uninitialized-topology bootstrapper finds there is nobody
// to stream from (a brand-new cluster). A bootstrapped shard is then marked
// AVAILABLE with one placement CAS that also drops its LEAVING copy.
//
// Per shard, on this node:
//
//	            placement gives shard INITIALIZING
//	(absent) ---------------------------------------> pending
//	                                                     |  worker picks it
//	                                                     v
//	          peers failed (retry later)            streaming
//	pending <----------------------------------------  |
//	                                                     |  loaded + durable
//	                                                     v
//	                                                bootstrapped
//	                                                     |  mark-available CAS
//	                                                     v
//	                                                 available (done)
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/uber-go/tally/v4"
)

// State is where one shard is in its bootstrap on this node.
type State int

const (
	Pending State = iota
	Streaming
	Bootstrapped
	Done
)

func (s State) String() string {
	return [...]string{"pending", "streaming", "bootstrapped", "done"}[s]
}

// transitions is the whitelist; each names the event that triggers it.
var transitions = map[[2]State]string{
	{Pending, Streaming}:      "a worker starts streaming the shard",
	{Streaming, Pending}:      "streaming failed; retried on the next round",
	{Streaming, Bootstrapped}: "every peer answer is loaded and durable",
	{Bootstrapped, Done}:      "the mark-available CAS succeeded",
	{Bootstrapped, Pending}:   "the CAS failed (placement changed); redo",
}

// Store marks shards available in the placement (one CAS).
type Store interface {
	MarkAvailable(ctx context.Context, instanceID string, shards []uint32) error
}

// DB is the storage the bootstrap loads into: sealed blocks as they were
// streamed, unflushed samples through the commit log.
type DB interface {
	LoadBlock(ns string, shard uint32, blockStart int64, series []fileset.Series) error
	LoadBatch(ns string, batch []storage.Sample) error
	Namespaces() []storage.NamespaceOptions
}

// Dialer gives an RPC client for a peer endpoint.
type Dialer func(endpoint string) (*rpc.Client, error)

// Options configure a Bootstrapper.
type Options struct {
	InstanceID string
	DB         DB
	Store      Store
	Dial       Dialer
	// Workers stream this many shard batches at once.
	Workers int
	// ShardsPerFetch groups shards into one fetch per peer.
	ShardsPerFetch int
	// MaxBytesPerSecond limits peer streaming (0 = unlimited).
	MaxBytesPerSecond int64
	Logger            *slog.Logger
	Metrics           tally.Scope
}

// Bootstrapper runs the per-shard chain. Reconcile is called with every
// new placement; it is safe to call concurrently with itself (rounds are
// serialised).
type Bootstrapper struct {
	opts Options

	round sync.Mutex
	mu    sync.Mutex
	state map[uint32]State

	total, done       atomic.Int64
	samples, bytesIn  atomic.Int64
	limiter           *limiter
	mShards, mSamples tally.Counter
	mBytes, mFailures tally.Counter
}

// New returns a Bootstrapper.
func New(opts Options) *Bootstrapper {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.ShardsPerFetch <= 0 {
		opts.ShardsPerFetch = 64
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = tally.NoopScope
	}
	return &Bootstrapper{
		opts: opts, state: map[uint32]State{},
		limiter:   newLimiter(opts.MaxBytesPerSecond),
		mShards:   opts.Metrics.Counter("shards_bootstrapped"),
		mSamples:  opts.Metrics.Counter("samples_streamed"),
		mBytes:    opts.Metrics.Counter("bytes_streamed"),
		mFailures: opts.Metrics.Counter("shard_failures"),
	}
}

func (b *Bootstrapper) set(shard uint32, to State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	from := b.state[shard]
	if from != to {
		if _, ok := transitions[[2]State{from, to}]; !ok {
			panic(fmt.Sprintf("bootstrap: shard %d: illegal transition %v -> %v", shard, from, to))
		}
	}
	b.state[shard] = to
}

// Progress is a snapshot for /ready and logs.
type Progress struct {
	ShardsTotal, ShardsDone int
	Samples, Bytes          int64
}

// Progress reports the bootstrap progress of the current placement.
func (b *Bootstrapper) Progress() Progress {
	return Progress{ShardsTotal: int(b.total.Load()), ShardsDone: int(b.done.Load()),
		Samples: b.samples.Load(), Bytes: b.bytesIn.Load()}
}

// PendingShards reports how many of this node's shards in m are not AVAILABLE
// or LEAVING yet (0 means ready).
func PendingShards(m *client.Map, instanceID string) int {
	in, ok := m.Placement.Instance(instanceID)
	if !ok {
		return 0
	}
	n := 0
	for _, s := range in.Shards {
		if s.State == placement.Initializing {
			n++
		}
	}
	return n
}

// Reconcile bootstraps this node's INITIALIZING shards of m and marks them
// available. It returns once every such shard was handled (or ctx ends);
// shards that failed stay pending and are retried by the next call.
func (b *Bootstrapper) Reconcile(ctx context.Context, m *client.Map) error {
	b.round.Lock()
	defer b.round.Unlock()
	in, ok := m.Placement.Instance(b.opts.InstanceID)
	if !ok {
		b.total.Store(0)
		b.done.Store(0)
		return nil
	}
	var todo []uint32
	total, done := 0, 0
	b.mu.Lock()
	initializing := map[uint32]bool{}
	for _, s := range in.Shards {
		total++
		if s.State != placement.Initializing {
			done++
			continue
		}
		initializing[s.ID] = true
		if b.state[s.ID] == Done {
			// Marked before, but this placement predates the CAS: wait.
			continue
		}
		b.state[s.ID] = Pending
		todo = append(todo, s.ID)
	}
	// Forget shards that are settled or gone, so a shard that comes back
	// later is bootstrapped again.
	for sh := range b.state {
		if !initializing[sh] {
			delete(b.state, sh)
		}
	}
	b.mu.Unlock()
	b.total.Store(int64(total))
	b.done.Store(int64(done))
	if len(todo) == 0 {
		return nil
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i] < todo[j] })
	start := time.Now()
	b.opts.Logger.Info("bootstrap starting", "shards", len(todo), "placement_version", m.Placement.Version)

	// Group shards by the peers to ask, then fetch in batches.
	type job struct {
		shards []uint32
		peers  []placement.Owner
	}
	groups := map[string]*job{}
	var order []string
	for _, sh := range todo {
		var peers []placement.Owner
		for _, o := range m.Owners.Owners(sh) {
			if o.InstanceID != b.opts.InstanceID && (o.State == placement.Available || o.State == placement.Leaving) {
				peers = append(peers, o)
			}
		}
		key := ""
		for _, p := range peers {
			key += p.InstanceID + ","
		}
		j := groups[key]
		if j == nil {
			j = &job{peers: peers}
			groups[key] = j
			order = append(order, key)
		}
		j.shards = append(j.shards, sh)
	}
	var jobs []job
	for _, k := range order {
		g := groups[k]
		for i := 0; i < len(g.shards); i += b.opts.ShardsPerFetch {
			end := min(i+b.opts.ShardsPerFetch, len(g.shards))
			jobs = append(jobs, job{shards: g.shards[i:end], peers: g.peers})
		}
	}

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		ready []uint32
		errs  []error
		jobCh = make(chan job)
	)
	for w := 0; w < b.opts.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobCh {
				for _, sh := range j.shards {
					b.set(sh, Streaming)
				}
				err := b.streamShards(ctx, j.shards, j.peers)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					for _, sh := range j.shards {
						b.set(sh, Pending)
					}
					b.mFailures.Inc(int64(len(j.shards)))
				} else {
					for _, sh := range j.shards {
						b.set(sh, Bootstrapped)
					}
					ready = append(ready, j.shards...)
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case jobCh <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobCh)
	wg.Wait()

	if len(ready) > 0 {
		sort.Slice(ready, func(i, j int) bool { return ready[i] < ready[j] })
		if err := b.opts.Store.MarkAvailable(ctx, b.opts.InstanceID, ready); err != nil {
			for _, sh := range ready {
				b.set(sh, Pending)
			}
			errs = append(errs, fmt.Errorf("mark %d shards available: %w", len(ready), err))
		} else {
			for _, sh := range ready {
				b.set(sh, Done)
			}
			b.done.Add(int64(len(ready)))
			b.mShards.Inc(int64(len(ready)))
		}
	}
	p := b.Progress()
	b.opts.Logger.Info("bootstrap round finished", "marked_available", len(ready), "failed", len(todo)-len(ready),
		"samples_streamed", p.Samples, "bytes_streamed", p.Bytes, "took", time.Since(start))
	return errors.Join(errs...)
}

// streamShards runs the peers bootstrapper for a group of shards with the
// same peers (streamBlocks); with no peers at all the shards are new
// (uninitialized topology) and there is nothing to fetch.
func (b *Bootstrapper) streamShards(ctx context.Context, shards []uint32, peers []placement.Owner) error {
	if len(peers) == 0 {
		return nil
	}
	return b.streamBlocks(ctx, shards, peers)
}

// orderPeers puts LEAVING owners first: the copy being replaced is the one
// that took every write until now, so one answer from it is complete. The
// AVAILABLE owners are the fallback, tried in turn until one answers.
// Writes during the move reach this node directly, so nothing newer needs
// fetching.
func orderPeers(peers []placement.Owner) []placement.Owner {
	out := make([]placement.Owner, 0, len(peers))
	for _, p := range peers {
		if p.State == placement.Leaving {
			out = append(out, p)
		}
	}
	for _, p := range peers {
		if p.State != placement.Leaving {
			out = append(out, p)
		}
	}
	return out
}

func (b *Bootstrapper) load(ns string, batch []storage.Sample) error {
	if len(batch) == 0 {
		return nil
	}
	err := b.opts.DB.LoadBatch(ns, batch)
	var rej *storage.RejectedError
	if errors.As(err, &rej) {
		err = nil // out of retention by now: nothing to keep
	}
	if err != nil {
		return fmt.Errorf("load streamed samples: %w", err)
	}
	b.samples.Add(int64(len(batch)))
	b.mSamples.Inc(int64(len(batch)))
	return nil
}
