package rpc

// Anti-entropy repair messages. A node compares, per shard it owns, a
// digest per block with each other owner (BlockDigests); for a block whose
// digests differ it pages through the per-series checksums
// (SeriesChecksums) to find the series that differ, then pulls those with
// Fetch. Both sides hash the samples a read returns (fileset and memory
// merged) in [Start, End), End being the requester's settle cutoff, so
// writes still arriving are not compared.

// DefaultChecksumsPageSeries is the page size of SeriesChecksums when the
// request's MaxSeries is 0.
const DefaultChecksumsPageSeries = 10000

// BlockDigestsRequest asks for the block digests of one shard over
// [Start, End) (unix ms, End exclusive).
type BlockDigestsRequest struct {
	Namespace  string
	Shard      uint32
	Start, End int64
}

// BlockDigest sums up one block: Digest is xxhash64 over its series'
// (ID, checksum) pairs in ID order (storage.DigestOf).
type BlockDigest struct {
	BlockStart int64
	Series     uint32
	Samples    uint64
	Digest     uint64
}

// BlockDigestsResponse has the blocks with samples in the range, by
// BlockStart.
type BlockDigestsResponse struct {
	Blocks []BlockDigest
}

// SeriesChecksumsRequest asks for one page of the per-series checksums of
// block BlockStart over [Start, End): the series with ID > After, in ID
// order, at most MaxSeries of them (the server default when 0).
type SeriesChecksumsRequest struct {
	Namespace  string
	Shard      uint32
	BlockStart int64
	Start, End int64
	After      []byte
	MaxSeries  uint32
}

// SeriesChecksum is one series' checksum over its samples in the range
// (storage.SeriesChecksum).
type SeriesChecksum struct {
	ID       []byte
	Checksum uint64
	Samples  uint32
}

// SeriesChecksumsResponse is one page; More says another follows (ask
// again with After set to the last ID).
type SeriesChecksumsResponse struct {
	Series []SeriesChecksum
	More   bool
}
