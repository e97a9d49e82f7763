package repair

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"

	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/internal/ctxsleep"
	"github.com/tessera-tsdb/tessera/internal/pace"
	"github.com/tessera-tsdb/tessera/placement"
)

// DB is the storage a repair compares and merges into; *storage.Database
// satisfies it.
type DB interface {
	BlockDigests(ns string, shard uint32, start, end int64) ([]storage.BlockDigest, error)
	SeriesChecksums(ns string, shard uint32, blockStart, start, end int64) ([]storage.SeriesChecksum, error)
	RepairSeries(ns string, in []storage.RepairInput) (storage.RepairResult, error)
	// LoadBlocks merges entries of a rollup namespace's block pulled from
	// a peer (storage merges them window by window).
	LoadBlocks(ns string, blocks []storage.StreamedBlock) error
	Namespaces() []storage.NamespaceOptions
}

// Peer is what a repair asks of another owner of a shard, with the
// signatures of *rpc.Client. Tests serve it from another storage engine in
// memory.
type Peer interface {
	BlockDigests(ctx context.Context, req *rpc.BlockDigestsRequest) (*rpc.BlockDigestsResponse, error)
	SeriesChecksums(ctx context.Context, req *rpc.SeriesChecksumsRequest) (*rpc.SeriesChecksumsResponse, error)
	Fetch(ctx context.Context, req *rpc.FetchRequest) (*rpc.FetchResponse, error)
	// FetchBlock pages a flushed block as stored: how a rollup
	// namespace's differing entries are pulled.
	FetchBlock(ctx context.Context, req *rpc.FetchBlockRequest) (*rpc.FetchBlockResponse, error)
}

// Dialer gives the Peer at an endpoint (the caller owns and closes any
// connection behind it).
type Dialer func(endpoint string) (Peer, error)

// Options configure a Repairer. Numeric options come from config.Repair,
// which holds the defaults; New refuses a missing one by name.
type Options struct {
	InstanceID string
	DB         DB
	Dial       Dialer
	// Placement returns the newest placement known (nil: none yet).
	Placement func() *client.Map
	// Every is the time from one pass's start to the next's (> 0).
	Every time.Duration
	// CompareOnly reports differences without pulling anything.
	CompareOnly bool
	// MaxBytesPerSecond paces the bytes received from peers (0 = no limit).
	MaxBytesPerSecond int64
	// SettleMargin is added to bufferPast to set the cutoff (>= 0).
	SettleMargin time.Duration
	// SeriesPerFetch bounds the series of one Fetch (> 0).
	SeriesPerFetch int
	// StateDir holds state.json; FS writes it (vfs.OS() when nil).
	StateDir string
	FS       vfs.FS
	// Now is the clock; time.Now when nil.
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics tally.Scope
}

// Repairer runs repair passes. It is safe for concurrent use: Status may
// be called while a pass runs.
type Repairer struct {
	opts    Options
	limiter *pace.Limiter
	m       metrics
	path    string

	mu      sync.Mutex
	st      state
	running bool
	total   Tally
	saved   time.Time // last time the state file was written
}

type metrics struct {
	blocksCompared, blocksDiffering, seriesCompared, seriesDiffering tally.Counter
	seriesRepaired, samplesRepaired, bytes, errors, shards, passes   tally.Counter
	// catchUpShards and catchUpSamples count CatchUp's shards and the
	// samples it pulled (also in samplesRepaired).
	catchUpShards, catchUpSamples tally.Counter
}

func newMetrics(s tally.Scope) metrics {
	return metrics{
		blocksCompared:  s.Counter("blocks_compared"),
		blocksDiffering: s.Counter("blocks_differing"),
		seriesCompared:  s.Counter("series_compared"),
		seriesDiffering: s.Counter("series_differing"),
		seriesRepaired:  s.Counter("series_repaired"),
		samplesRepaired: s.Counter("samples_repaired"),
		bytes:           s.Counter("bytes_received"),
		errors:          s.Counter("errors"),
		shards:          s.Counter("shards_compared"),
		passes:          s.Counter("passes"),
		catchUpShards:   s.Counter("catch_up_shards"),
		catchUpSamples:  s.Counter("catch_up_samples"),
	}
}

func (m metrics) add(t Tally) {
	m.blocksCompared.Inc(t.BlocksCompared)
	m.blocksDiffering.Inc(t.BlocksDiffering)
	m.seriesCompared.Inc(t.SeriesCompared)
	m.seriesDiffering.Inc(t.SeriesDiffering)
	m.seriesRepaired.Inc(t.SeriesRepaired)
	m.samplesRepaired.Inc(t.SamplesRepaired)
	m.bytes.Inc(t.Bytes)
	m.errors.Inc(t.Errors)
}

// New checks the options and loads the state a previous run left.
func New(opts Options) (*Repairer, error) {
	switch {
	case opts.InstanceID == "":
		return nil, errors.New("repair: InstanceID is empty")
	case opts.DB == nil:
		return nil, errors.New("repair: DB is nil")
	case opts.Dial == nil:
		return nil, errors.New("repair: Dial is nil")
	case opts.Placement == nil:
		return nil, errors.New("repair: Placement is nil")
	case opts.Every <= 0:
		return nil, fmt.Errorf("repair: Every must be > 0, got %v", opts.Every)
	case opts.SettleMargin < 0:
		return nil, fmt.Errorf("repair: SettleMargin must be >= 0, got %v", opts.SettleMargin)
	case opts.SeriesPerFetch <= 0:
		return nil, fmt.Errorf("repair: SeriesPerFetch must be > 0, got %d", opts.SeriesPerFetch)
	case opts.StateDir == "":
		return nil, errors.New("repair: StateDir is empty")
	}
	if opts.FS == nil {
		opts.FS = vfs.OS()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = tally.NoopScope
	}
	r := &Repairer{opts: opts, limiter: pace.New(opts.MaxBytesPerSecond), m: newMetrics(opts.Metrics),
		path: filepath.Join(opts.StateDir, "state.json")}
	st, err := loadState(opts.FS, r.path)
	if err != nil {
		// Progress only: start afresh, say so.
		opts.Logger.Warn("repair state unreadable; starting a fresh pass", "err", err)
	}
	r.st = st
	return r, nil
}

// Run runs a pass every Every until ctx ends. A pass a restart
// interrupted resumes first, at the shards it had not done; after a
// finished pass the next starts Every after it started. A node that never
// ran a pass (a new node: it bootstraps from its peers anyway) waits one
// Every before its first.
func (r *Repairer) Run(ctx context.Context) {
	r.mu.Lock()
	fresh := r.st.Pass.Number == 0
	r.mu.Unlock()
	if fresh && ctxsleep.Sleep(ctx, r.opts.Every) != nil {
		return
	}
	for ctx.Err() == nil {
		r.mu.Lock()
		last := r.st.Pass
		r.mu.Unlock()
		if !last.Started.IsZero() && !last.Finished.IsZero() {
			next := last.Started.Add(r.opts.Every)
			if d := next.Sub(r.opts.Now()); d > 0 {
				if ctxsleep.Sleep(ctx, d) != nil {
					return
				}
			}
		}
		if _, err := r.RunPass(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logger.Warn("repair pass", "err", err)
			// No placement yet, or the state could not be saved: try
			// again soon rather than a whole interval later.
			if ctxsleep.Sleep(ctx, min(r.opts.Every, 10*time.Second)) != nil {
				return
			}
		}
	}
}

// target is one (namespace, shard) a pass compares, with its peers.
type target struct {
	ns    storage.NamespaceOptions
	shard uint32
	peers []placement.Owner
}

// maxShardErrorsLogged bounds the per-shard warnings of one pass: a peer
// down fails every shard it shares (4096 lines a pass on the example
// cluster), which buries the log; the pass line counts them all.
const maxShardErrorsLogged = 3

// RunPass runs one pass (or finishes the interrupted one) over every shard
// the newest placement gives this node AVAILABLE, and returns its summary.
// Errors of single shards are counted in their results, not returned; the
// error is for a pass that could not run at all.
func (r *Repairer) RunPass(ctx context.Context) (Pass, error) {
	m := r.opts.Placement()
	if m == nil {
		return Pass{}, errors.New("no placement known yet")
	}
	targets := r.targets(m)
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return Pass{}, errors.New("a repair pass is already running")
	}
	r.running = true
	if r.st.Pass.Number == 0 || !r.st.Pass.Finished.IsZero() {
		r.st.Pass = Pass{Number: r.st.Pass.Number + 1, Started: r.opts.Now()}
	}
	r.st.Pass.ShardsTotal = len(targets)
	pass := r.st.Pass.Number
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running = false
		r.mu.Unlock()
	}()

	done, logged := 0, 0
	for _, t := range targets {
		if err := ctx.Err(); err != nil {
			return r.stopped(err)
		}
		key := shardKey(t.ns.Name, t.shard)
		r.mu.Lock()
		prev, seen := r.st.Shards[key]
		r.mu.Unlock()
		if seen && prev.Pass == pass {
			done++ // done before a restart
			continue
		}
		lo, hi := Window(t.ns, r.opts.Now(), r.opts.SettleMargin)
		res := r.repairShard(ctx, t, lo, hi)
		res.Pass = pass
		if ctx.Err() != nil {
			return r.stopped(ctx.Err()) // a cut-short shard is redone
		}
		done++
		r.m.shards.Inc(1)
		r.m.add(res.Tally)
		r.mu.Lock()
		r.st.Shards[key] = res
		r.st.Pass.ShardsDone = done
		r.st.Pass.Tally.add(res.Tally)
		r.total.add(res.Tally)
		r.mu.Unlock()
		if res.Error != "" {
			logged++
			switch {
			case logged <= maxShardErrorsLogged:
				r.opts.Logger.Warn("repair shard", "namespace", t.ns.Name, "shard", t.shard, "err", res.Error)
			case logged == maxShardErrorsLogged+1:
				r.opts.Logger.Warn("repair: more shards failed this pass; not logging each (the pass's errors count them, `tessera repair status` lists them)",
					"namespace", t.ns.Name, "shard", t.shard, "err", res.Error)
			}
		}
		r.saveSoon()
	}
	r.mu.Lock()
	r.st.Pass.ShardsDone = done
	r.st.Pass.Finished = r.opts.Now()
	r.forgetUnowned(targets)
	r.mu.Unlock()
	r.m.passes.Inc(1)
	if err := r.save(); err != nil {
		return r.snapshotPass(), err
	}
	p := r.snapshotPass()
	r.opts.Logger.Info("repair pass done", "pass", p.Number, "shards", p.ShardsDone,
		"blocks_differing", p.BlocksDiffering, "series_repaired", p.SeriesRepaired, "errors", p.Errors,
		"took", p.Finished.Sub(p.Started))
	return p, nil
}

// targets lists the (namespace, shard) pairs this node holds AVAILABLE,
// each with the other AVAILABLE owners, by shard.
func (r *Repairer) targets(m *client.Map) []target {
	in, ok := m.Placement.Instance(r.opts.InstanceID)
	if !ok {
		return nil
	}
	var shards []uint32
	for _, s := range in.Shards {
		if s.State == placement.Available {
			shards = append(shards, s.ID)
		}
	}
	sort.Slice(shards, func(i, j int) bool { return shards[i] < shards[j] })
	var out []target
	nss := r.opts.DB.Namespaces()
	for _, ns := range nss {
		if ns.RollupOf != "" {
			// A rollup block settles once its source's blocks under it
			// have flushed: past the source's bufferPast too.
			ns.BufferPast = settleBufferPast(nss, ns)
		}
		for _, sh := range shards {
			var peers []placement.Owner
			for _, o := range m.Owners.Owners(sh) {
				if o.InstanceID != r.opts.InstanceID && o.State == placement.Available {
					peers = append(peers, o)
				}
			}
			out = append(out, target{ns: ns, shard: sh, peers: peers})
		}
	}
	return out
}

// forgetUnowned drops the results of shards this node no longer owns.
// The caller holds mu.
func (r *Repairer) forgetUnowned(targets []target) {
	keep := make(map[string]bool, len(targets))
	for _, t := range targets {
		keep[shardKey(t.ns.Name, t.shard)] = true
	}
	for k := range r.st.Shards {
		if !keep[k] {
			delete(r.st.Shards, k)
		}
	}
}

// stopped saves the progress of a pass cut short (the node stopping), so
// the next start resumes it.
func (r *Repairer) stopped(err error) (Pass, error) {
	if serr := r.save(); serr != nil {
		r.opts.Logger.Warn("save repair state", "err", serr)
	}
	return r.snapshotPass(), err
}

func (r *Repairer) snapshotPass() Pass {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.Pass
}

// saveEvery bounds how often a pass writes its progress: at most once a
// second, and at the end of the pass. The file holds every shard's
// result, so writing it after each shard would cost more than comparing
// the shard; a restart loses at most a second of progress (those shards
// are compared again).
const saveEvery = time.Second

func (r *Repairer) saveSoon() {
	r.mu.Lock()
	due := time.Since(r.saved) >= saveEvery
	r.mu.Unlock()
	if !due {
		return
	}
	if err := r.save(); err != nil {
		r.opts.Logger.Warn("save repair state", "err", err)
	}
}

// save writes the state file atomically (write, fsync, rename).
func (r *Repairer) save() error {
	r.mu.Lock()
	b, err := r.st.encode()
	r.saved = time.Now()
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encode repair state: %w", err)
	}
	if err := vfs.WriteFileAtomic(r.opts.FS, r.path, b); err != nil {
		return fmt.Errorf("save repair state: %w", err)
	}
	return nil
}

// Status reports the current pass, the lifetime tally and every shard's
// last result.
func (r *Repairer) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Status{Enabled: true, CompareOnly: r.opts.CompareOnly, Every: r.opts.Every,
		Running: r.running, Pass: r.st.Pass, Total: r.total, Shards: r.st.status()}
}

// settleBufferPast is the longest bufferPast along a rollup namespace's
// chain of sources: its blocks change until every source block under them
// has flushed.
func settleBufferPast(nss []storage.NamespaceOptions, ns storage.NamespaceOptions) time.Duration {
	byName := make(map[string]storage.NamespaceOptions, len(nss))
	for _, n := range nss {
		byName[n.Name] = n
	}
	bp := ns.BufferPast
	for i := 0; ns.RollupOf != "" && i <= len(nss); i++ {
		src, ok := byName[ns.RollupOf]
		if !ok {
			break
		}
		bp = max(bp, src.BufferPast)
		ns = src
	}
	return bp
}
