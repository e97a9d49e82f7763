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

// frameAt checks the frame starting at off. It returns the payload and
// the offset after the frame, or reason != "" when there is no intact
// frame there (err is for I/O failures only).
func (s *fileScan) frameAt(w *window, off int64) (payload []byte, next int64, reason string, err error) {
	hs := int64(frameHeaderSize)
	if s.version == 1 {
		hs = frameHeaderSizeV1
	}
	if s.size-off < hs {
		return nil, 0, fmt.Sprintf("torn record header at offset %d (%d of %d bytes)", off, s.size-off, hs), nil
	}
	h, err := w.at(off, int(hs))
	if err != nil {
		return nil, 0, "", err
	}
	var length int64
	var sum uint32
	if s.version == 1 {
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
	if length > s.size-off-hs {
		return nil, 0, fmt.Sprintf("torn record at offset %d: length %d, %d bytes left", off, length, s.size-off-hs), nil
	}
	payload, err = w.at(off+hs, int(length))
	if err != nil {
		return nil, 0, "", err
	}
	var got uint32
	if s.version == 1 {
		got = crc32.Checksum(payload, castagnoli)
	} else {
		got = frameSum(s.seq, payload)
	}
	if got != sum {
		return nil, 0, fmt.Sprintf("record at offset %d: checksum %08x, want %08x", off, got, sum), nil
	}
	return payload, off + hs + length, "", nil
}

// resync finds the first offset >= from where an intact frame starts, or
// -1. Version 2 frames are found by their marker; version 1 frames have
// none, so every offset is tried. Either way a candidate counts only if
// its checksum holds (and, in the caller, if it decodes). It also returns
// the number of frame markers passed over: the records lost in between.
func (s *fileScan) resync(w *window, from int64) (at int64, markers int, err error) {
	if s.version == 1 {
		for off := from; off+frameHeaderSizeV1 < s.size; off++ {
			if _, _, reason, err := s.frameAt(w, off); err != nil {
				return -1, 0, err
			} else if reason == "" {
				return off, 0, nil
			}
		}
		return -1, 0, nil
	}
	for pos := from; pos+frameHeaderSize < s.size; {
		n := int(min(windowSize, s.size-pos))
		b, err := w.at(pos, n)
		if err != nil {
			return -1, markers, err
		}
		i := bytes.Index(b, []byte(frameMarker))
		if i < 0 {
			if pos+int64(n) >= s.size {
				break
			}
			pos += int64(n - len(frameMarker) + 1) // a marker may straddle the window's end
			continue
		}
		cand := pos + int64(i)
		if _, _, reason, err := s.frameAt(w, cand); err != nil {
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
func scanFile(fs vfs.FS, path string, nameSeq uint64, onRecord func([]Entry) error) (fileScan, error) {
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
func scan(r io.ReaderAt, size int64, nameSeq uint64, onRecord func([]Entry) error) (fileScan, error) {
	s := fileScan{size: size}
	w := &window{f: r, size: s.size}

	hdr, err := w.at(0, int(min(headerSize, s.size)))
	if err != nil {
		return s, fmt.Errorf("read header: %w", err)
	}
	s.seq, s.version, err = parseHeader(hdr)
	d := decoder{limit: uint64(s.size)}
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

	var (
		nsRange []TimeRange // by namespace ref
		nsSeen  []bool
	)
	for {
		if reason == "" {
			if off == s.size {
				break // clean end
			}
			payload, next, why, err := s.frameAt(w, off)
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
				if onRecord != nil && len(d.out) > 0 {
					if err := onRecord(d.out); err != nil {
						return s, fmt.Errorf("replay: %w", err)
					}
				}
				d.addRanges(nsRange, nsSeen)
				s.records++
				s.entries += len(d.out)
				s.unresolved += d.unresolved
				off = next
				s.good = off
				continue
			}
			reason = why
		}
		// No intact record at off: look for the next one.
		from := max(off+1, headerSize)
		at, markers, err := s.resync(w, from)
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
