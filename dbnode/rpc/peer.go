package rpc

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
	// AcceptHistograms: the requester reads block payload containers
	// (floats and native histograms); without it a page holding one is
	// refused (FailedPrecondition).
	AcceptHistograms bool
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
	// AcceptHistograms as in FetchTaggedRequest.
	AcceptHistograms bool
}

// FetchUnflushedResponse is one page of unflushed series, in ID order,
// each stream readable with encoding.NewIterator. More as in
// FetchBlockResponse.
type FetchUnflushedResponse struct {
	Series []FetchedSeries
	More   bool
}
