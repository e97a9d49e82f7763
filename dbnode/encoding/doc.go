// Package encoding compresses the samples of one series: (int64 millisecond
// timestamp, float64 value) pairs with strictly increasing timestamps.
//
// Two forms exist, both described bit by bit in docs/format/encoding.md:
//
//   - The stream form is what a series' in-memory buffer holds while a block is
//     open. Encoder appends to it in place (timestamps as offsets from the
//     scrape schedule, values as integer delta-of-deltas while they are
//     decimals of at most six fractional digits, Gorilla XOR otherwise) and
//     Encoder.Bytes hands out the bytes without copying; NewIterator reads
//     them. MergeIterators and Encode combine and re-encode iterators.
//   - The sealed form is what a sealed block is stored as on disk and streamed
//     to peers. Seal (or a reused Sealer) re-encodes a stream with the whole
//     block in view: timestamps in a byte-aligned section of their own, so
//     that the series scraped together carry identical bytes for the
//     fileset's page-wise zstd to match, and as Rice-coded runs of on-time
//     scrapes; values as integers with their common divisor taken out and
//     Rice-coded residuals. NewSealedIterator reads it.
//
// A third form, the histogram stream (HistogramEncoder, NewHistogramIterator,
// docs/format/histogram.md), holds Prometheus native histograms, integer or
// float. Storage does not use it yet.
//
// Every float64 bit pattern round-trips exactly (NaN payloads, -0, ±Inf,
// subnormals) and every int64 timestamp too. Decoders never panic on bad
// input: Iterator.Err tells corruption from the end of the data.
package encoding
