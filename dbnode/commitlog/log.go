package commitlog

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/histogram"
)

var (
	// ErrClosed is returned by Write, Rotate and Close once Close has been
	// called.
	ErrClosed = errors.New("commitlog: closed")
	// ErrQueueFull is returned by Write when MaxPending bytes are already
	// queued or being written: the disk is not keeping up, and the caller
	// should shed load (the HTTP layer answers 503).
	ErrQueueFull = errors.New("commitlog: queue full")
)

// Entry is one sample of one series.
type Entry struct {
	Namespace string
	ID        []byte // the series ID (ident); opaque to the log
	T         int64  // milliseconds since the epoch
	V         float64
	// Ref, when set, is where the log remembers the series' ref in the
	// file being written, so a caller that keeps state per series (the
	// storage engine) spares the log a lookup of ID in its per-file table.
	// See SeriesRef for the contract.
	Ref *SeriesRef
	// File and Series are set by replay only (zero on writes): the file's
	// place in this replay (0 for the first file replayed, then 1, ...)
	// and the series' ref in that file, the same for every entry of one
	// series in one file, and of no other series there. A replay callback
	// can keep its per-series state (the series it found for the ID) by
	// Series, reset when File changes, instead of looking the ID up for
	// every entry. Series is below the number of series the file defined
	// so far, so a table indexed by it is no larger than the log's own.
	File, Series uint32
}

// HistEntry is one native histogram sample of one series: H (integer
// counts) or FH (float counts), exactly one of them set. Its other fields
// mean what Entry's do; the log treats the histogram as read-only.
type HistEntry struct {
	Namespace string
	ID        []byte
	T         int64
	H         *histogram.Histogram
	FH        *histogram.FloatHistogram
	Ref       *SeriesRef
	// File and Series: as in Entry (replay only). One ref numbers a
	// series' float and histogram entries alike.
	File, Series uint32
}

// SeriesRef is the log's per-file handle on one series, kept by the
// caller beside its series. Only the log's flusher goroutine reads or
// writes it: once a SeriesRef has been handed to Write, the caller must not
// touch it. A caller passes the same SeriesRef only with the same
// namespace and ID. The zero value is valid (no ref yet).
type SeriesRef struct {
	gen uint32 // the encoder generation the ref belongs to; 0: none
	ref uint32
}

// TimeRange is an inclusive range of sample timestamps.
type TimeRange struct{ Min, Max int64 }

// FileMeta describes a closed commit log file.
type FileMeta struct {
	Path string
	Seq  uint64
	// Ranges holds, per namespace, the min and max sample timestamp in the
	// file. Callers must not modify it.
	Ranges map[string]TimeRange
}

// ReplayStats summarises Open's replay.
type ReplayStats struct {
	Files, Entries int
	// CoveredFiles were not replayed: Options.Covered said a snapshot
	// holds them (not counted in Files).
	CoveredFiles int
	// CorruptTails counts files whose end held no intact record (a torn
	// tail, normal after a crash, or a damaged header with nothing
	// intact after it); TruncatedBytes is what was cut off.
	CorruptTails   int
	TruncatedBytes int64

	// Mid-file corruption: damage followed by intact records. Replay
	// skips the damage, keeps every intact record after it, and moves
	// the damaged file aside (MovedAside: the copies, path+".corrupt").
	CorruptFiles   int
	SkippedBytes   int64
	SkippedRecords int // records lost in the skipped bytes (frame markers seen; one for a version 1 file)
	// UnresolvedEntries counts entries of intact records that were
	// dropped because their series was defined in a skipped record.
	UnresolvedEntries int
	MovedAside        []string
}

// Damaged reports whether replay lost anything but a torn tail.
func (s ReplayStats) Damaged() bool { return s.CorruptFiles > 0 }

// String summarises the damage for logs and /ready.
func (s ReplayStats) String() string {
	if !s.Damaged() {
		return fmt.Sprintf("commit log: %d files, %d entries replayed, %d torn tails (%d bytes)",
			s.Files, s.Entries, s.CorruptTails, s.TruncatedBytes)
	}
	return fmt.Sprintf("commit log: corruption in %d files: skipped %d bytes (%d records) and %d entries whose series was defined in them; kept %d entries; damaged files moved aside: %v",
		s.CorruptFiles, s.SkippedBytes, s.SkippedRecords, s.UnresolvedEntries, s.Entries, s.MovedAside)
}

// Log is an append-only commit log. All methods are safe for concurrent
// use.
type Log struct {
	opts     Options
	log      *slog.Logger
	m        metrics
	asyncHi  int64 // async: queued bytes that trigger a write before the tick
	kick     chan struct{}
	requests chan request
	exited   chan struct{}

	// reqMu serialises Rotate and Close, so that no request is sent to
	// the flusher after it has exited. The flusher never takes it.
	reqMu sync.Mutex

	mu      sync.Mutex
	cur     *queue // being filled by writers
	spare   *queue // nil while the flusher holds it
	pending int64  // bytes queued or being written
	closed  bool

	filesMu sync.Mutex
	files   []FileMeta // closed files, oldest first
	active  string     // path of the file being written, "" if none

	written atomic.Int64 // bytes written to files since Open

	w *fileWriter // owned by the flusher goroutine
}

type requestKind int

const (
	reqRotate requestKind = iota + 1
	reqClose
)

type request struct {
	kind requestKind
	done chan error
}

// Open replays every commit log file in opts.Dir in sequence order,
// calling replay (which may be nil) for each entry, then starts a new file
// for writes.
//
// A damaged record (cut short, failing its checksum or not decoding) is
// skipped: replay resynchronises on the next intact record and keeps
// everything after it. Damage with intact records after it is mid-file
// corruption: logged as an error, counted, and the file is rewritten
// with only what replay kept while the damaged original is moved aside to
// <file>.corrupt (see salvage). Damage with nothing intact after it is a
// torn tail, the normal result of a crash: logged, counted and truncated
// away. A file with a damaged header and nothing intact is removed. The
// files after a damaged one are always replayed. Open fails on I/O
// errors, on a file of an unsupported version and when replay returns an
// error.
//
// The Entry passed to replay is read-only; its ID stays valid after the
// call (it is shared by every entry of that series in the file).
func Open(opts Options, replay func(Entry) error) (*Log, ReplayStats, error) {
	var stats ReplayStats
	if err := opts.validate(); err != nil {
		return nil, stats, err
	}
	opts = opts.withSeams()
	l := &Log{
		opts:     opts,
		log:      opts.Logger.With("component", "commitlog", "dir", opts.Dir),
		m:        newMetrics(opts.Metrics),
		asyncHi:  min(opts.MaxPending/4, 4<<20),
		kick:     make(chan struct{}, 1),
		requests: make(chan request),
		exited:   make(chan struct{}),
		cur:      &queue{},
		spare:    &queue{},
	}
	if err := opts.FS.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, stats, fmt.Errorf("create commit log dir %s: %w", opts.Dir, err)
	}
	lastSeq, err := l.replayAll(replay, &stats)
	if err != nil {
		return nil, stats, err
	}
	l.w = newFileWriter(l, lastSeq+1)
	if err := l.w.openNext(); err != nil {
		return nil, stats, err
	}
	go l.run()
	return l, stats, nil
}

// replayAll replays the existing files and records them as closed files.
// It returns the highest sequence number seen.
func (l *Log) replayAll(replay func(Entry) error, stats *ReplayStats) (uint64, error) {
	fs, dir := l.opts.FS, l.opts.Dir
	dirents, err := fs.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list commit log dir %s: %w", dir, err)
	}
	var seqs []uint64
	for _, de := range dirents {
		if seq, ok := parseFileName(de.Name()); ok && de.Type().IsRegular() {
			seqs = append(seqs, seq)
		}
		if name := de.Name(); strings.HasSuffix(name, fileSuffix+salvageSuffix) {
			// A salvage that a crash interrupted; its source is still there.
			if err := fs.Remove(filepath.Join(dir, name)); err != nil {
				return 0, fmt.Errorf("remove interrupted salvage %s: %w", name, err)
			}
		}
	}
	slices.Sort(seqs)

	var lastSeq uint64
	removed := false
	for fileNum, seq := range seqs {
		lastSeq = seq
		path := filepath.Join(dir, fileName(seq))
		if l.opts.Covered != nil {
			if ranges, ok := l.opts.Covered(seq); ok {
				stats.CoveredFiles++
				l.files = append(l.files, FileMeta{Path: path, Seq: seq, Ranges: ranges})
				continue
			}
		}
		s, err := scanFile(fs, path, seq, func(es []Entry, hs []HistEntry) error {
			if replay == nil {
				return nil
			}
			for _, e := range es {
				e.File = uint32(fileNum)
				if err := replay(e); err != nil {
					return err
				}
			}
			if len(hs) > 0 && l.opts.ReplayHistogram == nil {
				// Never replay a record in part without saying so.
				return fmt.Errorf("%d histogram samples and no ReplayHistogram to take them", len(hs))
			}
			for _, h := range hs {
				h.File = uint32(fileNum)
				if err := l.opts.ReplayHistogram(h); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		stats.Files++
		stats.Entries += s.entries
		if len(s.skipped) > 0 {
			aside, err := salvage(fs, dir, path, seq)
			if err != nil {
				return 0, err
			}
			skipped := s.skippedBytes()
			stats.CorruptFiles++
			stats.SkippedBytes += skipped
			stats.SkippedRecords += s.skippedRecords
			stats.UnresolvedEntries += s.unresolved
			stats.MovedAside = append(stats.MovedAside, aside)
			l.m.corruptFiles.Inc(1)
			l.m.skippedBytes.Inc(skipped)
			l.m.skippedRecords.Inc(int64(s.skippedRecords))
			l.m.unresolvedEntries.Inc(int64(s.unresolved))
			for _, sp := range s.skipped {
				l.log.Error("commit log: corrupt range skipped; replay resumed at the next intact record",
					"file", path, "from", sp.Start, "to", sp.End, "bytes", sp.End-sp.Start, "reason", sp.Reason)
			}
			l.log.Error("commit log: damaged file rewritten with its intact records; the original is kept for inspection",
				"file", path, "moved_aside", aside, "skipped_bytes", skipped, "skipped_records", s.skippedRecords,
				"kept_entries", s.entries, "unresolved_entries", s.unresolved)
			if s.badTail != nil {
				cut := s.size - s.good
				stats.CorruptTails++
				stats.TruncatedBytes += cut
				l.m.corruptTails.Inc(1)
				l.m.truncatedBytes.Inc(cut)
			}
		} else if s.badTail != nil {
			cut := s.size - s.good
			stats.CorruptTails++
			stats.TruncatedBytes += cut
			l.m.corruptTails.Inc(1)
			l.m.truncatedBytes.Inc(cut)
			l.log.Warn("commit log: dropping torn or corrupt tail",
				"file", path, "offset", s.good, "bytes", cut, "reason", s.badTail)
			if s.good == 0 {
				if err := fs.Remove(path); err != nil {
					return 0, fmt.Errorf("remove commit log %s with bad header: %w", path, err)
				}
				removed = true
				continue
			}
			if err := truncateFile(fs, path, s.good); err != nil {
				return 0, err
			}
		}
		if s.seq != seq {
			l.log.Warn("commit log: header sequence differs from file name", "file", path, "header_seq", s.seq)
		}
		l.files = append(l.files, FileMeta{Path: path, Seq: seq, Ranges: s.ranges})
	}
	if removed {
		if err := fs.SyncDir(dir); err != nil {
			return 0, fmt.Errorf("sync commit log dir %s: %w", dir, err)
		}
	}
	return lastSeq, nil
}

// Write appends batch as one record. In ModeSync it returns nil only after
// the record is fsynced; if the write or fsync of the group it joined
// fails, every writer of that group gets the (wrapped) error and none of
// its entries may be considered durable. In ModeAsync it returns once the
// batch is queued (the log keeps a copy). An empty batch is a no-op.
//
// Write returns ErrQueueFull when MaxPending bytes are already pending, and
// ErrClosed after Close. The log does not modify batch; in ModeSync it
// reads it until Write returns.
func (l *Log) Write(batch []Entry) error {
	t, err := l.Enqueue(batch)
	if err != nil {
		return err
	}
	return t.Wait()
}

// Ticket is a batch's place in the log between Enqueue and Wait.
type Ticket struct {
	l *Log
	g *group // nil: nothing to wait for (async mode, empty batch)
}

// Enqueue is the first half of Write: it queues batch, or refuses it with
// ErrQueueFull or ErrClosed, and returns without waiting. In ModeSync the
// caller must call Wait on the ticket exactly once, and must keep batch
// unmodified until Wait returns.
//
// In ModeSync the batch joins the group being filled, which is written
// when one of its writers waits for it (or when a flush happens anyway).
// So a caller with work to do between Enqueue and Wait, such as the
// storage engine applying the batch to memory, lets the writers that
// arrive meanwhile join its group and share its write and fsync: with
// requests taking turns on few cores, this is what turns one fsync per
// request into one per several.
func (l *Log) Enqueue(batch []Entry) (Ticket, error) {
	return l.EnqueueWith(batch, nil)
}

// EnqueueWith is Enqueue for a batch that carries native histogram
// samples (hist) as well as floats (batch, may be empty): both go into one
// record, so a batch is replayed entirely or not at all whatever it holds.
// In ModeSync hist, and the histograms it points to, must stay unmodified
// until Wait returns; in ModeAsync the log copies them.
func (l *Log) EnqueueWith(batch []Entry, hist []HistEntry) (Ticket, error) {
	est, idBytes := batchBytes(batch)
	hest, hidBytes := histBytes(hist)
	est += hest
	sync := l.opts.Mode == ModeSync

	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return Ticket{}, ErrClosed
	}
	if len(batch) == 0 && len(hist) == 0 {
		l.mu.Unlock()
		return Ticket{}, nil
	}
	if l.pending > 0 && l.pending+est > l.opts.MaxPending {
		l.mu.Unlock()
		l.m.queueFull.Inc(1)
		return Ticket{}, ErrQueueFull
	}
	l.pending += est
	q := l.cur
	q.bytes += est
	if sync {
		q.batches = append(q.batches, batch)
		q.hists = append(q.hists, hist)
		if q.group == nil {
			q.group = &group{done: make(chan struct{})}
		}
		g := q.group
		l.mu.Unlock()
		return Ticket{l: l, g: g}, nil
	}
	q.appendCopy(batch, idBytes)
	q.appendHistCopy(hist, hidBytes)
	kick := q.bytes >= l.asyncHi
	l.mu.Unlock()
	if kick {
		l.kickFlusher()
	}
	return Ticket{}, nil
}

// Wait returns once the ticket's batch is durable (nil) or its group
// failed (the write or fsync error). It asks for the group to be written
// if nobody has yet.
func (t Ticket) Wait() error {
	if t.g == nil {
		return nil
	}
	select {
	case <-t.g.done:
	default:
		t.l.kickFlusher()
		<-t.g.done
	}
	return t.g.err
}

// Start asks for the ticket's group to be written and fsynced now, without
// waiting for it. A caller that queues many batches before it waits (peer
// bootstrap waits once per batch of shards) lets the fsyncs of its early
// batches overlap its later work instead of paying them at the end.
// Wait must still be called.
func (t Ticket) Start() {
	if t.g != nil {
		t.l.kickFlusher()
	}
}

// kickFlusher asks the flusher for a flush of everything queued. A kick
// made after a batch was queued always reaches a flush that takes it: if
// one is already pending, that flush has not swapped the queue yet.
func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Rotate writes and fsyncs everything queued, closes the current file and
// starts a new one.
func (l *Log) Rotate() error { return l.do(reqRotate) }

// Close writes and fsyncs everything queued and closes the current file,
// which then shows up in Files. Later calls to Write, Rotate and Close
// return ErrClosed.
func (l *Log) Close() error {
	l.reqMu.Lock()
	defer l.reqMu.Unlock()
	l.mu.Lock()
	closed := l.closed
	l.closed = true
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	err := l.send(reqClose)
	<-l.exited
	return err
}

func (l *Log) do(kind requestKind) error {
	l.reqMu.Lock()
	defer l.reqMu.Unlock()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return l.send(kind)
}

func (l *Log) send(kind requestKind) error {
	done := make(chan error, 1)
	l.requests <- request{kind: kind, done: done}
	return <-done
}

// BytesWritten is how many bytes the log has written to its files since
// Open (records and headers).
func (l *Log) BytesWritten() int64 { return l.written.Load() }

// Files returns the closed files (not the one being written), oldest
// first. The slice is the caller's; the Ranges maps must not be modified.
func (l *Log) Files() []FileMeta {
	l.filesMu.Lock()
	defer l.filesMu.Unlock()
	return slices.Clone(l.files)
}

// Remove deletes a closed file. The storage engine calls it once every
// sample in the file (see FileMeta.Ranges) is flushed to filesets. The
// active file cannot be removed.
func (l *Log) Remove(path string) error {
	l.filesMu.Lock()
	defer l.filesMu.Unlock()
	i := slices.IndexFunc(l.files, func(f FileMeta) bool { return f.Path == path })
	if i < 0 {
		if path != "" && path == l.active {
			return fmt.Errorf("remove commit log %s: file is still being written", path)
		}
		return fmt.Errorf("remove commit log %s: not a closed file of this log", path)
	}
	if err := l.opts.FS.Remove(path); err != nil {
		return fmt.Errorf("remove commit log %s: %w", path, err)
	}
	l.files = slices.Delete(l.files, i, i+1)
	if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
		return fmt.Errorf("sync commit log dir after removing %s: %w", path, err)
	}
	return nil
}

func (l *Log) addClosed(f FileMeta) {
	l.filesMu.Lock()
	l.files = append(l.files, f)
	if l.active == f.Path {
		l.active = ""
	}
	l.filesMu.Unlock()
}

func (l *Log) setActive(path string) {
	l.filesMu.Lock()
	l.active = path
	l.filesMu.Unlock()
}

// activePath is the file being written ("" if none); for tests.
func (l *Log) activePath() string {
	l.filesMu.Lock()
	defer l.filesMu.Unlock()
	return l.active
}
