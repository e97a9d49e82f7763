package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exemplars and metadata in a cluster (docs/internals/write.md "Exemplars and
// metadata in a cluster"). They are auxiliary data, best effort as in
// Prometheus: a write hands them to a bounded queue after its samples met
// their level and returns; workers deliver them to the owners of their
// shard (a series' exemplars: the series' shard; a metric's metadata: the
// shard of the metric name's hash), the local owner directly. Nothing
// here can fail or slow a sample write: a full queue drops the batch and
// a failed delivery is counted, never retried (senders resend metadata
// every minute; an exemplar lost is an exemplar missing from a
// dashboard). Queries ask the readable owners of every shard through
// Fanout at the session's read level, merge and de-duplicate.

// AuxPeer is the part of a Peer that carries exemplars and metadata.
// *rpc.Client has it; a peer without it (a test fake) is skipped like a
// node older than these methods (Unimplemented).
type AuxPeer interface {
	ExemplarsWrite(ctx context.Context, items []exemplars.Item) (int, error)
	ExemplarsQuery(ctx context.Context, start, end int64, sets [][]*labels.Matcher) ([]exemplar.QueryResult, error)
	MetadataWrite(ctx context.Context, rs []metadata.Record) error
	MetadataQuery(ctx context.Context, metric string, limit, limitPerMetric int) (map[string][]metadata.Entry, error)
}

// auxQueueLen bounds the write batches waiting for delivery: past it a
// batch is dropped and counted. A batch is one request's exemplars or
// metadata, so this holds seconds of a busy node's.
const auxQueueLen = 4096

// auxWorkers deliver batches concurrently, so one slow owner (up to a
// request timeout per batch) does not stop the others' deliveries.
const auxWorkers = 4

type auxJob struct {
	ex   []exemplars.Item
	meta []metadata.Record
}

// auxMetrics count what happened to exemplars and metadata, by kind
// (exemplars, metadata) and result: sent (per owner), failed (an owner
// failed), unimplemented (an owner too old), dropped (the queue was full).
type auxMetrics struct {
	mu sync.Mutex
	m  map[[2]string]tally.Counter
	s  tally.Scope
}

func (a *auxMetrics) inc(kind, result string, n int) {
	if n == 0 {
		return
	}
	a.mu.Lock()
	c, ok := a.m[[2]string{kind, result}]
	if !ok {
		c = a.s.Tagged(map[string]string{"kind": kind, "result": result}).Counter("aux_writes")
		a.m[[2]string{kind, result}] = c
	}
	a.mu.Unlock()
	c.Inc(int64(n))
}

// aux is the session's delivery of exemplars and metadata.
type aux struct {
	jobs    chan auxJob
	workers sync.WaitGroup
	m       auxMetrics
}

func (s *Session) startAux() {
	s.aux = &aux{jobs: make(chan auxJob, auxQueueLen), m: auxMetrics{m: map[[2]string]tally.Counter{}, s: s.opts.Metrics}}
	for range auxWorkers {
		s.aux.workers.Go(func() {
			for {
				select {
				case j := <-s.aux.jobs:
					s.deliverAux(j)
				case <-s.ctx.Done():
					return
				}
			}
		})
	}
}

// WriteExemplars hands exemplars to their series' owners, best effort,
// without waiting, and returns how many it took: on a one-node placement
// those the local store kept, else those queued for delivery (0 when the
// queue was full). The items' IDs are copied (they may alias a request's
// buffers); their labels must be the caller's to give.
func (s *Session) WriteExemplars(items []exemplars.Item) int {
	if len(items) == 0 {
		return 0
	}
	if s.sole() {
		return s.opts.Exemplars.Add(items)
	}
	size := 0
	for _, it := range items {
		size += len(it.SeriesID)
	}
	arena := make([]byte, 0, size)
	own := make([]exemplars.Item, len(items))
	for i, it := range items {
		start := len(arena)
		arena = append(arena, it.SeriesID...)
		it.SeriesID = arena[start:len(arena):len(arena)]
		own[i] = it
	}
	if !s.enqueueAux(auxJob{ex: own}, "exemplars", len(own)) {
		return 0
	}
	return len(own)
}

// WriteMetadata hands metadata to the owners of each metric name's shard,
// best effort, without waiting. rs becomes the session's.
func (s *Session) WriteMetadata(rs []metadata.Record) {
	if len(rs) == 0 {
		return
	}
	if s.sole() {
		s.opts.Metadata.AddRecords(rs)
		return
	}
	s.enqueueAux(auxJob{meta: rs}, "metadata", len(rs))
}

// sole says whether this node owns everything (one node): its own stores
// are the cluster's.
func (s *Session) sole() bool {
	m := s.opts.Topology.Get()
	return m != nil && m.Sole != "" && m.Sole == s.opts.LocalID && s.opts.Exemplars != nil && s.opts.Metadata != nil
}

func (s *Session) enqueueAux(j auxJob, kind string, n int) bool {
	select {
	case s.aux.jobs <- j:
		return true
	default:
		s.aux.m.inc(kind, "dropped", n)
		return false
	}
}

// deliverAux sends one batch to every owner of its items' shards
// (INITIALIZING and LEAVING ones too, as writes do), concurrently, and
// waits for them (bounded by the request timeout).
func (s *Session) deliverAux(j auxJob) {
	m := s.opts.Topology.Get()
	if m == nil {
		s.aux.m.inc("exemplars", "failed", len(j.ex))
		s.aux.m.inc("metadata", "failed", len(j.meta))
		return
	}
	r := s.routing(m)
	n := m.Placement.NumShards
	exBy := map[int][]exemplars.Item{}
	for _, it := range j.ex {
		for _, hi := range r.groups[r.byShard[ident.Shard(it.SeriesID, n)]].hosts {
			exBy[hi] = append(exBy[hi], it)
		}
	}
	metaBy := map[int][]metadata.Record{}
	for _, rec := range j.meta {
		for _, hi := range r.groups[r.byShard[ident.Shard([]byte(rec.Metric), n)]].hosts {
			metaBy[hi] = append(metaBy[hi], rec)
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.RequestTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for hi, items := range exBy {
		wg.Go(func() {
			inst := r.hosts[hi]
			err := s.auxCall(ctx, m, inst, func(ctx context.Context, p AuxPeer) error {
				_, err := p.ExemplarsWrite(ctx, items)
				return err
			}, func() { s.opts.Exemplars.Add(items) })
			s.countAux("exemplars", inst, len(items), err)
		})
	}
	for hi, rs := range metaBy {
		wg.Go(func() {
			inst := r.hosts[hi]
			err := s.auxCall(ctx, m, inst, func(ctx context.Context, p AuxPeer) error {
				return p.MetadataWrite(ctx, rs)
			}, func() { s.opts.Metadata.AddRecords(rs) })
			s.countAux("metadata", inst, len(rs), err)
		})
	}
	wg.Wait()
}

func (s *Session) countAux(kind, inst string, n int, err error) {
	switch {
	case err == nil:
		s.aux.m.inc(kind, "sent", n)
	case errors.Is(err, errAuxUnsupported):
		s.aux.m.inc(kind, "unimplemented", n)
	default:
		s.aux.m.inc(kind, "failed", n)
		s.opts.Logger.Debug("exemplars/metadata not delivered", "kind", kind, "instance", inst, "n", n, "err", err)
	}
}

// errAuxUnsupported is an owner that does not take exemplars or metadata:
// a node older than the methods, or a peer without them.
var errAuxUnsupported = errors.New("node does not serve exemplars and metadata (older version)")

// auxCall runs local on this node's stores, or call on a remote owner
// under its health guard. Unimplemented becomes errAuxUnsupported.
func (s *Session) auxCall(ctx context.Context, m *Map, inst string, call func(context.Context, AuxPeer) error, local func()) error {
	if inst == s.opts.LocalID {
		if s.opts.Exemplars == nil || s.opts.Metadata == nil {
			return errAuxUnsupported
		}
		local()
		return nil
	}
	h, err := s.host(inst, m.Endpoints[inst])
	if err != nil {
		return err
	}
	p, ok := h.peer.(AuxPeer)
	if !ok {
		return errAuxUnsupported
	}
	gctx, cancel, err := h.health.guard(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	err = callErr(gctx, call(gctx, p))
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%w: %v", errAuxUnsupported, err)
	}
	return err
}

// QueryExemplars answers /api/v1/query_exemplars from the cluster: the
// readable owners of every shard are asked as a read is (auxReadLevel,
// hedged, down hosts last), and their answers merged. An owner
// that failed or did not answer is named in a warning, and the answer is
// what the others had: exemplars are best effort. It fails only when no
// owner answered at all.
func (s *Session) QueryExemplars(ctx context.Context, start, end int64, sets [][]*labels.Matcher) ([]exemplar.QueryResult, []string, error) {
	if s.sole() {
		return s.opts.Exemplars.Select(start, end, sets...), nil, nil
	}
	answers, warns, err := auxQuery(s, ctx, "exemplars", func(ctx context.Context, p AuxPeer) ([]exemplar.QueryResult, error) {
		return p.ExemplarsQuery(ctx, start, end, sets)
	}, func() []exemplar.QueryResult { return s.opts.Exemplars.Select(start, end, sets...) })
	if err != nil {
		return nil, nil, err
	}
	return exemplars.Merge(answers...), warns, nil
}

// QueryMetadata answers /api/v1/metadata from the cluster as
// QueryExemplars does: every node's entries are merged per metric (set
// union), then limited.
func (s *Session) QueryMetadata(ctx context.Context, metric string, limit, limitPerMetric int) (map[string][]metadata.Entry, []string, error) {
	if s.sole() {
		return s.opts.Metadata.Query(metric, limit, limitPerMetric), nil, nil
	}
	// Each node's first limit names (by name) hold the merged answer's
	// first limit names, so the nodes may apply limit; limitPerMetric is
	// applied after the union.
	answers, warns, err := auxQuery(s, ctx, "metadata", func(ctx context.Context, p AuxPeer) (map[string][]metadata.Entry, error) {
		return p.MetadataQuery(ctx, metric, limit, -1)
	}, func() map[string][]metadata.Entry { return s.opts.Metadata.Query(metric, limit, -1) })
	if err != nil {
		return nil, nil, err
	}
	out := map[string][]metadata.Entry{}
	for _, a := range answers {
		metadata.Merge(out, a)
	}
	return metadata.Limit(out, limit, limitPerMetric), warns, nil
}

// auxReadLevel is the level of exemplar and metadata queries, whatever
// the session's: a majority of each shard's owners when they answer, one
// when no more can (an owner down, failing or older than the methods).
// A stricter level would turn one old or failed owner into an empty
// answer at once (the level impossible, the calls in flight cancelled),
// when best-effort data is better served by what the others hold.
const auxReadLevel = ReadUnstrictMajority

// auxQuery fans a query out to the readable owners of every shard group
// (at auxReadLevel, hedged, down hosts last) and returns the answers,
// with a warning per owner that failed or did not answer when some group
// is short of a majority.
func auxQuery[T any](s *Session, ctx context.Context, kind string, call func(context.Context, AuxPeer) (T, error), local func() T) ([]T, []string, error) {
	m := s.opts.Topology.Get()
	if m == nil {
		return nil, nil, ErrNoPlacement
	}
	r := s.routing(m)
	groups := make([]FanoutGroup, len(r.groups))
	for i, g := range r.groups {
		groups[i] = FanoutGroup{Owners: g.readable, Quorum: NewReadQuorum(g.owners, m.Placement.ReplicaFactor, auxReadLevel)}
	}
	answers, rep := Fanout(ctx, groups, FanoutOptions{Read: true, HedgeAfter: s.opts.HedgeAfter,
		Timeout: s.opts.RequestTimeout, Down: s.down(m)},
		func(ctx context.Context, inst string, _ []int) (T, error) {
			var v T
			err := s.auxCall(ctx, m, inst, func(ctx context.Context, p AuxPeer) error {
				var err error
				v, err = call(ctx, p)
				return err
			}, func() { v = local() })
			return v, err
		})
	if rep.Hedged > 0 {
		s.m.hedged.Inc(1)
	}
	out := make([]T, len(answers))
	for i, a := range answers {
		out[i] = a.Value
	}
	if rep.OK {
		return out, nil, nil
	}
	why := map[string]string{}
	for _, g := range rep.Groups {
		if g.Satisfied {
			continue
		}
		for _, f := range g.Failed {
			why[f.Instance] = fmt.Sprintf("%s (%s): %v", f.Instance, m.Endpoints[f.Instance], f.Err)
		}
		for _, p := range g.Pending {
			why[p] = fmt.Sprintf("%s (%s): no answer", p, m.Endpoints[p])
		}
		if len(g.Failed)+len(g.Pending) == 0 {
			why[""] = "some shards have no readable owner"
		}
	}
	warns := make([]string, 0, len(why))
	for _, w := range why {
		warns = append(warns, fmt.Sprintf("%s may be incomplete: read consistency %s not met: %s", kind, auxReadLevel, w))
	}
	sort.Strings(warns)
	if len(answers) == 0 {
		return nil, nil, &ConsistencyError{Msg: fmt.Sprintf("%s: no node answered: %v", kind, warns)}
	}
	return out, warns, nil
}
