package hints

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// ErrClosed is returned by a closed queue.
var ErrClosed = errors.New("hint queue closed")

// Drop reasons, the tag of the dropped counter.
const (
	DropBytes    = "bytes"     // past MaxBytes: the oldest segment went
	DropAge      = "age"       // older than MaxAge
	DropCorrupt  = "corrupt"   // a record failing its checksum or not decoding
	DropNotOwner = "not_owner" // the target no longer owns the shard
	DropRejected = "rejected"  // the target refused the samples for good
	DropRemoved  = "removed"   // the target left the placement
)

// segment is one file of a queue. size counts only durable bytes: the
// reader never reads past it.
type segment struct {
	seq     uint64
	path    string
	size    int64
	hseq    uint64                 // the seq in its header, which its frames' checksums cover (the name's, unless renamed)
	version uint32                 // of its framing: 1 or 2 (segVersion)
	hdr     int64                  // the size of its frame headers
	records int                    // frames, the damaged ones counted as the reader skips them
	newest  time.Time              // created time of the newest record (zero: none)
	rf      vfs.File               // read handle, opened by the reader
	fr      *commitlog.FrameReader // over rf, made by the reader
	open    bool                   // the segment appends go to: never removed by the reader
}

// frames returns the segment's frame reader, reading its durable bytes.
func (s *segment) frames(fs vfs.FS) (*commitlog.FrameReader, error) {
	if s.rf == nil {
		f, err := fs.Open(s.path)
		if err != nil {
			return nil, err
		}
		s.rf = f
	}
	if s.fr == nil {
		s.fr = commitlog.NewFrameReader(s.rf, s.size, s.version, s.hseq)
	}
	s.fr.SetSize(s.size)
	return s.fr, nil
}

// Queue is the durable, ordered hint queue of one target instance: a
// directory of segment files written append-only (framed, checksummed,
// fsynced before Append returns) and consumed from the oldest. It is safe
// for concurrent use by many appenders and one reader.
type Queue struct {
	target string
	dir    string
	opts   Options
	m      *targetMetrics

	// flushMu serialises writes to the active segment: appenders group
	// their records behind the one writing (group commit).
	flushMu sync.Mutex
	af      vfs.File // active segment's append handle; nil: make a new one

	mu      sync.Mutex
	segs    []*segment // oldest first; the last is the active one when af != nil
	off     int64      // reader's offset in segs[0]
	skipped int        // records of segs[0] before off
	pending *batch
	closed  bool
	notify  chan struct{} // signalled (non-blocking) when records become durable
	nextSeq uint64
}

// batch is the records appended while another write was on disk: the
// next writer writes and fsyncs them all at once.
type batch struct {
	buf     []byte
	starts  []int // where each record's frame starts in buf
	records int
	newest  time.Time
	done    chan struct{}
	err     error
}

func openQueue(target, dir string, opts Options, m *targetMetrics) (*Queue, error) {
	q := &Queue{target: target, dir: dir, opts: opts, m: m, notify: make(chan struct{}, 1)}
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("hint queue %s: %w", dir, err)
	}
	ents, err := opts.FS.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("hint queue %s: %w", dir, err)
	}
	for _, e := range ents {
		seq, ok := parseSegName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		s := &segment{seq: seq, path: filepath.Join(dir, e.Name())}
		if err := q.scan(s); err != nil {
			return nil, err
		}
		if seq >= q.nextSeq {
			q.nextSeq = seq + 1
		}
		if s.size <= segHeaderSize {
			// Nothing readable (empty, or a torn header): a crash while
			// creating it. Its records, if any, are not there to lose.
			_ = opts.FS.Remove(s.path)
			continue
		}
		q.segs = append(q.segs, s)
	}
	sort.Slice(q.segs, func(i, j int) bool { return q.segs[i].seq < q.segs[j].seq })
	q.gauges()
	return q, nil
}

// scan sizes a segment found on disk: it checks its frames up to the
// end of the last intact one, which marks the end of what was durable (a
// torn tail after it is ignored), and counts the records and the newest
// created time. A damaged record followed by intact ones costs only
// itself: the reader skips it (commitlog.FrameReader.Resync) and counts
// it then. A segment whose header is damaged is read as version 2 with
// the seq of its name.
func (q *Queue) scan(s *segment) error {
	f, err := q.opts.FS.Open(s.path)
	if err != nil {
		return fmt.Errorf("open hint segment %s: %w", s.path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat hint segment %s: %w", s.path, err)
	}
	var hdr [segHeaderSize]byte
	n, _ := f.ReadAt(hdr[:], 0)
	seq, version, err := parseSegHeader(hdr[:n])
	switch {
	case errors.Is(err, commitlog.ErrBadHeader):
		q.opts.Logger.Warn("hint segment with a bad header: reading its records by their markers", "target", q.target, "file", s.path, "err", err)
		seq, version = s.seq, segVersion
	case err != nil:
		return fmt.Errorf("hint segment %s: %w", s.path, err)
	}
	size := info.Size()
	fr := commitlog.NewFrameReader(f, size, version, seq)
	s.version, s.hdr, s.hseq = version, fr.HeaderSize(), seq
	off, end := int64(segHeaderSize), int64(segHeaderSize)
	for off < size {
		p, next, reason, err := fr.Frame(off)
		if err != nil {
			return fmt.Errorf("hint segment %s: %w", s.path, err)
		}
		if reason != "" {
			at, markers, err := fr.Resync(off + 1)
			if err != nil {
				return fmt.Errorf("hint segment %s: %w", s.path, err)
			}
			if at < 0 {
				break // a torn tail
			}
			// Counted as the reader will count them when it skips them.
			s.records += 1 + markers
			q.opts.Logger.Warn("hint segment has damaged records: they are skipped when read", "target", q.target, "file", s.path,
				"offset", off, "bytes", at-off, "reason", reason)
			off = at
			continue
		}
		s.records++
		if len(p) >= 8 {
			if created := createdOf(binary.LittleEndian.Uint64(p)); created.After(s.newest) {
				s.newest = created
			}
		}
		off, end = next, next
	}
	if end < size {
		q.opts.Logger.Warn("hint segment has a torn tail: ignored", "target", q.target, "file", s.path,
			"offset", end, "bytes", size-end)
	}
	s.size = end
	return nil
}

// Append stores float samples of namespace ns for the target: AppendBatch
// of floats alone.
func (q *Queue) Append(ns string, samples []storage.Sample) error {
	return q.AppendBatch(ns, storage.Batch{Floats: samples})
}

// AppendBatch stores batch b of namespace ns, samples of every kind, for
// the target in one record (docs/format/hints.md) and returns once it is
// durable (fsynced). An error means it is not stored; it fails on a
// histogram the payload encoding refuses.
func (q *Queue) AppendBatch(ns string, b storage.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	return q.append(func(buf []byte, now time.Time) ([]byte, error) {
		return appendBatchRecord(buf, now, ns, b)
	})
}

// append adds one record, built by rec, to the pending group commit and
// returns once it is durable.
func (q *Queue) append(rec func(b []byte, now time.Time) ([]byte, error)) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	b := q.pending
	if b == nil {
		b = &batch{done: make(chan struct{})}
		q.pending = b
	}
	now := q.opts.Now()
	buf, err := rec(b.buf, now)
	if err != nil {
		q.mu.Unlock()
		return fmt.Errorf("hint queue %s: %w", q.target, err)
	}
	b.starts = append(b.starts, len(b.buf))
	b.buf = buf
	b.records++
	b.newest = now
	q.mu.Unlock()

	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	select {
	case <-b.done: // written by the appender before us
		return b.err
	default:
	}
	q.mu.Lock()
	q.pending = nil // b: nobody takes it while we hold flushMu
	closed := q.closed
	q.mu.Unlock()
	if closed {
		b.err = ErrClosed
	} else {
		b.err = q.write(b)
	}
	close(b.done)
	if b.err == nil {
		q.m.appended.Inc(int64(b.records))
		q.m.totAppended.Add(int64(b.records))
		select {
		case q.notify <- struct{}{}:
		default:
		}
	}
	return b.err
}

// write puts one batch on disk and fsyncs it; flushMu is held. On
// failure the segment is cut back to its durable size, or abandoned (a
// new one is started) when that fails too.
func (q *Queue) write(b *batch) error {
	if q.af == nil {
		if err := q.newSegment(); err != nil {
			return err
		}
	}
	q.mu.Lock()
	active := q.segs[len(q.segs)-1]
	prev := active.size
	q.mu.Unlock()
	// The frames' checksums cover the segment's seq: a record copied
	// into another segment does not pass for one of it.
	for i, start := range b.starts {
		end := len(b.buf)
		if i+1 < len(b.starts) {
			end = b.starts[i+1]
		}
		commitlog.SealFrame(b.buf[:end], start, active.hseq)
	}
	_, err := q.af.Write(b.buf)
	if err == nil {
		err = q.af.Sync()
	}
	if err != nil {
		// Cut the segment back to what was durable; even then the state
		// of its page cache after a failed fsync is unknown, so appends go
		// on in a new segment.
		_ = q.af.Truncate(prev)
		q.closeActive()
		return fmt.Errorf("hint queue %s: write: %w", q.target, err)
	}
	q.mu.Lock()
	active.size += int64(len(b.buf))
	active.records += b.records
	active.newest = b.newest
	full := active.size >= q.opts.SegmentBytes
	q.mu.Unlock()
	q.enforceBytes()
	if full {
		q.closeActive()
	}
	q.gauges()
	return nil
}

func (q *Queue) newSegment() error {
	q.mu.Lock()
	seq := q.nextSeq
	q.nextSeq++
	q.mu.Unlock()
	s := &segment{seq: seq, path: filepath.Join(q.dir, segName(seq))}
	f, err := q.opts.FS.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("hint queue %s: create segment: %w", q.target, err)
	}
	hdr := appendSegHeader(nil, seq)
	if _, err := f.Write(hdr); err != nil {
		f.Close()
		_ = q.opts.FS.Remove(s.path)
		return fmt.Errorf("hint queue %s: write segment header: %w", q.target, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		_ = q.opts.FS.Remove(s.path)
		return fmt.Errorf("hint queue %s: sync segment header: %w", q.target, err)
	}
	if err := q.opts.FS.SyncDir(q.dir); err != nil {
		f.Close()
		_ = q.opts.FS.Remove(s.path)
		return fmt.Errorf("hint queue %s: sync dir: %w", q.target, err)
	}
	s.size, s.version, s.hdr, s.hseq = segHeaderSize, segVersion, commitlog.FrameHeaderSize, seq
	s.open = true
	q.mu.Lock()
	q.segs = append(q.segs, s)
	q.mu.Unlock()
	q.af = f
	return nil
}

// enforceBytes drops the oldest segments while the queue holds more than
// MaxBytes; the segment being written is never dropped.
func (q *Queue) enforceBytes() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.segs) > 1 && q.bytesLocked() > q.opts.MaxBytes {
		q.dropFirstLocked(DropBytes)
	}
}

// dropFirstLocked removes the oldest segment, counting its unread records.
func (q *Queue) dropFirstLocked(reason string) {
	s := q.segs[0]
	lost := s.records - q.skipped
	q.removeFirstLocked()
	if lost > 0 {
		q.m.drop(reason, int64(lost))
		q.opts.Logger.Warn("hints dropped", "target", q.target, "reason", reason, "records", lost, "file", s.path)
	}
}

func (q *Queue) removeFirstLocked() {
	s := q.segs[0]
	if s.rf != nil {
		s.rf.Close()
		s.rf, s.fr = nil, nil
	}
	_ = q.opts.FS.Remove(s.path)
	q.segs = q.segs[1:]
	q.off, q.skipped = 0, 0
}

func (q *Queue) bytesLocked() int64 {
	var n int64
	for _, s := range q.segs {
		n += s.size - segHeaderSize
	}
	if len(q.segs) > 0 && q.off > segHeaderSize {
		n -= q.off - segHeaderSize
	}
	return n
}

// Wait returns a channel signalled when new records became durable.
func (q *Queue) Wait() <-chan struct{} { return q.notify }

// Next returns the oldest unread record, or ok false when there is none.
// Records past MaxAge and corrupt ones are skipped (dropped, counted and
// logged) on the way. The record stays the oldest until Ack.
func (q *Queue) Next() (Record, bool, error) { return q.NextBatch(0) }

// NextBatch is Next, followed in the returned Record by the records
// after it in the same segment and namespace while they hold at most
// maxSamples samples in all: a replay sends them as one write. Ack
// consumes all of them.
func (q *Queue) NextBatch(maxSamples int) (Record, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return Record{}, false, ErrClosed
	}
	for len(q.segs) > 0 {
		s := q.segs[0]
		if q.off < segHeaderSize {
			q.off = segHeaderSize
		}
		active := s.open
		if q.off >= s.size {
			if active {
				return Record{}, false, nil
			}
			q.removeFirstLocked() // read to the end
			continue
		}
		if cutoff := q.opts.Now().Add(-q.opts.MaxAge); !s.newest.IsZero() && s.newest.Before(cutoff) && !active {
			q.dropFirstLocked(DropAge) // every record in it is too old
			continue
		}
		rec, err := q.readLocked(s, q.off)
		if err != nil {
			var corrupt *corruptError
			if !errors.As(err, &corrupt) {
				return Record{}, false, err
			}
			lost := 1
			if corrupt.skip > 0 {
				// An intact frame whose payload does not decode.
				q.off += corrupt.skip
				q.skipped++
			} else {
				// The frame is damaged, its length too perhaps: go on at
				// the next intact frame, found by its marker.
				at, markers, rerr := s.fr.Resync(q.off + 1)
				if rerr != nil {
					return Record{}, false, fmt.Errorf("hint queue %s: read %s: %w", q.target, s.path, rerr)
				}
				lost += markers
				if at < 0 {
					at = s.size
				}
				q.off = at
				q.skipped += lost
			}
			q.m.drop(DropCorrupt, int64(lost))
			q.opts.Logger.Warn("corrupt hint records skipped", "target", q.target, "file", s.path, "records", lost, "err", err)
			continue
		}
		cutoff := q.opts.Now().Add(-q.opts.MaxAge)
		if rec.Created.Before(cutoff) {
			q.m.drop(DropAge, 1)
			q.off += rec.Size
			q.skipped++
			continue
		}
		// Gather what follows while it is plainly good; anything else is
		// left for the next call, which deals with it as above.
		for len(rec.Samples)+len(rec.Histograms) < maxSamples {
			off := rec.off + rec.Size
			if off >= s.size {
				break
			}
			more, err := q.readLocked(s, off)
			if err != nil || more.Namespace != rec.Namespace || more.Created.Before(cutoff) ||
				len(rec.Samples)+len(rec.Histograms)+len(more.Samples)+len(more.Histograms) > maxSamples {
				break
			}
			rec.Samples = append(rec.Samples, more.Samples...)
			rec.Histograms = append(rec.Histograms, more.Histograms...)
			rec.Size += more.Size
			rec.frames++
		}
		return rec, true, nil
	}
	return Record{}, false, nil
}

type corruptError struct {
	skip int64 // bytes to skip to the next frame; 0: the frame is damaged
	err  error
}

func (e *corruptError) Error() string { return e.err.Error() }

// readLocked reads the record at offset off of s into buffers of its
// own: the samples of several records stay valid together.
func (q *Queue) readLocked(s *segment, off int64) (Record, error) {
	fr, err := s.frames(q.opts.FS)
	if err != nil {
		return Record{}, fmt.Errorf("hint queue %s: open %s: %w", q.target, s.path, err)
	}
	p, next, reason, err := fr.Frame(off)
	if err != nil {
		return Record{}, fmt.Errorf("hint queue %s: read %s: %w", q.target, s.path, err)
	}
	if reason != "" {
		return Record{}, &corruptError{err: errors.New(reason)}
	}
	size := next - off
	rec, _, err := decodeRecord(bytes.Clone(p), nil)
	if err != nil {
		return Record{}, &corruptError{skip: size, err: err}
	}
	rec.Size, rec.seq, rec.off, rec.frames = size, s.seq, off, 1
	return rec, nil
}

// Ack consumes the record(s) Next or NextBatch returned last. A record
// whose segment was dropped meanwhile (the byte bound) is ignored.
func (q *Queue) Ack(rec Record) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.segs) == 0 || q.segs[0].seq != rec.seq || q.off != rec.off {
		return
	}
	q.off += rec.Size
	q.skipped += rec.frames
	s := q.segs[0]
	if q.off >= s.size && !s.open {
		q.removeFirstLocked()
	}
	q.gaugesLocked()
}

// DropAll removes every hint of the queue (the target left the
// placement), counting them under reason.
func (q *Queue) DropAll(reason string) {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.closeActive()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.segs) > 0 {
		q.dropFirstLocked(reason)
	}
	q.gaugesLocked()
}

// Status is a queue's state, for metrics and the status endpoint.
type Status struct {
	Target string `json:"target"`
	// Bytes and Records not yet replayed.
	Bytes   int64 `json:"bytes"`
	Records int   `json:"records"`
	// OldestAgeSeconds is the age of the oldest hint not yet replayed; 0
	// when there is none.
	OldestAgeSeconds float64 `json:"oldestAgeSeconds"`
	Segments         int     `json:"segments"`
	// Since this process started: records appended and replayed, samples
	// replayed, and what was dropped by reason (docs/format/hints.md).
	Appended        int64            `json:"appended"`
	Replayed        int64            `json:"replayed"`
	ReplayedSamples int64            `json:"replayedSamples"`
	Dropped         map[string]int64 `json:"dropped"`
}

// Status returns the queue's current state.
func (q *Queue) Status() Status {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.statusLocked()
}

func (q *Queue) statusLocked() Status {
	st := Status{Target: q.target, Bytes: q.bytesLocked(), Segments: len(q.segs),
		Appended: q.m.totAppended.Load(), Replayed: q.m.totReplayed.Load(),
		ReplayedSamples: q.m.totReplayedSamples.Load(), Dropped: q.m.droppedTotals()}
	for _, s := range q.segs {
		st.Records += s.records
	}
	if len(q.segs) > 0 {
		st.Records -= q.skipped
		if t, ok := q.headCreatedLocked(); ok && st.Records > 0 {
			st.OldestAgeSeconds = q.opts.Now().Sub(t).Seconds()
		}
	}
	return st
}

func (q *Queue) gauges() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gaugesLocked()
}

func (q *Queue) gaugesLocked() {
	st := q.statusLocked()
	q.m.bytes.Update(float64(st.Bytes))
	q.m.records.Update(float64(st.Records))
	q.m.oldest.Update(st.OldestAgeSeconds)
}

// close closes the files; pending appenders get ErrClosed or their
// batch's outcome.
func (q *Queue) close() error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	var err error
	if q.af != nil {
		err = q.af.Close()
		q.af = nil
		q.segs[len(q.segs)-1].open = false
	}
	for _, s := range q.segs {
		if s.rf != nil {
			s.rf.Close()
			s.rf, s.fr = nil, nil
		}
	}
	return err
}

// closeActive closes the segment appends went to; the next append starts
// a new one. flushMu is held.
func (q *Queue) closeActive() {
	if q.af == nil {
		return
	}
	_ = q.af.Close()
	q.af = nil
	q.mu.Lock()
	for _, s := range q.segs {
		s.open = false
	}
	q.mu.Unlock()
}

// headCreatedLocked reads the created time of the oldest unread record
// (one small read; the page cache has it).
func (q *Queue) headCreatedLocked() (time.Time, bool) {
	for i, s := range q.segs {
		off := int64(segHeaderSize)
		if i == 0 && q.off > off {
			off = q.off
		}
		if off+s.hdr+8 > s.size {
			continue
		}
		if s.rf == nil {
			f, err := q.opts.FS.Open(s.path)
			if err != nil {
				return time.Time{}, false
			}
			s.rf = f
		}
		var b [8]byte
		if _, err := s.rf.ReadAt(b[:], off+s.hdr); err != nil {
			return time.Time{}, false
		}
		return createdOf(binary.LittleEndian.Uint64(b[:])), true
	}
	return time.Time{}, false
}
