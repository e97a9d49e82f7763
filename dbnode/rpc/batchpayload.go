package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// The write payloads of a batch with native histograms, one family:
// BATCH_V1 carries every kind of a storage.Batch in one request, as its
// float section (a SERIES_V1 payload, payload.go, which may hold no
// series) and its histogram section (HISTOGRAMS_V1 entries), so each
// section is written and read by the one codec of its kind:
//
//	uvarint(len(floats)) floats  histogram-entries
//
// A float section of length 0 is read as no floats too. The histogram
// entries run to the end. A series with samples of both kinds has an
// entry in each section. The coordinator's hint queue stores batch
// records in the same bytes (docs/format/hints.md, kind 2).
// HISTOGRAMS_V1 alone stays readable (nodes of the previous version send
// it, and read it: a sender falls back on it for them, Client.Write).
//
// The HISTOGRAMS_V1 write payload (docs/format/rpc.md) carries native
// histogram samples as entries back to back, no count, no trailer:
//
//	entry := uvarint(len(id)) id  uvarint(shard)  uvarint(len(stream)) stream
//
// stream is a histogram stream (docs/format/histogram.md) of one series'
// samples, at least one; consecutive samples of one series and kind in
// increasing time share an entry. The stream form is the storage engine's
// own, tested and fuzzed, and carries every field bit for bit.

// appendHistogramPayload appends the payload of batch to dst. It fails on
// a histogram the stream encoding refuses (storage refuses those too).
func appendHistogramPayload(dst []byte, batch []storage.HistogramSample) ([]byte, error) {
	var enc encoding.HistogramEncoder
	flush := func(s *storage.HistogramSample) {
		if enc.Len() == 0 {
			return
		}
		dst = binary.AppendUvarint(dst, uint64(len(s.ID)))
		dst = append(dst, s.ID...)
		dst = binary.AppendUvarint(dst, uint64(s.Shard))
		b := enc.Bytes()
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = append(dst, b...)
		enc.Reset()
	}
	for i := range batch {
		s := &batch[i]
		if i > 0 {
			p := &batch[i-1]
			if p.Shard != s.Shard || string(p.ID) != string(s.ID) || enc.IsFloat() != (s.FH != nil) || s.T <= enc.LastTimestamp() {
				flush(p)
			}
		}
		var err error
		switch {
		case s.H != nil && s.FH == nil:
			err = enc.AppendHistogram(s.T, s.H)
		case s.FH != nil && s.H == nil:
			err = enc.AppendFloatHistogram(s.T, s.FH)
		default:
			err = errors.New("exactly one of an integer and a float histogram must be given")
		}
		if err != nil {
			return dst, fmt.Errorf("histogram sample %d of series %q: %w", i, s.ID, err)
		}
	}
	if len(batch) > 0 {
		flush(&batch[len(batch)-1])
	}
	return dst, nil
}

// decodeHistogramPayload appends the samples of a HISTOGRAMS_V1 payload
// to out. IDs alias b. A malformed payload is an error naming the entry;
// nothing it yields is bigger than the payload warrants (a stream's
// samples take at least one bit each).
func decodeHistogramPayload(b []byte, out []storage.HistogramSample) ([]storage.HistogramSample, error) {
	for entry := 0; len(b) > 0; entry++ {
		id, rest, err := payloadBytes(b)
		if err != nil {
			return out, fmt.Errorf("histogram payload entry %d: series ID: %w", entry, err)
		}
		shard, n := binary.Uvarint(rest)
		if n <= 0 || shard > 1<<32-1 {
			return out, fmt.Errorf("histogram payload entry %d: bad shard", entry)
		}
		stream, rest, err := payloadBytes(rest[n:])
		if err != nil {
			return out, fmt.Errorf("histogram payload entry %d: stream: %w", entry, err)
		}
		b = rest
		if len(id) == 0 {
			return out, fmt.Errorf("histogram payload entry %d: empty series ID", entry)
		}
		it := encoding.NewHistogramIterator(stream)
		k := 0
		for ; it.Next(); k++ {
			s := storage.HistogramSample{ID: id, Shard: uint32(shard)}
			if it.IsFloat() {
				var fh *histogram.FloatHistogram
				s.T, fh = it.AtFloatHistogram(nil)
				s.FH = fh
			} else {
				s.T, s.H = it.AtHistogram(nil)
			}
			out = append(out, s)
		}
		if err := it.Err(); err != nil {
			return out, fmt.Errorf("histogram payload entry %d (%q): %w", entry, id, err)
		}
		if k == 0 {
			return out, fmt.Errorf("histogram payload entry %d (%q): no samples", entry, id)
		}
	}
	return out, nil
}

// payloadBytes reads uvarint(len) bytes from b.
func payloadBytes(b []byte) (v, rest []byte, err error) {
	l, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, nil, errors.New("truncated length")
	}
	if l > uint64(len(b)-n) {
		return nil, nil, fmt.Errorf("length %d past the end (%d bytes left)", l, len(b)-n)
	}
	return b[n : n+int(l) : n+int(l)], b[n+int(l):], nil
}

// AppendHistograms appends the HISTOGRAMS_V1 payload of samples to dst
// (the hint queue stores histogram records in it).
func AppendHistograms(dst []byte, samples []storage.HistogramSample) ([]byte, error) {
	return appendHistogramPayload(dst, samples)
}

// DecodeHistograms appends the samples of a HISTOGRAMS_V1 payload to dst;
// IDs alias b. It never panics on any input.
func DecodeHistograms(b []byte, dst []storage.HistogramSample) ([]storage.HistogramSample, error) {
	return decodeHistogramPayload(b, dst)
}

// appendBatchPayload appends the BATCH_V1 payload of b to dst.
func appendBatchPayload(dst []byte, b storage.Batch) ([]byte, error) {
	n, entries := payloadLen(b.Floats)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = appendPayloadEntries(dst, b.Floats, entries)
	return appendHistogramPayload(dst, b.Histograms)
}

// decodeBatchPayload decodes a BATCH_V1 payload, its floats appended to
// dst; IDs alias p. Errors say which section failed and, for floats,
// wrap ErrMalformed.
func decodeBatchPayload(p []byte, dst []storage.Sample) (storage.Batch, error) {
	var b storage.Batch
	floats, rest, err := payloadBytes(p)
	if err != nil {
		return b, fmt.Errorf("%w (format %s): float section: %v", ErrMalformed, nodepb.PayloadFormat_PAYLOAD_FORMAT_BATCH_V1, err)
	}
	if len(floats) > 0 {
		if b.Floats, err = decodePayload(floats, dst); err != nil {
			return storage.Batch{}, fmt.Errorf("float section: %w", err)
		}
	}
	if b.Histograms, err = decodeHistogramPayload(rest, nil); err != nil {
		return storage.Batch{}, fmt.Errorf("histogram section: %w", err)
	}
	return b, nil
}

// AppendBatch appends the BATCH_V1 payload of b to dst (the hint queue
// stores batch records in it).
func AppendBatch(dst []byte, b storage.Batch) ([]byte, error) { return appendBatchPayload(dst, b) }

// DecodeBatch decodes BATCH_V1 bytes, the floats appended to dst; IDs
// alias p. It never panics on any input.
func DecodeBatch(p []byte, dst []storage.Sample) (storage.Batch, error) {
	return decodeBatchPayload(p, dst)
}
