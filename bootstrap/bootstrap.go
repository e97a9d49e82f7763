// Package bootstrap brings the shards the placement gives a node up to
// date before they count: filesystem (the node's own filesets) and commit
// log replay happen when storage opens; then, per INITIALIZING shard, the
// peers bootstrapper streams the shard's data from its AVAILABLE or LEAVING
// owners, or the uninitialized-topology bootstrapper finds there is nobody
// to stream from (a brand-new cluster). A bootstrapped shard is then marked
// AVAILABLE with one placement CAS that also drops its LEAVING copy.
//
// Per shard, on this node (the whitelist is transitions below):
//
//	            placement gives shard INITIALIZING
//	absent -----------------------------------------> pending
//	                                                     |  worker picks it
//	                                                     v
//	          peers failed (retry later)            streaming
//	pending <----------------------------------------  |
//	                                                     |  loaded + durable
//	                                                     v
//	   mark-available failed every attempt          bootstrapped --+ mark-available
//	pending <------------------------------------------  |         | failed: re-read the
//	                                                     |         | placement, retry the
//	absent <-- no longer INITIALIZING here --------------+<--------+ CAS (no re-streaming)
//	                                                     |  mark-available CAS
//	                                                     v
//	                                                 available (done)
//
// A pending or done shard the placement no longer shows INITIALIZING here
// goes back to absent (forgotten), so a shard that returns later is
// bootstrapped again.
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"

	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/internal/ctxsleep"
	"github.com/tessera-tsdb/tessera/internal/pace"
	"github.com/tessera-tsdb/tessera/placement"
)

// State is where one shard is in its bootstrap on this node.
type State int

const (
	// Absent: the bootstrapper does not track the shard (it is not
	// INITIALIZING on this node, or no round saw it yet).
	Absent State = iota
	Pending
	Streaming
	Bootstrapped
	Done
)

func (s State) String() string {
	if s < Absent || s > Done {
		return fmt.Sprintf("state(%d)", int(s))
	}
	return [...]string{"absent", "pending", "streaming", "bootstrapped", "done"}[s]
}

// transitions is the whitelist; each names the event that triggers it.
// Every change of a shard's state goes through it (set), so a change not
// listed here is a bug in this package, reported as ErrIllegalTransition.
var transitions = map[[2]State]string{
	{Absent, Pending}:         "the placement gives the shard to this node INITIALIZING",
	{Pending, Streaming}:      "a worker starts streaming the shard",
	{Streaming, Pending}:      "streaming failed; retried on the next round",
	{Streaming, Bootstrapped}: "every peer answer is loaded and durable",
	{Bootstrapped, Done}:      "the mark-available CAS succeeded (or the newest placement already shows the copy AVAILABLE)",
	{Bootstrapped, Pending}:   "mark-available failed on every attempt; the next round redoes the shard",
	{Bootstrapped, Absent}:    "the newest placement no longer has the shard INITIALIZING here: dropped from mark-available",
	{Pending, Absent}:         "the placement no longer has the shard INITIALIZING here: forgotten",
	{Done, Absent}:            "the placement shows the shard settled (or gone): forgotten",
}

// ErrIllegalTransition is returned (wrapped, naming the shard and states)
// for a state change the whitelist does not allow. It means a bug: the
// shard's round fails and the shard is retried, the node keeps running.
var ErrIllegalTransition = errors.New("illegal bootstrap state transition")

// Store is the placement as the bootstrapper needs it: one CAS marking
// shards available, and the newest placement to decide which shards a
// failed CAS should retry.
type Store interface {
	MarkAvailable(ctx context.Context, instanceID string, shards []uint32) error
	Placement(ctx context.Context) (placement.Placement, error)
}

// DB is the storage the bootstrap loads into: sealed blocks as they were
// streamed (several at once, so their fsyncs overlap), unflushed series
// through the commit log (queued, waited for once per batch of shards).
type DB interface {
	LoadBlocks(ns string, blocks []storage.StreamedBlock) error
	QueueStreams(ns string, shard uint32, series []storage.SeriesStream) (int, *storage.Queued, error)
	Namespaces() []storage.NamespaceOptions
}

// Peer is what the bootstrapper asks of a peer node: the node RPC's
// bootstrap calls, with the signatures of *rpc.Client. Tests serve it
// from memory.
type Peer interface {
	BlockMetadata(ctx context.Context, req *rpc.BlockMetadataRequest) (*rpc.BlockMetadataResponse, error)
	FetchBlock(ctx context.Context, req *rpc.FetchBlockRequest) (*rpc.FetchBlockResponse, error)
	FetchUnflushed(ctx context.Context, req *rpc.FetchUnflushedRequest) (*rpc.FetchUnflushedResponse, error)
}

// Dialer gives the Peer at an endpoint (the caller owns and closes any
// connection behind it).
type Dialer func(endpoint string) (Peer, error)

// Options configure a Bootstrapper. Every numeric option comes from
// config.Bootstrap (which holds the defaults); New refuses a missing or
// invalid one rather than inventing a value.
type Options struct {
	InstanceID string
	DB         DB
	Store      Store
	Dial       Dialer
	// Workers stream this many shard batches at once (> 0).
	Workers int
	// ShardsPerFetch groups shards into one fetch per peer (> 0).
	ShardsPerFetch int
	// MaxBytesPerSecond limits peer streaming (0 = unlimited).
	MaxBytesPerSecond int64
	// MarkAvailableAttempts is how many times one round tries the
	// mark-available CAS before its shards go back to pending (> 0).
	MarkAvailableAttempts int
	// MarkAvailableBackoff is the wait before the second attempt, doubled
	// before each further one (> 0).
	MarkAvailableBackoff time.Duration
	// Restore, when set, is the backup bootstrapper: a shard with no
	// AVAILABLE or LEAVING owner to stream from (a fresh cluster) is
	// loaded from it instead of starting empty. nil: such shards start
	// empty (uninitialized topology).
	Restore RestoreSource
	// Marked, when set, is told the shards each round marked AVAILABLE,
	// after the CAS (the node schedules its post-join catch-up with it).
	Marked func(shards []uint32)
	// Logger and Metrics may be nil: nothing is logged or reported.
	Logger  *slog.Logger
	Metrics tally.Scope
}

// RestoreSource loads shards from outside the cluster (backup.Restorer).
// Restore returns once the shards' data is loaded and durable; an error
// leaves them pending (retried next round), so loading must be
// idempotent. Data it cannot recover (a damaged object) is its to
// report: the shard then goes AVAILABLE with the rest.
type RestoreSource interface {
	Restore(ctx context.Context, shards []uint32) error
}

// WholeRestore is a RestoreSource that wants every shard it restores in
// one call (WholeBatch true): a backup of another shard count, where one
// part can hold series of any shard, would otherwise be downloaded once
// per batch of ShardsPerFetch shards instead of once per node.
type WholeRestore interface {
	RestoreSource
	WholeBatch() bool
}

func (o Options) validate() error {
	var errs []error
	if o.InstanceID == "" {
		errs = append(errs, errors.New("InstanceID is empty"))
	}
	if o.DB == nil {
		errs = append(errs, errors.New("DB is nil"))
	}
	if o.Store == nil {
		errs = append(errs, errors.New("Store is nil"))
	}
	if o.Dial == nil {
		errs = append(errs, errors.New("Dial is nil"))
	}
	if o.Workers <= 0 {
		errs = append(errs, fmt.Errorf("Workers must be > 0, got %d", o.Workers))
	}
	if o.ShardsPerFetch <= 0 {
		errs = append(errs, fmt.Errorf("ShardsPerFetch must be > 0, got %d", o.ShardsPerFetch))
	}
	if o.MaxBytesPerSecond < 0 {
		errs = append(errs, fmt.Errorf("MaxBytesPerSecond must be >= 0, got %d", o.MaxBytesPerSecond))
	}
	if o.MarkAvailableAttempts <= 0 {
		errs = append(errs, fmt.Errorf("MarkAvailableAttempts must be > 0, got %d", o.MarkAvailableAttempts))
	}
	if o.MarkAvailableBackoff <= 0 {
		errs = append(errs, fmt.Errorf("MarkAvailableBackoff must be > 0, got %v", o.MarkAvailableBackoff))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bootstrap options: %w", err)
	}
	return nil
}

// Bootstrapper runs the per-shard chain. Reconcile is called with every
// new placement; it is safe to call concurrently with itself (rounds are
// serialised).
type Bootstrapper struct {
	opts Options

	round sync.Mutex
	mu    sync.Mutex
	state map[uint32]State // no Absent entries

	prog              roundProgress
	gauges            progressGauges
	limiter           *pace.Limiter
	mShards, mSamples tally.Counter
	mBytes, mFailures tally.Counter
	mIllegal          tally.Counter
	mMarkRetries      tally.Counter
}

// New returns a Bootstrapper, or an error naming the first missing or
// invalid option.
func New(opts Options) (*Bootstrapper, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = tally.NoopScope
	}
	return &Bootstrapper{
		opts: opts, state: map[uint32]State{},
		limiter:      pace.New(opts.MaxBytesPerSecond),
		gauges:       newProgressGauges(opts.Metrics.SubScope("progress")),
		mShards:      opts.Metrics.Counter("shards_bootstrapped"),
		mSamples:     opts.Metrics.Counter("samples_streamed"),
		mBytes:       opts.Metrics.Counter("bytes_streamed"),
		mFailures:    opts.Metrics.Counter("shard_failures"),
		mIllegal:     opts.Metrics.Counter("illegal_transitions"),
		mMarkRetries: opts.Metrics.Counter("mark_available_retries"),
	}, nil
}

// set moves shard to state to if the whitelist allows it from its current
// state (staying put is always allowed). An illegal change leaves the
// state as it was, is logged and counted, and returns an error wrapping
// ErrIllegalTransition.
func (b *Bootstrapper) set(shard uint32, to State) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.setLocked(shard, to)
}

func (b *Bootstrapper) setLocked(shard uint32, to State) error {
	from := b.state[shard] // Absent when missing
	if from == to {
		return nil
	}
	if _, ok := transitions[[2]State{from, to}]; !ok {
		b.mIllegal.Inc(1)
		b.opts.Logger.Error("bootstrap bug: illegal shard state transition", "shard", shard, "from", from, "to", to)
		return fmt.Errorf("shard %d: %w %v -> %v", shard, ErrIllegalTransition, from, to)
	}
	if to == Absent {
		delete(b.state, shard)
	} else {
		b.state[shard] = to
	}
	return nil
}

// setAll moves every shard to to and returns those that moved; the
// others (illegal transitions) are reported in err.
func (b *Bootstrapper) setAll(shards []uint32, to State) (moved []uint32, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	moved = make([]uint32, 0, len(shards))
	for _, sh := range shards {
		if e := b.setLocked(sh, to); e != nil {
			errs = append(errs, e)
			continue
		}
		moved = append(moved, sh)
	}
	return moved, errors.Join(errs...)
}

// State reports where shard is in its bootstrap on this node.
func (b *Bootstrapper) State(shard uint32) State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state[shard]
}

// Progress reports the bootstrap progress of the current (or last)
// round; safe to call at any time, from any goroutine.
func (b *Bootstrapper) Progress() Progress { return b.prog.snapshot(time.Now()) }

// publish updates the progress gauges; called wherever progress moves.
func (b *Bootstrapper) publish() { b.gauges.update(b.Progress()) }

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
	var errs []error
	in, ok := m.Placement.Instance(b.opts.InstanceID)
	var todo []uint32
	total, done := 0, 0
	initializing := map[uint32]bool{}
	b.mu.Lock()
	if ok {
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
			if err := b.setLocked(s.ID, Pending); err != nil {
				errs = append(errs, err)
				continue
			}
			todo = append(todo, s.ID)
		}
	}
	// Forget shards that are settled or gone, so a shard that comes back
	// later is bootstrapped again.
	for sh := range b.state {
		if !initializing[sh] {
			if err := b.setLocked(sh, Absent); err != nil {
				errs = append(errs, err)
			}
		}
	}
	b.mu.Unlock()
	b.prog.total.Store(int64(total))
	b.prog.done.Store(int64(done))
	if len(todo) == 0 {
		b.publish()
		return errors.Join(errs...)
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i] < todo[j] })
	start := time.Now()
	b.prog.start(start, len(todo))
	b.publish()
	defer func() { b.prog.finish(time.Now()); b.publish() }()
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
		per := b.opts.ShardsPerFetch
		if wr, ok := b.opts.Restore.(WholeRestore); ok && len(g.peers) == 0 && wr.WholeBatch() {
			per = len(g.shards)
		}
		for i := 0; i < len(g.shards); i += per {
			end := min(i+per, len(g.shards))
			jobs = append(jobs, job{shards: g.shards[i:end], peers: g.peers})
		}
	}

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		ready []uint32
		jobCh = make(chan job)
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for w := 0; w < b.opts.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobCh {
				shards, err := b.setAll(j.shards, Streaming)
				if err != nil {
					fail(err)
				}
				if len(shards) == 0 {
					continue
				}
				if err := b.streamShards(ctx, shards, j.peers); err != nil {
					fail(fmt.Errorf("stream %s: %w", describeShards(shards), err))
					b.mFailures.Inc(int64(len(shards)))
					if _, serr := b.setAll(shards, Pending); serr != nil {
						fail(serr)
					}
					continue
				}
				loaded, serr := b.setAll(shards, Bootstrapped)
				if serr != nil {
					fail(serr)
				}
				b.prog.streamed.Add(int64(len(loaded)))
				b.publish()
				mu.Lock()
				ready = append(ready, loaded...)
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
	streamed := time.Now()

	var marked []uint32
	if len(ready) > 0 {
		sort.Slice(ready, func(i, j int) bool { return ready[i] < ready[j] })
		var dropped, failed []uint32
		var err error
		marked, dropped, failed, err = b.markAvailable(ctx, ready)
		if err != nil {
			errs = append(errs, fmt.Errorf("mark %s available: %w", describeShards(failed), err))
		}
		for _, step := range []struct {
			shards []uint32
			to     State
		}{{marked, Done}, {dropped, Absent}, {failed, Pending}} {
			if _, err := b.setAll(step.shards, step.to); err != nil {
				errs = append(errs, err)
			}
		}
		b.prog.done.Add(int64(len(marked)))
		b.mShards.Inc(int64(len(marked)))
		if len(marked) > 0 && b.opts.Marked != nil {
			b.opts.Marked(marked)
		}
	}
	p := b.Progress()
	b.opts.Logger.Info("bootstrap round finished", "marked_available", len(marked), "failed", len(todo)-len(marked),
		"samples_streamed", p.Samples, "bytes_streamed", p.Bytes, "took", time.Since(start),
		"streaming", streamed.Sub(start), "marking", time.Since(streamed))
	return errors.Join(errs...)
}

// markAvailable runs the mark-available CAS for shards without streaming
// anything again when it fails. placement.Store.Update already re-reads
// and retries a lost CAS a few times (then ErrCASConflict), so a failure
// here is sustained contention, etcd trouble, or a placement that changed
// under us so that the CAS as asked is refused (a shard no longer held
// here, or LEAVING). Before each retry (after a doubling backoff, bounded
// by ctx) the newest placement is read: shards it shows AVAILABLE on this
// node are done (an earlier CAS whose reply was lost), shards no longer
// INITIALIZING here are dropped, and only the rest are retried. A
// permanent error (invalid placement, unknown instance) that no dropped
// shard explains ends the retries early.
//
// It returns the shards now AVAILABLE, the ones dropped, and the ones
// that failed every attempt (with the last error).
func (b *Bootstrapper) markAvailable(ctx context.Context, shards []uint32) (marked, dropped, failed []uint32, err error) {
	wait := b.opts.MarkAvailableBackoff
	for attempt := 1; ; attempt++ {
		err = b.opts.Store.MarkAvailable(ctx, b.opts.InstanceID, shards)
		if err == nil {
			return append(marked, shards...), dropped, nil, nil
		}
		if attempt >= b.opts.MarkAvailableAttempts || ctx.Err() != nil {
			return marked, dropped, shards, fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
		b.opts.Logger.Warn("mark available failed; retrying", "shards", len(shards), "attempt", attempt, "err", err)
		if serr := ctxsleep.Sleep(ctx, wait); serr != nil {
			return marked, dropped, shards, fmt.Errorf("%w (retry cancelled: %w)", err, serr)
		}
		wait *= 2
		b.mMarkRetries.Inc(1)
		p, perr := b.opts.Store.Placement(ctx)
		if perr != nil {
			// Cannot tell what changed: retry the same set.
			b.opts.Logger.Warn("read placement before retrying mark available", "err", perr)
			continue
		}
		still, avail, gone := b.classify(p, shards)
		marked, dropped = append(marked, avail...), append(dropped, gone...)
		if len(still) == 0 {
			return marked, dropped, nil, nil
		}
		if len(still) == len(shards) && (errors.Is(err, placement.ErrInvalid) || errors.Is(err, placement.ErrUnknownInstance)) {
			return marked, dropped, still, fmt.Errorf("not retried: %w", err)
		}
		shards = still
	}
}

// classify splits shards by their copy on this node in p: still
// INITIALIZING, already AVAILABLE, or gone (absent or LEAVING).
func (b *Bootstrapper) classify(p placement.Placement, shards []uint32) (still, avail, gone []uint32) {
	in, ok := p.Instance(b.opts.InstanceID)
	for _, sh := range shards {
		var c placement.Shard
		held := false
		if ok {
			c, held = in.Shard(sh)
		}
		switch {
		case held && c.State == placement.Initializing:
			still = append(still, sh)
		case held && c.State == placement.Available:
			avail = append(avail, sh)
		default:
			gone = append(gone, sh)
		}
	}
	return still, avail, gone
}

// describeShards names a shard list in an error: all of a short one,
// the range and count of a long one.
func describeShards(shards []uint32) string {
	switch {
	case len(shards) == 1:
		return fmt.Sprintf("shard %d", shards[0])
	case len(shards) <= 8:
		return fmt.Sprintf("shards %v", shards)
	default:
		return fmt.Sprintf("%d shards %d..%d", len(shards), shards[0], shards[len(shards)-1])
	}
}

// streamShards runs the peers bootstrapper for a group of shards with the
// same peers (streamBlocks); with no peers at all the shards are new: the
// backup bootstrapper loads them when one is configured, else
// (uninitialized topology) there is nothing to fetch.
func (b *Bootstrapper) streamShards(ctx context.Context, shards []uint32, peers []placement.Owner) error {
	if len(peers) == 0 {
		if b.opts.Restore != nil {
			if err := b.opts.Restore.Restore(ctx, shards); err != nil {
				return fmt.Errorf("restore from backup: %w", err)
			}
		}
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

// load writes one page of a peer's unflushed series into shard: in memory
// and queued in the commit log when it returns, durable once d.wait
// returns. A full commit log queue (the disk behind the stream, or live
// writes filling it) is waited out: this batch's own queued records
// drain (or, with none queued, a doubling backoff from 1 ms lets the
// flusher write the others'), then the page is offered again, up to
// queueFullTries times in all (about 0.1 s of backoff; nothing of a
// refused page was written, so it is retried whole).
func (b *Bootstrapper) load(ctx context.Context, d *durability, ns string, shard uint32, streams []storage.SeriesStream) error {
	if len(streams) == 0 {
		return nil
	}
	n, q, err := b.opts.DB.QueueStreams(ns, shard, streams)
	backoff := time.Millisecond
	for try := 1; errors.Is(err, commitlog.ErrQueueFull) && try < queueFullTries; try++ {
		waited, werr := d.drain()
		if werr != nil {
			return fmt.Errorf("load streamed samples: %w", werr)
		}
		if waited == 0 {
			// Others' records fill the queue (live writes, the other
			// workers): give the flusher time to write them.
			if serr := ctxsleep.Sleep(ctx, backoff); serr != nil {
				return fmt.Errorf("load streamed samples: %w (waiting for commit log room: %w)", err, serr)
			}
			backoff *= 2
		}
		n, q, err = b.opts.DB.QueueStreams(ns, shard, streams)
	}
	var rej *storage.RejectedError
	if errors.As(err, &rej) {
		err = nil // out of retention by now: nothing to keep
	}
	if err != nil {
		return fmt.Errorf("load streamed samples: %w", err)
	}
	if err := d.add(q, n); err != nil {
		return fmt.Errorf("load streamed samples: %w", err)
	}
	b.prog.samples.Add(int64(n))
	b.mSamples.Inc(int64(n))
	return nil
}

// queueFullTries is how many times load offers a page to a full commit
// log queue before failing the batch (its shards are retried next round).
const queueFullTries = 8

// maxQueuedSamples bounds the streamed samples one batch of shards keeps
// queued in the commit log before waiting for them. Each costs the commit
// log queue (commitlog.maxPendingBytes, default 64 MiB, shared with live
// writes, which get 503 when it is full) about 40 bytes plus its series ID
// until it is written: with 4 workers and ~60-byte IDs at most ~13 MiB
// when the disk lags. The waits are cheap: each page's write was started
// when it was queued, so the oldest are usually durable already.
const maxQueuedSamples = 1 << 15

// durability collects the queued commit log writes of one batch of
// shards: the shards may be marked bootstrapped only after wait returned
// nil. The fsyncs themselves started when each page was queued
// (storage.QueueStreams), so wait is mostly a formality unless the disk
// is behind.
type durability struct {
	mu      sync.Mutex
	queued  []*storage.Queued
	samples int
	err     error // the first failed wait: the batch is not durable
}

// add records q; past maxQueuedSamples it waits for everything queued.
func (d *durability) add(q *storage.Queued, n int) error {
	if q == nil {
		return nil
	}
	d.mu.Lock()
	d.queued = append(d.queued, q)
	d.samples += n
	full := d.samples >= maxQueuedSamples
	d.mu.Unlock()
	if full {
		return d.wait()
	}
	return nil
}

// wait returns once everything added so far is durable, or the first
// commit log error any of it (or an earlier wait) met.
func (d *durability) wait() error {
	_, err := d.drain()
	return err
}

// drain is wait, also saying how many queued loads it waited for.
func (d *durability) drain() (int, error) {
	d.mu.Lock()
	queued := d.queued
	d.queued, d.samples = nil, 0
	d.mu.Unlock()
	var errs []error
	for _, q := range queued {
		if err := q.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil && len(errs) > 0 {
		d.err = fmt.Errorf("streamed samples not durable: %w", errors.Join(errs...))
	}
	return len(queued), d.err
}
