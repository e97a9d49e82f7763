package storage

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/index"
	"github.com/tessera-tsdb/tessera/ident"
)

// replayer applies the commit log's entries to memory at Open, the
// node's whole restart time after a crash (issue 30: 4.3 s of a 4.5 s
// restart at a million series). Two things made it slow, both fixed here:
//
//   - every entry was looked up by its ID (two hashes and a probe of the
//     shard's table, a cache miss or more each), though the log names a
//     series by a ref per file: the replayer resolves a series once per
//     file, on its first entry, and keeps the *Series by the entry's
//     Series ref for the others;
//   - one goroutine did it all: entries are handed, in batches, to one
//     worker per core, each owning a fixed part of the shards (shard mod
//     workers), so every series' entries still reach memory in log order.
//
// The tag index is not the workers' business: a worker hands every
// series that opened a block (the index's insert for it) to one index
// goroutine, in batches. Every worker used to insert new series itself,
// and all of them write the same structures, the index's head block:
// its lock, postings and value tables moved from core to core with every
// new series, and a worker the OS descheduled while holding the lock
// stalled the others (the replay took longer with two workers than with
// one at load 8, issue 30). Index inserts are idempotent and commute, so
// their order across series does not matter, and nothing queries the
// index before Open returns, which is after the index goroutine is done.
//
// The log's decoding stays on the goroutine that calls float and hist.
// Apply errors are kept (the first one) and returned by the next call
// and by finish; finish waits until every entry handed over is in memory.
type replayer struct {
	db  *Database
	now time.Time

	workers []*replayWorker
	wg      sync.WaitGroup
	err     atomic.Pointer[error]

	// The index stage: batches of series to index, from the workers.
	ix     chan *replayIndexBatch
	ixFree chan *replayIndexBatch
	ixWg   sync.WaitGroup

	// On the feeding goroutine: per series ref of the file being replayed,
	// its shard, namespace and place in its worker's table.
	file   uint32
	refs   []replayRef
	nextID []uint32 // per worker: the next free place in its table
}

// replayRef is what the feeder resolved of one series of the current file.
type replayRef struct {
	shard uint32
	ns    int32  // 0: not resolved yet; -1: namespace not configured (dropped); else nsList index + 1
	local uint32 // the series' place in its worker's table
}

// replayTask is one entry handed to a worker: a float sample, or a
// histogram when h or fh is set.
type replayTask struct {
	ns    *namespace
	id    []byte
	t     int64
	v     float64
	h     *histogram.Histogram
	fh    *histogram.FloatHistogram
	shard uint32
	file  uint32
	local uint32
}

// replayIndexBatch is a batch of series that opened their bucket of a
// block, for one namespace's index: prepared (index.PrepareNewTagged:
// the ID checked, its labels walked and hashed) by the worker that
// found them, on its core, and inserted by the index stage. The
// insert was half of a snapshot restart's CPU, all on the index stage's
// goroutine; the preparing is about half of that, and now on every core.
type replayIndexBatch struct {
	ns *namespace
	pb index.PreparedBatch
}

// replayBatch is how many entries a worker is handed at once: a channel
// send per entry would cost more than applying it. replayQueue is how many
// batches a worker may have waiting: deep, so that a worker the OS
// descheduled for a while (a loaded machine) does not stop the feeder,
// and with it the other workers, at once. Batches are made as needed, up
// to replayQueue+2 a worker (80 bytes an entry: about 5 MiB).
const (
	replayBatch = 1024
	replayQueue = 64
)

// replayWorker applies the entries of the shards it owns.
type replayWorker struct {
	in   chan []replayTask
	free chan []replayTask
	made int          // batches made so far (feeder)
	cur  []replayTask // being filled by the feeder

	// Its own: the series of the current file by local place.
	file   uint32
	series []*Series
	ix     *replayIndexBatch // being filled for the index stage
}

func newReplayer(db *Database) *replayer {
	n := max(1, min(runtime.GOMAXPROCS(0), 16))
	r := &replayer{db: db, now: db.opts.Now(), nextID: make([]uint32, n),
		ix: make(chan *replayIndexBatch, replayQueue), ixFree: make(chan *replayIndexBatch, replayQueue+2*n)}
	r.ixWg.Add(1)
	go func() {
		defer r.ixWg.Done()
		r.runIndex()
	}()
	for range n {
		w := &replayWorker{in: make(chan []replayTask, replayQueue), free: make(chan []replayTask, replayQueue+2)}
		w.cur = w.batch()
		r.workers = append(r.workers, w)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.run(w)
		}()
	}
	return r
}

// float takes one replayed float entry (commitlog.Open's replay).
func (r *replayer) float(e commitlog.Entry) error {
	return r.add(e.Namespace, e.ID, e.File, e.Series, e.T, e.V, nil, nil)
}

// hist takes one replayed histogram entry (Options.ReplayHistogram).
func (r *replayer) hist(e commitlog.HistEntry) error {
	return r.add(e.Namespace, e.ID, e.File, e.Series, e.T, 0, e.H, e.FH)
}

func (r *replayer) add(nsName string, id []byte, file, ref uint32, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram) error {
	if p := r.err.Load(); p != nil {
		return *p
	}
	if file != r.file {
		// A new file numbers its series from 0 again.
		r.file = file
		clear(r.refs)
		clear(r.nextID)
	}
	r.refs = growTo(r.refs, int(ref)+1)
	rr := &r.refs[ref]
	if rr.ns == 0 {
		r.resolve(rr, nsName, id)
	}
	if rr.ns < 0 {
		return nil // namespace removed from config: its data is dropped
	}
	ns := r.db.nsList[rr.ns-1]
	if rs, _ := ns.check(t, r.now); rs == ReasonTooOld {
		return nil
	}
	if h != nil || fh != nil {
		// As a live histogram write does: from now on float writes to
		// the namespace check their series for a histogram at their
		// timestamp.
		ns.hadHist.Store(true)
	}
	w := r.workers[rr.shard%uint32(len(r.workers))]
	w.cur = append(w.cur, replayTask{ns: ns, id: id, t: t, v: v, h: h, fh: fh, shard: rr.shard, file: file, local: rr.local})
	if len(w.cur) == cap(w.cur) {
		w.in <- w.cur
		w.cur = w.batch()
	}
	return nil
}

// batch is an empty batch for the feeder to fill: one the worker gave
// back, a new one while fewer than replayQueue+2 exist, else the next one
// given back.
func (w *replayWorker) batch() []replayTask {
	select {
	case b := <-w.free:
		return b
	default:
	}
	if w.made < replayQueue+2 {
		w.made++
		return make([]replayTask, 0, replayBatch)
	}
	return <-w.free
}

// resolve fills in rr for the first entry of its series in this file.
func (r *replayer) resolve(rr *replayRef, nsName string, id []byte) {
	rr.ns = -1
	for i, ns := range r.db.nsList {
		if ns.opts.Name == nsName {
			rr.ns = int32(i + 1)
			break
		}
	}
	if rr.ns < 0 {
		return
	}
	rr.shard = ident.Shard(id, r.db.opts.NumShards)
	wi := rr.shard % uint32(len(r.workers))
	rr.local = r.nextID[wi]
	r.nextID[wi]++
}

// finish hands over what is left, waits for the workers to apply it and
// returns the first error. It must be called once, also after a failed
// replay, so that no worker is left running.
func (r *replayer) finish() error {
	for _, w := range r.workers {
		if len(w.cur) > 0 {
			w.in <- w.cur
		}
		w.cur = nil
		close(w.in)
	}
	r.wg.Wait()
	close(r.ix) // the workers handed over their last batches
	r.ixWg.Wait()
	if p := r.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (r *replayer) run(w *replayWorker) {
	for batch := range w.in {
		if r.err.Load() == nil {
			if err := r.apply(w, batch); err != nil {
				r.err.CompareAndSwap(nil, &err)
			}
		}
		clear(batch) // drop the references to IDs and histograms
		w.free <- batch[:0]
	}
	r.flushIndex(&w.ix)
}

// indexBatch is an empty batch for a worker's index tasks: one the index
// stage gave back, else a new one.
func (r *replayer) indexBatch() *replayIndexBatch {
	select {
	case b := <-r.ixFree:
		return b
	default:
		return &replayIndexBatch{}
	}
}

// indexSeries prepares the index insert of series id (registry slot
// slot) into ns's block bs in *cur, a worker's batch, and hands the
// batch to the index stage when it is full or of another namespace.
func (r *replayer) indexSeries(cur **replayIndexBatch, ns *namespace, id string, bs int64, slot uint32) error {
	if *cur != nil && (*cur).ns != ns {
		r.flushIndex(cur)
	}
	if *cur == nil {
		*cur = r.indexBatch()
		(*cur).ns = ns
	}
	if err := ns.index.PrepareNewTagged(&(*cur).pb, id, bs, slot); err != nil {
		return fmt.Errorf("replay %s: index series: %w", describeID([]byte(id)), err)
	}
	if (*cur).pb.Len() >= replayBatch {
		r.flushIndex(cur)
	}
	return nil
}

// flushIndex hands *cur, if any, to the index stage.
func (r *replayer) flushIndex(cur **replayIndexBatch) {
	if *cur != nil && (*cur).pb.Len() > 0 {
		r.ix <- *cur
	}
	*cur = nil
}

// runIndex is the index stage: it inserts every series handed over into
// its namespace's index, until finish closes r.ix. After an error it
// only drains, so that no worker blocks on a send.
func (r *replayer) runIndex() {
	for b := range r.ix {
		if r.err.Load() == nil {
			if err := b.ns.index.AddPreparedBatch(&b.pb); err != nil {
				err = fmt.Errorf("replay: index series: %w", err)
				r.err.CompareAndSwap(nil, &err)
			}
		}
		b.ns = nil
		b.pb.Reset()
		select {
		case r.ixFree <- b:
		default:
		}
	}
}

func (r *replayer) apply(w *replayWorker, batch []replayTask) error {
	db := r.db
	for i := range batch {
		t := &batch[i]
		if t.file != w.file {
			w.file = t.file
			clear(w.series)
			w.series = w.series[:0]
		}
		w.series = growTo(w.series, int(t.local)+1)
		s := w.series[t.local]
		if s == nil {
			s = t.ns.shard(t.shard).getOrCreateLocked(t.ns, hashID(t.id), t.id)
		}
		var hs *HistogramSample
		if t.h != nil || t.fh != nil {
			hs = &HistogramSample{H: t.h, FH: t.fh}
		}
		s, bs, newBucket, err := db.applyData(t.ns, t.shard, s, t.t, t.v, hs)
		if err != nil {
			return fmt.Errorf("replay %s: %w", describeID(t.id), err)
		}
		w.series[t.local] = s
		if newBucket && t.ns.index != nil {
			if err := r.indexSeries(&w.ix, t.ns, s.id, bs, s.slot); err != nil {
				return err
			}
		}
	}
	return nil
}

// growTo returns s with at least n elements, the new ones zero, growing
// its capacity geometrically (no allocation per new series).
func growTo[T any](s []T, n int) []T {
	if n <= len(s) {
		return s
	}
	old := len(s)
	s = slices.Grow(s, n-old)[:n]
	clear(s[old:])
	return s
}
