package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-tsdb/tessera/ident"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/uber-go/tally/v4"
)

// Local is this node's own storage, written and read without a network hop.
type Local interface {
	WriteBatch(ns string, samples []storage.Sample) error
	Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64, qo storage.QueryOptions) ([]storage.SeriesIterator, error)
}

// Options configure a Session. The defaults live in config (the cluster
// section); NewSession fills none of them in and refuses a missing
// required option by name.
type Options struct {
	// LocalID is this node's instance ID; its shards go to Local.
	LocalID string
	// Local is this node's storage; nil for a session without one (tools,
	// tests), which reaches every instance over the network.
	Local    Local
	Topology *Topology // required
	// WriteLevel and ReadLevel are required.
	WriteLevel WriteLevel
	ReadLevel  ReadLevel
	// Pairing lets an INITIALIZING owner and its LEAVING source count as
	// one replica for writes.
	Pairing bool
	// HedgeAfter: a read still short of its level after HedgeAfter asks the
	// next readable owner, at every level. Required (> 0).
	HedgeAfter time.Duration
	// RequestTimeout bounds one read or write, and the replicas still
	// being written after a write returned. Required (> 0).
	RequestTimeout time.Duration
	// MaxBatch is the most samples one write RPC carries. Required (> 0).
	MaxBatch int
	// Health probes every remote host; zero Interval turns it off.
	Health HealthOptions
	// Hints: hinted handoff for replicas that miss writes (client/hints.go);
	// the zero value turns it off.
	Hints HintOptions
	// Dial connects to a host; nil means the node RPC (DialRPC).
	Dial DialFunc
	// Exemplars and Metadata are this node's stores of auxiliary data
	// (client/aux.go): the local owner's deliveries go there, and queries
	// read them. Nil (tools, tests): this node takes none, like a node
	// older than the feature.
	Exemplars *exemplars.Store
	Metadata  *metadata.Store
	// Evaluate computes a pushed-down query over this node's shards (Push);
	// nil: Push declines and queries read raw series.
	Evaluate rpc.Evaluator
	// EvaluateParts computes several of Push's parts over this node's
	// shards with one read of their series; nil: each part is asked of
	// Evaluate apart.
	EvaluateParts rpc.PartsEvaluator
	// EvaluateReader computes a pushed-down query over raw series read
	// through the session, for Push's parts whose replicas disagreed; nil:
	// such a query reads every shard raw.
	EvaluateReader func(ctx context.Context, r query.Reader, req *query.Request) (*query.Result, error)
	// Logger and Metrics: nil discards.
	Logger  *slog.Logger
	Metrics tally.Scope
}

// Session routes writes and reads through the cluster. It is safe for
// concurrent use and implements httpapi.Backend.
type Session struct {
	opts Options

	route atomic.Pointer[routing]

	// ctx ends at Close, cancelling the writes still delivered to slow
	// replicas after their callers returned.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	hosts  map[string]*host // by endpoint
	closed bool
	stop   chan struct{}
	probes sync.WaitGroup

	m     sessionMetrics
	hints *hinter // nil: hinted handoff off
	aux   *aux    // exemplars and metadata delivery (aux.go)

	histOK     sync.Map // instance -> struct{}: stores native histograms (batchwrite.go)
	batchCalls inflight // writes of batches with histograms to replicas still running (batchwrite.go)
}

// host is one remote node: its connection, write queue and health.
type host struct {
	instance, endpoint string
	peer               Peer
	queue              *hostQueue
	health             *health
}

type sessionMetrics struct {
	writeOK, writeFail, readOK, readFail, hedged tally.Counter
	hinted, hintFail                             tally.Counter
	// readBytes counts the payload bytes (series IDs, float and histogram
	// streams) reads received from other nodes: what a query costs the
	// network, before and after computation moves to the data.
	readBytes tally.Counter
	// pushDisagree counts pushdowns whose replicas' digests differed (the
	// query then read raw series).
	pushDisagree tally.Counter
	pushed       tally.Counter // queries answered by Push
}

// NewSession builds a session over a topology.
func NewSession(opts Options) (*Session, error) {
	switch {
	case opts.Topology == nil:
		return nil, errors.New("client: Options.Topology is required")
	case opts.WriteLevel < WriteOne || opts.WriteLevel > WriteAll:
		return nil, fmt.Errorf("client: Options.WriteLevel is required (got %d)", opts.WriteLevel)
	case opts.ReadLevel < ReadOne || opts.ReadLevel > ReadAll:
		return nil, fmt.Errorf("client: Options.ReadLevel is required (got %d)", opts.ReadLevel)
	case opts.HedgeAfter <= 0:
		return nil, fmt.Errorf("client: Options.HedgeAfter must be > 0, got %v", opts.HedgeAfter)
	case opts.RequestTimeout <= 0:
		return nil, fmt.Errorf("client: Options.RequestTimeout must be > 0, got %v", opts.RequestTimeout)
	case opts.MaxBatch <= 0:
		return nil, fmt.Errorf("client: Options.MaxBatch must be > 0, got %d", opts.MaxBatch)
	case opts.Health.Interval < 0:
		return nil, fmt.Errorf("client: Options.Health.Interval must be >= 0, got %v", opts.Health.Interval)
	case opts.Health.Interval > 0 && (opts.Health.Timeout <= 0 || opts.Health.Failures <= 0):
		return nil, fmt.Errorf("client: Options.Health.Timeout and Failures must be > 0 when probing (got %v, %d)",
			opts.Health.Timeout, opts.Health.Failures)
	}
	if opts.Dial == nil {
		opts.Dial = DialRPC(opts.RequestTimeout)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = tally.NoopScope
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Session{opts: opts, ctx: ctx, cancel: cancel, hosts: map[string]*host{}, stop: make(chan struct{}), m: sessionMetrics{
		writeOK:      opts.Metrics.Counter("write_success"),
		writeFail:    opts.Metrics.Counter("write_errors"),
		readOK:       opts.Metrics.Counter("read_success"),
		readFail:     opts.Metrics.Counter("read_errors"),
		hedged:       opts.Metrics.Counter("read_hedged"),
		readBytes:    opts.Metrics.Counter("read_received_bytes"),
		pushDisagree: opts.Metrics.Counter("pushdown_disagreements"),
		pushed:       opts.Metrics.Counter("read_pushdown"),
		hinted:       opts.Metrics.Counter("hinted_samples"),
		hintFail:     opts.Metrics.Counter("hint_errors"),
	}}
	s.hints = newHinter(s, opts.Hints)
	s.startAux()
	return s, nil
}

// Close stops the health probes and closes every host connection.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	hosts := s.hosts
	s.hosts = map[string]*host{}
	s.mu.Unlock()
	// Writes already acknowledged at their level may still be on their way
	// to the other replicas: deliver them (a graceful stop must not leave a
	// replica short), for at most one request timeout; a host marked down
	// fails its deliveries at once. Only then is everything cancelled.
	drained := make(chan struct{})
	go func() {
		for _, h := range hosts {
			h.queue.close()
		}
		s.batchCalls.wait() // batches with histograms still being delivered (batchwrite.go)
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(s.opts.RequestTimeout):
	}
	close(s.stop) // the probes ran until now, to mark a frozen host down
	s.cancel()
	<-drained
	s.probes.Wait()
	s.hints.wait()
	s.aux.workers.Wait()
	var errs []error
	for _, h := range hosts {
		if err := h.peer.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", h.endpoint, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Session) host(instance, endpoint string) (*host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errHostClosed
	}
	if h := s.hosts[endpoint]; h != nil {
		return h, nil
	}
	p, err := s.opts.Dial(endpoint)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	hl := newHealth(instance, endpoint)
	h := &host{instance: instance, endpoint: endpoint, peer: p, health: hl,
		queue: newHostQueue(s.ctx, endpoint, p, hl, s.opts.MaxBatch, s.opts.RequestTimeout)}
	s.hosts[endpoint] = h
	if s.opts.Health.Interval > 0 {
		s.probes.Add(1)
		go func() {
			defer s.probes.Done()
			hl.probe(p, s.opts.Health, s.stop, s.opts.Logger)
		}()
	}
	return h, nil
}

// down reports whether a host is known not to answer, for reads choosing
// whom to ask first.
func (s *Session) down(m *Map) func(string) bool {
	return func(instance string) bool {
		s.mu.Lock()
		h := s.hosts[m.Endpoints[instance]]
		s.mu.Unlock()
		return h != nil && h.health.Down() != nil
	}
}

// routing returns the routing table of m, built once per placement.
func (s *Session) routing(m *Map) *routing {
	if r := s.route.Load(); r != nil && r.m == m {
		return r
	}
	r := newRouting(m, s.opts.LocalID)
	s.route.Store(r)
	return r
}

// ErrNoPlacement is returned before any placement is known.
var ErrNoPlacement = errors.New("no placement: the cluster is not initialised or etcd was never reached")

// WriteBatch writes float samples to every owner of their shards and
// returns once each shard met the write level (or cannot). It returns a
// *storage.RejectedError when replicas refused samples permanently. It is
// Write of a batch of floats only, the hot path's own signature.
func (s *Session) WriteBatch(ctx context.Context, ns string, samples []storage.Sample) error {
	return s.Write(ctx, ns, storage.Batch{Floats: samples})
}

// Write writes a batch of samples of every kind to every owner of their
// shards and returns once each shard met the write level (or cannot): one
// fan-out, one level count, in which an owner counts once it stored its
// share of every kind. It returns a *storage.RejectedError when replicas
// refused samples permanently, and a *HistogramRefusedError when an owner
// refused native histograms as a whole (a node older than them): that is
// never acknowledged, even when the level was met by the others. A batch
// with histograms is refused (ErrHistogramsNotStored) while
// StoresHistograms is false.
func (s *Session) Write(ctx context.Context, ns string, b storage.Batch) error {
	if len(b.Histograms) > 0 && !s.StoresHistograms() {
		return ErrHistogramsNotStored
	}
	m := s.opts.Topology.Get()
	if m == nil {
		return ErrNoPlacement
	}
	if m.Sole != "" && m.Sole == s.opts.LocalID && s.opts.Local != nil {
		// One node owning everything: every level is met by its own write.
		return s.writeLocal(ns, b)
	}
	return s.routeAgain(ctx, m, func(m *Map) error { return s.writeOnce(ctx, ns, b, m) })
}

// writeLocal writes b to this node's storage alone (a one-node
// placement): a batch with histograms through its one entry point.
func (s *Session) writeLocal(ns string, b storage.Batch) error {
	if len(b.Histograms) == 0 {
		return s.opts.Local.WriteBatch(ns, b.Floats)
	}
	return s.opts.Local.(localBatchWriter).Write(ns, b)
}

// routeAgain runs one write attempt by placement m and, while it misses
// its level (a ConsistencyError), up to twice more by a newer placement.
// Replicas refuse shards they no longer (or not yet) hold when this
// node's placement lags theirs, as at the end of a shard move. If a newer
// placement arrives shortly, the write is routed again by it: rewriting a
// sample is idempotent.
func (s *Session) routeAgain(ctx context.Context, m *Map, once func(*Map) error) error {
	for attempt := 0; ; attempt++ {
		err := once(m)
		var ce *ConsistencyError
		if err == nil || !errors.As(err, &ce) || attempt == 2 {
			return err
		}
		next := s.waitNewer(ctx, m.Placement.Version, 500*time.Millisecond)
		if next == nil {
			return err
		}
		m = next
	}
}

// localBatchWriter is what a Local that stores native histograms has:
// the storage entry point for a batch of every kind
// (storage.Database.Write).
type localBatchWriter interface {
	Write(ns string, b storage.Batch) error
}

// StoresHistograms reports whether native histograms written now are
// stored end to end: the cluster session writes them to every owner, so
// yes once a placement is known, unless this node's own storage cannot
// store them. A replica that cannot (a node older than the HISTOGRAMS_V1
// payload) fails the write by name instead (*HistogramRefusedError),
// never acknowledged.
func (s *Session) StoresHistograms() bool {
	if s.opts.Topology.Get() == nil {
		return false
	}
	if s.opts.Local == nil {
		return true
	}
	_, ok := s.opts.Local.(localBatchWriter)
	return ok
}

// ErrHistogramsNotStored is Write's refusal of histograms when
// StoresHistograms is false: no placement is known yet, or this node's
// storage does not store native histograms.
var ErrHistogramsNotStored = errors.New("client: native histograms are not stored: no placement is known yet, or this node's storage does not store them; retry")

// WriteHistograms is Write of a batch of native histograms only.
func (s *Session) WriteHistograms(ctx context.Context, ns string, samples []storage.HistogramSample) error {
	return s.Write(ctx, ns, storage.Batch{Histograms: samples})
}

// waitNewer returns a map newer than version, polling until d elapses;
// nil if none arrived.
func (s *Session) waitNewer(ctx context.Context, version int64, d time.Duration) *Map {
	deadline := time.Now().Add(d)
	for {
		if m := s.opts.Topology.Get(); m != nil && m.Placement.Version > version {
			return m
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeOnce writes batch b by placement m: every kind is split per
// owner, and each owner is called once for its share of all of them. A
// batch of floats alone goes through the host queues (the hot path); one
// with histograms goes to each owner as one request of every kind
// (batchwrite.go).
func (s *Session) writeOnce(ctx context.Context, ns string, b storage.Batch, m *Map) error {
	samples := b.Floats
	r := s.routing(m)
	localIdx := -1
	if hi, ok := r.hostIdx[s.opts.LocalID]; ok && s.opts.Local != nil {
		localIdx = hi
	}
	used := make([]bool, len(r.groups))
	var perHost [][]storage.Sample
	var chunk *rpc.SeqChunk
	var kw *kindsWrite
	var err error
	switch {
	case len(b.Histograms) > 0:
		if kw, err = s.newKindsWrite(r, b, used); err != nil {
			return err
		}
	case len(samples) > 0:
		if perHost, chunk, err = distribute(r, samples, localIdx, used); err != nil {
			return err
		}
	}
	// Only the groups of shards the batch writes must meet the level: a
	// write never waits for, or fails on, replicas of shards it does not
	// touch. ridx maps each fan-out group back to its routing group.
	var groups []FanoutGroup
	var ridx []int
	for i, g := range r.groups {
		if used[i] {
			groups = append(groups, FanoutGroup{Owners: g.owners, Quorum: NewWriteQuorum(g.owners, m.Placement.ReplicaFactor, s.opts.WriteLevel, s.opts.Pairing)})
			ridx = append(ridx, i)
		}
	}
	if kw != nil && !kw.start(s, m) {
		return errHostClosed
	}
	// The local write sets each sample's storage ref in its copy. When it
	// holds every sample (as with RF 3 on three nodes) and finished before
	// the level was met, the refs are handed back to the caller, whose
	// series cache then skips the shard lookup next time, as on a single
	// node. A local write still running is never waited for.
	var local []storage.Sample
	localDone := make(chan struct{})
	if perHost != nil && localIdx >= 0 && len(perHost[localIdx]) == len(samples) {
		local = perHost[localIdx]
	}
	// Remote hosts that receive every sample share one encoding of them
	// (distribute), sent as it is by each of their queues.
	var shared *sharedBatch
	if chunk != nil {
		shared = &sharedBatch{chunk: chunk}
	}
	answers, rep := Fanout(ctx, groups, FanoutOptions{Timeout: s.opts.RequestTimeout},
		func(ctx context.Context, inst string, _ []int) (*storage.RejectedError, error) {
			hi := r.hostIdx[inst]
			var rej *storage.RejectedError
			var err error
			var hint storage.Batch // what the owner did not acknowledge
			if perHost != nil {
				batch := perHost[hi]
				var sb *sharedBatch
				if batch == nil {
					sb = shared
				}
				if len(batch) > 0 || sb != nil {
					rej, err = s.writeHost(ctx, m, ns, inst, batch, sb)
					if err != nil && hintable(err) {
						if sb != nil {
							batch = sb.samples()
						}
						hint.Floats = batch
					}
				}
			}
			if kw != nil {
				var share storage.Batch
				share, rej, err = kw.write(ctx, s, m, ns, inst)
				if err != nil && hintable(err) {
					hint = share
				}
			}
			if err != nil {
				// Durable before the level is met: one record of every kind.
				s.hints.hint(inst, ns, hint, err)
			}
			if local != nil && inst == s.opts.LocalID {
				close(localDone)
			}
			return rej, err
		})
	if local != nil {
		select {
		case <-localDone:
			for i := range samples {
				samples[i].Ref = local[i].Ref
			}
		default:
		}
	}
	if kw != nil {
		if err := kw.refused(ctx, s, rep); err != nil {
			s.m.writeFail.Inc(1)
			return err
		}
	}
	if !rep.OK {
		s.m.writeFail.Inc(1)
		return s.failure(fmt.Sprintf("write consistency %s not met", s.opts.WriteLevel), "acknowledged", m, r, ridx, groups, rep)
	}
	s.m.writeOK.Inc(1)
	for _, a := range answers {
		if a.Value != nil {
			return a.Value
		}
	}
	return nil
}

// distribute splits samples per host of routing r: one slice index per
// sample to find its group, one append per owner. Replicas still being
// written after the write returned must not see the caller reuse its
// buffers (the HTTP decoder's): a sample with a storage ref takes the
// series' own immutable ID (storage.SeriesID), the others' IDs are
// copied into one arena, consecutive samples of one series once.
// It marks in used the routing groups the samples fall in.
//
// Remote hosts that receive every sample (all of them with RF equal to
// the cluster size) get them encoded once for all (chunk, rpc.SeqChunk,
// which holds no reference to samples) and a nil slice, or, when the
// encoding does not pay (most series without a storage ref), share one
// slice: hosts only read their batch. The local host, whose write sets
// each sample's Ref, always gets its own.
func distribute(r *routing, samples []storage.Sample, local int, used []bool) (perHost [][]storage.Sample, chunk *rpc.SeqChunk, err error) {
	counts := make([]int, len(r.hosts))
	size := 0
	for i := range samples {
		sh := samples[i].Shard
		if int(sh) >= len(r.byShard) {
			return nil, nil, fmt.Errorf("sample of shard %d: placement version %d has %d shards",
				sh, r.m.Placement.Version, len(r.byShard))
		}
		gi := r.byShard[sh]
		used[gi] = true
		for _, hi := range r.groups[gi].hosts {
			counts[hi]++
		}
		if samples[i].Ref == 0 && (i == 0 || !sameSeries(&samples[i], &samples[i-1])) {
			size += len(samples[i].ID)
		}
	}
	// full says whether host hi receives every sample, not as its own copy.
	full := func(hi int) bool { return counts[hi] == len(samples) && hi != local }
	anyFull := false
	for hi := range counts {
		anyFull = anyFull || full(hi)
	}
	if anyFull {
		chunk = rpc.EncodeSeqChunk(samples)
	}
	arena := make([]byte, 0, size)
	perHost = make([][]storage.Sample, len(r.hosts))
	var shared []storage.Sample
	for hi, n := range counts {
		switch {
		case !full(hi):
			perHost[hi] = make([]storage.Sample, 0, n)
		case chunk != nil:
			// encoded: no slice
		case shared == nil:
			shared = make([]storage.Sample, len(samples))
			fallthrough
		default:
			perHost[hi] = shared
		}
	}
	var id []byte
	for i := range samples {
		smp := samples[i]
		if i == 0 || !sameSeries(&smp, &samples[i-1]) {
			// storage's immutable copy of the same ID, while its series is
			// in memory; else a copy (the arena grows past its estimate
			// only for a series gone since the write)
			if id = storage.SeriesID(smp.Ref); id == nil {
				start := len(arena)
				arena = append(arena, smp.ID...)
				id = arena[start:len(arena):len(arena)]
			}
		}
		smp.ID = id
		if shared != nil {
			shared[i] = smp
		}
		for _, hi := range r.groups[r.byShard[smp.Shard]].hosts {
			if !full(hi) {
				perHost[hi] = append(perHost[hi], smp)
			}
		}
	}
	return perHost, chunk, nil
}

// sameSeries says whether b is of a's series. Samples of different series
// almost always differ in shard, which is compared before the IDs.
func sameSeries(a, b *storage.Sample) bool { return a.Shard == b.Shard && ident.Same(a.ID, b.ID) }

// failure builds the error of a write or read that missed its level,
// naming per group of shards the owners that failed and why, and those
// that had not answered.
//
// ridx maps each of groups to its routing group (nil: the same index, as
// for reads, which ask every group).
func (s *Session) failure(what, verb string, m *Map, r *routing, ridx []int, groups []FanoutGroup, rep *FanoutReport) error {
	var parts []string
	for gi, gr := range rep.Groups {
		if gr.Satisfied {
			continue
		}
		var hosts []string
		for _, f := range gr.Failed {
			hosts = append(hosts, fmt.Sprintf("%s (%s): %v", f.Instance, m.Endpoints[f.Instance], f.Err))
		}
		// Pending owners did not answer by the timeout, or had not
		// answered yet when the level became impossible.
		pending := "still pending"
		if rep.Cause != nil {
			pending = "no answer"
		}
		for _, inst := range gr.Pending {
			hosts = append(hosts, fmt.Sprintf("%s (%s): %s", inst, m.Endpoints[inst], pending))
		}
		if len(groups[gi].Owners) == 0 {
			hosts = append(hosts, "no readable owner")
		}
		rg := gi
		if ridx != nil {
			rg = ridx[gi]
		}
		shards := r.groups[rg].shards
		more := ""
		if len(shards) > 5 {
			shards, more = shards[:5], fmt.Sprintf(" and %d more", len(r.groups[rg].shards)-5)
		}
		q := groups[gi].Quorum
		parts = append(parts, fmt.Sprintf("shards %v%s: %d of %d replicas needed %s [%s]",
			shards, more, q.Counted(), q.Need(), verb, strings.Join(hosts, "; ")))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("%s: %s", what, strings.Join(parts, "; "))
	if rep.Cause != nil {
		return fmt.Errorf("%s: %w", msg, rep.Cause)
	}
	return &ConsistencyError{Msg: msg}
}

// ConsistencyError is a write or read that did not reach its level. It is
// transient: retrying may succeed once hosts are back.
type ConsistencyError struct{ Msg string }

func (e *ConsistencyError) Error() string { return e.Msg }

// writeHost writes one host's samples: locally, or through its queue
// under a context cancelled if the host goes down. A permanent rejection
// of samples is returned as the value: the replica answered, and counts.
// shared, when not nil, is batch as several remote hosts receive it.
func (s *Session) writeHost(ctx context.Context, m *Map, ns, inst string, batch []storage.Sample, shared *sharedBatch) (*storage.RejectedError, error) {
	var err error
	if inst == s.opts.LocalID && s.opts.Local != nil {
		err = s.opts.Local.WriteBatch(ns, batch)
	} else {
		var h *host
		h, err = s.host(inst, m.Endpoints[inst])
		if err == nil {
			var gctx context.Context
			var cancel context.CancelFunc
			gctx, cancel, err = h.health.guard(ctx)
			if err == nil {
				err = callErr(gctx, h.queue.write(gctx, ns, batch, shared))
				cancel()
			}
		}
	}
	return answered(err)
}

// answered splits a replica's write outcome: a permanent rejection of
// samples is the value (the replica answered, and counts), anything
// else the error.
func answered(err error) (*storage.RejectedError, error) {
	var rej *storage.RejectedError
	if errors.As(err, &rej) {
		return rej, nil
	}
	return nil, err
}

// seriesAcc collects the replicas' answers for one series.
type seriesAcc struct {
	id    []byte
	shard uint32
	its   []encoding.Iterator
	hits  []encoding.HistogramIterator // replicas' native histograms
}

// Query reads the series matching matchers from the owners of every shard
// and merges the replicas' answers, de-duplicated by timestamp.
func (s *Session) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	m := s.opts.Topology.Get()
	if m == nil {
		return nil, ErrNoPlacement
	}
	if m.Sole != "" && m.Sole == s.opts.LocalID && s.opts.Local != nil {
		return s.opts.Local.Query(ctx, ns, ms, start, end, storage.QueryOptions{})
	}
	return s.readSets(ctx, m, s.routing(m).groups, ns, ms, start, end)
}

// readAtLevel calls call on the owners of every set of shards until the
// read level is met in each (hedged, as every read): the fan-out a raw
// read and a rollup read share. A level not met is the error, naming the
// owners that failed.
func readAtLevel[T any](ctx context.Context, s *Session, m *Map, sets []routeGroup,
	call func(ctx context.Context, inst string, gs []int) (T, error)) ([]FanoutAnswer[T], error) {
	groups := make([]FanoutGroup, len(sets))
	for i, g := range sets {
		groups[i] = FanoutGroup{Owners: g.readable, Quorum: NewReadQuorum(g.owners, m.Placement.ReplicaFactor, s.opts.ReadLevel)}
	}
	answers, rep := Fanout(ctx, groups, FanoutOptions{Read: true, HedgeAfter: s.opts.HedgeAfter,
		Timeout: s.opts.RequestTimeout, Down: s.down(m)}, call)
	if !rep.OK {
		s.m.readFail.Inc(1)
		return nil, s.failure(fmt.Sprintf("read consistency %s not met", s.opts.ReadLevel), "answered", m, &routing{groups: sets}, nil, groups, rep)
	}
	if rep.Hedged > 0 {
		s.m.hedged.Inc(1)
	}
	return answers, nil
}

// readSets reads the series matching matchers from the owners of every
// set of shards at the read level and merges the replicas' answers: Query
// over every routing group, and Push's raw fallback over the parts whose
// replicas disagreed.
func (s *Session) readSets(ctx context.Context, m *Map, sets []routeGroup, ns string, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	answers, err := readAtLevel(ctx, s, m, sets,
		func(ctx context.Context, inst string, gs []int) ([]storage.SeriesIterator, error) {
			return s.readHost(ctx, m, sets, ns, inst, gs, ms, start, end)
		})
	if err != nil {
		return nil, err
	}
	acc := map[string]*seriesAcc{}
	for _, a := range answers {
		for _, ser := range a.Value {
			sa := acc[string(ser.ID)]
			if sa == nil {
				sa = &seriesAcc{id: ser.ID, shard: ser.Shard}
				acc[string(ser.ID)] = sa
			}
			sa.its = append(sa.its, ser.Values)
			if ser.Histograms != nil {
				sa.hits = append(sa.hits, ser.Histograms)
			}
		}
	}
	out := make([]storage.SeriesIterator, 0, len(acc))
	for _, a := range acc {
		it := a.its[0]
		if len(a.its) > 1 {
			it = encoding.MergeIterators(a.its...)
		}
		var hit encoding.HistogramIterator
		if len(a.hits) > 0 {
			hit = encoding.MergeHistogramIterators(a.hits...)
		}
		out = append(out, storage.SeriesIterator{ID: a.id, Shard: a.shard, Values: it, Histograms: hit})
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i].ID) < string(out[j].ID) })
	s.m.readOK.Inc(1)
	return out, nil
}

func (s *Session) readHost(ctx context.Context, m *Map, sets []routeGroup, ns, inst string, gs []int, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	if inst == s.opts.LocalID && s.opts.Local != nil {
		return s.opts.Local.Query(ctx, ns, ms, start, end, storage.QueryOptions{Shards: shardSet(m, sets, gs)})
	}
	resp, err := s.fetchTagged(ctx, m, sets, inst, gs, ms, &rpc.FetchTaggedRequest{Namespace: ns, Start: start, End: end, AcceptHistograms: true})
	if err != nil {
		return nil, err
	}
	out := make([]storage.SeriesIterator, len(resp.Series))
	var n int
	for i, ser := range resp.Series {
		out[i] = storage.SeriesIterator{ID: ser.ID, Shard: ser.Shard, Values: encoding.NewIterator(ser.Stream), Histograms: ser.HistogramIterator()}
		n += len(ser.ID) + len(ser.Stream)
		for _, h := range ser.Histograms {
			n += len(h)
		}
	}
	s.m.readBytes.Inc(int64(n))
	return out, nil
}

// fetchTagged asks owner inst for req over the shards of sets gs
// matching ms (both filled in here), under the host's health guard: the
// remote half that raw reads (readHost) and rollup reads
// (readRollupHost) share.
func (s *Session) fetchTagged(ctx context.Context, m *Map, sets []routeGroup, inst string, gs []int, ms []*labels.Matcher, req *rpc.FetchTaggedRequest) (*rpc.FetchResponse, error) {
	h, err := s.host(inst, m.Endpoints[inst])
	if err != nil {
		return nil, err
	}
	gctx, cancel, err := h.health.guard(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	for _, gi := range gs {
		req.Shards = append(req.Shards, sets[gi].shards...)
	}
	for _, mt := range ms {
		req.Matchers = append(req.Matchers, rpc.Matcher{Type: uint8(mt.Type), Name: mt.Name, Value: mt.Value})
	}
	resp, err := h.peer.FetchTagged(gctx, req)
	if err != nil {
		return nil, callErr(gctx, err)
	}
	return resp, nil
}

// shardSet is the membership test of the shards of sets gs.
func shardSet(m *Map, sets []routeGroup, gs []int) func(uint32) bool {
	asked := make([]bool, m.Placement.NumShards)
	for _, gi := range gs {
		for _, sh := range sets[gi].shards {
			asked[sh] = true
		}
	}
	return func(sh uint32) bool { return int(sh) < len(asked) && asked[sh] }
}

// LabelNames answers from the series matching matchers (all series when
// none), read through the cluster at the read level.
func (s *Session) LabelNames(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	series, err := s.Query(ctx, ns, orAll(ms), start, end)
	if err != nil {
		return nil, err
	}
	return collectLabels(series, "")
}

// LabelValues answers like LabelNames.
func (s *Session) LabelValues(ctx context.Context, ns, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	series, err := s.Query(ctx, ns, orAll(ms), start, end)
	if err != nil {
		return nil, err
	}
	return collectLabels(series, name)
}

func orAll(ms []*labels.Matcher) []*labels.Matcher {
	if len(ms) > 0 {
		return ms
	}
	return []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")}
}
