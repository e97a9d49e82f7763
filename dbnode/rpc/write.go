package rpc

import "encoding/binary"

// Sample is one (timestamp, value) pair of a series.
type Sample struct {
	T int64 // unix milliseconds
	V float64
}

// WriteSeries is the samples of one series in a write batch. Shard must be
// the series' shard (ident.Shard of ID): the server checks it, since it
// decides ownership by it.
type WriteSeries struct {
	ID      []byte
	Shard   uint32
	Samples []Sample
}

// WriteRequest writes samples of many series into one namespace. It is
// idempotent: a retried batch rewrites the same samples.
type WriteRequest struct {
	Namespace string
	Series    []WriteSeries
}

// WriteResponse reports a write that was carried out. Rejected samples
// (outside the namespace's retention or buffer window) are refused for good:
// retrying them cannot succeed, so they are reported here and not as an RPC
// error; the Written others are durable per the node's commit log mode.
type WriteResponse struct {
	Written   int
	Rejected  int
	RejectMsg string
}

// NumSamples counts the samples of the request.
func (m *WriteRequest) NumSamples() int {
	n := 0
	for i := range m.Series {
		n += len(m.Series[i].Samples)
	}
	return n
}

// Size implements Message.
func (m *WriteRequest) Size() int {
	n := 1 + bytesLen(len(m.Namespace)) + uvarintLen(uint64(len(m.Series)))
	total, base := 0, int64(0)
	for i := range m.Series {
		s := &m.Series[i]
		n += bytesLen(len(s.ID)) + uvarintLen(uint64(s.Shard)) + uvarintLen(uint64(len(s.Samples)))
		prev := base
		for j, smp := range s.Samples {
			n += varintLen(smp.T-prev) + 8
			prev = smp.T
			if j == 0 {
				base = smp.T
			}
		}
		total += len(s.Samples)
	}
	return n + uvarintLen(uint64(total))
}

// MarshalAppend implements Message.
//
// Layout: version, namespace, series count, total sample count, then per
// series: ID, shard, sample count, samples. A sample is its timestamp as a
// zigzag varint delta from the previous sample of the series (the first
// one: from the first timestamp of the previous series with samples, or 0)
// and its value as 8 little-endian bytes of its float64 bits.
func (m *WriteRequest) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = appendString(dst, m.Namespace)
	dst = binary.AppendUvarint(dst, uint64(len(m.Series)))
	dst = binary.AppendUvarint(dst, uint64(m.NumSamples()))
	base := int64(0)
	for i := range m.Series {
		s := &m.Series[i]
		dst = appendBytes(dst, s.ID)
		dst = binary.AppendUvarint(dst, uint64(s.Shard))
		dst = binary.AppendUvarint(dst, uint64(len(s.Samples)))
		prev := base
		for j, smp := range s.Samples {
			dst = appendVarint(dst, smp.T-prev)
			dst = appendFloat(dst, smp.V)
			prev = smp.T
			if j == 0 {
				base = smp.T
			}
		}
	}
	return dst
}

// Smallest encodings, to bound counts read from untrusted input.
const (
	minSeriesSize = 3 // empty ID, shard, sample count
	minSampleSize = 9 // one-byte delta, 8-byte value
)

// Unmarshal implements Message. All samples share one allocation.
func (m *WriteRequest) Unmarshal(b []byte) error {
	r := newReader("WriteRequest", b)
	m.Namespace = r.string("namespace")
	nSeries := r.count("series count", minSeriesSize)
	total := r.count("sample count", minSampleSize)
	if r.err != nil {
		return r.err
	}
	m.Series = make([]WriteSeries, nSeries)
	samples := make([]Sample, total)
	used, base := 0, int64(0)
	for i := range m.Series {
		s := &m.Series[i]
		s.ID = r.bytes("series id")
		s.Shard = r.u32("shard")
		n := r.uvarint("series sample count")
		if r.err != nil {
			return r.err
		}
		if n > uint64(total-used) {
			r.fail("series %d: %d samples exceed the total of %d", i, n, total)
			return r.err
		}
		s.Samples = samples[used : used+int(n) : used+int(n)]
		used += int(n)
		prev := base
		for j := range s.Samples {
			t := prev + r.varint("timestamp")
			s.Samples[j] = Sample{T: t, V: r.float("value")}
			prev = t
			if j == 0 {
				base = t
			}
		}
		if r.err != nil {
			return r.err
		}
	}
	if used != total {
		r.fail("series hold %d samples, header says %d", used, total)
	}
	return r.done()
}

// Size implements Message.
func (m *WriteResponse) Size() int {
	return 1 + uvarintLen(uint64(m.Written)) + uvarintLen(uint64(m.Rejected)) + bytesLen(len(m.RejectMsg))
}

// MarshalAppend implements Message. Layout: version, written, rejected,
// reject message.
func (m *WriteResponse) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = binary.AppendUvarint(dst, uint64(m.Written))
	dst = binary.AppendUvarint(dst, uint64(m.Rejected))
	return appendString(dst, m.RejectMsg)
}

// Unmarshal implements Message.
func (m *WriteResponse) Unmarshal(b []byte) error {
	r := newReader("WriteResponse", b)
	m.Written = r.count32("written")
	m.Rejected = r.count32("rejected")
	m.RejectMsg = r.string("reject message")
	return r.done()
}
