package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tessera-tsdb/tessera/client/hints"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/internal/ctxsleep"
	"google.golang.org/grpc/codes"
)

// HintOptions turn on hinted handoff: the samples a remote replica did not
// acknowledge are kept in Store and replayed to it once it answers again.
type HintOptions struct {
	// Store holds the queues; nil turns hinted handoff off.
	Store *hints.Store
	// ReplayBytesPerSecond paces each target's replay (hint bytes on
	// disk); 0 means unpaced.
	ReplayBytesPerSecond int64
}

// hinter is the session's side of hinted handoff: it writes the hints
// and runs one replay loop per target.
type hinter struct {
	s    *Session
	opts HintOptions

	mu      sync.Mutex
	running map[string]bool
	closed  bool // no replay starts any more
	wg      sync.WaitGroup
}

func newHinter(s *Session, opts HintOptions) *hinter {
	if opts.Store == nil {
		return nil
	}
	h := &hinter{s: s, opts: opts, running: map[string]bool{}}
	// Hints left by an earlier run (a restart, a crash) are replayed.
	for _, t := range opts.Store.Targets() {
		h.start(t)
	}
	return h
}

// hintable says whether a replica's failure should leave a hint. A
// refusal of shards the replica does not hold, a request it found
// malformed, and native histograms refused by a node older than them
// would be refused again on replay.
func hintable(err error) bool {
	switch rpc.Code(err) {
	case codes.FailedPrecondition, codes.InvalidArgument:
		return false
	}
	var refused *HistogramRefusedError
	return !errors.As(err, &refused)
}

// hint keeps the samples of every kind a remote replica did not
// acknowledge (failure err) in one record. It runs inside the fan-out's
// call for that replica, so a failure known before the write's level was
// met is durable before the write is acknowledged; a straggler that fails
// after the return is hinted then. A hint that cannot be written is
// logged and counted: the replica simply failed, as it would without
// hints. The caller leaves out of b each kind whose failure is not
// hintable.
func (h *hinter) hint(inst, ns string, b storage.Batch, err error) {
	if h == nil || inst == h.s.opts.LocalID || b.Len() == 0 {
		return
	}
	q, qerr := h.opts.Store.Queue(inst)
	if qerr == nil {
		qerr = q.AppendBatch(ns, b)
	}
	if qerr != nil {
		h.s.m.hintFail.Inc(1)
		h.s.opts.Logger.Warn("hint not stored: the replica stays short of these samples until repair",
			"instance", inst, "samples", len(b.Floats), "histograms", len(b.Histograms), "write_err", err, "err", qerr)
		return
	}
	h.s.m.hinted.Inc(int64(b.Len()))
	h.start(inst)
}

// start runs the replay loop of target unless it runs already.
func (h *hinter) start(target string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[target] || h.closed {
		return
	}
	h.running[target] = true
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.replay(target)
	}()
}

// wait stops new replays and waits for the running ones, which end with
// the session's context.
func (h *hinter) wait() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.wg.Wait()
}

// replay delivers target's hints in order while the target answers,
// consecutive records coalesced into fill-only writes of up to MaxBatch
// samples, paced. It never touches a live write: it calls the peer
// directly, not through the host's write queue.
func (h *hinter) replay(target string) {
	s := h.s
	q, err := h.opts.Store.Queue(target)
	if err != nil {
		return
	}
	ctx := s.ctx
	const minBackoff, maxBackoff = 100 * time.Millisecond, 2 * time.Second
	backoff := minBackoff
	// The pacing is a rate, not a pause per write: each write may start
	// once the bytes before it would have taken their time at
	// ReplayBytesPerSecond (due), so a write's own duration counts
	// towards it. Time spent waiting on a target that does not answer
	// gives no credit: due never lies before the write that starts now.
	var due time.Time
	fail := func() {
		_ = ctxsleep.Sleep(ctx, backoff)
		backoff = min(2*backoff, maxBackoff)
	}
	for ctx.Err() == nil {
		m := s.opts.Topology.Get()
		if m == nil {
			fail()
			continue
		}
		endpoint, inPlacement := m.Endpoints[target]
		if !inPlacement {
			// The target left the placement: nobody to give these to; the
			// shards' new owners bootstrapped from the others.
			q.DropAll(hints.DropRemoved)
			select {
			case <-q.Wait():
			case <-ctx.Done():
			}
			continue
		}
		rec, ok, err := q.NextBatch(s.opts.MaxBatch)
		if err != nil {
			if errors.Is(err, hints.ErrClosed) {
				return
			}
			s.opts.Logger.Warn("hint replay: read", "target", target, "err", err)
			fail()
			continue
		}
		if !ok {
			select {
			case <-q.Wait():
			case <-ctx.Done():
			case <-time.After(time.Minute): // age out what is there
			}
			continue
		}
		host, err := s.host(target, endpoint)
		if err != nil {
			fail()
			continue
		}
		if host.health.Down() != nil {
			fail()
			continue
		}
		sent := time.Now()
		if err := h.deliver(ctx, q, host, m, rec); err != nil {
			s.opts.Logger.Debug("hint replay: target not answering yet", "target", target, "err", err)
			fail()
			continue
		}
		backoff = minBackoff
		q.Replayed(rec)
		q.Ack(rec)
		if r := h.opts.ReplayBytesPerSecond; r > 0 {
			due = paceDue(due, sent, rec.Size, r)
			_ = ctxsleep.Sleep(ctx, time.Until(due))
		}
	}
}

// paceDue returns when the replay after a write of size bytes, started
// at sent, may start at rate bytes per second: size's share of a second
// after the previous due time, or after sent when that is later (the
// replay was idle or backing off, which earns no burst).
func paceDue(due, sent time.Time, size, rate int64) time.Time {
	if sent.After(due) {
		due = sent
	}
	return due.Add(time.Duration(float64(size) / float64(rate) * float64(time.Second)))
}

// deliver sends one record's samples of every kind, of shards the target
// still holds in placement m, in requests of every kind (fill_only when
// the peer has it); the rest are dropped, counted. Samples of shards the
// target does not hold (by m, or by its own answer: its placement is
// newer than ours, or they moved away) are dropped, counted: nobody
// replays them. A target that refuses the record as a whole
// (InvalidArgument: a node older than its histograms) would refuse every
// replay: its samples are dropped, counted rejected, rather than blocking
// the queue behind them. A nil error means the record is done with.
func (h *hinter) deliver(ctx context.Context, q *hints.Queue, host *host, m *Map, rec hints.Record) error {
	write := peerWrite(host.peer, true)
	b := storage.Batch{Floats: ownedBy(m, host.instance, rec.Samples), Histograms: ownedBy(m, host.instance, rec.Histograms)}
	if n := len(rec.Samples) + len(rec.Histograms) - b.Len(); n > 0 {
		q.Dropped(hints.DropNotOwner, n)
	}
	for b.Len() > 0 {
		gctx, cancel, err := host.health.guard(ctx)
		if err != nil {
			return err
		}
		tctx, tcancel := context.WithTimeout(gctx, h.s.opts.RequestTimeout)
		resp, err := write(tctx, rec.Namespace, b)
		err = callErr(gctx, err)
		tcancel()
		cancel()
		var rerr *rpc.Error
		switch {
		case rpc.Code(err) == codes.FailedPrecondition && errors.As(err, &rerr) && len(rerr.Shards) > 0:
			rest := batchWithoutShards(b, rerr.Shards)
			q.Dropped(hints.DropNotOwner, b.Len()-rest.Len())
			b = rest
			continue
		case rpc.Code(err) == codes.InvalidArgument || errors.Is(err, errNoHistograms):
			h.s.opts.Logger.Warn("hints refused by the target: dropped", "target", host.instance,
				"samples", len(b.Floats), "histograms", len(b.Histograms), "err", err)
			q.Dropped(hints.DropRejected, b.Len())
			return nil
		case err != nil:
			return err
		}
		if resp.Rejected > 0 {
			q.Dropped(hints.DropRejected, int(resp.Rejected))
		}
		return nil
	}
	return nil
}

// ownedBy is the samples of shards instance owns in m.
func ownedBy[S storage.Sample | storage.HistogramSample](m *Map, instance string, samples []S) []S {
	kept := samples[:0:0]
	for i := range samples {
		if ownsShard(m, instance, shardOf(&samples[i])) {
			kept = append(kept, samples[i])
		}
	}
	return kept
}

// fillWriter is a Peer that can write without overwriting values the
// node already holds (*rpc.Client: fill_only). A replayed hint may be
// older than what the target has since received at the same series and
// timestamp; peers without it overwrite.
type fillWriter interface {
	WriteBatchFill(ctx context.Context, ns string, samples []storage.Sample) (WriteResult, error)
}

func ownsShard(m *Map, instance string, shard uint32) bool {
	if shard >= m.Placement.NumShards {
		return false
	}
	for _, o := range m.Owners.Owners(shard) {
		if o.InstanceID == instance {
			return true
		}
	}
	return false
}
