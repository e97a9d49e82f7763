package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
)

// hostQueue batches writes to one remote host: concurrent callers' batches
// queued while an RPC is in flight are coalesced into the next one (up to
// maxBatch samples), so many small requests cost few round trips, and a
// large one is split. Up to hostWorkers RPCs are in flight per host.
type hostQueue struct {
	base     context.Context // ends when the session closes
	endpoint string
	peer     Peer
	health   *health
	maxBatch int
	timeout  time.Duration

	ops  chan *writeOp
	stop chan struct{}
	// exited is closed once every worker has returned: an op still
	// unanswered then was queued after the workers' last drain (a write
	// racing Close: the buffered ops channel takes it even after stop)
	// and will never be sent.
	exited chan struct{}
	wg     sync.WaitGroup

	// noStreamsUntil (unix ns): the host answered WriteStream with
	// Unimplemented (an older node); until then workers send WriteBatch,
	// after it they try a stream again (the node may have been upgraded).
	noStreamsUntil atomic.Int64
	// noSeqsUntil (unix ns): the host refused a SERIES_SEQS request (a
	// node older than that format, or a series it would not take); until
	// then workers send SERIES_HANDLES.
	noSeqsUntil atomic.Int64
}

// streamRetryAfter is how long a host that does not know WriteStream is
// written with WriteBatch before a stream is tried again.
const streamRetryAfter = time.Minute

// streamPeer is a Peer that can also write over streams (*rpc.Client);
// test fakes are written with WriteBatch.
type streamPeer interface {
	NewWriteStream() *rpc.WriteStream
}

// hostWorker is one of a host queue's workers: it sends one RPC at a
// time, over its own write stream when the peer has them (the stream's
// series handles are per stream, so they are per worker too).
type hostWorker struct {
	h  *hostQueue
	ws *rpc.WriteStream
}

// write sends one batch: over the worker's stream, opened (again) when
// needed, or with WriteBatch to a peer without streams. A node older than
// WriteStream refuses the stream before writing anything, so the batch
// goes again with WriteBatch. shared, when not nil, is the batch as the
// ops' shared encodings (one per op, in order, sharedBatch): sent as they
// are (SERIES_SEQS) when every one of them has its chunk, unless the host
// refused that format lately; a refusal of it writes nothing, and the
// batch goes again with handles. samples gives the batch's samples,
// called only when they are sent otherwise.
func (w *hostWorker) write(ctx context.Context, ns string, samples func() []storage.Sample, shared []*sharedBatch) (WriteResult, error) {
	sp, ok := w.h.peer.(streamPeer)
	now := time.Now().UnixNano()
	if !ok || now < w.h.noStreamsUntil.Load() {
		return w.h.peer.WriteBatch(ctx, ns, samples())
	}
	if w.ws == nil || w.ws.Broken() {
		w.close()
		w.ws = sp.NewWriteStream()
	}
	if chunks := chunksOf(shared); chunks != nil && now >= w.h.noSeqsUntil.Load() {
		res, err := w.ws.WriteChunks(ctx, ns, chunks)
		switch rpc.Code(err) {
		case codes.InvalidArgument:
			// A node older than SERIES_SEQS, or a series it refuses:
			// nothing was written; handles tell the two apart.
			w.h.noSeqsUntil.Store(time.Now().Add(streamRetryAfter).UnixNano())
			w.close()
			w.ws = sp.NewWriteStream()
		case codes.Unimplemented:
			w.h.noStreamsUntil.Store(time.Now().Add(streamRetryAfter).UnixNano())
			w.close()
			return w.h.peer.WriteBatch(ctx, ns, samples())
		default:
			return res, err
		}
	}
	res, err := w.ws.WriteBatch(ctx, ns, samples())
	if rpc.Code(err) == codes.Unimplemented {
		w.h.noStreamsUntil.Store(time.Now().Add(streamRetryAfter).UnixNano())
		w.close()
		return w.h.peer.WriteBatch(ctx, ns, samples())
	}
	return res, err
}

// chunksOf returns the encodings of a batch's shared parts, or nil when
// the batch has none.
func chunksOf(shared []*sharedBatch) []*rpc.SeqChunk {
	if len(shared) == 0 {
		return nil
	}
	chunks := make([]*rpc.SeqChunk, len(shared))
	for i, sb := range shared {
		chunks[i] = sb.chunk
	}
	return chunks
}

// sharedBatch is a batch that several remote replicas receive alike (all
// of them when the replication factor is the cluster's size), encoded
// once (SERIES_SEQS) for all of them: the coordinator no longer encodes a
// batch once per replica, nor copies it for them. Its samples are decoded
// from the encoding only for a replica written otherwise (an older node,
// a refusal resent in part, a hint).
type sharedBatch struct {
	chunk   *rpc.SeqChunk
	once    sync.Once
	decoded []storage.Sample
}

func (b *sharedBatch) samples() []storage.Sample {
	b.once.Do(func() { b.decoded = b.chunk.AppendSamples(make([]storage.Sample, 0, b.chunk.Samples())) })
	return b.decoded
}

func (w *hostWorker) close() {
	if w.ws != nil {
		w.ws.Close()
		w.ws = nil
	}
}

type writeOp struct {
	ctx     context.Context
	ns      string
	samples []storage.Sample
	shared  *sharedBatch // instead of samples: encoded once for every replica
	done    chan error
}

// count is the number of samples of the op.
func (op *writeOp) count() int {
	if op.shared != nil {
		return op.shared.chunk.Samples()
	}
	return len(op.samples)
}

// batch is the op's samples, decoded from its shared encoding if need be.
func (op *writeOp) batch() []storage.Sample {
	if op.shared != nil {
		return op.shared.samples()
	}
	return op.samples
}

// hostWorkers is how many RPCs (and write streams) a host queue keeps in
// flight. Two keep a replica's commit log groups fed while the next batch
// coalesces; with four, batches were smaller and each stream kept its own
// copy of every series' handle, and the cluster spent more CPU per sample
// (scripts/cpu-per-sample.sh, 6 interleaved pairs: replicas ~167 -> ~153
// ticks each).
const hostWorkers = 2

func newHostQueue(base context.Context, endpoint string, p Peer, hl *health, maxBatch int, timeout time.Duration) *hostQueue {
	h := &hostQueue{base: base, endpoint: endpoint, peer: p, health: hl, maxBatch: maxBatch, timeout: timeout,
		ops: make(chan *writeOp, 1024), stop: make(chan struct{}), exited: make(chan struct{})}
	for i := 0; i < hostWorkers; i++ {
		h.wg.Add(1)
		go h.run()
	}
	return h
}

// write queues samples, or (shared not nil, samples nil) a batch encoded
// once for every host queue that sends it, and waits for the outcome.
func (h *hostQueue) write(ctx context.Context, ns string, samples []storage.Sample, shared *sharedBatch) error {
	op := &writeOp{ctx: ctx, ns: ns, samples: samples, shared: shared, done: make(chan error, 1)}
	select {
	case h.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-h.stop:
		return errHostClosed
	}
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-h.exited:
		// Workers answer an op before they return: an empty done means
		// no worker took it.
		select {
		case err := <-op.done:
			return err
		default:
			return errHostClosed
		}
	}
}

var errHostClosed = &ConsistencyError{Msg: "session closed"}

func (h *hostQueue) run() {
	defer h.wg.Done()
	w := &hostWorker{h: h}
	defer w.close()
	for {
		var first *writeOp
		select {
		case first = <-h.ops:
		case <-h.stop:
			// Deliver what was queued before the close.
			for {
				select {
				case op := <-h.ops:
					h.send(w, []*writeOp{op})
				default:
					return
				}
			}
		}
		batch := []*writeOp{first}
		n := first.count()
		// Coalesce what is already queued for the same namespace.
	drain:
		for n < h.maxBatch {
			select {
			case op := <-h.ops:
				if op.ns != first.ns {
					h.send(w, []*writeOp{op}) // rare: another namespace
					continue
				}
				batch = append(batch, op)
				n += op.count()
			default:
				break drain
			}
		}
		h.send(w, batch)
	}
}

// send writes a batch of ops as one RPC and completes every op with the
// outcome. Ops whose context is already done are dropped from it.
func (h *hostQueue) send(w *hostWorker, ops []*writeOp) {
	live := ops[:0]
	for _, op := range ops {
		if op.ctx.Err() != nil {
			op.done <- op.ctx.Err()
			continue
		}
		live = append(live, op)
	}
	if len(live) == 0 {
		return
	}
	var shared []*sharedBatch
	for _, op := range live {
		if op.shared == nil {
			shared = nil
			break
		}
		shared = append(shared, op.shared)
	}
	// The ops' samples are joined only if sent so: shared encodings are
	// sent as they are.
	var joined []storage.Sample
	samples := func() []storage.Sample {
		if len(live) == 1 {
			return live[0].batch()
		}
		if joined == nil {
			n := 0
			for _, op := range live {
				n += op.count()
			}
			joined = make([]storage.Sample, 0, n)
			for _, op := range live {
				joined = append(joined, op.batch()...)
			}
		}
		return joined
	}
	// The RPC is cancelled when the host goes down, so a frozen host does
	// not hold the workers for the whole request timeout.
	ctx, cancel, err := h.health.guard(h.base)
	var resp WriteResult
	if err == nil {
		tctx, tcancel := context.WithTimeout(ctx, h.timeout)
		resp, err = h.writeWithRetry(tctx, w, live[0].ns, samples, shared)
		err = callErr(ctx, err)
		tcancel()
		cancel()
	}
	for _, op := range live {
		switch {
		case err != nil:
			op.done <- err
		case resp.Rejected > 0:
			// Rejections are per coalesced RPC; they come from time rules
			// every replica applies alike, so report them to every op.
			// The series limit is per node, not alike: it is kept apart
			// so that the answer says a retry may succeed (429).
			rej := &storage.RejectedError{Total: resp.Rejected, Examples: []storage.SampleError{{Msg: resp.RejectMsg}}}
			if resp.RejectedSeriesLimit > 0 {
				rej.ByReason = map[storage.Reason]int{storage.ReasonSeriesLimit: resp.RejectedSeriesLimit}
			}
			op.done <- rej
		default:
			op.done <- nil
		}
	}
}

func (h *hostQueue) close() {
	close(h.stop)
	h.wg.Wait()
	close(h.exited)
}

// writeWithRetry sends req, and again (up to 3 times, backing off) when
// the failure may pass: a refusal, since a host one placement version
// behind the coordinator catches up in milliseconds, or a transient error,
// since the caller may have its quorum already but this replica should
// still converge. A refusal that persists means the host does not hold
// some shards of the batch (an older placement routed them here); it
// refuses the whole batch, so the shards it does hold are sent on their
// own, while the ops still report the refusal and the quorum does not
// count this host for them.
func (h *hostQueue) writeWithRetry(ctx context.Context, w *hostWorker, ns string, samples func() []storage.Sample, shared []*sharedBatch) (WriteResult, error) {
	backoff := 50 * time.Millisecond
	for try := 0; ; try++ {
		resp, err := w.write(ctx, ns, samples, shared)
		refused := rpc.Code(err) == codes.FailedPrecondition
		if err == nil || try == 3 || !(refused || transient(err)) {
			var rerr *rpc.Error
			if refused && errors.As(err, &rerr) && len(rerr.Shards) > 0 {
				if rest := withoutShards(samples(), rerr.Shards); len(rest) > 0 {
					_, _ = w.write(ctx, ns, func() []storage.Sample { return rest }, nil)
				}
			}
			return resp, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return resp, err
		}
		backoff *= 2
	}
}

// transient says whether a failed write may succeed if sent again.
func transient(err error) bool {
	switch rpc.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// withoutShards returns the samples not of the given shards.
func withoutShards[S storage.Sample | storage.HistogramSample](samples []S, shards []uint32) []S {
	drop := make(map[uint32]bool, len(shards))
	for _, sh := range shards {
		drop[sh] = true
	}
	var out []S
	for i := range samples {
		if !drop[shardOf(&samples[i])] {
			out = append(out, samples[i])
		}
	}
	return out
}

// shardOf is a float or histogram sample's shard.
func shardOf[S storage.Sample | storage.HistogramSample](s *S) uint32 {
	_, shard := seriesOf(s)
	return shard
}

// seriesOf is a float or histogram sample's series ID and shard.
func seriesOf[S storage.Sample | storage.HistogramSample](s *S) ([]byte, uint32) {
	switch x := any(s).(type) {
	case *storage.Sample:
		return x.ID, x.Shard
	case *storage.HistogramSample:
		return x.ID, x.Shard
	}
	return nil, 0
}
