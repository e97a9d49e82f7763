// Package encoding compresses the samples of one series: (int64 millisecond
// timestamp, float64 value) pairs with strictly increasing timestamps.
//
// Two forms exist, both described bit by bit in docs/format/encoding.md:
//
//   - The stream form is what a series' in-memory buffer holds while a block is
//     open. Encoder appends to it in place (delta-of-delta timestamps, values as
//     integer delta-of-deltas while they are decimal numbers of at most six
//     fractional digits, Gorilla XOR otherwise) and Encoder.Bytes hands out
//     the bytes without copying; NewIterator reads them.
//   - The sealed form is what a sealed block is stored as on disk and streamed
//     to peers. Seal re-encodes a stream column by column, byte aligned, so
//     that the fileset's page-wise zstd compression finds the redundancy that
//     bit-packed streams hide (identical timestamp columns of series scraped
//     together, common factors of value deltas); NewSealedIterator reads it.
//
// Every float64 bit pattern round-trips exactly (NaN payloads, -0, ±Inf,
// subnormals) and every int64 timestamp too. Decoders never panic on bad
// input: Iterator.Err tells corruption from the end of the data.
package encoding
