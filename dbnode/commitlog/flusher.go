package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// run is the flusher goroutine: the only code that touches the active
// file. It exits after handling reqClose.
func (l *Log) run() {
	defer close(l.exited)
	var tick <-chan time.Time
	if l.opts.Mode == ModeAsync {
		t := time.NewTicker(l.opts.FlushEvery)
		defer t.Stop()
		tick = t.C
	}
	syncOnKick := l.opts.Mode == ModeSync
	for {
		select {
		case <-l.kick:
			_ = l.flush(syncOnKick)
		case <-tick:
			_ = l.flush(true)
		case r := <-l.requests:
			err := l.flush(true)
			switch r.kind {
			case reqRotate:
				if err == nil {
					err = l.w.rotate()
				}
				r.done <- err
			case reqClose:
				if cerr := l.w.closeActive(); err == nil {
					err = cerr
				}
				r.done <- err
				return
			}
		}
	}
}

// flush writes everything queued as one group, and fsyncs if fsync is set
// (or leaves the data to the next fsync). It reports the result to the
// group's waiters and returns it.
func (l *Log) flush(fsync bool) error {
	l.mu.Lock()
	q := l.cur
	l.cur, l.spare = l.spare, nil
	l.mu.Unlock()

	var err error
	if len(q.batches) > 0 || (fsync && l.w.dirty) {
		err = l.w.writeGroup(q.batches, q.hists, fsync)
	}
	if err != nil && q.group == nil && len(q.batches) > 0 {
		n := 0
		for i, b := range q.batches {
			n += len(b) + len(q.hists[i])
		}
		l.log.Error("commit log: async write failed, entries lost", "entries", n, "err", err)
	}
	// Release the pending bytes before waking the group, so a writer that
	// returns and writes again is not refused for bytes already written.
	g, bytes := q.group, q.bytes
	q.reset()
	l.mu.Lock()
	l.pending -= bytes
	l.spare = q
	l.mu.Unlock()
	if g != nil {
		g.err = err
		close(g.done)
	}
	return err
}

// fileWriter is the active file and its ref tables. Only the flusher
// goroutine (and Open, before starting it) uses it.
type fileWriter struct {
	l       *Log
	file    vfs.File // nil between a failure and the next write
	seq     uint64
	path    string
	size    int64 // bytes of the file known good: written, and fsynced if the last flush asked for it
	dirty   bool  // written since the last fsync
	nextSeq uint64
	enc     *encoder
	buf     []byte
}

func newFileWriter(l *Log, nextSeq uint64) *fileWriter {
	return &fileWriter{l: l, nextSeq: max(nextSeq, 1), enc: newEncoder()}
}

// writeGroup encodes each batch as one record, rotating between records
// when the file is full, and writes (and fsyncs) them. Any failure fails
// the whole group: some of its records may have reached an earlier file,
// but none is reported durable.
func (w *fileWriter) writeGroup(batches [][]Entry, hists [][]HistEntry, fsync bool) error {
	entries := 0
	for i, b := range batches {
		if w.file == nil {
			if err := w.openNext(); err != nil {
				return err
			}
		}
		if w.size+int64(len(w.buf)) >= w.l.opts.MaxFileSize && w.size+int64(len(w.buf)) > headerSize {
			if err := w.rotate(); err != nil {
				return err
			}
		}
		w.buf = w.enc.appendRecord(w.buf, b, hists[i])
		entries += len(b) + len(hists[i])
	}
	if err := w.commit(fsync); err != nil {
		return err
	}
	w.l.m.records.Inc(int64(len(batches)))
	w.l.m.entries.Inc(int64(entries))
	if w.size >= w.l.opts.MaxFileSize {
		return w.rotate()
	}
	return nil
}

// commit writes the encoded records and, if fsync is set, fsyncs. On
// failure it undoes what it can (see fail).
func (w *fileWriter) commit(fsync bool) error {
	if w.file == nil {
		return nil
	}
	if len(w.buf) > 0 {
		n, err := w.file.Write(w.buf)
		w.l.m.bytesWritten.Inc(int64(n))
		w.l.written.Add(int64(n))
		if err != nil {
			return w.fail(fmt.Errorf("commitlog: write %d bytes to %s: %w", len(w.buf), w.path, err))
		}
		w.dirty = true
	}
	if fsync && w.dirty {
		if err := w.file.Sync(); err != nil {
			return w.fail(fmt.Errorf("commitlog: fsync %s: %w", w.path, err))
		}
		w.l.m.fsyncs.Inc(1)
		w.dirty = false
	}
	w.size += int64(len(w.buf))
	w.buf = w.buf[:0]
	w.enc.commit()
	return nil
}

// fail handles a write or fsync error: it truncates the file back to the
// last good record, closes it and leaves the writer without a file, so the
// next write starts a new file with fresh ref tables. The records of the
// failed group are dropped. It returns err.
func (w *fileWriter) fail(err error) error {
	l := w.l
	l.m.writeErrors.Inc(1)
	l.log.Error("commit log: write failed, rotating to a new file", "file", w.path, "good_size", w.size, "err", err)
	if terr := w.file.Truncate(w.size); terr != nil {
		// The half record stays as a torn tail of a file that is never
		// appended to again; replay cuts it off and goes on to later files.
		l.log.Error("commit log: truncate after failed write", "file", w.path, "err", terr)
	} else if serr := w.file.Sync(); serr != nil {
		l.log.Warn("commit log: fsync after truncate", "file", w.path, "err", serr)
	}
	if cerr := w.file.Close(); cerr != nil {
		l.log.Warn("commit log: close after failed write", "file", w.path, "err", cerr)
	}
	w.retire()
	return err
}

// retire hands the (already closed) active file over to Files and resets
// the per-file state.
func (w *fileWriter) retire() {
	w.l.addClosed(FileMeta{Path: w.path, Seq: w.seq, Ranges: w.enc.ranges()})
	w.file = nil
	w.buf = w.buf[:0]
	w.dirty = false
	w.enc.reset(0)
}

// closeActive writes and fsyncs what is buffered, closes the active file
// and retires it. It is a no-op without an active file.
func (w *fileWriter) closeActive() error {
	if w.file == nil {
		return nil
	}
	if err := w.commit(true); err != nil {
		return err // fail already retired the file
	}
	err := w.file.Close()
	if err != nil {
		// Everything was fsynced; a close error loses nothing.
		w.l.log.Warn("commit log: close", "file", w.path, "err", err)
	}
	w.retire()
	return nil
}

// rotate closes the active file (if any) and opens the next one.
func (w *fileWriter) rotate() error {
	if w.file != nil {
		if err := w.closeActive(); err != nil {
			return err
		}
		w.l.m.rotations.Inc(1)
	}
	return w.openNext()
}

// openNext creates the next file, writes its header and makes both
// durable (fsync of the file and of the directory). A sequence number is
// never reused, even when creating its file fails.
func (w *fileWriter) openNext() error {
	l := w.l
	seq := w.nextSeq
	w.nextSeq++
	path := filepath.Join(l.opts.Dir, fileName(seq))
	f, err := l.opts.FS.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("commitlog: create %s: %w", path, err)
	}
	hdr := appendHeader(w.buf[:0], seq)
	n, err := f.Write(hdr)
	l.m.bytesWritten.Inc(int64(n))
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = l.opts.FS.SyncDir(l.opts.Dir)
	}
	if err != nil {
		_ = f.Close()
		if rerr := l.opts.FS.Remove(path); rerr != nil {
			// Left behind with a torn header; Open removes it.
			l.log.Warn("commit log: remove half-created file", "file", path, "err", rerr)
		}
		return fmt.Errorf("commitlog: start %s: %w", path, err)
	}
	l.m.fsyncs.Inc(1)
	w.file, w.seq, w.path = f, seq, path
	w.size, w.dirty = headerSize, false
	w.buf = w.buf[:0]
	w.enc.reset(seq)
	l.setActive(path)
	return nil
}

// truncateFile cuts path to size and makes that durable.
func truncateFile(fs vfs.FS, path string, size int64) error {
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open commit log %s to truncate: %w", path, err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("truncate commit log %s to %d bytes: %w", path, size, err)
	}
	return nil
}
