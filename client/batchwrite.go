package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"google.golang.org/grpc/codes"
)

// The session's one write path (writeOnce in session.go) sends a batch of
// floats alone through each host's coalescing write queue (the hot path:
// shared encodings, the series-ref cache). A batch with native histograms
// goes to each owner as one request of every kind instead (payload format
// BATCH_V1, rpc.Client.Write), in which the owner's floats travel with
// its histograms: the owner counts toward its shards' level once that
// request succeeded, and what it missed is one hint record.

// batchPeer is a Peer that writes batches of every kind (*rpc.Client; the
// in-memory fakes of the tests). A peer without it writes floats only
// and fails every histogram it is asked for, by name, as an older node
// does.
type batchPeer interface {
	Write(ctx context.Context, ns string, b storage.Batch) (WriteResult, error)
}

// batchFillWriter is fillWriter (hints.go) for batches of every kind.
type batchFillWriter interface {
	WriteFill(ctx context.Context, ns string, b storage.Batch) (WriteResult, error)
}

// peerWrite returns how p writes a batch: its batch write (fill_only
// when fill and it has one), or for a peer without one its float write,
// then a refusal of the histograms (as rpc.Client.Write to a node older
// than them: floats stored, histograms refused).
func peerWrite(p Peer, fill bool) func(ctx context.Context, ns string, b storage.Batch) (WriteResult, error) {
	if fw, ok := p.(batchFillWriter); ok && fill {
		return fw.WriteFill
	}
	if bp, ok := p.(batchPeer); ok {
		return bp.Write
	}
	floats := p.WriteBatch
	if fw, ok := p.(fillWriter); ok && fill {
		floats = fw.WriteBatchFill
	}
	return func(ctx context.Context, ns string, b storage.Batch) (WriteResult, error) {
		var res WriteResult
		if len(b.Floats) > 0 {
			var err error
			if res, err = floats(ctx, ns, b.Floats); err != nil {
				return res, err
			}
		}
		if len(b.Histograms) > 0 {
			return res, errNoHistograms
		}
		return res, nil
	}
}

var errNoHistograms = errors.New("its client does not write native histograms")

// HistogramRefusedError is a write with native histograms an owner
// refused as a whole because it cannot store them (a node older than the
// HISTOGRAMS_V1 payload, which answers InvalidArgument, unknown format).
// It is not retryable until that node is upgraded.
type HistogramRefusedError struct {
	Instance, Endpoint string
	Err                error
}

func (e *HistogramRefusedError) Error() string {
	return fmt.Sprintf("native histograms refused by replica %s (%s), which cannot store them (upgrade it): %v",
		e.Instance, e.Endpoint, e.Err)
}

func (e *HistogramRefusedError) Unwrap() error { return e.Err }

// refusesHistograms says whether err is an owner's refusal of a request
// with histograms as a format it does not know (or a client that cannot
// send them).
func refusesHistograms(err error) bool {
	return errors.Is(err, errNoHistograms) ||
		rpc.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "unknown to this node")
}

// kindsWrite is one write of a batch with histograms: each owner's share
// of every kind, the connections of the remote owners, and the owners not
// yet known to store histograms, whose answers the write waits for before
// it is acknowledged.
type kindsWrite struct {
	r       *routing
	perHost []storage.Batch
	conns   map[string]hostConn
	// unknown: owners not yet known to store histograms are waited for
	// even after the level is met (refused): each reports its outcome
	// here once.
	unknown map[string]chan error
}

type hostConn struct {
	h   *host
	err error
}

// newKindsWrite splits b per host of r, marking in used the routing
// groups it falls in.
func (s *Session) newKindsWrite(r *routing, b storage.Batch, used []bool) (*kindsWrite, error) {
	floats, err := splitPerHost(r, b.Floats, used, detachFloat)
	if err != nil {
		return nil, err
	}
	hists, err := splitPerHost(r, b.Histograms, used, detachHistogram)
	if err != nil {
		return nil, err
	}
	kw := &kindsWrite{r: r, perHost: make([]storage.Batch, len(r.hosts)), unknown: map[string]chan error{}}
	for hi, inst := range r.hosts {
		kw.perHost[hi] = storage.Batch{Floats: floats[hi], Histograms: hists[hi]}
		if _, ok := s.histOK.Load(inst); !ok && len(hists[hi]) > 0 {
			kw.unknown[inst] = make(chan error, 1)
		}
	}
	return kw, nil
}

// start counts the write's calls, and finds their hosts, before the
// fan-out begins; false once the session closes. Close waits for every
// call of this write, as it drains the float queues: a write acknowledged
// at its level still reaches the others. A write's fan-out calls each
// owner of its groups once; they are all counted before any starts, so a
// call not yet running when the level is met (and the caller closes the
// session) is waited for too, and finds its connection, which Close keeps
// open until the calls end.
func (kw *kindsWrite) start(s *Session, m *Map) bool {
	n := 0
	for hi := range kw.perHost {
		if kw.perHost[hi].Len() > 0 {
			n++
		}
	}
	if !s.batchCalls.add(n) {
		return false
	}
	kw.conns = make(map[string]hostConn, n)
	for hi, inst := range kw.r.hosts {
		if kw.perHost[hi].Len() > 0 && (inst != s.opts.LocalID || s.opts.Local == nil) {
			h, err := s.host(inst, m.Endpoints[inst])
			kw.conns[inst] = hostConn{h, err}
		}
	}
	return true
}

// write writes owner inst's share, from the fan-out's call for inst, and
// returns that share; nothing when it has none.
func (kw *kindsWrite) write(ctx context.Context, s *Session, m *Map, ns, inst string) (storage.Batch, *storage.RejectedError, error) {
	b := kw.perHost[kw.r.hostIdx[inst]]
	if b.Len() == 0 {
		return b, nil, nil
	}
	defer s.batchCalls.done()
	c := kw.conns[inst]
	rej, err := s.writeKindsHost(ctx, m, ns, inst, c.h, c.err, b)
	if len(b.Histograms) > 0 {
		if err != nil {
			// A node restarted older than the format fails this way
			// first: it is waited for again until it answers.
			s.histOK.Delete(inst)
		} else {
			s.histOK.Store(inst, struct{}{})
		}
	}
	if ch := kw.unknown[inst]; ch != nil {
		ch <- err
	}
	return b, rej, err
}

// refused returns the *HistogramRefusedError of an owner that cannot store
// histograms at all: it fails the write even when the others met the
// level, as acknowledging would leave it short for good (neither hints nor
// repair could give it what it refuses). Owners never seen storing
// histograms (a fresh session, a node that failed since) are waited for,
// within the request timeout, so that an older node's refusal is seen
// before the write is acknowledged; known ones are not, as floats.
func (kw *kindsWrite) refused(ctx context.Context, s *Session, rep *FanoutReport) error {
	if rep.OK {
		wctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
	wait:
		for _, ch := range kw.unknown {
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

// writeKindsHost writes one owner's share of every kind: locally through
// storage's one entry point, or over the node RPC in requests of at most
// MaxBatch samples, under a context cancelled if the host goes down. A
// permanent rejection of samples is returned as the value: the replica
// answered, and counts.
func (s *Session) writeKindsHost(ctx context.Context, m *Map, ns, inst string, h *host, hostErr error, b storage.Batch) (*storage.RejectedError, error) {
	var err error
	if inst == s.opts.LocalID && s.opts.Local != nil {
		if lb, ok := s.opts.Local.(localBatchWriter); ok {
			err = lb.Write(ns, b)
		} else if len(b.Histograms) > 0 {
			err = &HistogramRefusedError{Instance: inst, Endpoint: m.Endpoints[inst], Err: errors.New("local storage does not store native histograms")}
		} else {
			err = s.opts.Local.WriteBatch(ns, b.Floats)
		}
	} else {
		err = hostErr
		if err == nil {
			err = s.sendKinds(ctx, h, ns, b)
		}
	}
	return answered(err)
}

// sendKinds writes b to remote owner h in requests of at most MaxBatch
// samples; rejections of every request are summed.
func (s *Session) sendKinds(ctx context.Context, h *host, ns string, b storage.Batch) error {
	write := peerWrite(h.peer, false)
	var total *storage.RejectedError
	hists := 0
	for b.Len() > 0 {
		var part storage.Batch
		part, b = takeBatch(b, s.opts.MaxBatch)
		resp, err := s.kindsRPC(ctx, h, write, ns, part)
		if err != nil {
			// As the float host queue: a replica one placement behind
			// refuses the whole request for the shards it does not hold;
			// send it the shards it does hold, so it does not stay short
			// of them while the others' acknowledgement makes the write
			// succeed. The refusal is still reported.
			var rerr *rpc.Error
			if rpc.Code(err) == codes.FailedPrecondition && errors.As(err, &rerr) && len(rerr.Shards) > 0 {
				if rest := batchWithoutShards(part, rerr.Shards); rest.Len() > 0 {
					_, _ = s.kindsRPC(ctx, h, write, ns, rest)
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
			// The answer does not split its rejections by kind: a part
			// of one kind is exact, a part of both is shared by size.
			hists += resp.Rejected * len(part.Histograms) / part.Len()
		}
	}
	if total != nil {
		total.Histograms = hists
		return total
	}
	return nil
}

// kindsRPC is one batch write under the host's health guard and the
// request timeout. An owner that refuses histograms as a format it does
// not know is a *HistogramRefusedError.
func (s *Session) kindsRPC(ctx context.Context, h *host, write func(context.Context, string, storage.Batch) (WriteResult, error), ns string, b storage.Batch) (WriteResult, error) {
	gctx, cancel, err := h.health.guard(ctx)
	if err != nil {
		return WriteResult{}, err
	}
	defer cancel()
	tctx, tcancel := context.WithTimeout(gctx, s.opts.RequestTimeout)
	defer tcancel()
	resp, err := write(tctx, ns, b)
	err = callErr(gctx, err)
	if len(b.Histograms) > 0 && refusesHistograms(err) {
		return resp, &HistogramRefusedError{Instance: h.instance, Endpoint: h.endpoint, Err: err}
	}
	return resp, err
}

// takeBatch splits off the first n samples of b: floats first, then
// histograms.
func takeBatch(b storage.Batch, n int) (head, rest storage.Batch) {
	nf := min(n, len(b.Floats))
	nh := min(n-nf, len(b.Histograms))
	return storage.Batch{Floats: b.Floats[:nf], Histograms: b.Histograms[:nh]},
		storage.Batch{Floats: b.Floats[nf:], Histograms: b.Histograms[nh:]}
}

// batchWithoutShards is withoutShards for every kind of b.
func batchWithoutShards(b storage.Batch, shards []uint32) storage.Batch {
	return storage.Batch{Floats: withoutShards(b.Floats, shards), Histograms: withoutShards(b.Histograms, shards)}
}

// splitPerHost splits samples of one kind per host of routing r, as
// distribute does for the float hot path, and marks in used their routing
// groups. Replicas still being written after the write returned must not
// see the caller reuse its buffers: series IDs are copied into one arena
// and histograms are copied, once per sample, shared by every host (hosts
// only read them).
//
// detach gives a sample's copy under its arena ID (detachFloat,
// detachHistogram): a function of the kind, not a type switch, as this
// runs once per sample.
func splitPerHost[S storage.Sample | storage.HistogramSample](r *routing, samples []S, used []bool, detach func(*S, []byte) S) ([][]S, error) {
	perHost := make([][]S, len(r.hosts))
	if len(samples) == 0 {
		return perHost, nil
	}
	counts := make([]int, len(r.hosts))
	size := 0
	for i := range samples {
		id, sh := seriesOf(&samples[i])
		if int(sh) >= len(r.byShard) {
			what := "sample"
			if _, ok := any(&samples[i]).(*storage.HistogramSample); ok {
				what = "histogram sample"
			}
			return nil, fmt.Errorf("%s of shard %d: placement version %d has %d shards",
				what, sh, r.m.Placement.Version, len(r.byShard))
		}
		gi := r.byShard[sh]
		used[gi] = true
		for _, hi := range r.groups[gi].hosts {
			counts[hi]++
		}
		size += len(id)
	}
	arena := make([]byte, 0, size)
	for hi, n := range counts {
		perHost[hi] = make([]S, 0, n)
	}
	var id, prevID []byte
	prevShard := uint32(0)
	for i := range samples {
		cur, sh := seriesOf(&samples[i])
		if i == 0 || sh != prevShard || !ident.Same(cur, prevID) {
			start := len(arena)
			arena = append(arena, cur...)
			id = arena[start:len(arena):len(arena)]
		}
		prevID, prevShard = cur, sh
		smp := detach(&samples[i], id)
		for _, hi := range r.groups[r.byShard[sh]].hosts {
			perHost[hi] = append(perHost[hi], smp)
		}
	}
	return perHost, nil
}

// detachFloat and detachHistogram give a copy of s under series ID id
// that shares nothing with the caller's buffers and carries no storage
// ref.
func detachFloat(s *storage.Sample, id []byte) storage.Sample {
	return storage.Sample{ID: id, Shard: s.Shard, T: s.T, V: s.V}
}

func detachHistogram(s *storage.HistogramSample, id []byte) storage.HistogramSample {
	h := storage.HistogramSample{ID: id, Shard: s.Shard, T: s.T}
	if s.H != nil {
		h.H = s.H.Copy()
	}
	if s.FH != nil {
		h.FH = s.FH.Copy()
	}
	return h
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
