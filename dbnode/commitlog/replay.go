package commitlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Span is a byte range [Start, End) of a commit log file that replay
// skipped because it held no intact record.
type Span struct {
	Start, End int64
	Reason     string
}

// fileScan is what reading one file found.
type fileScan struct {
	seq     uint64
	version uint32
	size    int64 // bytes in the file
	good    int64 // end of the last intact record before the tail (or 0 for a bad header and nothing after)
	records int
	entries int
	ranges  map[string]TimeRange
	badTail error // why the bytes after good were rejected; nil if none

	// skipped are damaged ranges followed by at least one intact record:
	// mid-file corruption, as opposed to a torn tail.
	skipped        []Span
	skippedRecords int // records (frame starts) seen inside skipped ranges, at least one per range
	unresolved     int // entries of intact records whose series was defined in a skipped range
}

func (s *fileScan) skippedBytes() int64 {
	var n int64
	for _, sp := range s.skipped {
		n += sp.End - sp.Start
	}
	return n
}

// window reads a file through ReadAt with a buffer that slides forward,
// so replay can step back and search (resync) without reading the file
// into memory.
type window struct {
	f    io.ReaderAt
	size int64
	buf  []byte
	off  int64 // file offset of buf[0]
}

const windowSize = 1 << 20

// at returns the n bytes at off (off+n <= size). The slice is valid until
// the next call.
func (w *window) at(off int64, n int) ([]byte, error) {
	if off >= w.off && off+int64(n) <= w.off+int64(len(w.buf)) {
		return w.buf[off-w.off : off-w.off+int64(n)], nil
	}
	want := int(min(max(int64(n), windowSize), w.size-off))
	if cap(w.buf) < want {
		w.buf = make([]byte, want)
	}
	w.buf = w.buf[:want]
	got, err := w.f.ReadAt(w.buf, off)
	if got < want {
		w.buf, w.off = w.buf[:0], 0
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %d bytes at offset %d: %w", want, off, err)
	}
	w.off = off
	return w.buf[:n], nil
}

// FrameReader checks the frames of one file written in the commit log's
// framing (version 1: length and CRC32-C; version 2: marker, length and
// a checksum over the file's seq, the length and the payload) and finds
// the next intact frame after damage. The commit log's replay and the
// client's hint queue (docs/format/hints.md) read their files with it,
// so a corrupt byte costs both only the record it is in.
type FrameReader struct {
	w       window
	seq     uint64
	version uint32
}

// NewFrameReader reads the frames of the first size bytes of r, a file of
// the given framing version (1 or 2) whose header carries seq.
func NewFrameReader(r io.ReaderAt, size int64, version uint32, seq uint64) *FrameReader {
	return &FrameReader{w: window{f: r, size: size}, seq: seq, version: version}
}

// SetSize changes how many bytes of the file may be read: a file being
// appended to grows. Bytes before the old size must not have changed.
func (fr *FrameReader) SetSize(size int64) {
	fr.w.size = size
	if fr.w.off+int64(len(fr.w.buf)) > size {
		fr.w.buf, fr.w.off = fr.w.buf[:0], 0
	}
}

// HeaderSize is the size of a frame header in this reader's version.
func (fr *FrameReader) HeaderSize() int64 {
	if fr.version == 1 {
		return frameHeaderSizeV1
	}
	return frameHeaderSize
}

// Frame checks the frame starting at off. It returns the payload (valid
// until the next call) and the offset after the frame, or reason != ""
// when there is no intact frame there (err is for I/O failures only).
func (fr *FrameReader) Frame(off int64) (payload []byte, next int64, reason string, err error) {
	w := &fr.w
	hs := fr.HeaderSize()
	if w.size-off < hs {
		return nil, 0, fmt.Sprintf("torn record header at offset %d (%d of %d bytes)", off, w.size-off, hs), nil
	}
	h, err := w.at(off, int(hs))
	if err != nil {
		return nil, 0, "", err
	}
	var length int64
	var sum uint32
	if fr.version == 1 {
		length, sum = int64(binary.LittleEndian.Uint32(h)), binary.LittleEndian.Uint32(h[4:])
	} else {
		if string(h[:4]) != frameMarker {
			return nil, 0, fmt.Sprintf("no record marker at offset %d", off), nil
		}
		length, sum = int64(binary.LittleEndian.Uint32(h[4:])), binary.LittleEndian.Uint32(h[8:])
	}
	if length == 0 {
		// Never written: an empty payload's CRC is 0, so a run of zero
		// bytes (a file extended but not filled before a crash) would
		// otherwise parse as endless valid version 1 records.
		return nil, 0, fmt.Sprintf("zero-length record at offset %d", off), nil
	}
	if length > w.size-off-hs {
		return nil, 0, fmt.Sprintf("torn record at offset %d: length %d, %d bytes left", off, length, w.size-off-hs), nil
	}
	payload, err = w.at(off+hs, int(length))
	if err != nil {
		return nil, 0, "", err
	}
	var got uint32
	if fr.version == 1 {
		got = crc32.Checksum(payload, castagnoli)
	} else {
		got = frameSum(fr.seq, payload)
	}
	if got != sum {
		return nil, 0, fmt.Sprintf("record at offset %d: checksum %08x, want %08x", off, got, sum), nil
	}
	return payload, off + hs + length, "", nil
}

// Resync finds the first offset >= from where an intact frame starts, or
// -1. Version 2 frames are found by their marker; version 1 frames have
// none, so every offset is tried. Either way a candidate counts only if
// its checksum holds (callers also decode it). It also returns the
// number of frame markers passed over: the records lost in between.
func (fr *FrameReader) Resync(from int64) (at int64, markers int, err error) {
	size := fr.w.size
	if fr.version == 1 {
		for off := from; off+frameHeaderSizeV1 < size; off++ {
			if _, _, reason, err := fr.Frame(off); err != nil {
				return -1, 0, err
			} else if reason == "" {
				return off, 0, nil
			}
		}
		return -1, 0, nil
	}
	for pos := from; pos+frameHeaderSize < size; {
		n := int(min(windowSize, size-pos))
		b, err := fr.w.at(pos, n)
		if err != nil {
			return -1, markers, err
		}
		i := bytes.Index(b, []byte(frameMarker))
		if i < 0 {
			if pos+int64(n) >= size {
				break
			}
			pos += int64(n - len(frameMarker) + 1) // a marker may straddle the window's end
			continue
		}
		cand := pos + int64(i)
		if _, _, reason, err := fr.Frame(cand); err != nil {
			return -1, markers, err
		} else if reason == "" {
			return cand, markers, nil
		}
		markers++
		pos = cand + 1
	}
	return -1, markers, nil
}

// scanFile reads every intact record of the file at path, calling onRecord
// with the entries of each, in order. After a damaged record it
// resynchronises on the next intact one (see resync) and goes on; damage
// with no intact record after it is the file's bad tail. It never
// modifies the file. An error is returned only for I/O failures, an
// unsupported version, or an error from onRecord.
//
// nameSeq is the seq in the file's name: with a damaged header it is the
// seq version 2 frames are checked against.
func scanFile(fs vfs.FS, path string, nameSeq uint64, onRecord func([]Entry, []HistEntry) error) (fileScan, error) {
	f, err := fs.Open(path)
	if err != nil {
		return fileScan{}, fmt.Errorf("open commit log %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fileScan{}, fmt.Errorf("stat commit log %s: %w", path, err)
	}
	s, err := scan(f, info.Size(), nameSeq, onRecord)
	if err != nil {
		return s, fmt.Errorf("commit log %s: %w", path, err)
	}
	return s, nil
}

// scan is scanFile over any reader of size bytes.
func scan(r io.ReaderAt, size int64, nameSeq uint64, onRecord func([]Entry, []HistEntry) error) (fileScan, error) {
	s := fileScan{size: size}
	hdr := make([]byte, min(headerSize, size))
	if n, err := r.ReadAt(hdr, 0); n < len(hdr) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return s, fmt.Errorf("read header: %w", err)
	}
	var err error
	s.seq, s.version, err = parseHeader(hdr)
	off := int64(headerSize)
	var reason string
	switch {
	case errors.Is(err, errBadHeader):
		// The records after a damaged header may be intact: look for
		// version 2 frames of this file's seq.
		s.seq, s.version = nameSeq, fileVersion
		reason, off = err.Error(), 0
	case err != nil:
		return s, err
	default:
		s.good = headerSize
	}
	fr := NewFrameReader(r, size, s.version, s.seq)
	d := decoder{limit: uint64(s.size), version: s.version, guess: reason != ""}

	var (
		nsRange []TimeRange // by namespace ref
		nsSeen  []bool
	)
	for {
		if reason == "" {
			if off == s.size {
				break // clean end
			}
			payload, next, why, err := fr.Frame(off)
			if err != nil {
				return s, err
			}
			if why == "" {
				if derr := d.decode(payload); derr != nil {
					why = fmt.Sprintf("record at offset %d: %v", off, derr)
				}
			}
			if why == "" {
				for len(nsRange) < len(d.namespaces) {
					nsRange = append(nsRange, TimeRange{})
					nsSeen = append(nsSeen, false)
				}
				if onRecord != nil && len(d.out)+len(d.hout) > 0 {
					if err := onRecord(d.out, d.hout); err != nil {
						return s, fmt.Errorf("replay: %w", err)
					}
				}
				d.addRanges(nsRange, nsSeen)
				s.records++
				s.entries += len(d.out) + len(d.hout)
				s.unresolved += d.unresolved
				off = next
				s.good = off
				continue
			}
			reason = why
		}
		// No intact record at off: look for the next one.
		from := max(off+1, headerSize)
		at, markers, err := fr.Resync(from)
		if err != nil {
			return s, err
		}
		if at < 0 {
			s.badTail = errors.New(reason)
			break
		}
		s.skipped = append(s.skipped, Span{Start: off, End: at, Reason: reason})
		if off >= headerSize {
			markers++ // the record that should have started at off
		}
		s.skippedRecords += markers
		if at > headerSize {
			d.skipped() // records (and the definitions in them) were lost
		}
		off, reason = at, ""
	}

	s.ranges = make(map[string]TimeRange, len(nsRange))
	for i, r := range nsRange {
		if nsSeen[i] {
			s.ranges[d.namespaces[i].name] = r
		}
	}
	return s, nil
}
