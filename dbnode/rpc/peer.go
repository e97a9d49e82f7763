package rpc

import (
	"encoding/binary"
)

// Peer bootstrap messages. A joining node first asks a peer which sealed
// blocks it holds (BlockMetadata), compares digests with what it already
// has, then pages through each block it lacks as stored (FetchBlock: no
// decode and re-encode on either side) and finally through the peer's
// unflushed in-memory data (FetchUnflushed). Every page is bounded by
// MaxBytes, so neither side holds more than one page of a shard in memory.

// BlockMetadataRequest asks for the flushed blocks of Shards of Namespace.
// Every shard must be readable on the node.
type BlockMetadataRequest struct {
	Namespace string
	Shards    []uint32
}

// BlockMeta describes one flushed (fileset) block of a shard.
type BlockMeta struct {
	BlockStart int64 // unix ms
	Volume     uint32
	Series     uint32
	Samples    uint32
	// Digest is xxhash64 over the block's (ID, checksum) pairs in ID
	// order: equal digests mean identical block contents.
	Digest uint64
}

// ShardBlocks are the flushed blocks of one shard, by BlockStart.
type ShardBlocks struct {
	Shard  uint32
	Blocks []BlockMeta
}

// BlockMetadataResponse holds one ShardBlocks per distinct requested
// shard, in request order.
type BlockMetadataResponse struct {
	Shards []ShardBlocks
}

// FetchBlockRequest asks for one page of the series of a flushed block:
// those with ID > After (all when After is empty), in ID order, until
// their data adds up to MaxBytes (at least one series). MaxBytes 0 means
// the server's default.
type FetchBlockRequest struct {
	Namespace  string
	Shard      uint32
	BlockStart int64
	After      []byte
	MaxBytes   uint32
}

// BlockSeries is one series of a block as stored in its fileset: Data is
// the sealed payload, not re-encoded.
type BlockSeries struct {
	ID      []byte
	Data    []byte
	Samples uint32
}

// FetchBlockResponse is one page of a block. More says another page
// follows: ask again with After set to the last series' ID.
type FetchBlockResponse struct {
	Series []BlockSeries
	More   bool
}

// FetchUnflushedRequest asks for one page of a shard's data not yet
// flushed to filesets, paged like FetchBlockRequest.
type FetchUnflushedRequest struct {
	Namespace string
	Shard     uint32
	After     []byte
	MaxBytes  uint32
}

// FetchUnflushedResponse is one page of unflushed series, in ID order,
// each stream readable with encoding.NewIterator. More as in
// FetchBlockResponse.
type FetchUnflushedResponse struct {
	Series []FetchedSeries
	More   bool
}

// digestLen is the fixed little-endian size of a BlockMeta digest.
const digestLen = 8

// minBlockMetaLen is the smallest encoded BlockMeta: four one-byte
// varints and the digest.
const minBlockMetaLen = 4 + digestLen

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func (r *reader) bool(what string) bool {
	switch r.u8(what) {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("%s byte is neither 0 nor 1", what)
	return false
}

func (r *reader) u64(what string) uint64 {
	if r.err != nil {
		return 0
	}
	if r.remaining() < 8 {
		r.fail("%s: truncated", what)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// Size implements Message.
func (m *BlockMetadataRequest) Size() int {
	n := 1 + bytesLen(len(m.Namespace)) + uvarintLen(uint64(len(m.Shards)))
	for _, s := range m.Shards {
		n += uvarintLen(uint64(s))
	}
	return n
}

// MarshalAppend implements Message. Layout: version, namespace, shard
// count, shards.
func (m *BlockMetadataRequest) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = appendString(dst, m.Namespace)
	dst = binary.AppendUvarint(dst, uint64(len(m.Shards)))
	for _, s := range m.Shards {
		dst = binary.AppendUvarint(dst, uint64(s))
	}
	return dst
}

// Unmarshal implements Message.
func (m *BlockMetadataRequest) Unmarshal(b []byte) error {
	r := newReader("BlockMetadataRequest", b)
	m.Namespace = r.string("namespace")
	m.Shards = nil
	if n := r.count("shard count", 1); n > 0 {
		m.Shards = make([]uint32, n)
		for i := range m.Shards {
			m.Shards[i] = r.u32("shard")
		}
	}
	return r.done()
}

func (b *BlockMeta) size() int {
	return varintLen(b.BlockStart) + uvarintLen(uint64(b.Volume)) + uvarintLen(uint64(b.Series)) +
		uvarintLen(uint64(b.Samples)) + digestLen
}

func (s *ShardBlocks) size() int {
	n := uvarintLen(uint64(s.Shard)) + uvarintLen(uint64(len(s.Blocks)))
	for i := range s.Blocks {
		n += s.Blocks[i].size()
	}
	return n
}

// Size implements Message.
func (m *BlockMetadataResponse) Size() int {
	n := 1 + uvarintLen(uint64(len(m.Shards)))
	for i := range m.Shards {
		n += m.Shards[i].size()
	}
	return n
}

// MarshalAppend implements Message. Layout: version, shard count, then per
// shard: shard, block count, blocks (block start varint, volume, series,
// samples uvarints, digest 8 bytes little-endian).
func (m *BlockMetadataResponse) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = binary.AppendUvarint(dst, uint64(len(m.Shards)))
	for i := range m.Shards {
		s := &m.Shards[i]
		dst = binary.AppendUvarint(dst, uint64(s.Shard))
		dst = binary.AppendUvarint(dst, uint64(len(s.Blocks)))
		for _, b := range s.Blocks {
			dst = appendVarint(dst, b.BlockStart)
			dst = binary.AppendUvarint(dst, uint64(b.Volume))
			dst = binary.AppendUvarint(dst, uint64(b.Series))
			dst = binary.AppendUvarint(dst, uint64(b.Samples))
			dst = binary.LittleEndian.AppendUint64(dst, b.Digest)
		}
	}
	return dst
}

// Unmarshal implements Message.
func (m *BlockMetadataResponse) Unmarshal(b []byte) error {
	r := newReader("BlockMetadataResponse", b)
	m.Shards = nil
	if n := r.count("shard count", 2); n > 0 {
		m.Shards = make([]ShardBlocks, n)
		for i := range m.Shards {
			s := &m.Shards[i]
			s.Shard = r.u32("shard")
			if n := r.count("block count", minBlockMetaLen); n > 0 {
				s.Blocks = make([]BlockMeta, n)
				for j := range s.Blocks {
					s.Blocks[j] = BlockMeta{
						BlockStart: r.varint("block start"),
						Volume:     r.u32("volume"),
						Series:     r.u32("series"),
						Samples:    r.u32("samples"),
						Digest:     r.u64("digest"),
					}
				}
			}
			if r.err != nil {
				break
			}
		}
	}
	return r.done()
}

// Size implements Message.
func (m *FetchBlockRequest) Size() int {
	return 1 + bytesLen(len(m.Namespace)) + uvarintLen(uint64(m.Shard)) + varintLen(m.BlockStart) +
		bytesLen(len(m.After)) + uvarintLen(uint64(m.MaxBytes))
}

// MarshalAppend implements Message. Layout: version, namespace, shard,
// block start, after, max bytes.
func (m *FetchBlockRequest) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = appendString(dst, m.Namespace)
	dst = binary.AppendUvarint(dst, uint64(m.Shard))
	dst = appendVarint(dst, m.BlockStart)
	dst = appendBytes(dst, m.After)
	return binary.AppendUvarint(dst, uint64(m.MaxBytes))
}

// Unmarshal implements Message. After aliases b.
func (m *FetchBlockRequest) Unmarshal(b []byte) error {
	r := newReader("FetchBlockRequest", b)
	m.Namespace = r.string("namespace")
	m.Shard = r.u32("shard")
	m.BlockStart = r.varint("block start")
	m.After = r.bytes("after")
	m.MaxBytes = r.u32("max bytes")
	return r.done()
}

func (s *BlockSeries) size() int {
	return bytesLen(len(s.ID)) + bytesLen(len(s.Data)) + uvarintLen(uint64(s.Samples))
}

// Size implements Message.
func (m *FetchBlockResponse) Size() int {
	n := 2 + uvarintLen(uint64(len(m.Series)))
	for i := range m.Series {
		n += m.Series[i].size()
	}
	return n
}

// MarshalAppend implements Message. Layout: version, series count, then
// per series: ID, data, samples; then the more byte (0 or 1).
func (m *FetchBlockResponse) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = binary.AppendUvarint(dst, uint64(len(m.Series)))
	for i := range m.Series {
		s := &m.Series[i]
		dst = appendBytes(dst, s.ID)
		dst = appendBytes(dst, s.Data)
		dst = binary.AppendUvarint(dst, uint64(s.Samples))
	}
	return appendBool(dst, m.More)
}

// Unmarshal implements Message. IDs and data alias b.
func (m *FetchBlockResponse) Unmarshal(b []byte) error {
	r := newReader("FetchBlockResponse", b)
	m.Series = nil
	if n := r.count("series count", 3); n > 0 {
		m.Series = make([]BlockSeries, n)
		for i := range m.Series {
			s := &m.Series[i]
			s.ID = r.bytes("series id")
			s.Data = r.bytes("data")
			s.Samples = r.u32("samples")
		}
	}
	m.More = r.bool("more")
	return r.done()
}

// Size implements Message.
func (m *FetchUnflushedRequest) Size() int {
	return 1 + bytesLen(len(m.Namespace)) + uvarintLen(uint64(m.Shard)) +
		bytesLen(len(m.After)) + uvarintLen(uint64(m.MaxBytes))
}

// MarshalAppend implements Message. Layout: version, namespace, shard,
// after, max bytes.
func (m *FetchUnflushedRequest) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = appendString(dst, m.Namespace)
	dst = binary.AppendUvarint(dst, uint64(m.Shard))
	dst = appendBytes(dst, m.After)
	return binary.AppendUvarint(dst, uint64(m.MaxBytes))
}

// Unmarshal implements Message. After aliases b.
func (m *FetchUnflushedRequest) Unmarshal(b []byte) error {
	r := newReader("FetchUnflushedRequest", b)
	m.Namespace = r.string("namespace")
	m.Shard = r.u32("shard")
	m.After = r.bytes("after")
	m.MaxBytes = r.u32("max bytes")
	return r.done()
}

// Size implements Message.
func (m *FetchUnflushedResponse) Size() int {
	n := 2 + uvarintLen(uint64(len(m.Series)))
	for i := range m.Series {
		n += m.Series[i].size()
	}
	return n
}

// MarshalAppend implements Message. Layout: version, series count, series
// as in FetchResponse (ID, shard, stream), then the more byte (0 or 1).
func (m *FetchUnflushedResponse) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = binary.AppendUvarint(dst, uint64(len(m.Series)))
	for i := range m.Series {
		s := &m.Series[i]
		dst = appendBytes(dst, s.ID)
		dst = binary.AppendUvarint(dst, uint64(s.Shard))
		dst = appendBytes(dst, s.Stream)
	}
	return appendBool(dst, m.More)
}

// Unmarshal implements Message. IDs and streams alias b.
func (m *FetchUnflushedResponse) Unmarshal(b []byte) error {
	r := newReader("FetchUnflushedResponse", b)
	m.Series = nil
	if n := r.count("series count", 3); n > 0 {
		m.Series = make([]FetchedSeries, n)
		for i := range m.Series {
			s := &m.Series[i]
			s.ID = r.bytes("series id")
			s.Shard = r.u32("shard")
			s.Stream = r.bytes("stream")
		}
	}
	m.More = r.bool("more")
	return r.done()
}
