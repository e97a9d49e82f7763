// Package memsnap is the file format of the restart snapshot: a copy of
// every shard's unflushed memory (per series its ID and encoded streams)
// that storage writes in the background after the commit log has grown,
// so that a restart after a crash loads it and replays only the commit
// log files written after it, instead of the whole log (issue 30: the
// replay was a restart's whole time, ~30 CPU s at 5 M series).
//
// The file is never the only copy of anything: the commit log files it
// covers are kept until their data is flushed, as without it, so a
// snapshot that fails any check here is ignored and the whole log
// replayed. Hence every part is checksummed and Decode checks the whole
// file (every section's CRC and structure) before the caller loads any
// of it. docs/format/restart-snapshot.md has the layout.
//
// This package knows bytes only; what the fields mean for recovery
// (which files are covered, when a snapshot may be used) is storage's (dbnode/storage/memsnap.go).
package memsnap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/tessera-tsdb/tessera/internal/decbuf"
	"hash/crc32"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
)

// Version is the format version this release writes. It reads it and
// versions 1 and 2. Version 1 sections hold one shard each: version 2
// sections hold series of any shards of one namespace, in the order the
// series were created, so that a restart creates them (and their index
// refs) in the order they had (see Writer). Version 3 headers also give,
// per namespace, each label's number of distinct values in each index
// block (Namespace.Values), so that a restart sizes the index's value
// tables once.
const Version = 3

var (
	headMagic = [4]byte{'T', 'S', 'R', 'S'}
	endMagic  = [4]byte{'T', 'S', 'R', 'E'}
)

// ErrCorrupt is wrapped by every decoding failure.
var ErrCorrupt = errors.New("corrupt restart snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header says what a snapshot covers.
type Header struct {
	CreatedMs int64
	NumShards uint32
	// CoveredSeq: every commit log file with a sequence number at or
	// below it had all its entries in memory when the memory was copied.
	CoveredSeq uint64
	// Files are the closed commit log files at or below CoveredSeq when
	// the snapshot was taken, with their sample time ranges: a restart
	// that skips replaying a file still needs its ranges to know when
	// the file may be deleted.
	Files []File
	// Namespaces are the namespaces of the snapshot; sections name a
	// namespace by its index here.
	Namespaces []Namespace
}

// File is one covered commit log file.
type File struct {
	Seq    uint64
	Ranges []Range
}

// Range is the sample time range of one namespace in a commit log file.
type Range struct {
	Namespace string
	Min, Max  int64
}

// Namespace is one namespace of the snapshot.
type Namespace struct {
	Name string
	// Values (version 3) are, for each of the namespace's index blocks
	// when the snapshot was taken, each label name's number of distinct
	// values: a hint the restart sizes its value tables by, never data.
	Values []BlockValues
}

// BlockValues is the distinct values of each label name in the index
// block starting at Start.
type BlockValues struct {
	Start int64
	Names []NameValues
}

// NameValues is one label name's number of distinct values.
type NameValues struct {
	Name   string
	Values uint64
}

// Series is one series' unflushed samples: floats as one encoding stream
// (nil when none), native histograms as histogram streams.
type Series struct {
	Shard      uint32
	ID         []byte
	Floats     []byte
	Histograms [][]byte
}

// Writer writes a snapshot: NewWriter (the header), then sections
// (BeginSection, Add for each series, EndSection), then Close (the
// trailer). The first error sticks and is returned by every later call.
//
// A section holds series of one namespace and any shards. Why not one
// shard a section (version 1): a restart loads the series in the file's
// order, and the index gives each new series the next ref, so shard
// order scattered the series of one instance (one job, one group) over
// the whole ref space, where they had been side by side: each of such a
// value's bitmaps then held a container per series instead of one for
// all. At 10 M series that value table was 70% of the restart's index
// stage, the stage every loader waited on. Written in the order the
// series were created, they come back in it.
type Writer struct {
	w        *bufio.Writer
	buf      []byte // the section being built
	count    uint32
	sections uint32
	series   uint64
	chain    uint32 // CRC of the header's and the sections' CRCs
	open     bool
	err      error
}

// NewWriter writes h to w and returns a Writer for the sections.
func NewWriter(w io.Writer, h Header) *Writer {
	sw := &Writer{w: bufio.NewWriterSize(w, 1<<20)}
	body := appendHeader(nil, h, Version)
	frame := append(headMagic[:0:0], headMagic[:]...)
	frame = binary.LittleEndian.AppendUint32(frame, Version)
	frame = binary.LittleEndian.AppendUint32(frame, uint32(len(body)))
	frame = append(frame, body...)
	crc := crc32.Checksum(frame, castagnoli)
	frame = binary.LittleEndian.AppendUint32(frame, crc)
	sw.chain = chainCRC(0, crc)
	_, sw.err = sw.w.Write(frame)
	return sw
}

func chainCRC(chain, crc uint32) uint32 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], crc)
	return crc32.Update(chain, castagnoli, b[:])
}

// appendHeader encodes h as version writes it (tests write older ones).
func appendHeader(b []byte, h Header, version uint32) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(h.CreatedMs))
	b = binary.LittleEndian.AppendUint32(b, h.NumShards)
	b = binary.LittleEndian.AppendUint64(b, h.CoveredSeq)
	b = binary.AppendUvarint(b, uint64(len(h.Files)))
	for _, f := range h.Files {
		b = binary.LittleEndian.AppendUint64(b, f.Seq)
		b = binary.AppendUvarint(b, uint64(len(f.Ranges)))
		for _, r := range f.Ranges {
			b = appendBytes(b, []byte(r.Namespace))
			b = binary.LittleEndian.AppendUint64(b, uint64(r.Min))
			b = binary.LittleEndian.AppendUint64(b, uint64(r.Max))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(h.Namespaces)))
	for _, ns := range h.Namespaces {
		b = appendBytes(b, []byte(ns.Name))
		if version < 3 {
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(ns.Values)))
		for _, bv := range ns.Values {
			b = binary.LittleEndian.AppendUint64(b, uint64(bv.Start))
			b = binary.AppendUvarint(b, uint64(len(bv.Names)))
			for _, nv := range bv.Names {
				b = appendBytes(b, []byte(nv.Name))
				b = binary.AppendUvarint(b, nv.Values)
			}
		}
	}
	return b
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// BeginSection starts a section of namespace ns (an index into
// Header.Namespaces).
func (w *Writer) BeginSection(ns uint16) {
	if w.err == nil && w.open {
		w.err = errors.New("memsnap: BeginSection inside a section")
	}
	w.open = true
	w.buf = binary.LittleEndian.AppendUint32(w.buf[:0], 0) // body length, set by EndSection
	w.buf = binary.LittleEndian.AppendUint16(w.buf, ns)
	w.count = 0
}

// Add appends one series of shard to the open section. The bytes are
// copied.
func (w *Writer) Add(shard uint32, id, floats []byte, hists [][]byte) {
	w.buf = binary.AppendUvarint(w.buf, uint64(shard))
	w.buf = appendBytes(w.buf, id)
	w.buf = appendBytes(w.buf, floats)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(hists)))
	for _, h := range hists {
		w.buf = appendBytes(w.buf, h)
	}
	w.count++
}

// EndSection writes the open section (nothing when it holds no series).
func (w *Writer) EndSection() error {
	if w.err != nil {
		return w.err
	}
	if !w.open {
		w.err = errors.New("memsnap: EndSection without BeginSection")
		return w.err
	}
	w.open = false
	if w.count == 0 {
		return nil
	}
	w.buf = binary.LittleEndian.AppendUint32(w.buf, w.count)
	binary.LittleEndian.PutUint32(w.buf, uint32(len(w.buf)-4))
	crc := crc32.Checksum(w.buf[4:], castagnoli)
	w.buf = binary.LittleEndian.AppendUint32(w.buf, crc)
	w.chain = chainCRC(w.chain, crc)
	w.sections++
	w.series += uint64(w.count)
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("memsnap: write section: %w", err)
	}
	return w.err
}

// Close writes the trailer and flushes. It does not close or sync the
// underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.open {
		return errors.New("memsnap: Close inside a section")
	}
	b := binary.LittleEndian.AppendUint32(nil, 0) // a zero length marks the trailer: no section is empty
	b = append(b, endMagic[:]...)
	b = binary.LittleEndian.AppendUint32(b, w.sections)
	b = binary.LittleEndian.AppendUint64(b, w.series)
	b = binary.LittleEndian.AppendUint32(b, w.chain)
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("memsnap: write trailer: %w", err)
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("memsnap: flush: %w", err)
	}
	return nil
}

// Series reports how many series the sections written so far hold.
func (w *Writer) Series() uint64 { return w.series }

// Snapshot is a decoded snapshot. Its sections alias the decoded bytes.
type Snapshot struct {
	Header   Header
	Sections []Section
	Series   uint64 // in all sections
}

// Section is series of one namespace.
type Section struct {
	NS    uint16
	Count uint32
	// shard is every series' shard in a version 1 section; a version 2
	// section names each series' shard (perSeries).
	shard     uint32
	perSeries bool
	body      []byte // the series, checked by Decode
}

// Each calls fn for every series of the section, in the order written.
// The slices alias the decoded bytes; Histograms is reused between calls.
// It stops at fn's first error and returns it.
func (s Section) Each(fn func(Series) error) error {
	d := newDecoder(s.body)
	var hs [][]byte
	for range s.Count {
		x := Series{Shard: s.shard}
		if s.perSeries {
			x.Shard = uint32(d.Uvarint("series shard"))
		}
		x.ID, x.Floats = d.Bytes("series ID"), d.Bytes("float stream")
		if len(x.Floats) == 0 {
			x.Floats = nil
		}
		nh := d.Uvarint("histogram stream count")
		hs = hs[:0]
		for j := uint64(0); j < nh && d.Err == nil; j++ {
			hs = append(hs, d.Bytes("histogram stream"))
		}
		if len(hs) > 0 {
			x.Histograms = hs
		}
		if d.Err != nil {
			return d.Err // Decode checked every section: not reached
		}
		if err := fn(x); err != nil {
			return err
		}
	}
	return nil
}

type decoder struct{ decbuf.Buf }

func newDecoder(b []byte) decoder { return decoder{decbuf.Buf{B: b, Fail: malformed}} }

func malformed(what string) error {
	return fmt.Errorf("%w: truncated or malformed %s", ErrCorrupt, what)
}

// count reads a count of items each at least min bytes long, refusing one
// the rest of the input cannot hold (no allocation from a corrupt count).
func (d *decoder) count(what string, min int) int {
	n := d.Uvarint(what)
	if d.Err == nil && n > uint64(len(d.B)/min) {
		d.Failf(what)
		return 0
	}
	return int(n)
}

// Decode checks b, a whole snapshot file, and decodes it: the header's
// and every section's checksum, every section's structure, the trailer's
// counts and checksum chain, and that nothing follows it. Any failure
// wraps ErrCorrupt; nothing of a failing snapshot may be used.
func Decode(b []byte) (*Snapshot, error) {
	d := newDecoder(b)
	magic := d.Take(4, "magic")
	if d.Err != nil || string(magic) != string(headMagic[:]) {
		return nil, fmt.Errorf("%w: not a restart snapshot (magic %q)", ErrCorrupt, magic)
	}
	version := d.U32("version")
	if d.Err == nil && (version == 0 || version > Version) {
		return nil, fmt.Errorf("%w: version %d, this release reads 1 to %d", ErrCorrupt, version, Version)
	}
	hlen := d.U32("header length")
	body := d.Take(int(hlen), "header")
	sum := d.U32("header checksum")
	if d.Err != nil {
		return nil, d.Err
	}
	crc := crc32.Checksum(b[:12+len(body)], castagnoli)
	if crc != sum {
		return nil, fmt.Errorf("%w: header checksum mismatch", ErrCorrupt)
	}
	chain := chainCRC(0, crc)
	h, err := decodeHeader(body, version)
	if err != nil {
		return nil, err
	}
	// The sections' frames in one pass (their lengths only), then their
	// checksums and structure on every core: one core took 0.9 s for a
	// 5 M-series snapshot, before any of it could load.
	var frames []frame
	for {
		n := d.U32("section length")
		if d.Err != nil {
			return nil, d.Err
		}
		if n == 0 {
			break // the trailer
		}
		sb := d.Take(int(n), "section")
		sum := d.U32("section checksum")
		if d.Err != nil {
			return nil, d.Err
		}
		frames = append(frames, frame{body: sb, sum: sum})
	}
	snap := &Snapshot{Header: h, Sections: make([]Section, len(frames))}
	crcs, err := checkSections(frames, h, version, snap.Sections)
	if err != nil {
		return nil, err
	}
	for i, crc := range crcs {
		chain = chainCRC(chain, crc)
		snap.Series += uint64(snap.Sections[i].Count)
	}
	if m := d.Take(4, "trailer magic"); d.Err != nil || string(m) != string(endMagic[:]) {
		return nil, fmt.Errorf("%w: no trailer", ErrCorrupt)
	}
	sections := d.U32("trailer section count")
	series := d.U64("trailer series count")
	tchain := d.U32("trailer checksum")
	if d.Err != nil {
		return nil, d.Err
	}
	switch {
	case sections != uint32(len(snap.Sections)) || series != snap.Series:
		return nil, fmt.Errorf("%w: trailer says %d sections and %d series, file holds %d and %d",
			ErrCorrupt, sections, series, len(snap.Sections), snap.Series)
	case tchain != chain:
		return nil, fmt.Errorf("%w: trailer checksum mismatch", ErrCorrupt)
	case len(d.B) != 0:
		return nil, fmt.Errorf("%w: %d bytes after the trailer", ErrCorrupt, len(d.B))
	}
	return snap, nil
}

// frame is one section's bytes and the checksum stored after them.
type frame struct {
	body []byte
	sum  uint32
}

// checkSections checks every frame's checksum and structure into out,
// in parallel, and returns their checksums; the error is the first
// failing section's (by its place in the file, as a check in order
// would find it).
func checkSections(frames []frame, h Header, version uint32, out []Section) ([]uint32, error) {
	crcs := make([]uint32, len(frames))
	errs := make([]error, len(frames))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), len(frames))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(frames) {
					return
				}
				crc := crc32.Checksum(frames[i].body, castagnoli)
				if crc != frames[i].sum {
					errs[i] = fmt.Errorf("%w: section %d checksum mismatch", ErrCorrupt, i)
					continue
				}
				crcs[i] = crc
				s, err := checkSection(frames[i].body, h, version)
				if err != nil {
					errs[i] = fmt.Errorf("section %d: %w", i, err)
					continue
				}
				out[i] = s
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return crcs, nil
}

func decodeHeader(b []byte, version uint32) (Header, error) {
	d := newDecoder(b)
	var h Header
	h.CreatedMs = int64(d.U64("created"))
	h.NumShards = d.U32("shard count")
	h.CoveredSeq = d.U64("covered sequence")
	nf := d.count("file count", 9)
	for range nf {
		f := File{Seq: d.U64("file sequence")}
		nr := d.count("range count", 17)
		for range nr {
			f.Ranges = append(f.Ranges, Range{Namespace: string(d.Bytes("range namespace")),
				Min: int64(d.U64("range min")), Max: int64(d.U64("range max"))})
		}
		h.Files = append(h.Files, f)
	}
	nn := d.count("namespace count", 1)
	for range nn {
		ns := Namespace{Name: string(d.Bytes("namespace name"))}
		if version >= 3 {
			nb := d.count("index block count", 9)
			for range nb {
				bv := BlockValues{Start: int64(d.U64("index block start"))}
				nv := d.count("label count", 2)
				for range nv {
					bv.Names = append(bv.Names, NameValues{Name: string(d.Bytes("label name")), Values: d.Uvarint("label values")})
				}
				ns.Values = append(ns.Values, bv)
			}
		}
		h.Namespaces = append(h.Namespaces, ns)
	}
	switch {
	case d.Err != nil:
		return Header{}, d.Err
	case len(d.B) != 0:
		return Header{}, fmt.Errorf("%w: %d bytes after the header", ErrCorrupt, len(d.B))
	case h.NumShards == 0:
		return Header{}, fmt.Errorf("%w: no shards", ErrCorrupt)
	case len(h.Namespaces) > 1<<16:
		return Header{}, fmt.Errorf("%w: %d namespaces", ErrCorrupt, len(h.Namespaces))
	}
	return h, nil
}

// checkSection walks a section's series of a snapshot of version, so
// that Each cannot fail later.
func checkSection(b []byte, h Header, version uint32) (Section, error) {
	least := 6 // namespace and count, in version 2
	if version == 1 {
		least = 10 // and the shard
	}
	if len(b) < least {
		return Section{}, fmt.Errorf("%w: section of %d bytes", ErrCorrupt, len(b))
	}
	d := newDecoder(b[:len(b)-4])
	s := Section{NS: d.U16("namespace"), Count: binary.LittleEndian.Uint32(b[len(b)-4:]), perSeries: version != 1}
	if version == 1 {
		s.shard = d.U32("shard")
	}
	s.body = d.B
	if int(s.NS) >= len(h.Namespaces) || s.shard >= h.NumShards {
		return Section{}, fmt.Errorf("%w: namespace %d shard %d out of range", ErrCorrupt, s.NS, s.shard)
	}
	if s.Count == 0 || uint64(s.Count) > uint64(len(d.B)) {
		return Section{}, fmt.Errorf("%w: %d series in %d bytes", ErrCorrupt, s.Count, len(d.B))
	}
	for range s.Count {
		if s.perSeries {
			if shard := d.Uvarint("series shard"); d.Err == nil && shard >= uint64(h.NumShards) {
				d.Err = fmt.Errorf("%w: series of shard %d, the snapshot has %d", ErrCorrupt, shard, h.NumShards)
			}
		}
		if id := d.Bytes("series ID"); d.Err == nil && len(id) == 0 {
			d.Err = fmt.Errorf("%w: empty series ID", ErrCorrupt)
		}
		d.Bytes("float stream")
		nh := d.count("histogram stream count", 1)
		for range nh {
			d.Bytes("histogram stream")
		}
		if d.Err != nil {
			return Section{}, d.Err
		}
	}
	if len(d.B) != 0 {
		return Section{}, fmt.Errorf("%w: %d bytes after the last series", ErrCorrupt, len(d.B))
	}
	return s, nil
}
