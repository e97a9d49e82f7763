package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"google.golang.org/grpc/codes"
)

// The session's native histogram write path. It is kept apart from the
// float path (session.go) on purpose: floats go through each host's
// coalescing write queue and the series-ref cache, histograms are rarer
// and bigger and go to each owner in their own RPC (payload format
// HISTOGRAMS_V1), but both meet the write level through the same Fanout
// and the same write quorums, so a histogram batch counts toward its
// shards' level exactly as a float batch does.

// histogramPeer is a Peer that writes native histograms (*rpc.Client; the
// in-memory fakes of the tests). A peer without it fails every histogram
// write it is asked for, by name, as an older node does.
type histogramPeer interface {
	WriteHistograms(ctx context.Context, ns string, samples []storage.HistogramSample) (WriteResult, error)
}

// writeHistogramsCluster writes samples to every owner of their shards
// and returns once each shard met the write level (or cannot): the local
// owner directly, remote ones through WriteHistograms under the host's
// health guard. It returns a
// *storage.RejectedError when replicas refused samples for good, and a
// *HistogramRefusedError when an owner refused the batch as a whole
// (a node older than the payload format): that is never acknowledged,
// even when the level was met by the others.
func (s *Session) writeHistogramsCluster(ctx context.Context, ns string, samples []storage.HistogramSample, m *Map) error {
	return s.routeAgain(ctx, m, func(m *Map) error { return s.writeHistogramsOnce(ctx, ns, samples, m) })
}

// HistogramRefusedError is a histogram write an owner refused as a whole
// because it cannot store native histograms (a node older than the
// HISTOGRAMS_V1 payload, which answers InvalidArgument). It is not
// retryable until that node is upgraded.
type HistogramRefusedError struct {
	Instance, Endpoint string
	Err                error
}

func (e *HistogramRefusedError) Error() string {
	return fmt.Sprintf("native histograms refused by replica %s (%s), which cannot store them (upgrade it): %v",
		e.Instance, e.Endpoint, e.Err)
}

func (e *HistogramRefusedError) Unwrap() error { return e.Err }

func (s *Session) writeHistogramsOnce(ctx context.Context, ns string, samples []storage.HistogramSample, m *Map) error {
	r := s.routing(m)
	perHost, used, err := distributeHistograms(r, samples)
	if err != nil {
		return err
	}
	var groups []FanoutGroup
	var ridx []int
	for i, g := range r.groups {
		if used[i] {
			groups = append(groups, FanoutGroup{Owners: g.owners, Quorum: NewWriteQuorum(g.owners, m.Placement.ReplicaFactor, s.opts.WriteLevel, s.opts.Pairing)})
			ridx = append(ridx, i)
		}
	}
	// Owners not yet known to store histograms are waited for even after
	// the level is met (below): each reports its outcome here once.
	unknown := map[string]chan error{}
	for _, inst := range r.hosts {
		if _, ok := s.histOK.Load(inst); !ok && len(perHost[r.hostIdx[inst]]) > 0 {
			unknown[inst] = make(chan error, 1)
		}
	}
	// Close waits for every call of this write, as it drains the float
	// queues: a write acknowledged at its level still reaches the others.
	// A write's fan-out calls each owner of its groups once; they are all
	// counted before any starts, so a call not yet running when the level
	// is met (and the caller closes the session) is waited for too.
	callees := map[string]bool{}
	for _, g := range groups {
		for _, o := range g.Owners {
			callees[o.InstanceID] = true
		}
	}
	if !s.histCalls.add(len(callees)) {
		return errHostClosed
	}
	// Their hosts too, now: a call starting after Close began must still
	// find its connection, which Close keeps open until the calls end.
	type conn struct {
		h   *host
		err error
	}
	conns := make(map[string]conn, len(callees))
	for inst := range callees {
		if inst != s.opts.LocalID || s.opts.Local == nil {
			h, err := s.host(inst, m.Endpoints[inst])
			conns[inst] = conn{h, err}
		}
	}
	answers, rep := Fanout(ctx, groups, FanoutOptions{Timeout: s.opts.RequestTimeout},
		func(ctx context.Context, inst string, _ []int) (*storage.RejectedError, error) {
			defer s.histCalls.done()
			batch := perHost[r.hostIdx[inst]]
			c := conns[inst]
			rej, err := s.writeHistogramsHost(ctx, m, ns, inst, c.h, c.err, batch)
			if err != nil {
				// Durable before the level is met, as for floats.
				s.hints.hintHistograms(inst, ns, batch, err)
			}
			if err == nil {
				s.histOK.Store(inst, struct{}{})
			} else {
				// A node restarted older than the format fails this way
				// first: it is waited for again until it answers.
				s.histOK.Delete(inst)
			}
			if ch := unknown[inst]; ch != nil {
				ch <- err
			}
			return rej, err
		})
	// An owner that cannot store histograms at all fails the write even
	// when the others met the level: acknowledging would leave it short
	// for good (neither hints nor repair could give it what it refuses).
	// Owners never seen storing histograms (a fresh session, a node that
	// failed since) are waited for, within the request timeout, so that
	// an older node's refusal is seen before the write is acknowledged;
	// known ones are not, as floats.
	if rep.OK {
		wctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
	wait:
		for _, ch := range unknown {
			select {
			case err := <-ch:
				var refused *HistogramRefusedError
				if errors.As(err, &refused) {
					s.m.writeFail.Inc(1)
					return refused
				}
			case <-wctx.Done():
				// A replica that does not answer at all is down, not
				// older: the level was met, as for floats.
				break wait
			}
		}
	}
	for gi := range rep.Groups {
		for _, f := range rep.Groups[gi].Failed {
			var refused *HistogramRefusedError
			if errors.As(f.Err, &refused) {
				s.m.writeFail.Inc(1)
				return refused
			}
		}
	}
	if !rep.OK {
		s.m.writeFail.Inc(1)
		return s.failure(fmt.Sprintf("native histogram write consistency %s not met", s.opts.WriteLevel), "acknowledged", m, r, ridx, groups, rep)
	}
	s.m.writeOK.Inc(1)
	for _, a := range answers {
		if a.Value != nil {
			return a.Value
		}
	}
	return nil
}

// writeHistogramsHost writes one owner's histogram samples: locally, or
// over the node RPC in RPCs of at most MaxBatch samples, under a context
// cancelled if the host goes down. A permanent rejection of samples is
// returned as the value: the replica answered, and counts.
func (s *Session) writeHistogramsHost(ctx context.Context, m *Map, ns, inst string, h *host, hostErr error, batch []storage.HistogramSample) (*storage.RejectedError, error) {
	var err error
	if inst == s.opts.LocalID && s.opts.Local != nil {
		lh, ok := s.opts.Local.(localHistograms)
		if !ok {
			err = &HistogramRefusedError{Instance: inst, Endpoint: m.Endpoints[inst], Err: errors.New("local storage does not store native histograms")}
		} else {
			err = lh.WriteHistograms(ns, batch)
		}
	} else {
		err = hostErr
		if err == nil {
			err = s.sendHistograms(ctx, h, ns, batch)
		}
	}
	var rej *storage.RejectedError
	if errors.As(err, &rej) {
		return rej, nil
	}
	return nil, err
}

// sendHistograms writes batch to remote owner h in RPCs of at most
// MaxBatch samples; rejections of every RPC are summed.
func (s *Session) sendHistograms(ctx context.Context, h *host, ns string, batch []storage.HistogramSample) error {
	hp, ok := h.peer.(histogramPeer)
	if !ok {
		return &HistogramRefusedError{Instance: h.instance, Endpoint: h.endpoint, Err: errors.New("its client does not write native histograms")}
	}
	var total *storage.RejectedError
	for len(batch) > 0 {
		n := min(len(batch), s.opts.MaxBatch)
		resp, err := s.histogramRPC(ctx, h, hp, ns, batch[:n])
		if err != nil {
			// As the float host queue: a replica one placement behind
			// refuses the whole batch for the shards it does not hold;
			// send it the shards it does hold, so it does not stay short
			// of them while the others' acknowledgement makes the write
			// succeed. The refusal is still reported.
			var rerr *rpc.Error
			if rpc.Code(err) == codes.FailedPrecondition && errors.As(err, &rerr) && len(rerr.Shards) > 0 {
				if rest := withoutShards(batch[:n], rerr.Shards); len(rest) > 0 {
					_, _ = s.histogramRPC(ctx, h, hp, ns, rest)
				}
			}
			return err
		}
		if resp.Rejected > 0 {
			if total == nil {
				total = &storage.RejectedError{Examples: []storage.SampleError{{Msg: resp.RejectMsg}}}
			}
			total.Total += resp.Rejected
			if resp.RejectedSeriesLimit > 0 {
				if total.ByReason == nil {
					total.ByReason = map[storage.Reason]int{}
				}
				total.ByReason[storage.ReasonSeriesLimit] += resp.RejectedSeriesLimit
			}
		}
		batch = batch[n:]
	}
	if total != nil {
		return total
	}
	return nil
}

// histogramRPC is one WriteHistograms call under the host's health guard
// and the request timeout. InvalidArgument for a payload the client
// itself built means the node does not know the format: a refusal.
func (s *Session) histogramRPC(ctx context.Context, h *host, hp histogramPeer, ns string, batch []storage.HistogramSample) (WriteResult, error) {
	gctx, cancel, err := h.health.guard(ctx)
	if err != nil {
		return WriteResult{}, err
	}
	defer cancel()
	tctx, tcancel := context.WithTimeout(gctx, s.opts.RequestTimeout)
	defer tcancel()
	resp, err := hp.WriteHistograms(tctx, ns, batch)
	err = callErr(gctx, err)
	if rpc.Code(err) == codes.InvalidArgument {
		return resp, &HistogramRefusedError{Instance: h.instance, Endpoint: h.endpoint, Err: err}
	}
	return resp, err
}

// distributeHistograms splits samples per host of routing r, as
// distribute does for floats. Replicas still being written after the
// write returned must not see the caller reuse its buffers: series IDs
// are copied into one arena and histograms are copied, once per sample,
// shared by every host (hosts only read them).
func distributeHistograms(r *routing, samples []storage.HistogramSample) ([][]storage.HistogramSample, []bool, error) {
	counts := make([]int, len(r.hosts))
	used := make([]bool, len(r.groups))
	size := 0
	for i := range samples {
		sh := samples[i].Shard
		if int(sh) >= len(r.byShard) {
			return nil, nil, fmt.Errorf("histogram sample of shard %d: placement version %d has %d shards",
				sh, r.m.Placement.Version, len(r.byShard))
		}
		gi := r.byShard[sh]
		used[gi] = true
		for _, hi := range r.groups[gi].hosts {
			counts[hi]++
		}
		size += len(samples[i].ID)
	}
	arena := make([]byte, 0, size)
	perHost := make([][]storage.HistogramSample, len(r.hosts))
	for hi, n := range counts {
		perHost[hi] = make([]storage.HistogramSample, 0, n)
	}
	var id []byte
	for i := range samples {
		smp := samples[i]
		if i == 0 || smp.Shard != samples[i-1].Shard || !ident.Same(smp.ID, samples[i-1].ID) {
			start := len(arena)
			arena = append(arena, smp.ID...)
			id = arena[start:len(arena):len(arena)]
		}
		smp.ID = id
		smp.Ref = nil
		if smp.H != nil {
			smp.H = smp.H.Copy()
		}
		if smp.FH != nil {
			smp.FH = smp.FH.Copy()
		}
		for _, hi := range r.groups[r.byShard[smp.Shard]].hosts {
			perHost[hi] = append(perHost[hi], smp)
		}
	}
	return perHost, used, nil
}

// inflight counts running calls and lets Close wait for them; once
// waited on, it admits no new call (unlike a sync.WaitGroup, adding after
// the wait began is allowed, and refused).
type inflight struct {
	mu      sync.Mutex
	n       int
	closing bool
	zero    chan struct{} // closed when n drops to 0 while closing
}

// add counts n calls about to start; false once closing (none counted).
func (f *inflight) add(n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return false
	}
	f.n += n
	return true
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.closing && f.zero != nil {
		close(f.zero)
		f.zero = nil
	}
}

// wait refuses new calls and returns once the running ones ended.
func (f *inflight) wait() {
	f.mu.Lock()
	f.closing = true
	if f.n == 0 {
		f.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	f.zero = ch
	f.mu.Unlock()
	<-ch
}
