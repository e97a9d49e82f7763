package fileset

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// pageRef locates one compressed page in the data file.
type pageRef struct {
	offset int64  // absolute offset in the data file
	clen   uint32 // compressed length
	ulen   uint32 // uncompressed length
	crc    uint32 // CRC32C of the compressed bytes
}

const pageRefSize = 8 + 4 + 4 + 4

// entry locates one series. Its ID lives in index.ids[idOff:idOff+idLen];
// one arena for all IDs keeps millions of series from costing millions of
// small allocations.
type entry struct {
	idOff    int
	idLen    uint32
	page     uint32
	off      uint32 // offset inside the uncompressed page
	size     uint32 // payload length
	samples  uint32
	checksum uint64 // xxhash64 of the payload
	kind     Kind   // KindUnknown in indexes written before version 4
}

// Kind says what a series' payload in a fileset holds, as far as the
// index knows: recorded per series since index version 4, so a query that
// must not read histograms (storage.QueryOptions.DeclineHistograms) can
// tell before reading the payload.
type Kind uint8

const (
	// KindUnknown: the index predates the kind (version 1 filesets,
	// index versions 2 and 3); only reading the payload tells.
	KindUnknown Kind = 0
	// KindFloats: float samples only.
	KindFloats Kind = 1
	// KindHistograms: native histogram samples, possibly floats too.
	KindHistograms Kind = 2
)

// payloadKind is the kind of a block payload, from its first byte
// (docs/format/encoding.md, "Block payload"): a container (0x83) holds
// at least one histogram stream; anything else is the sealed float form.
// The one byte of the payload the fileset layer looks at.
func payloadKind(data []byte) Kind {
	if len(data) > 0 && data[0] == payloadContainer {
		return KindHistograms
	}
	return KindFloats
}

// payloadContainer is encoding's first byte of a payload holding
// histogram streams (encoding.PayloadHoldsHistograms says the same).
const payloadContainer = 0x83

// minEntrySize is the smallest encoded entry (empty ID, one-byte varints),
// used to bound allocations driven by counts read from disk.
const minEntrySize = 1 + 1 + 1 + 1 + 1 + 8

// index is the decoded index file, kept in memory by a Reader.
type index struct {
	ids     []byte
	entries []entry
	pages   []pageRef
	kinds   bool // entries record their kind (index version 4)
	hist    int  // entries of KindHistograms
}

func (ix *index) id(i int) []byte {
	e := &ix.entries[i]
	return ix.ids[e.idOff : e.idOff+int(e.idLen) : e.idOff+int(e.idLen)]
}

// writeIndex streams the index file (without its trailer, which the caller's
// checksumming writer supplies) to w.
func writeIndex(w io.Writer, series []Series, entries []entry, pages []pageRef) error {
	b := appendHeader(make([]byte, 0, 64<<10), magicIndex)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(entries)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(pages)))
	flush := func(force bool) error {
		if len(b) < 60<<10 && !force {
			return nil
		}
		_, err := w.Write(b)
		b = b[:0]
		return err
	}
	for _, p := range pages {
		b = appendPageRef(b, p)
		if err := flush(false); err != nil {
			return err
		}
	}
	for i, e := range entries {
		b = appendEntry(b, series[i].ID, e)
		if err := flush(false); err != nil {
			return err
		}
	}
	return flush(true)
}

// appendSection appends a page table and the entries of series: the body
// of a version 1 index after its counts, and one shard's section of a
// version 2 index.
// With kinds (index version 4) each entry ends with its kind byte.
func appendSection(b []byte, series []Series, entries []entry, pages []pageRef, kinds bool) []byte {
	for _, p := range pages {
		b = appendPageRef(b, p)
	}
	for i, e := range entries {
		b = appendEntry(b, series[i].ID, e)
		if kinds {
			b = append(b, byte(e.kind))
		}
	}
	return b
}

func appendPageRef(b []byte, p pageRef) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(p.offset))
	b = binary.LittleEndian.AppendUint32(b, p.clen)
	b = binary.LittleEndian.AppendUint32(b, p.ulen)
	return binary.LittleEndian.AppendUint32(b, p.crc)
}

func appendEntry(b []byte, id []byte, e entry) []byte {
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	b = binary.AppendUvarint(b, uint64(e.page))
	b = binary.AppendUvarint(b, uint64(e.off))
	b = binary.AppendUvarint(b, uint64(e.size))
	b = binary.AppendUvarint(b, uint64(e.samples))
	return binary.LittleEndian.AppendUint64(b, e.checksum)
}

// decodeIndex parses and cross-checks a whole index file against the info
// file and the data file size. Every count read from disk is bounded by the
// bytes left before anything is allocated, so a corrupt file yields an
// error, never a panic or a giant allocation.
func decodeIndex(path string, b []byte, in info, dataSize int64) (*index, error) {
	body, err := unseal(path, b, magicIndex)
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", path, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	d := newDecoder(body)
	nSeries := d.U64("series count")
	nPages := d.U64("page count")
	if d.Err != nil {
		return nil, bad("%v", d.Err)
	}
	if nSeries != in.seriesCount || nPages != in.pageCount {
		return nil, bad("index has %d series in %d pages, info says %d in %d",
			nSeries, nPages, in.seriesCount, in.pageCount)
	}
	ix, samples, payload, err := decodeSection(&d, nSeries, nPages, int64(headerSize), dataSize, false)
	if err != nil {
		return nil, bad("%v", err)
	}
	if err := d.done(); err != nil {
		return nil, bad("%v", err)
	}
	if samples != in.sampleCount || payload != in.payloadBytes {
		return nil, bad("index totals %d samples / %d payload bytes, info says %d / %d",
			samples, payload, in.sampleCount, in.payloadBytes)
	}
	return ix, nil
}

// decodeSection decodes a page table of nPages and nSeries entries from d
// (a version 1 index after its counts, or one shard's section of a
// version 2 index) and checks every invariant: pages contiguous from
// dataStart to dataEnd in the data file, entries tiling the pages in ID
// order. With kinds (index version 4) each entry ends with its kind, which
// must be KindFloats or KindHistograms; without, entries are KindUnknown.
// It returns the index and its sample and payload totals. Every
// count is bounded by the bytes left before anything is allocated.
func decodeSection(d *decoder, nSeries, nPages uint64, dataStart, dataEnd int64, kinds bool) (*index, uint64, uint64, error) {
	bad := func(format string, args ...any) (*index, uint64, uint64, error) {
		return nil, 0, 0, fmt.Errorf(format, args...)
	}
	if nPages > uint64(len(d.B))/pageRefSize {
		return bad("page count %d exceeds file size", nPages)
	}
	ix := &index{pages: make([]pageRef, nPages), kinds: kinds}
	next := dataStart
	for i := range ix.pages {
		p := &ix.pages[i]
		p.offset = int64(d.U64("page offset"))
		p.clen = d.U32("page length")
		p.ulen = d.U32("page size")
		p.crc = d.U32("page checksum")
		if p.offset != next {
			return bad("page %d at offset %d, expected %d", i, p.offset, next)
		}
		if p.ulen > maxPageSize {
			return bad("page %d uncompressed size %d too large", i, p.ulen)
		}
		next += int64(p.clen)
	}
	if d.Err != nil {
		return bad("%v", d.Err)
	}
	if next != dataEnd {
		return bad("pages end at %d, data ends at %d", next, dataEnd)
	}
	if nSeries > uint64(len(d.B))/minEntrySize {
		return bad("series count %d exceeds file size", nSeries)
	}
	ix.entries = make([]entry, nSeries)
	ix.ids = make([]byte, 0, len(d.B)-int(nSeries)*(minEntrySize-1))
	var samples, payload uint64
	for i := range ix.entries {
		e := &ix.entries[i]
		idLen := d.Uvarint("id length")
		if idLen > uint64(len(d.B)) {
			return bad("series %d: id length %d exceeds file size", i, idLen)
		}
		id := d.Take(int(idLen), "id")
		page := d.Uvarint("page")
		off := d.Uvarint("offset")
		size := d.Uvarint("size")
		smp := d.Uvarint("samples")
		e.checksum = d.U64("checksum")
		if kinds {
			if k := d.Take(1, "kind"); k != nil {
				e.kind = Kind(k[0])
				if e.kind != KindFloats && e.kind != KindHistograms {
					return bad("series %d: kind %d", i, k[0])
				}
				if e.kind == KindHistograms {
					ix.hist++
				}
			}
		}
		if d.Err != nil {
			return bad("series %d: %v", i, d.Err)
		}
		if page >= nPages || off > math.MaxUint32 || size > math.MaxUint32 || smp > math.MaxUint32 {
			return bad("series %d: field out of range (page %d, offset %d, size %d, samples %d)", i, page, off, size, smp)
		}
		e.idOff, e.idLen = len(ix.ids), uint32(idLen)
		e.page, e.off, e.size, e.samples = uint32(page), uint32(off), uint32(size), uint32(smp)
		ix.ids = append(ix.ids, id...)
		if err := checkTiling(ix, i); err != nil {
			return bad("series %d: %v", i, err)
		}
		samples += smp
		payload += size
	}
	if nSeries > 0 {
		last := ix.entries[nSeries-1]
		if uint64(last.off)+uint64(last.size) != uint64(ix.pages[last.page].ulen) || uint64(last.page) != nPages-1 {
			return bad("last series does not end the last page")
		}
	} else if nPages != 0 {
		return bad("%d pages but no series", nPages)
	}
	return ix, samples, payload, nil
}

// checkTiling checks entry i against entry i-1: IDs strictly increasing,
// and payloads packed back to back, each page filled exactly before the
// next one starts. Together with the page checks this means every payload
// lies inside its page.
func checkTiling(ix *index, i int) error {
	e := ix.entries[i]
	if i == 0 {
		if e.page != 0 || e.off != 0 {
			return fmt.Errorf("first series at page %d offset %d", e.page, e.off)
		}
	} else {
		prev := ix.entries[i-1]
		if bytes.Compare(ix.id(i-1), ix.id(i)) >= 0 {
			return fmt.Errorf("ids not strictly increasing")
		}
		end := uint64(prev.off) + uint64(prev.size)
		switch {
		case e.page == prev.page:
			if uint64(e.off) != end {
				return fmt.Errorf("offset %d, expected %d", e.off, end)
			}
		case e.page == prev.page+1:
			if e.off != 0 || end != uint64(ix.pages[prev.page].ulen) {
				return fmt.Errorf("page %d not filled before page %d", prev.page, e.page)
			}
		default:
			return fmt.Errorf("page %d after page %d", e.page, prev.page)
		}
	}
	if uint64(e.off)+uint64(e.size) > uint64(ix.pages[e.page].ulen) {
		return fmt.Errorf("payload [%d,+%d) beyond page %d of %d bytes", e.off, e.size, e.page, ix.pages[e.page].ulen)
	}
	return nil
}
