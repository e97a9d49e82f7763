package commitlog

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// fileScan is what reading one file found.
type fileScan struct {
	seq     uint64
	size    int64 // bytes in the file
	good    int64 // end of the last intact record (or 0 for a bad header)
	records int
	entries int
	ranges  map[string]TimeRange
	badTail error // why the bytes after good were rejected; nil if none
}

// scanFile reads every intact record of the file at path, calling fn for
// each entry in order. It stops at the first torn or corrupt record and
// reports it in badTail (it never modifies the file). An error is returned
// only for I/O failures, an unsupported version, or an error from fn.
func scanFile(fs vfs.FS, path string, fn func(Entry) error) (fileScan, error) {
	var s fileScan
	f, err := fs.Open(path)
	if err != nil {
		return s, fmt.Errorf("open commit log %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return s, fmt.Errorf("stat commit log %s: %w", path, err)
	}
	s.size = info.Size()

	br := bufio.NewReaderSize(f, 1<<20)
	var hdr [headerSize]byte
	n, err := io.ReadFull(br, hdr[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return s, fmt.Errorf("read commit log header %s: %w", path, err)
	}
	s.seq, err = parseHeader(hdr[:n])
	if errors.Is(err, errBadHeader) {
		s.badTail = err
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("commit log %s: %w", path, err)
	}
	s.good = headerSize

	var (
		d       decoder
		payload []byte
		nsRange []TimeRange // by namespace ref
		nsSeen  []bool
	)
	for {
		var fh [frameHeaderSize]byte
		n, err := io.ReadFull(br, fh[:])
		if errors.Is(err, io.EOF) {
			break // clean end
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			s.badTail = fmt.Errorf("torn record header at offset %d (%d of %d bytes)", s.good, n, frameHeaderSize)
			break
		}
		if err != nil {
			return s, fmt.Errorf("read commit log %s at offset %d: %w", path, s.good, err)
		}
		l32, sum := ParseFrameHeader(fh[:])
		length := int64(l32)
		if length == 0 {
			// Never written: an empty payload's CRC is 0, so a run of zero
			// bytes (a file extended but not filled before a crash) would
			// otherwise parse as endless valid records.
			s.badTail = fmt.Errorf("zero-length record at offset %d", s.good)
			break
		}
		if length > s.size-s.good-frameHeaderSize {
			s.badTail = fmt.Errorf("torn record at offset %d: length %d, %d bytes left", s.good, length, s.size-s.good-frameHeaderSize)
			break
		}
		if int64(cap(payload)) < length {
			payload = make([]byte, length)
		}
		payload = payload[:length]
		if _, err := io.ReadFull(br, payload); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				s.badTail = fmt.Errorf("torn record at offset %d", s.good)
				break
			}
			return s, fmt.Errorf("read commit log %s at offset %d: %w", path, s.good, err)
		}
		if !FrameIntact(payload, sum) {
			s.badTail = fmt.Errorf("record at offset %d: checksum %08x, want %08x", s.good, crc32.Checksum(payload, castagnoli), sum)
			break
		}
		if err := d.decode(payload); err != nil {
			s.badTail = fmt.Errorf("record at offset %d: %w", s.good, err)
			break
		}
		for len(nsRange) < len(d.namespaces) {
			nsRange = append(nsRange, TimeRange{})
			nsSeen = append(nsSeen, false)
		}
		for _, e := range d.out {
			if fn != nil {
				if err := fn(e); err != nil {
					return s, fmt.Errorf("replay commit log %s: %w", path, err)
				}
			}
		}
		d.addRanges(nsRange, nsSeen)
		s.records++
		s.entries += len(d.out)
		s.good += frameHeaderSize + length
	}

	s.ranges = make(map[string]TimeRange, len(nsRange))
	for i, r := range nsRange {
		if nsSeen[i] {
			s.ranges[d.namespaces[i]] = r
		}
	}
	return s, nil
}
