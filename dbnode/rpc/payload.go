package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/tessera-tsdb/tessera/ident"

	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// The write payload (WriteBatchRequest.payload, format SERIES_V1) carries
// the samples of a batch in a form that is encoded straight from, and
// decoded straight into, a []storage.Sample: no per-series structs and no
// per-sample allocation on either side, so a replica's write costs about
// what the coordinator's local write costs. docs/format/rpc.md describes it
// byte by byte:
//
//	uvarint total samples
//	uvarint series entries
//	entries × {
//	  uvarint id length, id bytes
//	  uvarint shard
//	  uvarint samples (at least 1)
//	  samples × { zigzag varint timestamp delta, 8 bytes float64 bits LE }
//	}
//
// A timestamp is relative to the previous sample of the entry; an entry's
// first sample to the first timestamp of the previous entry (0 for the
// first): series scraped together share timestamps. Values are raw float64
// bits: XOR-compressing them saves bytes on loopback but costs CPU, which
// is what replication is short of (BenchmarkPayload).

// ErrMalformed is wrapped by every payload decoding error: the bytes are
// not a payload of the stated format (truncated, trailing garbage,
// impossible lengths or counts).
var ErrMalformed = errors.New("rpc: malformed write payload")

// Smallest encodings, to bound counts read from untrusted input.
const (
	minEntrySize  = 3 // ID length (an empty ID decodes; the server refuses it), shard, sample count
	minSampleSize = 9 // one-byte delta, 8-byte value
)

func zigzag(x int64) uint64 { return uint64(x<<1) ^ uint64(x>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// sameSeries says whether b continues a's entry: same ID and same shard (a
// sender that disagrees with itself about the shard gets two entries, and
// the server's shard check refuses the wrong one).
func sameSeries(a, b *storage.Sample) bool { return a.Shard == b.Shard && ident.Same(a.ID, b.ID) }

// appendPayload appends the SERIES_V1 encoding of samples to dst. Runs of
// consecutive samples with the same ID (and shard) become one entry; the order of
// samples is kept, so a decoder gives back exactly samples (Ref aside).
func appendPayload(dst []byte, samples []storage.Sample) []byte {
	_, entries := payloadLen(samples)
	return appendPayloadEntries(dst, samples, entries)
}

// appendPayloadEntries is appendPayload for a caller that counted the
// entries already (payloadLen).
func appendPayloadEntries(dst []byte, samples []storage.Sample, entries int) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(samples)))
	dst = binary.AppendUvarint(dst, uint64(entries))
	base := int64(0)
	for i := 0; i < len(samples); {
		id := samples[i].ID
		j := i + 1
		for j < len(samples) && sameSeries(&samples[i], &samples[j]) {
			j++
		}
		dst = binary.AppendUvarint(dst, uint64(len(id)))
		dst = append(dst, id...)
		dst = binary.AppendUvarint(dst, uint64(samples[i].Shard))
		dst = binary.AppendUvarint(dst, uint64(j-i))
		prev := base
		base = samples[i].T
		for k := i; k < j; k++ {
			s := &samples[k]
			dst = binary.AppendUvarint(dst, zigzag(s.T-prev))
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(s.V))
			prev = s.T
		}
		i = j
	}
	return dst
}

// payloadLen returns the exact length of appendPayload's output and its
// number of entries, so that a request is built in one buffer of the
// right size with its length prefix in front (the gRPC codec sends that
// buffer without copying it).
func payloadLen(samples []storage.Sample) (n, entries int) {
	base := int64(0)
	for i := 0; i < len(samples); {
		s := &samples[i]
		j := i + 1
		for j < len(samples) && sameSeries(s, &samples[j]) {
			j++
		}
		entries++
		n += uvarintLen(uint64(len(s.ID))) + len(s.ID) + uvarintLen(uint64(s.Shard)) + uvarintLen(uint64(j-i))
		prev := base
		base = s.T
		for k := i; k < j; k++ {
			n += uvarintLen(zigzag(samples[k].T-prev)) + 8
			prev = samples[k].T
		}
		i = j
	}
	return n + uvarintLen(uint64(len(samples))) + uvarintLen(uint64(entries)), entries
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// payloadHeader reads the sample and entry counts of a SERIES_V1
// payload (payloadHeaderOf).
func payloadHeader(b []byte) (total, entries, off int, err error) {
	return payloadHeaderOf(b, nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_V1, minEntrySize)
}

// payloadHeaderOf reads the sample and entry counts of a payload of
// format f, whose entries take at least minEntry bytes, checked against
// its size so that garbage cannot make the decoder allocate more than the
// payload's own size.
func payloadHeaderOf(b []byte, f nodepb.PayloadFormat, minEntry uint64) (total, entries, off int, err error) {
	t, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, 0, malformedOf(f, 0, "sample count: bad varint")
	}
	off = n
	e, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, 0, 0, malformedOf(f, off, "entry count: bad varint")
	}
	off += n
	left := uint64(len(b) - off)
	if t > left/minSampleSize {
		return 0, 0, 0, malformedOf(f, 0, "%d samples cannot fit in %d bytes", t, left)
	}
	if e > t || e > left/minEntry || (e == 0) != (t == 0) {
		return 0, 0, 0, malformedOf(f, off, "%d entries for %d samples in %d bytes", e, t, left)
	}
	return int(t), int(e), off, nil
}

// decodePayload appends the samples of a SERIES_V1 payload to dst. IDs
// alias b. It never panics; errors wrap ErrMalformed and say where.
func decodePayload(b []byte, dst []storage.Sample) ([]storage.Sample, error) {
	total, entries, off, err := payloadHeader(b)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = growSamples(dst, total)
	out := dst[start : start+total]
	used, base := 0, int64(0)
	for e := 0; e < entries; e++ {
		l, n := binary.Uvarint(b[off:])
		if n <= 0 || l > uint64(len(b)-off-n) {
			return dst[:start], malformed(off, "entry %d: bad ID length", e)
		}
		off += n
		id := b[off : off+int(l) : off+int(l)]
		off += int(l)
		shard, n := binary.Uvarint(b[off:])
		if n <= 0 || shard > math.MaxUint32 {
			return dst[:start], malformed(off, "entry %d: bad shard", e)
		}
		off += n
		cnt, n := binary.Uvarint(b[off:])
		if n <= 0 || cnt == 0 || cnt > uint64(total-used) {
			return dst[:start], malformed(off, "entry %d: sample count %d with %d of %d samples left", e, cnt, total-used, total)
		}
		off += n
		prev := base
		for k := 0; k < int(cnt); k++ {
			u, n := binary.Uvarint(b[off:])
			if n <= 0 || len(b)-off-n < 8 {
				return dst[:start], malformed(off, "entry %d sample %d: truncated", e, k)
			}
			off += n
			t := prev + unzigzag(u)
			if k == 0 {
				base = t
			}
			prev = t
			out[used] = storage.Sample{ID: id, Shard: uint32(shard), T: t,
				V: math.Float64frombits(binary.LittleEndian.Uint64(b[off:]))}
			off += 8
			used++
		}
	}
	if used != total {
		return dst[:start], malformed(off, "entries hold %d samples, header says %d", used, total)
	}
	if off != len(b) {
		return dst[:start], malformed(off, "%d trailing bytes", len(b)-off)
	}
	return dst, nil
}

func growSamples(dst []storage.Sample, n int) []storage.Sample {
	if cap(dst)-len(dst) < n {
		grown := make([]storage.Sample, len(dst), len(dst)+n)
		copy(grown, dst)
		dst = grown
	}
	return dst[:len(dst)+n]
}

func malformed(off int, format string, args ...any) error {
	return malformedOf(nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_V1, off, format, args...)
}

func malformedOf(f nodepb.PayloadFormat, off int, format string, args ...any) error {
	return fmt.Errorf("%w (format %s) at byte %d: %s", ErrMalformed, f, off, fmt.Sprintf(format, args...))
}

// AppendSamples appends the SERIES_V1 encoding of samples to dst: the
// write payload's bytes, for callers that keep samples in that form
// outside an RPC (the coordinator's hint queue, docs/format/hints.md).
func AppendSamples(dst []byte, samples []storage.Sample) []byte { return appendPayload(dst, samples) }

// DecodeSamples appends the samples of SERIES_V1 bytes to dst; IDs alias
// b. Errors wrap ErrMalformed.
func DecodeSamples(b []byte, dst []storage.Sample) ([]storage.Sample, error) {
	return decodePayload(b, dst)
}
