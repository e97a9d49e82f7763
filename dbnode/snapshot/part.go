package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// A part is the portable form of one shard's data that a snapshot holds
// and a backup uploads: a sealed block of one shard (BlockPart) or a
// shard's unflushed memory (UnflushedPart). It is self-describing
// (namespace, shard, the source's shard count, block range) and framed
// with a CRC32C trailer; its bytes depend only on its content, so two
// replicas holding the same block make the same part and a backup stores
// it once. docs/format/backup.md has the layout.

// ErrCorrupt is wrapped by every decoding failure of a part.
var ErrCorrupt = errors.New("corrupt backup part")

var (
	blockMagic     = [4]byte{'T', 'S', 'B', 'B'}
	unflushedMagic = [4]byte{'T', 'S', 'B', 'U'}
)

const partVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// PartHeader says whose data a part holds.
type PartHeader struct {
	Namespace string
	Shard     uint32
	NumShards uint32 // of the cluster the part came from
	// BlockStart and BlockSize (unix ms, ms) for a block part; 0 for an
	// unflushed one.
	BlockStart int64
	BlockSize  int64
}

func appendHeader(b []byte, magic [4]byte, h PartHeader, block bool) []byte {
	b = append(b, magic[:]...)
	b = binary.LittleEndian.AppendUint32(b, partVersion)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h.Namespace)))
	b = append(b, h.Namespace...)
	b = binary.LittleEndian.AppendUint32(b, h.Shard)
	b = binary.LittleEndian.AppendUint32(b, h.NumShards)
	if block {
		b = binary.LittleEndian.AppendUint64(b, uint64(h.BlockStart))
		b = binary.LittleEndian.AppendUint64(b, uint64(h.BlockSize))
	}
	return b
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func seal(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// EncodeBlock makes the block part of series (sorted by ID, payloads as
// stored in the fileset).
func EncodeBlock(h PartHeader, series []fileset.Series) []byte {
	size := 64 + len(h.Namespace)
	for _, s := range series {
		size += len(s.ID) + len(s.Data) + 16
	}
	b := appendHeader(make([]byte, 0, size), blockMagic, h, true)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(series)))
	for _, s := range series {
		b = appendBytes(b, s.ID)
		b = binary.AppendUvarint(b, uint64(s.Samples))
		b = appendBytes(b, s.Data)
	}
	return seal(b)
}

// EncodeUnflushed makes the unflushed part of series (sorted by ID).
func EncodeUnflushed(h PartHeader, series []storage.SeriesStream) []byte {
	h.BlockStart, h.BlockSize = 0, 0
	size := 64 + len(h.Namespace)
	for _, s := range series {
		size += len(s.ID) + len(s.Stream) + 16
		for _, x := range s.Histograms {
			size += len(x) + 8
		}
	}
	b := appendHeader(make([]byte, 0, size), unflushedMagic, h, false)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(series)))
	for _, s := range series {
		b = appendBytes(b, s.ID)
		b = appendBytes(b, s.Stream)
		b = binary.AppendUvarint(b, uint64(len(s.Histograms)))
		for _, x := range s.Histograms {
			b = appendBytes(b, x)
		}
	}
	return seal(b)
}

// partDecoder reads a part, remembering the first failure.
type partDecoder struct {
	b   []byte
	err error
}

func (d *partDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or malformed %s", ErrCorrupt, what)
	}
}

func (d *partDecoder) take(n int, what string) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.fail(what)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *partDecoder) u16(what string) uint16 {
	v := d.take(2, what)
	if v == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(v)
}

func (d *partDecoder) u32(what string) uint32 {
	v := d.take(4, what)
	if v == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(v)
}

func (d *partDecoder) u64(what string) uint64 {
	v := d.take(8, what)
	if v == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(v)
}

func (d *partDecoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *partDecoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if n > uint64(len(d.b)) {
		d.fail(what)
		return nil
	}
	return d.take(int(n), what)
}

// open checks the trailer and the header and returns a decoder positioned
// after the header.
func openPart(b []byte, magic [4]byte, block bool) (*partDecoder, PartHeader, error) {
	if len(b) < 12 {
		return nil, PartHeader{}, fmt.Errorf("%w: %d bytes is too short", ErrCorrupt, len(b))
	}
	body, trailer := b[:len(b)-4], b[len(b)-4:]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(trailer); got != want {
		return nil, PartHeader{}, fmt.Errorf("%w: checksum mismatch (computed %08x, trailer says %08x)", ErrCorrupt, got, want)
	}
	if !bytes.Equal(body[:4], magic[:]) {
		return nil, PartHeader{}, fmt.Errorf("%w: magic %q, want %q", ErrCorrupt, body[:4], magic[:])
	}
	d := &partDecoder{b: body[4:]}
	if v := d.u32("version"); d.err == nil && v != partVersion {
		return nil, PartHeader{}, fmt.Errorf("%w: version %d, this release reads %d", ErrCorrupt, v, partVersion)
	}
	var h PartHeader
	h.Namespace = string(d.take(int(d.u16("namespace length")), "namespace"))
	h.Shard = d.u32("shard")
	h.NumShards = d.u32("shard count")
	if block {
		h.BlockStart = int64(d.u64("block start"))
		h.BlockSize = int64(d.u64("block size"))
	}
	if d.err == nil && (h.NumShards == 0 || h.Shard >= h.NumShards) {
		d.err = fmt.Errorf("%w: shard %d of %d", ErrCorrupt, h.Shard, h.NumShards)
	}
	if d.err == nil && block && h.BlockSize <= 0 {
		d.err = fmt.Errorf("%w: block size %d", ErrCorrupt, h.BlockSize)
	}
	return d, h, d.err
}

// DecodeBlock checks and decodes a block part. The returned slices alias b.
func DecodeBlock(b []byte) (PartHeader, []fileset.Series, error) {
	d, h, err := openPart(b, blockMagic, true)
	if err != nil {
		return h, nil, err
	}
	n := d.u32("series count")
	if uint64(n) > uint64(len(d.b)) {
		return h, nil, fmt.Errorf("%w: %d series in %d bytes", ErrCorrupt, n, len(d.b))
	}
	out := make([]fileset.Series, 0, n)
	var prev []byte
	for i := uint32(0); i < n && d.err == nil; i++ {
		id := d.bytes("series ID")
		samples := d.uvarint("sample count")
		data := d.bytes("payload")
		if d.err == nil && prev != nil && bytes.Compare(prev, id) >= 0 {
			d.err = fmt.Errorf("%w: series %d out of ID order", ErrCorrupt, i)
		}
		prev = id
		out = append(out, fileset.Series{ID: id, Data: data, Samples: int(samples)})
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d bytes after the last series", ErrCorrupt, len(d.b))
	}
	return h, out, d.err
}

// DecodeUnflushed checks and decodes an unflushed part. The returned
// slices alias b.
func DecodeUnflushed(b []byte) (PartHeader, []storage.SeriesStream, error) {
	d, h, err := openPart(b, unflushedMagic, false)
	if err != nil {
		return h, nil, err
	}
	n := d.u32("series count")
	if uint64(n) > uint64(len(d.b)) {
		return h, nil, fmt.Errorf("%w: %d series in %d bytes", ErrCorrupt, n, len(d.b))
	}
	out := make([]storage.SeriesStream, 0, n)
	for i := uint32(0); i < n && d.err == nil; i++ {
		s := storage.SeriesStream{ID: d.bytes("series ID"), Stream: d.bytes("float stream")}
		if len(s.Stream) == 0 {
			s.Stream = nil
		}
		nh := d.uvarint("histogram stream count")
		if nh > uint64(len(d.b)) {
			d.fail("histogram streams")
		}
		for j := uint64(0); j < nh && d.err == nil; j++ {
			s.Histograms = append(s.Histograms, d.bytes("histogram stream"))
		}
		out = append(out, s)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d bytes after the last series", ErrCorrupt, len(d.b))
	}
	return h, out, d.err
}

// IsBlockPart reports whether b starts like a block part (else it may be
// an unflushed one); decoding still checks everything.
func IsBlockPart(b []byte) bool { return len(b) >= 4 && bytes.Equal(b[:4], blockMagic[:]) }
