package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/rollup"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/limits"
	"github.com/uber-go/tally/v4"
)

// Sample is one sample of one series, addressed by its canonical ID and
// the virtual shard the caller computed from it (one hash per series).
type Sample struct {
	ID    []byte
	Shard uint32
	T     int64 // unix ms
	V     float64
	// Ref is 0 or the ref WriteBatch filled in for this same ID on an
	// earlier call: with it the write skips looking the series up. A stale
	// ref (the series was flushed out of memory, its shard dropped, or it
	// belongs to another namespace) is detected and looked up again.
	Ref SeriesRef
}

// Database is the storage engine of one node. It is safe for concurrent
// use.
type Database struct {
	opts       Options
	namespaces map[string]*namespace
	nsList     []*namespace

	// writeMu is held shared by writers across "append to commit log, apply
	// to memory", and exclusively by Tick while it snapshots the commit log
	// files: every entry of a file listed then is already in memory, so a
	// file whose blocks have no unflushed memory left is safe to delete.
	writeMu sync.RWMutex
	cl      *commitlog.Log

	tickMu      sync.Mutex // one Tick at a time
	flushedLast bool
	graveyard   []closer // readers replaced by a newer volume, closed next tick
	// tickSeries is Tick's reused snapshot of a shard's series (see
	// shard.appendSeries); guarded by tickMu, cleared after each use so
	// that it keeps no removed series alive.
	tickSeries []*Series
	// sealed: the float samples of the shard sections the flush in
	// progress installed, by reader, for its rollups (sealroll.go); nil
	// when not keeping them; sealSlab holds their samples. sealOff (tests)
	// keeps none, so rollups read every section back. Guarded by tickMu.
	sealed   map[*fileset.Reader]map[string][]rollup.Sample
	sealSlab []rollup.Sample
	sealOff  bool
	// sealedUsed counts the sections rollups took from sealed (tests).
	sealedUsed int

	scratchPool sync.Pool // *writeScratch
	metrics     metrics
	// active is the number of series in memory, all namespaces: what
	// limits.maxActiveSeries bounds.
	active atomic.Int64

	recovery     Recovery         // what Open found damaged; fixed once Open returns
	snap         restartSnapState // the last restart snapshot (memsnap.go); guarded by tickMu
	damageLogged sync.Map         // error text -> struct{}: damaged reads already logged

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

type closer interface{ Close() error }

type metrics struct {
	written      tally.Counter
	histWritten  tally.Counter
	rejected     map[Reason]tally.Counter
	flushes      tally.Counter
	flushErrors  tally.Counter
	flushedBytes tally.Counter
	series       tally.Gauge
	memSamples   tally.Gauge
	memBytes     tally.Gauge
	bytesPerSamp tally.Gauge
	expired      tally.Counter
	clRemoved    tally.Counter

	seriesUnreadable   tally.Counter
	filesetsUnreadable tally.Counter

	// The restart snapshot (memsnap.go): written, failed to write,
	// loaded at Open, and not used at Open (by reason).
	snapWritten     tally.Counter
	snapErrors      tally.Counter
	snapLoaded      tally.Counter
	snapInvalidated tally.Counter
	snapFallback    func(reason string)
}

func newMetrics(s tally.Scope) metrics {
	m := metrics{
		written:      s.Counter("samples_written"),
		histWritten:  s.Counter("histogram_samples_written"),
		rejected:     map[Reason]tally.Counter{},
		flushes:      s.Counter("flushes"),
		flushErrors:  s.Counter("flush_errors"),
		flushedBytes: s.Counter("flushed_bytes"),
		series:       s.Gauge("series_in_memory"),
		memSamples:   s.Gauge("samples_in_memory"),
		memBytes:     s.Gauge("bytes_in_memory"),
		bytesPerSamp: s.Gauge("bytes_per_sample"),
		expired:      s.Counter("blocks_expired"),
		clRemoved:    s.Counter("commitlog_files_removed"),

		seriesUnreadable:   s.Counter("query_series_unreadable"),
		filesetsUnreadable: s.Counter("filesets_unreadable"),

		snapWritten:     s.Counter("restart_snapshots_written"),
		snapErrors:      s.Counter("restart_snapshot_errors"),
		snapLoaded:      s.Counter("restart_snapshots_loaded"),
		snapInvalidated: s.Counter("restart_snapshots_invalidated"),
		snapFallback: func(reason string) {
			s.Tagged(map[string]string{"reason": reason}).Counter("restart_snapshot_fallbacks").Inc(1)
		},
	}
	for _, r := range []Reason{ReasonTooOld, ReasonTooFarFuture, ReasonColdDisabled, ReasonBadID, ReasonSeriesLimit, ReasonBadHistogram, ReasonTypeConflict} {
		m.rejected[r] = s.Tagged(map[string]string{"reason": r.String()}).Counter("samples_rejected")
	}
	return m
}

// Open recovers a database from its directory: filesets first, then the
// commit log replayed on top. It returns once recovery is complete.
func Open(opts Options) (*Database, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	db := &Database{
		opts:       opts,
		namespaces: map[string]*namespace{},
		metrics:    newMetrics(opts.Metrics),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	for _, n := range opts.Namespaces {
		ns := newNamespace(n, opts.NumShards, &db.active)
		db.namespaces[n.Name] = ns
		db.nsList = append(db.nsList, ns)
	}
	if err := opts.FS.MkdirAll(db.dataDir(), 0o755); err != nil {
		return nil, fmt.Errorf("storage: create data dir: %w", err)
	}
	start := time.Now()
	opts.Logger.Info("storage recovering: reading filesets", "dir", db.dataDir())
	if err := db.loadFilesets(); err != nil {
		return nil, err
	}
	opts.Logger.Info("storage recovering: replaying commit log", "filesets_took", time.Since(start))
	stats, err := db.openCommitLog()
	if err != nil {
		db.closeReaders()
		return nil, err
	}
	db.recovery.CommitLog = stats
	opts.Logger.Info("storage recovered",
		"commitlog_files", stats.Files, "commitlog_covered_files", stats.CoveredFiles, "commitlog_entries", stats.Entries,
		"corrupt_tails", stats.CorruptTails, "took", time.Since(start))
	for _, w := range db.recovery.Warnings() {
		opts.Logger.Error("storage recovered with damage", "damage", w)
	}
	if opts.TickEvery > 0 {
		go db.loop()
	} else {
		close(db.done)
	}
	return db, nil
}

// Recovery is what Open found damaged on disk.
type Recovery struct {
	CommitLog commitlog.ReplayStats
	// UnreadableFilesets are filesets that failed their checks at Open
	// (checkpoint, digest, info or index): their blocks are not served
	// from this node's disk. The files are left where they are.
	UnreadableFilesets []string
}

// Warnings lists the damage, one line each; none for a clean recovery
// (a torn commit log tail after a crash is not damage).
func (r Recovery) Warnings() []string {
	var out []string
	if r.CommitLog.Damaged() {
		out = append(out, r.CommitLog.String())
	}
	for _, f := range r.UnreadableFilesets {
		out = append(out, "unreadable fileset, its block is not served from this node's disk: "+f)
	}
	return out
}

// Recovery reports what Open found damaged.
func (db *Database) Recovery() Recovery { return db.recovery }

func (db *Database) dataDir() string { return filepath.Join(db.opts.Dir, "data") }

func (db *Database) openCommitLog() (commitlog.ReplayStats, error) {
	// Entries are applied by the replayer's workers (replay.go); Open
	// returns once every one of them is in memory.
	r := newReplayer(db)
	db.snap.last = db.opts.Now()
	covered, err := db.loadRestartSnapshot(r)
	if err != nil {
		_ = r.finish()
		return commitlog.ReplayStats{}, fmt.Errorf("storage: load restart snapshot: %w", err)
	}
	cl, stats, err := commitlog.Open(commitlog.Options{
		Covered:         covered,
		ReplayHistogram: r.hist,
		Dir:             filepath.Join(db.opts.Dir, "commitlog"),
		FS:              db.opts.FS,
		Mode:            db.opts.CommitLogMode,
		FlushEvery:      db.opts.CommitLogFlushEvery,
		MaxFileSize:     db.opts.CommitLogMaxFile,
		MaxPending:      db.opts.CommitLogMaxPending,
		Logger:          db.opts.Logger,
		Metrics:         db.opts.Metrics.SubScope("commitlog"),
	}, r.float)
	ferr := r.finish()
	if err != nil {
		return stats, fmt.Errorf("storage: open commit log: %w", err)
	}
	if ferr != nil {
		_ = cl.Close()
		return stats, fmt.Errorf("storage: open commit log: replay: %w", ferr)
	}
	db.cl = cl
	// Entries no snapshot covers were replayed: the next snapshot is due
	// without waiting for the log to grow.
	db.snap.owed = db.snap.owed || stats.Entries > 0
	return stats, nil
}

// ActiveSeries is the number of series in memory, all namespaces: the
// count limits.maxActiveSeries bounds.
func (db *Database) ActiveSeries() int64 { return db.active.Load() }

// typeConflictMsg names the series and timestamp of a sample refused
// because the series holds a sample of the other type (has) there.
func (db *Database) typeConflictMsg(id []byte, t int64, has string) string {
	return fmt.Sprintf("series %s already holds a %s at %s: a series holds one sample per timestamp, a float or a native histogram (Prometheus: duplicate sample for timestamp)",
		describeID(id), has, fmtMs(t))
}

// describeID formats a series ID for a message, bounded.
func describeID(id []byte) string {
	lset, err := ident.Labels(id)
	if err != nil {
		return fmt.Sprintf("%q", id)
	}
	s := lset.String()
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func (db *Database) seriesLimitMsg(id []byte) string {
	lset, err := ident.Labels(id)
	series := fmt.Sprintf("%q", id)
	if err == nil {
		series = lset.String()
		if len(series) > 300 {
			series = series[:300] + "..."
		}
	}
	return fmt.Sprintf("new series %s refused: this node holds %d series, %s=%d", series,
		db.active.Load(), limits.ActiveSeries, db.opts.Limits.Config().MaxActiveSeries)
}

// Shard returns the virtual shard of a series ID.
func (db *Database) Shard(id []byte) uint32 { return ident.Shard(id, db.opts.NumShards) }

// NumShards is the number of virtual shards.
func (db *Database) NumShards() uint32 { return db.opts.NumShards }

// Namespaces lists the configured namespaces.
func (db *Database) Namespaces() []NamespaceOptions {
	out := make([]NamespaceOptions, len(db.nsList))
	for i, ns := range db.nsList {
		out[i] = ns.opts
	}
	return out
}

func (db *Database) namespace(name string) (*namespace, error) {
	ns := db.namespaces[name]
	if ns == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownNamespace, name)
	}
	return ns, nil
}

// WriteBatch writes samples to namespace ns. Samples the namespace's time
// rules refuse are skipped and reported in a *RejectedError (permanent);
// the others are written. Any other error (commit log full or failing) is
// transient and means none of the batch was acknowledged: the caller may
// retry it whole, since rewriting a sample is idempotent.
//
// It sets the Ref of every sample it wrote, so a caller that remembers
// series across requests can hand the ref back next time.
func (db *Database) WriteBatch(nsName string, batch []Sample) error {
	return db.writeBatch(nsName, batch, false)
}

// LoadBatch writes samples streamed from a peer during bootstrap: like
// WriteBatch, durable in the commit log before it returns, but samples
// older than bufferPast are taken even with cold writes off, since they are
// the shard's history, not late writes.
func (db *Database) LoadBatch(nsName string, batch []Sample) error {
	return db.writeBatch(nsName, batch, true)
}

func (db *Database) writeBatch(nsName string, batch []Sample, bootstrap bool) error {
	return db.write(nsName, Batch{Floats: batch}, bootstrap)
}

// Write writes a batch of samples of every kind to namespace ns: the one
// entry point of the write path. Each sample goes to its series' encoder
// by its kind (float or native histogram); all of them go into one commit
// log record, replayed entirely or not at all, and the batch is durable
// once that record is. Errors as WriteBatch's; a *RejectedError's Index
// is a position in the sample's own kind's slice, and its Histograms says
// how many of the refused are histograms. A float and a histogram of one
// series at one timestamp in one batch: the histogram is refused (type
// conflict), as when the float came first.
func (db *Database) Write(nsName string, b Batch) error {
	return db.write(nsName, b, false)
}

func (db *Database) write(nsName string, b Batch, bootstrap bool) error {
	w, err := db.queue(nsName, b, bootstrap)
	if werr := w.wait(); werr != nil {
		return werr
	}
	return err
}

// queuedWrite is a batch in memory whose commit log record is queued:
// wait returns once it is durable (or its group failed). The zero value
// has nothing to wait for. It is a value, not a closure, so the write
// path allocates nothing for it.
type queuedWrite struct {
	db     *Database
	ticket commitlog.Ticket
	sc     *writeScratch // back to the pool after the wait; nil: none
	nsName string
	n      int // samples, of which hists are histograms
	hists  int
}

// wait waits for the commit log exactly once and releases the scratch.
func (w *queuedWrite) wait() error {
	db := w.db
	if db == nil {
		return nil
	}
	w.db = nil
	err := w.ticket.Wait()
	db.putScratch(w.sc)
	w.sc = nil
	if err != nil {
		return fmt.Errorf("write batch to namespace %s: %w", w.nsName, err)
	}
	db.metrics.written.Inc(int64(w.n))
	if w.hists > 0 {
		db.metrics.histWritten.Inc(int64(w.hists))
	}
	return nil
}

// queue is write up to the commit log wait: the accepted samples are in
// memory and queued in the commit log when it returns, and the caller
// waits (queuedWrite.wait) before counting them durable. err is a
// *RejectedError (the others were taken) or a failure (nothing to wait
// for: the caller may retry the batch whole).
func (db *Database) queue(nsName string, b Batch, bootstrap bool) (queuedWrite, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return queuedWrite{}, err
	}
	if ns.opts.RollupOf != "" {
		return queuedWrite{}, rollupWriteError(nsName)
	}
	a := db.admission(ns, bootstrap)
	sc := db.getScratch(len(b.Floats))
	a.floats(nsName, b.Floats, sc)
	if len(b.Histograms) > 0 {
		nf := 0
		if a.rejected != nil {
			nf = a.rejected.Total
		}
		a.histograms(nsName, b.Histograms, sc)
		if a.rejected != nil {
			a.rejected.Histograms = a.rejected.Total - nf
		}
	}
	if len(sc.entries) == 0 && len(sc.hentries) == 0 {
		db.putScratch(sc)
	} else {
		w, err := db.logAndApply(ns, b, sc)
		if err != nil {
			return queuedWrite{}, fmt.Errorf("write batch to namespace %s: %w", nsName, err)
		}
		w.nsName = nsName
		if a.rejected != nil {
			return w, a.rejected
		}
		return w, nil
	}
	if a.rejected != nil {
		return queuedWrite{}, a.rejected
	}
	return queuedWrite{}, nil
}

// admit is the admission of one write, of any kind: the namespace's
// rules every sample is checked against before it is logged (time, shard,
// the active series limit), written once for every kind, and the
// rejections so far.
type admit struct {
	db        *Database
	ns        *namespace
	now       time.Time
	numShards uint32
	bootstrap bool
	maxSeries int64
	rejected  *RejectedError
	// checkKind is set while admitting samples that may meet a sample of
	// the other kind at their time (see sample).
	checkKind bool
	// floatAt holds the floats of this batch admitted so far, for its
	// histograms (nil: none, or no histogram).
	floatAt map[seriesAt]bool
	// from and to are the sample times the namespace takes at now
	// (namespace.window): floats compares with them inline.
	from, to int64
}

func (db *Database) admission(ns *namespace, bootstrap bool) admit {
	maxSeries := int64(db.opts.Limits.Config().MaxActiveSeries)
	if bootstrap || maxSeries < 0 {
		maxSeries = 0
	}
	a := admit{db: db, ns: ns, now: db.opts.Now(), numShards: db.opts.NumShards, bootstrap: bootstrap, maxSeries: maxSeries}
	a.from, a.to = ns.window(a.now, bootstrap)
	return a
}

func (a *admit) reject(i int, reason Reason, msg string) {
	if a.rejected == nil {
		a.rejected = &RejectedError{}
	}
	a.rejected.add(SampleError{Index: i, Reason: reason, Msg: msg})
	a.db.metrics.rejected[reason].Inc(1)
}

// refusal is the reason the namespace's rules refuse a sample (msg says
// why), 0 if they take it, past the time check: for a sample the check
// refused (reason, msg) or of a shard out of range. The hot path calls it
// only then.
func (a *admit) refusal(reason Reason, msg string, shard uint32) (Reason, string) {
	if a.bootstrap && reason == ReasonColdDisabled {
		reason, msg = 0, ""
	}
	if reason == 0 && shard >= a.numShards {
		return ReasonBadID, fmt.Sprintf("shard %d out of range", shard)
	}
	return reason, msg
}

// sample admits sample i of either kind (its series' id, shard, time t
// and the ref the caller kept; hs is the histogram sample, nil for a
// float) and returns its series: the ref when it is live in this
// namespace, else the series found or created. It is nil when the sample
// is refused, counted in rejected: by the namespace's time and shard
// rules, as an invalid histogram, by the active series limit (refusing a
// new series), or as a type conflict, the series holding a sample of the
// other kind at t. Conflicts are looked for only with a.checkKind: floats
// look only in a namespace that has taken histograms, histograms always,
// and among the floats admitted before them in this batch too (floatAt).
//
// Each accepted sample's series is found (or created) before the commit
// log write, so the log can record it by the ref kept in the series and
// memory is written without a second lookup. A series created for a write
// the log then fails stays empty and is dropped at the next tick. Floats
// call it only off their inline common case (admit.floats): a sample
// without a live ref, outside the batch's time window, of a shard out of
// range, or in a namespace that has taken histograms.
func (a *admit) sample(i int, id []byte, shard uint32, ref SeriesRef, t int64, hs *HistogramSample) *Series {
	if reason, msg := a.ns.check(t, a.now); reason != 0 || shard >= a.numShards {
		if reason, msg = a.refusal(reason, msg, shard); reason != 0 {
			a.reject(i, reason, msg)
			return nil
		}
	}
	if hs != nil && !a.validHistogram(i, t, hs) {
		return nil
	}
	se := resolveRef(ref)
	if se == nil || se.ns != a.ns.num {
		if se = a.lookup(i, id, shard); se == nil {
			return nil
		}
	}
	if a.checkKind && a.conflicts(i, se, id, t, hs != nil) {
		return nil
	}
	return se
}

// validHistogram reports whether histogram sample i (at t) is one the
// stream encoding takes, and rejects it if not.
func (a *admit) validHistogram(i int, t int64, hs *HistogramSample) bool {
	if err := checkHistogram(hs.H, hs.FH); err != nil {
		a.reject(i, ReasonBadHistogram, fmt.Sprintf("histogram at %s: %v", fmtMs(t), err))
		return false
	}
	return true
}

// conflicts reports whether series se (of sample i, id) holds a sample
// at t of the other kind than hist says the new one is, and rejects the
// new one if so.
func (a *admit) conflicts(i int, se *Series, id []byte, t int64, hist bool) bool {
	bs := a.ns.blockStart(t)
	other := "native histogram"
	if hist {
		if !a.floatAt[seriesAt{se, t}] && !se.holdsFloatAt(bs, t) {
			return false
		}
		other = "float sample"
	} else if !se.holdsHistAt(bs, t) {
		return false
	}
	a.reject(i, ReasonTypeConflict, a.db.typeConflictMsg(id, t, other))
	return true
}

func (a *admit) lookup(i int, id []byte, shard uint32) *Series {
	se, ok := a.ns.shard(shard).getOrCreateUpTo(a.ns, hashID(id), id, a.maxSeries)
	if !ok {
		// A replayed or streamed series is history already
		// acknowledged: only new writes are limited.
		a.reject(i, ReasonSeriesLimit, a.db.seriesLimitMsg(id))
		a.db.opts.Limits.Count(limits.ActiveSeries)
		return nil
	}
	return se
}

// floats admits the float samples of batch into sc: their series, their
// indexes in batch and their commit log entries.
func (a *admit) floats(nsName string, batch []Sample, sc *writeScratch) {
	// Only a namespace that has taken histograms can hold a conflict: the
	// common one pays one atomic load per batch, not a lock per sample.
	a.checkKind = a.ns.hadHist.Load()
	nsNum := a.ns.num
	for i := range batch {
		s := &batch[i]
		// The common sample, inline: in the namespace's time window, of a
		// shard in range, its ref live in this namespace and no kind to
		// check. Any other takes sample's whole way (which resolves the
		// ref again: a refused sample is rare).
		se := resolveRef(s.Ref)
		if se == nil || se.ns != nsNum || s.T < a.from || s.T > a.to || s.Shard >= a.numShards || a.checkKind {
			if se = a.sample(i, s.ID, s.Shard, s.Ref, s.T, nil); se == nil {
				continue
			}
		}
		sc.series = append(sc.series, se)
		sc.index = append(sc.index, int32(i))
		sc.entries = append(sc.entries, commitlog.Entry{Namespace: nsName, ID: se.ID(), Ref: &se.clRef, T: s.T, V: s.V})
	}
}

// logAndApply queues the accepted samples in the commit log and applies
// them to memory; the caller then waits for the log (the returned
// queuedWrite, which owns sc from here): requests that arrive while this
// one applies join its commit log group and share its fsync. Memory may
// thus briefly hold samples not yet durable, and keeps them if the log
// then fails; the caller is told the batch failed and retries it, which
// rewrites the same samples.
//
// On a failure it has already waited (the queued entries live in sc, which
// must not go back to the pool while queued, even when applying panics)
// and released sc.
func (db *Database) logAndApply(ns *namespace, b Batch, sc *writeScratch) (w queuedWrite, err error) {
	if len(sc.hentries) > 0 {
		// Before the histograms are applied: a float write that starts
		// after this checks its series for them (admit.floats).
		ns.hadHist.Store(true)
	}
	db.writeMu.RLock()
	defer db.writeMu.RUnlock()
	ticket, err := db.cl.EnqueueWith(sc.entries, sc.hentries)
	if err != nil {
		db.putScratch(sc)
		return queuedWrite{}, err
	}
	w = queuedWrite{db: db, ticket: ticket, sc: sc, n: len(sc.entries) + len(sc.hentries), hists: len(sc.hentries)}
	ok := false
	defer func() {
		if !ok {
			_ = w.wait() // the apply error is the one reported
		}
	}()
	for k, se := range sc.series {
		s := &b.Floats[sc.index[k]]
		if se, err = db.applyTo(ns, s.Shard, se, s.T, s.V, nil); err != nil {
			return queuedWrite{}, err
		}
		s.Ref = se.Ref()
	}
	for k, se := range sc.hseries {
		s := &b.Histograms[sc.hindex[k]]
		if se, err = db.applyTo(ns, s.Shard, se, s.T, 0, s); err != nil {
			return queuedWrite{}, err
		}
		s.Ref = se.Ref()
	}
	ok = true
	return w, nil
}

// logAndApplyEntries is logAndApply for entries of one shard that no
// caller batch stands behind (streamed series): memory is written from the
// entries themselves.
func (db *Database) logAndApplyEntries(ns *namespace, shard uint32, sc *writeScratch) (w queuedWrite, err error) {
	db.writeMu.RLock()
	defer db.writeMu.RUnlock()
	ticket, err := db.cl.Enqueue(sc.entries)
	if err != nil {
		db.putScratch(sc)
		return queuedWrite{}, err
	}
	w = queuedWrite{db: db, ticket: ticket, sc: sc, n: len(sc.entries)}
	ok := false
	defer func() {
		if !ok {
			_ = w.wait() // the apply error is the one reported
		}
	}()
	for k, se := range sc.series {
		e := &sc.entries[k]
		if _, err = db.applyTo(ns, shard, se, e.T, e.V, nil); err != nil {
			return queuedWrite{}, err
		}
	}
	ok = true
	return w, nil
}

// writeScratch is the per-call working memory of writeBatch, pooled: the
// accepted samples' series, their indexes in the batch and their commit
// log entries.
type writeScratch struct {
	series  []*Series
	index   []int32
	entries []commitlog.Entry
	// The same for the batch's histograms (none: never grown).
	hseries  []*Series
	hindex   []int32
	hentries []commitlog.HistEntry
}

func (db *Database) getScratch(n int) *writeScratch {
	sc, _ := db.scratchPool.Get().(*writeScratch)
	if sc == nil {
		sc = &writeScratch{}
	}
	if cap(sc.entries) < n {
		sc.series = make([]*Series, 0, n)
		sc.index = make([]int32, 0, n)
		sc.entries = make([]commitlog.Entry, 0, n)
	}
	return sc
}

func (db *Database) putScratch(sc *writeScratch) {
	clear(sc.series) // drop references to series and caller IDs
	clear(sc.entries)
	sc.series, sc.index, sc.entries = sc.series[:0], sc.index[:0], sc.entries[:0]
	if len(sc.hentries) > 0 { // and histograms
		clear(sc.hseries)
		clear(sc.hentries)
		sc.hseries, sc.hindex, sc.hentries = sc.hseries[:0], sc.hindex[:0], sc.hentries[:0]
	}
	db.scratchPool.Put(sc)
}

// applyTo writes one sample to series s of shard, to the encoder of its
// kind: float v, or the native histogram of hs when it is not nil. It
// indexes the series for the block the first time it opens a bucket
// there. If a flush or a shard drop removed s from memory meanwhile, the
// series is looked up again. It returns the series written.
// The common sample, written into a bucket already open, costs it one
// call (Series.write); the rest is out of line (applyRest).
func (db *Database) applyTo(ns *namespace, shard uint32, s *Series, t int64, v float64, hs *HistogramSample) (*Series, error) {
	bs := ns.blockStart(t)
	newBucket, err := s.write(bs, t, v, hs)
	if err == nil && !newBucket {
		return s, nil
	}
	return db.applyRest(ns, shard, s, bs, t, v, hs, newBucket, err)
}

// applyRest is applyTo after a write into s (at block start bs) that
// opened a bucket or failed (newBucket, err: Series.write's).
func (db *Database) applyRest(ns *namespace, shard uint32, s *Series, bs, t int64, v float64, hs *HistogramSample, newBucket bool, err error) (*Series, error) {
	switch {
	case err == errSeriesRemoved:
		s = ns.shard(shard).getOrCreate(ns, hashID(s.ID()), s.ID())
		s, bs, newBucket, err = db.applyData(ns, shard, s, t, v, hs)
	case err != nil:
		err = fmt.Errorf("shard %d: %w", shard, err)
	}
	if err == nil && newBucket {
		err = ns.indexSeries(s, bs)
	}
	return s, err
}

// indexSeries indexes series s for block bs, if the namespace has an
// index.
func (ns *namespace) indexSeries(s *Series, bs int64) error {
	if ns.index == nil {
		return nil
	}
	if err := ns.index.InsertTagged(s.id, bs, s.slot); err != nil {
		return fmt.Errorf("index series: %w", err)
	}
	return nil
}

// applyData is applyTo without the index: it also returns the sample's
// block start and whether the sample opened the series' bucket there
// (the series then needs indexing for that block), so that the commit
// log replay can hand the index work to a goroutine of its own.
func (db *Database) applyData(ns *namespace, shard uint32, s *Series, t int64, v float64, hs *HistogramSample) (*Series, int64, bool, error) {
	bs := ns.blockStart(t)
	for {
		newBucket, err := s.write(bs, t, v, hs)
		if err == errSeriesRemoved {
			s = ns.shard(shard).getOrCreate(ns, hashID(s.ID()), s.ID())
			continue
		}
		if err != nil {
			return s, bs, false, fmt.Errorf("shard %d: %w", shard, err)
		}
		return s, bs, newBucket, nil
	}
}

// Read returns the samples of one series in [start, end] (ms, inclusive),
// merged across filesets and memory, in timestamp order.
func (db *Database) Read(nsName string, id []byte, start, end int64) (encoding.Iterator, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, err
	}
	return db.read(ns, id, db.Shard(id), start, end)
}

func (db *Database) read(ns *namespace, id []byte, shard uint32, start, end int64) (encoding.Iterator, error) {
	f, _, err := db.readBoth(ns, id, nil, shard, start, end, nil)
	return f.Values, err
}

// readScratch is what a read of many series (readIDs) keeps from one
// series to the next.
type readScratch struct {
	srcs []readSource
	// slab, when not nil (QueryOptions.Streams), receives copies of the
	// series' in-memory streams, and a series that is one stream inside
	// the range is returned as its bytes.
	slab *byteSlab
}

// floats is a series' float samples as readBoth returns them: Values, or
// when it is nil the stream they are (SeriesIterator.Stream).
type floats struct {
	Values encoding.Iterator
	Stream []byte
}

// readBoth returns the float samples (Values never nil, unless rs.slab
// asked for a Stream) and the histogram samples (nil when there are none)
// of one series in [start, end]. rs, when not nil, is room for the series'
// sources that the caller's next read reuses (readIDs). hint, when not
// nil, is the series of id as readIDs found it by its registry slot (see
// shard.read).
func (db *Database) readBoth(ns *namespace, id []byte, hint *Series, shard uint32, start, end int64, rs *readScratch) (floats, encoding.HistogramIterator, error) {
	sh := ns.existingShard(shard)
	if sh == nil {
		return floats{Values: emptyIterator{}}, nil, nil
	}
	var (
		room []readSource
		slab *byteSlab
	)
	if rs != nil {
		room, slab = rs.srcs[:0], rs.slab
	}
	srcs, hits, err := sh.read(id, hint, ns.blockStart(start), ns.blockStart(end), ns.blockSize, room, slab)
	if rs != nil {
		// The iterators live on in the answer; only the slice is reused.
		defer func() { clear(srcs); rs.srcs = srcs[:0] }()
	}
	if err != nil {
		return floats{}, nil, fmt.Errorf("read shard %d: %w", shard, err)
	}
	var hit encoding.HistogramIterator
	if len(hits) > 0 {
		hit = &rangeHistIterator{HistogramIterator: encoding.MergeHistogramIterators(hits...), window: window{start: start, end: end}}
	}
	if len(srcs) == 0 {
		return floats{Values: emptyIterator{}}, hit, nil
	}
	if len(srcs) == 1 && srcs[0].it == nil && srcs[0].lo >= start && srcs[0].hi <= end {
		// One stream, wholly in range: the caller decodes it.
		return floats{Stream: srcs[0].stream}, hit, nil
	}
	for i := range srcs {
		if srcs[i].it == nil {
			srcs[i].it = encoding.NewIterator(srcs[i].stream)
		}
	}
	it, lo, hi := combineSources(srcs)
	if lo >= start && hi <= end {
		// Every sample is in the range (a query over the whole of the
		// data, as dashboards ask): no filter between the decoder and
		// the reader, sample by sample.
		return floats{Values: it}, hit, nil
	}
	return floats{Values: &rangeIterator{it: it, window: window{start: start, end: end}}}, hit, nil
}

// combineSources returns one iterator over a series' float sources in
// timestamp order, later sources winning equal timestamps, and bounds of
// all their samples. Sources of different blocks never share a timestamp
// (a block's data lies inside it), so blocks are concatenated in order
// and only the sources of one block (a fileset and a cold write to it, a
// flushing bucket and the open one) are merged.
func combineSources(srcs []readSource) (it encoding.Iterator, lo, hi int64) {
	lo, hi = srcs[0].lo, srcs[0].hi
	if len(srcs) == 1 {
		return srcs[0].it, lo, hi
	}
	if !slices.IsSortedFunc(srcs, func(a, b readSource) int { return cmp.Compare(a.block, b.block) }) {
		// Stable: within a block the order (older first) decides ties.
		slices.SortStableFunc(srcs, func(a, b readSource) int { return cmp.Compare(a.block, b.block) })
	}
	var (
		blocks []encoding.Iterator
		group  []encoding.Iterator
	)
	flush := func() {
		if len(group) == 1 {
			blocks = append(blocks, group[0])
		} else {
			blocks = append(blocks, encoding.MergeIterators(group...))
		}
		group = nil
	}
	for i, s := range srcs {
		if i > 0 && s.block != srcs[i-1].block {
			flush()
		}
		group = append(group, s.it)
		lo, hi = min(lo, s.lo), max(hi, s.hi)
	}
	flush()
	return encoding.ConcatIterators(blocks...), lo, hi
}

// SeriesIterator is one series matched by a query.
type SeriesIterator struct {
	ID    []byte // aliases index memory: do not modify
	Shard uint32
	// Values iterates the series' float samples in the range; nil when
	// Stream holds them instead.
	Values encoding.Iterator
	// Stream, when Values is nil (only with QueryOptions.Streams), is the
	// series' float samples as one encoded stream (encoding.NewIterator's
	// form), every one inside the range: a reader of many series decodes
	// them one after another with one encoding.StreamReader. Floats serves
	// either form.
	Stream []byte
	// Histograms are the series' native histogram samples in the range;
	// nil when it has none. A series may have both (Prometheus lets a
	// series change type); a reader that cannot return histograms must
	// fail rather than answer with Values alone.
	Histograms encoding.HistogramIterator
}

// QueryOptions narrow a query.
type QueryOptions struct {
	// Shards, when set, restricts results to series of shards it accepts
	// (a clustered node answers only for the shards it owns).
	Shards func(shard uint32) bool
	// Limit stops after that many series (0: none).
	Limit int
	// DeclineHistograms asks Query to fail with ErrHistogramsSelected,
	// before it reads a series' samples, when a selected series is known
	// to hold native histograms in the range's blocks: a caller that
	// declines such a selection anyway (a replica's pushdown, whose
	// coordinator then reads the series raw) is spared a read it would
	// throw away. Known means unflushed histogram samples in memory,
	// checked with one series map look-up per selected series, and only in
	// a namespace that has taken a histogram since it was opened; or
	// flushed histograms, recorded per series in the index of a fileset of
	// index version 4, looked up (a binary search) only in the range's
	// filesets that hold any. A series whose histograms are flushed in an
	// older fileset only is known when it is read: the read stops there.
	DeclineHistograms bool
	// Streams lets Query answer a series whose float samples are one
	// in-memory stream inside the range with a copy of its bytes
	// (SeriesIterator.Stream) instead of an iterator, the copies packed
	// into shared slabs: for a caller that decodes one series at a time
	// (the fast path's workers), a query over ten million series then
	// holds each one's bytes (~30 at 4 samples) in a few large objects
	// without pointers, where an iterator and a copy each were ~250 bytes
	// in two objects the collector marked one by one.
	Streams bool
	// Unsorted lets Query answer in the index's ref order (about the order
	// the series were created in) instead of by ID: for a caller whose
	// answer does not depend on the order, a query over ten million series
	// skips the IDs' sort.
	Unsorted bool
}

// Floats returns the series' float samples as an iterator: Values, or a
// new iterator over Stream (a fresh one per call).
func (s SeriesIterator) Floats() encoding.Iterator {
	if s.Values != nil {
		return s.Values
	}
	return encoding.NewIterator(s.Stream)
}

// ErrHistogramsSelected is Query's answer, with
// QueryOptions.DeclineHistograms, to a selection holding native
// histograms: nothing was read, or (histograms flushed only) the read
// stopped at the first series holding some.
var ErrHistogramsSelected = errors.New("storage: the selection holds native histograms")

// Query returns the series of namespace ns matching all matchers with data
// in [start, end], each with an iterator over its samples in the range.
func (db *Database) Query(ctx context.Context, nsName string, matchers []*labels.Matcher, start, end int64, qo QueryOptions) ([]SeriesIterator, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, err
	}
	if ns.opts.RollupOf != "" {
		return db.queryRollupAsRaw(ctx, nsName, matchers, start, end, qo)
	}
	if ns.index == nil {
		return nil, fmt.Errorf("namespace %s is not indexed: queries by label need index: true", nsName)
	}
	query := ns.index.QueryTagged
	if qo.Unsorted {
		query = ns.index.QueryTaggedUnsorted
	}
	ids, tags, err := query(matchers, start, end)
	if err != nil {
		return nil, fmt.Errorf("query index: %w", err)
	}
	if qo.DeclineHistograms && (ns.hadHist.Load() || ns.flushedHist.Load()) && db.holdsHistograms(ns, ids, start, end, qo.Shards) {
		return nil, ErrHistogramsSelected
	}
	var r queryPart
	if workers := min(runtime.GOMAXPROCS(0), len(ids)/parallelReadMin); workers > 1 && qo.Limit == 0 {
		r = db.readParallel(ctx, ns, ids, tags, start, end, qo, workers)
	} else {
		r = db.readIDs(ctx, ns, ids, tags, start, end, qo)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.damaged) > 0 {
		db.metrics.seriesUnreadable.Inc(int64(len(r.damaged)))
		return r.out, &PartialError{Damaged: r.damaged}
	}
	return r.out, nil
}

// parallelReadMin is the fewest series per goroutine Query reads with:
// reading a series (its shard, its lock, a copy of its unflushed bytes,
// a fileset lookup) costs a microsecond or two, mostly cache misses, so a
// dashboard query selecting 100,000 series spent a tenth of a second in
// Query on the engine's one goroutine with the other cores idle.
const parallelReadMin = 4096

// queryPart is what reading some of a query's series found.
type queryPart struct {
	out     []SeriesIterator
	damaged []DamagedSeries
	err     error
}

// readParallel is readIDs over workers contiguous parts of ids at once,
// the parts' answers joined in the order of ids (the index's order, which
// callers see): the same answer as readIDs over all of them, the error of
// the first part that failed. Each part fills its own stretch of one
// answer, closed up in place after: a copy of every part into a new slice
// was as large as the answer (88 bytes a series).
func (db *Database) readParallel(ctx context.Context, ns *namespace, ids [][]byte, tags []uint32, start, end int64, qo QueryOptions, workers int) queryPart {
	all := make([]SeriesIterator, len(ids))
	parts := make([]queryPart, workers)
	size := (len(ids) + workers - 1) / workers
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := min(w*size, len(ids)), min((w+1)*size, len(ids))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var t []uint32
			if tags != nil {
				t = tags[lo:hi]
			}
			parts[w] = db.readIDsInto(ctx, ns, ids[lo:hi], t, start, end, qo, all[lo:lo:hi])
		}()
	}
	wg.Wait()
	n := 0
	for _, p := range parts {
		if p.err != nil {
			return queryPart{err: p.err}
		}
		n += copy(all[n:], p.out) // stays in place or moves down
	}
	clear(all[n:])
	r := queryPart{out: all[:n:n]}
	for _, p := range parts {
		r.damaged = append(r.damaged, p.damaged...)
	}
	return r
}

// readIDs reads the series ids of namespace ns in [start, end], in order,
// stopping after qo.Limit of them. tags are the index's tags of ids
// (Index.QueryTagged): the registry slots of their series when they were
// indexed, or nil.
//
// A tag finds the series without the two hashes of its ID (murmur3 for
// its shard, xxhash for the shard's map) and the map's probe, a fifth of
// the CPU of a query over every series (docs/performance.md, query30).
// A tag is a hint: the series in the slot must be of this namespace and
// have the ID, else (the series left memory, the slot holds another) the
// ID is looked up as without one; shard.read checks, under the lock it
// reads the filesets with, that the series is still in the map.
func (db *Database) readIDs(ctx context.Context, ns *namespace, ids [][]byte, tags []uint32, start, end int64, qo QueryOptions) queryPart {
	return db.readIDsInto(ctx, ns, ids, tags, start, end, qo, make([]SeriesIterator, 0, len(ids)))
}

// readIDsInto is readIDs appending its answer to out, which has room for
// every one of ids.
func (db *Database) readIDsInto(ctx context.Context, ns *namespace, ids [][]byte, tags []uint32, start, end int64, qo QueryOptions, out []SeriesIterator) queryPart {
	r := queryPart{out: out}
	var scratch readScratch
	if qo.Streams {
		scratch.slab = &byteSlab{}
	}
	for i, id := range ids {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return queryPart{err: err}
			}
		}
		var hint *Series
		var shard uint32
		if tags != nil {
			if s := registry.get(tags[i]); s != nil && s.shard != 0 && s.ns == ns.num && s.id == string(id) {
				hint, shard = s, uint32(s.shard-1)
			}
		}
		if hint == nil {
			shard = db.Shard(id)
		}
		if qo.Shards != nil && !qo.Shards(shard) {
			continue
		}
		f, hit, err := db.readBoth(ns, id, hint, shard, start, end, &scratch)
		if errors.Is(err, fileset.ErrCorrupt) {
			// The damage costs this series only; the others are returned.
			db.reportDamage(err)
			r.damaged = append(r.damaged, DamagedSeries{ID: id, Shard: shard, Err: err})
			continue
		}
		if err != nil {
			return queryPart{err: err}
		}
		if hit != nil && qo.DeclineHistograms {
			// Flushed histograms, known only now: read no further.
			return queryPart{err: ErrHistogramsSelected}
		}
		r.out = append(r.out, SeriesIterator{ID: id, Shard: shard, Values: f.Values, Stream: f.Stream, Histograms: hit})
		if qo.Limit > 0 && len(r.out) >= qo.Limit {
			break
		}
	}
	return r
}

// reportDamage logs a damaged fileset read once per distinct error (every
// query touching the damage would otherwise log it again).
func (db *Database) reportDamage(err error) {
	if _, seen := db.damageLogged.LoadOrStore(err.Error(), struct{}{}); !seen {
		db.opts.Logger.Error("damaged fileset data: the series is left out of query results", "err", err)
	}
}

// LabelNames lists label names of series matching matchers in the range.
func (db *Database) LabelNames(nsName string, matchers []*labels.Matcher, start, end int64) ([]string, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, err
	}
	if ns.index == nil {
		return nil, fmt.Errorf("namespace %s is not indexed", nsName)
	}
	return ns.index.LabelNames(matchers, start, end)
}

// LabelValues lists the values of label name in the range.
func (db *Database) LabelValues(nsName, name string, matchers []*labels.Matcher, start, end int64) ([]string, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, err
	}
	if ns.index == nil {
		return nil, fmt.Errorf("namespace %s is not indexed", nsName)
	}
	return ns.index.LabelValues(name, matchers, start, end)
}

// Close stops the background loop, flushes and closes the commit log and
// closes fileset readers. Unflushed memory is recovered from the commit log
// at the next Open.
func (db *Database) Close() error {
	var err error
	db.once.Do(func() {
		close(db.stop)
		<-db.done
		db.writeMu.Lock()
		err = db.cl.Close()
		db.writeMu.Unlock()
		db.tickMu.Lock()
		db.closeReaders()
		db.tickMu.Unlock()
	})
	return err
}

func (db *Database) closeReaders() {
	for _, ns := range db.nsList {
		for _, sh := range ns.allShards() {
			sh.mu.Lock()
			for bs, r := range sh.blocks {
				_ = r.Close()
				delete(sh.blocks, bs)
			}
			sh.mu.Unlock()
		}
	}
	for _, c := range db.graveyard {
		_ = c.Close()
	}
	db.graveyard = nil
}

func (db *Database) loop() {
	defer close(db.done)
	t := time.NewTicker(db.opts.TickEvery)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
			if err := db.Tick(); err != nil {
				db.opts.Logger.Error("tick", "err", err)
			}
			db.maybeRestartSnapshot()
		}
	}
}

type emptyIterator struct{}

func (emptyIterator) Next() bool           { return false }
func (emptyIterator) At() (int64, float64) { return 0, 0 }
func (emptyIterator) Err() error           { return nil }

// rangeIterator keeps the samples of it inside [start, end].
type rangeIterator struct {
	it encoding.Iterator
	window
}

func (r *rangeIterator) Next() bool           { return nextIn(&r.window, r.it, floatT) }
func (r *rangeIterator) At() (int64, float64) { return r.it.At() }
func (r *rangeIterator) Err() error           { return r.it.Err() }

// window is the range of a range iterator, of either kind: the samples
// of [start, end], the first one past end ending the walk.
type window struct {
	start, end int64
	done       bool
}

// nextIn moves it (whose sample times at reads) to its next sample
// inside window w.
func nextIn[I interface{ Next() bool }](w *window, it I, at func(I) int64) bool {
	if w.done {
		return false
	}
	for it.Next() {
		t := at(it)
		if t < w.start {
			continue
		}
		if t > w.end {
			w.done = true
			return false
		}
		return true
	}
	w.done = true
	return false
}

// ResolveRefs sets the Ref of every sample of batch without one whose
// series is in memory in namespace ns, in the sample's shard, under
// exactly the sample's ID bytes; it leaves the others' Ref 0, keeps a
// Ref the caller set (WriteBatch checks those as always) and creates
// nothing (not even the shard). Every write path files a series in the shard its
// ID hashes to, so a resolved sample's ID is known to be a canonical ID of
// that shard: a caller that must validate IDs from the network (the node
// RPC server) validates only the unresolved ones, and WriteBatch then
// skips the lookup for the resolved ones. Consecutive samples with the
// same ID and shard are looked up once. An unknown namespace resolves
// nothing.
func (db *Database) ResolveRefs(nsName string, batch []Sample) {
	ns := db.namespaces[nsName]
	if ns == nil {
		return
	}
	for i := range batch {
		s := &batch[i]
		if i > 0 && s.Shard == batch[i-1].Shard && ident.Same(s.ID, batch[i-1].ID) {
			s.Ref = batch[i-1].Ref
			continue
		}
		if s.Ref != 0 || s.Shard >= db.opts.NumShards {
			continue
		}
		sh := ns.shards[s.Shard].Load()
		if sh == nil {
			continue
		}
		sh.mu.RLock()
		if se := sh.series.get(hashID(s.ID), s.ID); se != nil {
			s.Ref = se.Ref()
		}
		sh.mu.RUnlock()
	}
}
