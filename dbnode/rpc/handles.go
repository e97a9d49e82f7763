package rpc

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// The SERIES_HANDLES payload (format 10) is SERIES_V1 with the series ID
// sent once per WriteStream stream: a coordinator replicates the same
// series to the same replica batch after batch, and in SERIES_V1 the IDs
// were most of the bytes (a 70-byte ID beside a 9-byte sample), copied by
// the sender, the kernel twice, gRPC and proto on the receiver, then
// hashed and compared by its ref cache. With handles, a known series costs
// one or three bytes, and the replica finds its series by indexing a slice.
//
//	uvarint total samples
//	uvarint series entries
//	entries × {
//	  uvarint ref        handle<<1 | new
//	  new only: uvarint id length, id bytes, uvarint shard
//	  uvarint samples (at least 1)
//	  samples × { zigzag varint timestamp delta, 8 bytes float64 bits LE }
//	}
//
// A new entry defines the next handle of the stream (0, 1, 2, ... in
// order: any other number is malformed); a known entry names one defined
// by this or an earlier request of the same stream. Timestamps are as in
// SERIES_V1. docs/format/rpc.md has the rules.

// maxStreamHandles bounds the handles of one stream on both sides: a
// sender whose table is full opens a new stream (with an empty table), a
// receiver refuses a request defining more. 1<<20 handles of ~100 bytes
// are ~100 MiB per stream at worst, a replica's active series at most.
const maxStreamHandles = 1 << 20

// minHandleEntrySize is the smallest SERIES_HANDLES entry: a one-byte
// ref and a one-byte sample count.
const minHandleEntrySize = 2

// maxSeqIndex bounds a handle table's slice indexed by series number: a
// series numbered beyond it (in a process that created over a million
// series) is found in the table's map instead.
const maxSeqIndex = 1 << 20

// handleTable is a sender's side of one stream's handles: the handle of
// every series the stream defined. A sample with a storage ref (a
// coordinator that owns the series wrote it locally, and the HTTP series
// cache hands the ref back with every later request) is found by its
// series' number (storage.Series.Seq) in a slice: no hashing, and 4 bytes
// per series keep the table in cache. A sample without a ref is found by
// its ID bytes. A ref stands for exactly one ID (storage.Sample); a series
// found both ways gets two handles, which is only a few bytes more.
type handleTable struct {
	bySeq []uint32 // handle+1 by series number; 0: none
	byRef map[storage.SeriesRef]uint32
	byID  map[string]uint32
	n     uint32 // handles defined
	// scratch per entry of the request being encoded
	refs []uint64
}

func newHandleTable() *handleTable {
	return &handleTable{byRef: map[storage.SeriesRef]uint32{}, byID: map[string]uint32{}}
}

// full says whether the table holds as many handles as a stream may.
func (t *handleTable) full() bool { return t.n >= maxStreamHandles }

// handle returns the handle of s's series and whether the stream defined
// it before; if not, it defines it.
func (t *handleTable) handle(s *storage.Sample) (uint32, bool) {
	if r := s.Ref; r != 0 {
		if q := r.Seq(); q > 0 && q < maxSeqIndex {
			if q < uint64(len(t.bySeq)) {
				if h := t.bySeq[q]; h != 0 {
					return h - 1, true
				}
			} else {
				grown := make([]uint32, min(max(q+1, 2*uint64(len(t.bySeq))), maxSeqIndex))
				copy(grown, t.bySeq)
				t.bySeq = grown
			}
			h := t.n
			t.n++
			t.bySeq[q] = h + 1
			return h, false
		}
		if h, ok := t.byRef[r]; ok {
			return h, true
		}
		h := t.n
		t.n++
		t.byRef[r] = h
		return h, false
	}
	if h, ok := t.byID[string(s.ID)]; ok {
		return h, true
	}
	h := t.n
	t.n++
	t.byID[string(s.ID)] = h
	return h, false
}

// encodeHandleRequest builds WriteBatchRequest{Namespace: ns, Format:
// SERIES_HANDLES, Payload: samples} in wire form, defining in t the
// series it names for the first time. Once it returned, the request must
// reach the stream's receiver or the stream must be abandoned: the
// receiver learns the new handles only from it.
func encodeHandleRequest(ns string, samples []storage.Sample, t *handleTable, pool mem.BufferPool) (*writeRequest, error) {
	// First pass: one handle lookup per entry, and the exact size.
	refs := t.refs[:0]
	plen, entries := 0, 0
	base := int64(0)
	for i := 0; i < len(samples); {
		s := &samples[i]
		j := i + 1
		for j < len(samples) && sameSeries(s, &samples[j]) {
			j++
		}
		entries++
		h, ok := t.handle(s)
		var ref uint64
		if ok {
			ref = uint64(h) << 1
			plen += uvarintLen(ref)
		} else {
			ref = uint64(h)<<1 | 1
			plen += uvarintLen(ref) + uvarintLen(uint64(len(s.ID))) + len(s.ID) + uvarintLen(uint64(s.Shard))
		}
		refs = append(refs, ref)
		plen += uvarintLen(uint64(j - i))
		prev := base
		base = s.T
		for k := i; k < j; k++ {
			plen += uvarintLen(zigzag(samples[k].T-prev)) + 8
			prev = samples[k].T
		}
		i = j
	}
	t.refs = refs
	plen += uvarintLen(uint64(len(samples))) + uvarintLen(uint64(entries))

	format := uint64(nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_HANDLES)
	n := protowire.SizeTag(2) + protowire.SizeVarint(format) + protowire.SizeTag(3) + protowire.SizeBytes(plen)
	if ns != "" {
		n += protowire.SizeTag(1) + protowire.SizeBytes(len(ns))
	}
	buf := pool.Get(n)
	b := (*buf)[:0]
	if ns != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, ns)
	}
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, format)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(plen))

	// Second pass: the payload.
	b = binary.AppendUvarint(b, uint64(len(samples)))
	b = binary.AppendUvarint(b, uint64(entries))
	base = 0
	e := 0
	for i := 0; i < len(samples); {
		s := &samples[i]
		j := i + 1
		for j < len(samples) && sameSeries(s, &samples[j]) {
			j++
		}
		ref := refs[e]
		e++
		b = binary.AppendUvarint(b, ref)
		if ref&1 == 1 {
			b = binary.AppendUvarint(b, uint64(len(s.ID)))
			b = append(b, s.ID...)
			b = binary.AppendUvarint(b, uint64(s.Shard))
		}
		b = binary.AppendUvarint(b, uint64(j-i))
		prev := base
		base = s.T
		for k := i; k < j; k++ {
			b = binary.AppendUvarint(b, zigzag(samples[k].T-prev))
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(samples[k].V))
			prev = samples[k].T
		}
		i = j
	}
	if len(b) != n {
		pool.Put(buf)
		return nil, fmt.Errorf("rpc: write request (handles) encoded to %d bytes, expected %d", len(b), n)
	}
	*buf = b
	return &writeRequest{bufs: mem.BufferSlice{mem.NewBuffer(buf, pool)}}, nil
}

// streamSeries is what a receiver knows of one handle of a stream.
type streamSeries struct {
	id    []byte // a copy: the request's bytes are reused
	shard uint32
	// valid: the ID passed limits.CheckID and hashes to shard, so it is
	// not checked again (ownership is, at every write).
	valid bool
	// ref is the storage series a write of namespace ns resolved; storage
	// notices a stale one and looks the ID up again.
	ns  string
	ref storage.SeriesRef
}

// streamTable is a receiver's side of one stream's handles, indexed by
// handle.
type streamTable struct {
	series []streamSeries
	seqs   seqIndex // SERIES_SEQS numbers, apart from the handles
}

// decodeHandlePayload appends the samples of a SERIES_HANDLES payload to
// dst, defining the handles it introduces in t, and appends each sample's
// handle to hs. A sample's ID is its handle's copy (shared by all its
// samples), its Ref the handle's ref when that was resolved in namespace
// ns. It never panics; errors wrap ErrMalformed and say where, and leave
// t with the handles defined before the error (the stream must end: the
// sender's table no longer matches).
func decodeHandlePayload(b []byte, ns string, t *streamTable, dst []storage.Sample, hs []uint32) ([]storage.Sample, []uint32, error) {
	const f = nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_HANDLES
	total, entries, off, err := payloadHeaderOf(b, f, minHandleEntrySize)
	if err != nil {
		return dst, hs, err
	}
	start, hstart := len(dst), len(hs)
	dst = growSamples(dst, total)
	out := dst[start : start+total]
	hs = growHandles(hs, total)
	hout := hs[hstart : hstart+total]
	fail := func(off int, format string, args ...any) ([]storage.Sample, []uint32, error) {
		return dst[:start], hs[:hstart], malformedOf(f, off, format, args...)
	}
	used, base := 0, int64(0)
	for e := 0; e < entries; e++ {
		ref, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return fail(off, "entry %d: bad handle", e)
		}
		off += n
		h := ref >> 1
		if ref&1 == 1 {
			if h != uint64(len(t.series)) {
				return fail(off, "entry %d: defines handle %d, the next is %d", e, h, len(t.series))
			}
			if h >= maxStreamHandles {
				return fail(off, "entry %d: more than %d handles in one stream", e, maxStreamHandles)
			}
			l, n := binary.Uvarint(b[off:])
			if n <= 0 || l > uint64(len(b)-off-n) {
				return fail(off, "entry %d: bad ID length", e)
			}
			off += n
			id := append([]byte(nil), b[off:off+int(l)]...)
			off += int(l)
			shard, n := binary.Uvarint(b[off:])
			if n <= 0 || shard > math.MaxUint32 {
				return fail(off, "entry %d: bad shard", e)
			}
			off += n
			t.series = append(t.series, streamSeries{id: id[:len(id):len(id)], shard: uint32(shard)})
		} else if h >= uint64(len(t.series)) {
			return fail(off, "entry %d: handle %d not defined (%d are)", e, h, len(t.series))
		}
		ser := &t.series[h]
		var sref storage.SeriesRef
		if ser.ns == ns {
			sref = ser.ref
		}
		cnt, n := binary.Uvarint(b[off:])
		if n <= 0 || cnt == 0 || cnt > uint64(total-used) {
			return fail(off, "entry %d: sample count %d with %d of %d samples left", e, cnt, total-used, total)
		}
		off += n
		prev := base
		for k := 0; k < int(cnt); k++ {
			u, n := binary.Uvarint(b[off:])
			if n <= 0 || len(b)-off-n < 8 {
				return fail(off, "entry %d sample %d: truncated", e, k)
			}
			off += n
			ts := prev + unzigzag(u)
			if k == 0 {
				base = ts
			}
			prev = ts
			out[used] = storage.Sample{ID: ser.id, Shard: ser.shard, T: ts, Ref: sref,
				V: math.Float64frombits(binary.LittleEndian.Uint64(b[off:]))}
			hout[used] = uint32(h)
			off += 8
			used++
		}
	}
	if used != total {
		return fail(off, "entries hold %d samples, header says %d", used, total)
	}
	if off != len(b) {
		return fail(off, "%d trailing bytes", len(b)-off)
	}
	return dst, hs, nil
}

func growHandles(hs []uint32, n int) []uint32 {
	if cap(hs)-len(hs) < n {
		grown := make([]uint32, len(hs), len(hs)+n)
		copy(grown, hs)
		hs = grown
	}
	return hs[:len(hs)+n]
}
