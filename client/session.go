package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/uber-go/tally/v4"
)

// Local is this node's own storage, written and read without a network hop.
type Local interface {
	WriteBatch(ns string, samples []storage.Sample) error
	Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64, qo storage.QueryOptions) ([]storage.SeriesIterator, error)
}

// Options configure a Session.
type Options struct {
	// LocalID is this node's instance ID; its shards go to Local.
	LocalID    string
	Local      Local
	Topology   *Topology
	WriteLevel WriteLevel
	ReadLevel  ReadLevel
	// Pairing lets an INITIALIZING owner and its LEAVING source count as
	// one replica for writes.
	Pairing bool
	// HedgeAfter is the stage timeout of a read at level one.
	HedgeAfter time.Duration
	// RequestTimeout bounds one RPC.
	RequestTimeout time.Duration
	// MaxBatch is the most samples one write RPC carries.
	MaxBatch int
	Logger   *slog.Logger
	Metrics  tally.Scope
}

// Session routes writes and reads through the cluster. It is safe for
// concurrent use and implements httpapi.Backend.
type Session struct {
	opts Options

	mu    sync.Mutex
	hosts map[string]*hostQueue // by endpoint

	m sessionMetrics
}

type sessionMetrics struct {
	writeOK, writeFail, readOK, readFail, hedged tally.Counter
}

// NewSession builds a session over a topology.
func NewSession(opts Options) *Session {
	if opts.WriteLevel == 0 {
		opts.WriteLevel = WriteMajority
	}
	if opts.ReadLevel == 0 {
		opts.ReadLevel = ReadUnstrictMajority
	}
	if opts.HedgeAfter <= 0 {
		opts.HedgeAfter = 100 * time.Millisecond
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 16384
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = tally.NoopScope
	}
	return &Session{opts: opts, hosts: map[string]*hostQueue{}, m: sessionMetrics{
		writeOK:   opts.Metrics.Counter("write_success"),
		writeFail: opts.Metrics.Counter("write_errors"),
		readOK:    opts.Metrics.Counter("read_success"),
		readFail:  opts.Metrics.Counter("read_errors"),
		hedged:    opts.Metrics.Counter("read_hedged"),
	}}
}

// Close closes every host connection.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for ep, h := range s.hosts {
		errs = append(errs, h.close())
		delete(s.hosts, ep)
	}
	return errors.Join(errs...)
}

func (s *Session) host(endpoint string) (*hostQueue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hosts[endpoint]; h != nil {
		return h, nil
	}
	c, err := rpc.Dial(endpoint, rpc.ClientOptions{Timeout: s.opts.RequestTimeout})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	h := newHostQueue(endpoint, c, s.opts.MaxBatch, s.opts.RequestTimeout)
	s.hosts[endpoint] = h
	return h, nil
}

// ErrNoPlacement is returned before any placement is known.
var ErrNoPlacement = errors.New("no placement: the cluster is not initialised or etcd was never reached")

// shardGroup is the set of shards of one write that share the same owners
// in the same states; they succeed or fail together, so one quorum
// serves them all (with three nodes at RF 3 every shard is in one group).
type shardGroup struct {
	owners []placement.Owner
	q      *Quorum
	shards []uint32
	errs   map[string]error
}

type hostResult struct {
	instance string
	err      error
	rejected *storage.RejectedError
}

// WriteBatch writes samples to every owner of their shards and returns
// once each shard met the write level (or cannot). It returns a
// *storage.RejectedError when replicas refused samples permanently.
func (s *Session) WriteBatch(ctx context.Context, ns string, samples []storage.Sample) error {
	m := s.opts.Topology.Get()
	if m == nil {
		return ErrNoPlacement
	}
	if m.Sole != "" && m.Sole == s.opts.LocalID && s.opts.Local != nil {
		// One node owning everything: every level is met by its own write.
		return s.opts.Local.WriteBatch(ns, samples)
	}
	for attempt := 0; ; attempt++ {
		err := s.writeOnce(ctx, ns, samples, m)
		var ce *ConsistencyError
		if err == nil || !errors.As(err, &ce) || attempt == 2 {
			return err
		}
		// Replicas refuse shards they no longer (or not yet) hold when this
		// node's placement lags theirs, as at the end of a shard move. If
		// a newer placement arrives shortly, route again by it: rewriting
		// a sample is idempotent.
		next := s.waitNewer(ctx, m.Placement.Version, 500*time.Millisecond)
		if next == nil {
			return err
		}
		m = next
	}
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

func (s *Session) writeOnce(ctx context.Context, ns string, samples []storage.Sample, m *Map) error {
	rf := m.Placement.ReplicaFactor
	if len(m.Placement.Instances) > 1 {
		// Replicas still being written when this call returns must not
		// see the caller reuse its buffers (the HTTP decoder's arena).
		samples = detach(samples)
	}
	groups := map[string]*shardGroup{}
	byShardGroup := map[uint32]*shardGroup{}
	perHost := map[string][]storage.Sample{}
	for i := range samples {
		smp := &samples[i]
		g := byShardGroup[smp.Shard]
		if g == nil {
			owners := m.Owners.Owners(smp.Shard)
			if len(owners) == 0 {
				return fmt.Errorf("shard %d has no owners in placement version %d", smp.Shard, m.Placement.Version)
			}
			key := ownersKey(owners)
			g = groups[key]
			if g == nil {
				g = &shardGroup{owners: owners, q: NewWriteQuorum(owners, rf, s.opts.WriteLevel, s.opts.Pairing), errs: map[string]error{}}
				groups[key] = g
			}
			g.shards = append(g.shards, smp.Shard)
			byShardGroup[smp.Shard] = g
		}
		for _, o := range g.owners {
			perHost[o.InstanceID] = append(perHost[o.InstanceID], *smp)
		}
	}

	// Every replica gets the write even after the level is met and this
	// call returned (M3DB does the same): the replica that answers late
	// still converges. So the host writes outlive the caller's context,
	// bounded by the request timeout.
	hostCtx, hostCancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.RequestTimeout)
	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	results := make(chan hostResult, len(perHost))
	var hostsLeft sync.WaitGroup
	for inst, batch := range perHost {
		hostsLeft.Add(1)
		go func(inst string, batch []storage.Sample) {
			defer hostsLeft.Done()
			results <- s.writeHost(hostCtx, m, ns, inst, batch)
		}(inst, batch)
	}
	go func() { hostsLeft.Wait(); hostCancel() }()

	var rejected *storage.RejectedError
	pending := len(perHost)
	unsatisfied := len(groups)
	for pending > 0 && unsatisfied > 0 {
		var r hostResult
		select {
		case r = <-results:
		case <-ctx.Done():
			return s.writeFailed(groups, fmt.Errorf("write timed out: %w", ctx.Err()))
		}
		pending--
		if r.rejected != nil && rejected == nil {
			rejected = r.rejected
		}
		unsatisfied = 0
		for _, g := range groups {
			if g.owners == nil {
				continue
			}
			for _, o := range g.owners {
				if o.InstanceID == r.instance {
					g.q.Record(r.instance, r.err == nil)
					if r.err != nil {
						g.errs[r.instance] = r.err
					}
				}
			}
			if !g.q.Satisfied() {
				if !g.q.Possible() {
					return s.writeFailed(groups, nil)
				}
				unsatisfied++
			}
		}
	}
	if unsatisfied > 0 {
		return s.writeFailed(groups, nil)
	}
	s.m.writeOK.Inc(1)
	if rejected != nil {
		return rejected
	}
	return nil
}

// writeFailed builds an error naming the shards and hosts that failed.
func (s *Session) writeFailed(groups map[string]*shardGroup, cause error) error {
	s.m.writeFail.Inc(1)
	var parts []string
	for _, g := range groups {
		if g.q.Satisfied() {
			continue
		}
		hosts := make([]string, 0, len(g.errs))
		for h, err := range g.errs {
			hosts = append(hosts, fmt.Sprintf("%s: %v", h, err))
		}
		sort.Strings(hosts)
		shards := g.shards
		more := ""
		if len(shards) > 5 {
			shards, more = shards[:5], fmt.Sprintf(" and %d more", len(g.shards)-5)
		}
		parts = append(parts, fmt.Sprintf("shards %v%s: %d of %d replicas needed acknowledged [%s]",
			shards, more, g.q.Counted(), g.q.Need(), strings.Join(hosts, "; ")))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("write consistency %s not met: %s", s.opts.WriteLevel, strings.Join(parts, "; "))
	if cause != nil {
		return fmt.Errorf("%s: %w", msg, cause)
	}
	return &ConsistencyError{Msg: msg}
}

// ConsistencyError is a write or read that did not reach its level. It is
// transient: retrying may succeed once hosts are back.
type ConsistencyError struct{ Msg string }

func (e *ConsistencyError) Error() string { return e.Msg }

func (s *Session) writeHost(ctx context.Context, m *Map, ns, inst string, batch []storage.Sample) hostResult {
	res := hostResult{instance: inst}
	var err error
	if inst == s.opts.LocalID && s.opts.Local != nil {
		err = s.opts.Local.WriteBatch(ns, batch)
	} else {
		var h *hostQueue
		h, err = s.host(m.Endpoints[inst])
		if err == nil {
			err = h.write(ctx, ns, batch)
		}
	}
	var rej *storage.RejectedError
	if errors.As(err, &rej) {
		res.rejected = rej
		err = nil
	}
	res.err = err
	return res
}

// SeriesResult collects the replicas' answers for one series.
type seriesAcc struct {
	id    []byte
	shard uint32
	its   []encoding.Iterator
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
	groups, byShard := s.readGroups(m)

	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	type readResult struct {
		instance string
		shards   []uint32
		series   []storage.SeriesIterator
		err      error
	}
	results := make(chan readResult, 64)
	inflight := 0
	ask := func(plan map[string][]uint32) {
		for inst, shards := range plan {
			inflight++
			go func(inst string, shards []uint32) {
				series, err := s.readHost(ctx, m, ns, inst, shards, ms, start, end)
				select {
				case results <- readResult{instance: inst, shards: shards, series: series, err: err}:
				case <-ctx.Done(): // the query returned without this answer
				}
			}(inst, shards)
		}
	}
	// First stage: level one asks one candidate per group of shards; the
	// other levels ask every readable owner at once.
	plan := map[string][]uint32{}
	for _, g := range groups {
		n := len(g.cands)
		if s.opts.ReadLevel == ReadOne && n > 0 {
			n = 1
		}
		for _, o := range g.cands[:n] {
			plan[o.InstanceID] = append(plan[o.InstanceID], g.shards...)
		}
		g.asked = n
	}
	ask(plan)

	acc := map[string]*seriesAcc{}
	var hedge <-chan time.Time
	if s.opts.ReadLevel == ReadOne {
		hedge = time.After(s.opts.HedgeAfter)
	}
	hostErrs := map[string]error{}
	// escalate asks the next candidate of every group not yet satisfied.
	escalate := func() {
		plan := map[string][]uint32{}
		for _, g := range groups {
			if g.q.Satisfied() || g.asked >= len(g.cands) {
				continue
			}
			o := g.cands[g.asked]
			g.asked++
			plan[o.InstanceID] = append(plan[o.InstanceID], g.shards...)
		}
		if len(plan) > 0 {
			s.m.hedged.Inc(1)
		}
		ask(plan)
	}
	done := func() bool {
		for _, g := range groups {
			if len(g.cands) > 0 && !g.q.Satisfied() {
				return false
			}
		}
		return true
	}
loop:
	for inflight > 0 {
		select {
		case r := <-results:
			inflight--
			var last *readGroup
			for _, sh := range r.shards {
				// A host is asked for whole groups, so its shards come in
				// runs of one group: record each group once.
				if g := byShard[sh]; g != last {
					g.q.Record(r.instance, r.err == nil)
					last = g
				}
			}
			if r.err != nil {
				hostErrs[r.instance] = r.err
				if s.opts.ReadLevel == ReadOne {
					escalate() // a failed replica is replaced at once
				}
				continue
			}
			for _, ser := range r.series {
				a := acc[string(ser.ID)]
				if a == nil {
					a = &seriesAcc{id: ser.ID, shard: ser.Shard}
					acc[string(ser.ID)] = a
				}
				a.its = append(a.its, ser.Values)
			}
		case <-hedge:
			hedge = nil
			escalate()
		case <-ctx.Done():
			return nil, s.readFailed(groups, hostErrs, ctx.Err())
		}
		if s.opts.ReadLevel == ReadOne && done() {
			break loop
		}
	}
	for _, g := range groups {
		if len(g.cands) == 0 || !g.q.Satisfied() {
			return nil, s.readFailed(groups, hostErrs, nil)
		}
	}
	out := make([]storage.SeriesIterator, 0, len(acc))
	for _, a := range acc {
		it := a.its[0]
		if len(a.its) > 1 {
			it = encoding.MergeIterators(a.its...)
		}
		out = append(out, storage.SeriesIterator{ID: a.id, Shard: a.shard, Values: it})
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i].ID) < string(out[j].ID) })
	s.m.readOK.Inc(1)
	return out, nil
}

// readGroup is the shards of one read whose owners are the same in the
// same states: they are asked together and succeed or fail together.
type readGroup struct {
	cands  []placement.Owner // readable owners in asking order: this node first
	q      *Quorum
	asked  int // candidates asked so far
	shards []uint32
}

// readGroups groups every shard of m by its owners (with three nodes at
// RF 3, all shards are one group) and indexes the groups by shard.
func (s *Session) readGroups(m *Map) ([]*readGroup, []*readGroup) {
	byShard := make([]*readGroup, m.Placement.NumShards)
	byKey := map[string]*readGroup{}
	var groups []*readGroup
	for sh := uint32(0); sh < m.Placement.NumShards; sh++ {
		owners := m.Owners.Owners(sh)
		key := ownersKey(owners)
		g := byKey[key]
		if g == nil {
			g = &readGroup{q: NewReadQuorum(owners, m.Placement.ReplicaFactor, s.opts.ReadLevel)}
			for _, o := range owners {
				if o.State == placement.Available || o.State == placement.Leaving {
					if o.InstanceID == s.opts.LocalID {
						g.cands = append([]placement.Owner{o}, g.cands...)
					} else {
						g.cands = append(g.cands, o)
					}
				}
			}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.shards = append(g.shards, sh)
		byShard[sh] = g
	}
	return groups, byShard
}

// ownersKey identifies an owner set with its states, for grouping shards.
func ownersKey(owners []placement.Owner) string {
	var b strings.Builder
	for _, o := range owners {
		b.WriteString(o.InstanceID)
		b.WriteByte(byte('0' + o.State))
		b.WriteString(o.SourceID)
		b.WriteByte(0)
	}
	return b.String()
}

func (s *Session) readFailed(groups []*readGroup, hostErrs map[string]error, cause error) error {
	s.m.readFail.Inc(1)
	var bad []uint32
	for _, g := range groups {
		if len(g.cands) == 0 || !g.q.Satisfied() {
			bad = append(bad, g.shards...)
		}
	}
	sort.Slice(bad, func(i, j int) bool { return bad[i] < bad[j] })
	more := ""
	if len(bad) > 5 {
		more = fmt.Sprintf(" and %d more", len(bad)-5)
		bad = bad[:5]
	}
	hosts := make([]string, 0, len(hostErrs))
	for h, err := range hostErrs {
		hosts = append(hosts, fmt.Sprintf("%s: %v", h, err))
	}
	sort.Strings(hosts)
	msg := fmt.Sprintf("read consistency %s not met for shards %v%s [%s]", s.opts.ReadLevel, bad, more, strings.Join(hosts, "; "))
	if cause != nil {
		return fmt.Errorf("%s: %w", msg, cause)
	}
	return &ConsistencyError{Msg: msg}
}

func (s *Session) readHost(ctx context.Context, m *Map, ns, inst string, shards []uint32, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	if inst == s.opts.LocalID && s.opts.Local != nil {
		set := make(map[uint32]bool, len(shards))
		for _, sh := range shards {
			set[sh] = true
		}
		return s.opts.Local.Query(ctx, ns, ms, start, end, storage.QueryOptions{Shards: func(sh uint32) bool { return set[sh] }})
	}
	h, err := s.host(m.Endpoints[inst])
	if err != nil {
		return nil, err
	}
	req := &rpc.FetchTaggedRequest{Namespace: ns, Start: start, End: end, Shards: shards}
	for _, mt := range ms {
		req.Matchers = append(req.Matchers, rpc.Matcher{Type: uint8(mt.Type), Name: mt.Name, Value: mt.Value})
	}
	resp, err := h.client.FetchTagged(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]storage.SeriesIterator, len(resp.Series))
	for i, ser := range resp.Series {
		out[i] = storage.SeriesIterator{ID: ser.ID, Shard: ser.Shard, Values: encoding.NewIterator(ser.Stream)}
	}
	return out, nil
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

// detach copies samples and their IDs into memory the session owns. IDs of
// consecutive samples of one series are copied once.
func detach(samples []storage.Sample) []storage.Sample {
	size := 0
	for i := range samples {
		if i == 0 || string(samples[i].ID) != string(samples[i-1].ID) {
			size += len(samples[i].ID)
		}
	}
	arena := make([]byte, 0, size)
	out := make([]storage.Sample, len(samples))
	var last []byte
	for i, smp := range samples {
		if i == 0 || string(smp.ID) != string(samples[i-1].ID) {
			start := len(arena)
			arena = append(arena, smp.ID...)
			last = arena[start:len(arena):len(arena)]
		}
		smp.ID = last
		out[i] = smp
	}
	return out
}
