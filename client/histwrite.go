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

// The native histogram share of the session's one write path (writeOnce
// in session.go): floats go through each host's coalescing write queue
// and the series-ref cache, histograms are rarer and bigger and go to
// each owner in their own RPC (payload format HISTOGRAMS_V1), from the
// same fan-out call for that owner, so an owner counts toward its shards'
// level once it stored its share of both.

// histogramPeer is a Peer that writes native histograms (*rpc.Client; the
// in-memory fakes of the tests). A peer without it fails every histogram
// write it is asked for, by name, as an older node does.
type histogramPeer interface {
	WriteHistograms(ctx context.Context, ns string, samples []storage.HistogramSample) (WriteResult, error)
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

// histWrite is the native histogram share of one write: the histograms
// split per host, the connections of their remote owners, and the owners
// not yet known to store histograms, whose answers the write waits for
// before it is acknowledged.
type histWrite struct {
	r       *routing
	perHost [][]storage.HistogramSample
	conns   map[string]histConn
	// unknown: owners not yet known to store histograms are waited for
	// even after the level is met (refused): each reports its outcome
	// here once.
	unknown map[string]chan error
}

type histConn struct {
	h   *host
	err error
}

// newHistWrite splits samples per host of r, marking in used the routing
// groups they fall in.
func (s *Session) newHistWrite(r *routing, samples []storage.HistogramSample, used []bool) (*histWrite, error) {
	perHost, err := distributeHistograms(r, samples, used)
	if err != nil {
		return nil, err
	}
	hw := &histWrite{r: r, perHost: perHost, unknown: map[string]chan error{}}
	for _, inst := range r.hosts {
		if _, ok := s.histOK.Load(inst); !ok && len(perHost[r.hostIdx[inst]]) > 0 {
			hw.unknown[inst] = make(chan error, 1)
		}
	}
	return hw, nil
}

// start counts the write's histogram calls, and finds their hosts, before
// the fan-out begins; false once the session closes. Close waits for
// every call of this write, as it drains the float queues: a write
// acknowledged at its level still reaches the others. A write's fan-out
// calls each owner of its groups once; they are all counted before any
// starts, so a call not yet running when the level is met (and the caller
// closes the session) is waited for too, and finds its connection, which
// Close keeps open until the calls end.
func (hw *histWrite) start(s *Session, m *Map) bool {
	n := 0
	for hi := range hw.perHost {
		if len(hw.perHost[hi]) > 0 {
			n++
		}
	}
	if !s.histCalls.add(n) {
		return false
	}
	hw.conns = make(map[string]histConn, n)
	for hi, inst := range hw.r.hosts {
		if len(hw.perHost[hi]) > 0 && (inst != s.opts.LocalID || s.opts.Local == nil) {
			h, err := s.host(inst, m.Endpoints[inst])
			hw.conns[inst] = histConn{h, err}
		}
	}
	return true
}

// write writes owner inst's share of the histograms, from the fan-out's
// call for inst, and returns that share; nothing when it has none.
func (hw *histWrite) write(ctx context.Context, s *Session, m *Map, ns, inst string) ([]storage.HistogramSample, *storage.RejectedError, error) {
	batch := hw.perHost[hw.r.hostIdx[inst]]
	if len(batch) == 0 {
		return nil, nil, nil
	}
	defer s.histCalls.done()
	c := hw.conns[inst]
	rej, err := s.writeHistogramsHost(ctx, m, ns, inst, c.h, c.err, batch)
	if err != nil {
		// A node restarted older than the format fails this way first:
		// it is waited for again until it answers.
		s.histOK.Delete(inst)
	} else {
		s.histOK.Store(inst, struct{}{})
	}
	if ch := hw.unknown[inst]; ch != nil {
		ch <- err
	}
	return batch, rej, err
}

// refused returns the *HistogramRefusedError of an owner that cannot store
// histograms at all: it fails the write even when the others met the
// level, as acknowledging would leave it short for good (neither hints nor
// repair could give it what it refuses). Owners never seen storing
// histograms (a fresh session, a node that failed since) are waited for,
// within the request timeout, so that an older node's refusal is seen
// before the write is acknowledged; known ones are not, as floats.
func (hw *histWrite) refused(ctx context.Context, s *Session, rep *FanoutReport) error {
	if rep.OK {
		wctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
	wait:
		for _, ch := range hw.unknown {
			select {
			case err := <-ch:
				var refused *HistogramRefusedError
				if errors.As(err, &refused) {
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
				return refused
			}
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
			err = lh.Write(ns, storage.Batch{Histograms: batch})
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
		total.Histograms = total.Total
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
// distribute does for floats, and marks in used their routing groups. Replicas still being written after the
// write returned must not see the caller reuse its buffers: series IDs
// are copied into one arena and histograms are copied, once per sample,
// shared by every host (hosts only read them).
func distributeHistograms(r *routing, samples []storage.HistogramSample, used []bool) ([][]storage.HistogramSample, error) {
	counts := make([]int, len(r.hosts))
	size := 0
	for i := range samples {
		sh := samples[i].Shard
		if int(sh) >= len(r.byShard) {
			return nil, fmt.Errorf("histogram sample of shard %d: placement version %d has %d shards",
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
		smp.Ref = 0
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
	return perHost, nil
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
