package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/tessera-tsdb/tessera/internal/decbuf"
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
type partDecoder struct{ decbuf.Buf }

func newPartDecoder(b []byte) *partDecoder {
	return &partDecoder{decbuf.Buf{B: b, Fail: malformed}}
}

func malformed(what string) error {
	return fmt.Errorf("%w: truncated or malformed %s", ErrCorrupt, what)
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
	d := newPartDecoder(body[4:])
	if v := d.U32("version"); d.Err == nil && v != partVersion {
		return nil, PartHeader{}, fmt.Errorf("%w: version %d, this release reads %d", ErrCorrupt, v, partVersion)
	}
	var h PartHeader
	h.Namespace = string(d.Take(int(d.U16("namespace length")), "namespace"))
	h.Shard = d.U32("shard")
	h.NumShards = d.U32("shard count")
	if block {
		h.BlockStart = int64(d.U64("block start"))
		h.BlockSize = int64(d.U64("block size"))
	}
	if d.Err == nil && (h.NumShards == 0 || h.Shard >= h.NumShards) {
		d.Err = fmt.Errorf("%w: shard %d of %d", ErrCorrupt, h.Shard, h.NumShards)
	}
	if d.Err == nil && block && h.BlockSize <= 0 {
		d.Err = fmt.Errorf("%w: block size %d", ErrCorrupt, h.BlockSize)
	}
	return d, h, d.Err
}

// DecodeBlock checks and decodes a block part. The returned slices alias b.
func DecodeBlock(b []byte) (PartHeader, []fileset.Series, error) {
	d, h, err := openPart(b, blockMagic, true)
	if err != nil {
		return h, nil, err
	}
	n := d.U32("series count")
	if uint64(n) > uint64(len(d.B)) {
		return h, nil, fmt.Errorf("%w: %d series in %d bytes", ErrCorrupt, n, len(d.B))
	}
	out := make([]fileset.Series, 0, n)
	var prev []byte
	for i := uint32(0); i < n && d.Err == nil; i++ {
		id := d.Bytes("series ID")
		samples := d.Uvarint("sample count")
		data := d.Bytes("payload")
		if d.Err == nil && prev != nil && bytes.Compare(prev, id) >= 0 {
			d.Err = fmt.Errorf("%w: series %d out of ID order", ErrCorrupt, i)
		}
		prev = id
		out = append(out, fileset.Series{ID: id, Data: data, Samples: int(samples)})
	}
	if d.Err == nil && len(d.B) != 0 {
		d.Err = fmt.Errorf("%w: %d bytes after the last series", ErrCorrupt, len(d.B))
	}
	return h, out, d.Err
}

// DecodeUnflushed checks and decodes an unflushed part. The returned
// slices alias b.
func DecodeUnflushed(b []byte) (PartHeader, []storage.SeriesStream, error) {
	d, h, err := openPart(b, unflushedMagic, false)
	if err != nil {
		return h, nil, err
	}
	n := d.U32("series count")
	if uint64(n) > uint64(len(d.B)) {
		return h, nil, fmt.Errorf("%w: %d series in %d bytes", ErrCorrupt, n, len(d.B))
	}
	out := make([]storage.SeriesStream, 0, n)
	for i := uint32(0); i < n && d.Err == nil; i++ {
		s := storage.SeriesStream{ID: d.Bytes("series ID"), Stream: d.Bytes("float stream")}
		if len(s.Stream) == 0 {
			s.Stream = nil
		}
		nh := d.Uvarint("histogram stream count")
		if nh > uint64(len(d.B)) {
			d.Failf("histogram streams")
		}
		for j := uint64(0); j < nh && d.Err == nil; j++ {
			s.Histograms = append(s.Histograms, d.Bytes("histogram stream"))
		}
		out = append(out, s)
	}
	if d.Err == nil && len(d.B) != 0 {
		d.Err = fmt.Errorf("%w: %d bytes after the last series", ErrCorrupt, len(d.B))
	}
	return h, out, d.Err
}

// IsBlockPart reports whether b starts like a block part (else it may be
// an unflushed one); decoding still checks everything.
func IsBlockPart(b []byte) bool { return len(b) >= 4 && bytes.Equal(b[:4], blockMagic[:]) }
