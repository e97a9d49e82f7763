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

// The SERIES_SEQS payload (format 11) lets a coordinator encode a batch
// once for all its replicas. In SERIES_HANDLES a series' handle is
// numbered by the stream it travels on, so the same batch encodes
// differently per stream, and the coordinator encoded (and looked up
// handles for) every batch once per replica: about a seventh of its CPU
// in a three-node RF 3 cluster. Here a series is named by the
// coordinator's own number for it (storage.Series.Seq, unique in its
// process for its whole life), the same on every stream; what differs per
// stream is only which numbers the stream has defined, so a request is
//
//	uvarint defs                 numbers this request defines
//	defs × { uvarint seq (≥ 1), uvarint id length, id bytes, uvarint shard }
//	chunks (until the payload ends) × {
//	  uvarint total              samples of the chunk (≥ 1)
//	  entries until their counts add up to total × {
//	    uvarint seq              0: the ID follows inline, not defined
//	    seq 0 only: uvarint id length, id bytes, uvarint shard
//	    uvarint count            samples of the entry (≥ 1)
//	    count × { zigzag varint timestamp delta, 8 bytes float64 bits LE }
//	  }
//	}
//
// The chunks (SeqChunk) are built once per batch and shared, byte for
// byte, by the requests to every replica; each stream's request adds only
// its header and the definitions that stream has not sent yet (none once
// the series are known). Timestamp deltas restart from 0 at each chunk,
// so chunks of several batches concatenate. docs/format/rpc.md has the
// rules.

// maxSeqBits bounds a sender's bitmap of defined numbers: numbers beyond
// it (a process that created over 16 million series) go in a map.
const maxSeqBits = 1 << 24

// minSeqDefSize is the smallest definition, to bound the count read from
// untrusted input.
const minSeqDefSize = 3 // seq, an empty ID's length, shard

// SeqChunk is a batch of samples encoded once in the SERIES_SEQS chunk
// form, to be sent to any number of replicas over their WriteStreams
// (WriteStream.WriteChunks). It is immutable once built and safe to share
// between goroutines, and it does not alias the samples it was built
// from: per entry it keeps the storage series (whose ID is immutable) or,
// inline in its own bytes, a copy of the ID, so the caller may reuse its
// buffers while the chunk is still being sent, and Samples gives the
// batch back.
type SeqChunk struct {
	body    []byte
	n       int // samples
	entries []seqEntry
}

// seqEntry is what a chunk keeps of one entry beside its bytes: the
// series' number (0: ID inline), its storage ref (0 inline), ID (storage's
// own immutable bytes, nil inline) and shard, for the definitions a
// stream sends and for AppendSamples. The ID is taken when the chunk is
// encoded: the ref may go stale later, the bytes stay.
type seqEntry struct {
	ref        storage.SeriesRef
	id         []byte
	seq, shard uint32
}

// Samples is the number of samples in the chunk.
func (c *SeqChunk) Samples() int { return c.n }

// seqOf is the number a sample's series travels under: its storage
// series' number, or 0 (no ref, or a number past uint32) for an inline ID.
func seqOf(s *storage.Sample) uint32 {
	if q := s.Ref.Seq(); q > 0 && q <= math.MaxUint32 {
		return uint32(q)
	}
	return 0
}

// EncodeSeqChunk encodes samples as one SERIES_SEQS chunk. It returns nil
// when the form does not pay: no samples, or more than half of the
// batch's series without a storage ref (a coordinator that does not hold
// the series itself; SERIES_HANDLES names those by per-stream handles).
// It reads samples only while it runs.
func EncodeSeqChunk(samples []storage.Sample) *SeqChunk {
	if len(samples) == 0 {
		return nil
	}
	// One pass: entries as they come, into slices sized for the most
	// entries a batch can have (one per sample).
	c := &SeqChunk{n: len(samples), entries: make([]seqEntry, 0, len(samples))}
	b := make([]byte, 0, len(samples)*13+binary.MaxVarintLen64)
	b = binary.AppendUvarint(b, uint64(len(samples)))
	inline := 0
	base := int64(0)
	for i := 0; i < len(samples); {
		s := &samples[i]
		q := seqOf(s)
		var id []byte
		if q != 0 {
			if id = storage.SeriesID(s.Ref); id == nil {
				q = 0 // gone from memory since the write: send the ID
			}
		}
		j := i + 1
		for j < len(samples) && sameSeqEntry(s, &samples[j], q) {
			j++
		}
		b = binary.AppendUvarint(b, uint64(q))
		if q == 0 {
			if inline++; inline*2 > len(samples) {
				return nil // cannot be at most half of the entries
			}
			c.entries = append(c.entries, seqEntry{shard: s.Shard})
			b = binary.AppendUvarint(b, uint64(len(s.ID)))
			b = append(b, s.ID...)
			b = binary.AppendUvarint(b, uint64(s.Shard))
		} else {
			c.entries = append(c.entries, seqEntry{ref: s.Ref, id: id, seq: q, shard: s.Shard})
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
	if inline*2 > len(c.entries) {
		return nil
	}
	c.body = b
	return c
}

// AppendSamples appends the chunk's samples to dst, as they were given
// to EncodeSeqChunk, for a replica written otherwise (an older node, a
// hint): the IDs are the storage series' own, or alias the chunk's
// immutable bytes for inline ones.
func (c *SeqChunk) AppendSamples(dst []storage.Sample) []storage.Sample {
	b := c.body
	_, off := binary.Uvarint(b)
	base := int64(0)
	for _, en := range c.entries {
		_, n := binary.Uvarint(b[off:])
		off += n
		var id []byte
		shard, ref := en.shard, en.ref
		if en.seq == 0 {
			l, n := binary.Uvarint(b[off:])
			off += n
			id = b[off : off+int(l) : off+int(l)]
			off += int(l)
			_, n = binary.Uvarint(b[off:])
			off += n
		} else {
			id = en.id
		}
		cnt, n := binary.Uvarint(b[off:])
		off += n
		prev := base
		for k := 0; k < int(cnt); k++ {
			u, n := binary.Uvarint(b[off:])
			off += n
			ts := prev + unzigzag(u)
			if k == 0 {
				base = ts
			}
			prev = ts
			dst = append(dst, storage.Sample{ID: id, Shard: shard, Ref: ref, T: ts,
				V: math.Float64frombits(binary.LittleEndian.Uint64(b[off:]))})
			off += 8
		}
	}
	return dst
}

// sameSeqEntry says whether b continues the entry a starts, whose number
// is q: the same storage series, or for an inline entry the same ID.
func sameSeqEntry(a, b *storage.Sample, q uint32) bool {
	if q != 0 {
		return b.Ref == a.Ref
	}
	return seqOf(b) == 0 && sameSeries(a, b)
}

// seqDefined is a sender's side of one stream's SERIES_SEQS numbers:
// those it has defined, in a bitmap by number (a map past maxSeqBits).
type seqDefined struct {
	bits []uint64
	big  map[uint32]struct{}
	n    int
	defs []byte // scratch: the definitions of the request being encoded
}

func (d *seqDefined) has(q uint32) bool {
	if q < maxSeqBits {
		w := q >> 6
		return int(w) < len(d.bits) && d.bits[w]&(1<<(q&63)) != 0
	}
	_, ok := d.big[q]
	return ok
}

func (d *seqDefined) add(q uint32) {
	d.n++
	if q < maxSeqBits {
		w := int(q >> 6)
		if w >= len(d.bits) {
			grown := make([]uint64, min(max(w+1, 2*len(d.bits)), maxSeqBits/64))
			copy(grown, d.bits)
			d.bits = grown
		}
		d.bits[w] |= 1 << (q & 63)
		return
	}
	if d.big == nil {
		d.big = map[uint32]struct{}{}
	}
	d.big[q] = struct{}{}
}

// room says whether the stream may define up to n more numbers.
func (d *seqDefined) room(n int) bool { return d.n+n <= maxStreamHandles }

// encodeSeqRequest builds WriteBatchRequest{Namespace: ns, Format:
// SERIES_SEQS, Payload: definitions + chunks} in wire form: a header
// buffer of its own, then the chunks' shared bytes as they are. It marks
// in d the numbers it defines; once it returned, the request must reach
// the receiver or the stream must be abandoned. The caller made sure d
// has room for every entry of the chunks.
func encodeSeqRequest(ns string, chunks []*SeqChunk, d *seqDefined, pool mem.BufferPool) (*writeRequest, error) {
	defs := d.defs[:0]
	ndefs := 0
	body := 0
	for _, c := range chunks {
		body += len(c.body)
		for e := range c.entries {
			en := &c.entries[e]
			q := en.seq
			if q == 0 || d.has(q) {
				continue
			}
			d.add(q)
			ndefs++
			id := en.id // the number's own, immutable ID
			defs = binary.AppendUvarint(defs, uint64(q))
			defs = binary.AppendUvarint(defs, uint64(len(id)))
			defs = append(defs, id...)
			defs = binary.AppendUvarint(defs, uint64(en.shard))
		}
	}
	d.defs = defs
	plen := uvarintLen(uint64(ndefs)) + len(defs) + body

	format := uint64(nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_SEQS)
	n := protowire.SizeTag(2) + protowire.SizeVarint(format) + protowire.SizeTag(3) + protowire.SizeVarint(uint64(plen)) +
		uvarintLen(uint64(ndefs)) + len(defs)
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
	b = binary.AppendUvarint(b, uint64(ndefs))
	b = append(b, defs...)
	if len(b) != n {
		pool.Put(buf)
		return nil, fmt.Errorf("rpc: write request (seqs) header encoded to %d bytes, expected %d", len(b), n)
	}
	*buf = b
	bufs := make(mem.BufferSlice, 0, 1+len(chunks))
	bufs = append(bufs, mem.NewBuffer(buf, pool))
	for _, c := range chunks {
		bufs = append(bufs, mem.SliceBuffer(c.body)) // shared, never written
	}
	return &writeRequest{bufs: bufs}, nil
}

// seqIndex is a receiver's map from a stream's SERIES_SEQS numbers to
// its definitions: a slice by number (a sender numbers its series densely
// from 1), a map past maxSeqIndex.
type seqIndex struct {
	bySeq  []uint32 // index+1 into series
	big    map[uint32]uint32
	series []streamSeries
}

func (x *seqIndex) lookup(q uint32) (uint32, bool) {
	if q < maxSeqIndex {
		if int(q) < len(x.bySeq) {
			if i := x.bySeq[q]; i != 0 {
				return i - 1, true
			}
		}
		return 0, false
	}
	i, ok := x.big[q]
	return i, ok
}

func (x *seqIndex) define(q uint32, s streamSeries) {
	i := uint32(len(x.series))
	x.series = append(x.series, s)
	if q < maxSeqIndex {
		if int(q) >= len(x.bySeq) {
			grown := make([]uint32, min(max(int(q)+1, 2*len(x.bySeq)), maxSeqIndex))
			copy(grown, x.bySeq)
			x.bySeq = grown
		}
		x.bySeq[q] = i + 1
		return
	}
	if x.big == nil {
		x.big = map[uint32]uint32{}
	}
	x.big[q] = i
}

// noHandle is the handle decodeSeqPayload gives a sample whose ID came
// inline: it names no series of the stream.
const noHandle = math.MaxUint32

// decodeSeqPayload appends the samples of a SERIES_SEQS payload to dst,
// defining the numbers it introduces in x, and appends each sample's
// index in x.series to hs (noHandle for an inline ID). A defined sample's
// ID is its definition's copy, its Ref the definition's ref when that was
// resolved in namespace ns; an inline ID aliases b. It never panics;
// errors wrap ErrMalformed and say where, and leave x with what was
// defined before the error (the stream must end: the sender's view of
// it no longer matches).
func decodeSeqPayload(b []byte, ns string, x *seqIndex, dst []storage.Sample, hs []uint32) ([]storage.Sample, []uint32, error) {
	const f = nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_SEQS
	start, hstart := len(dst), len(hs)
	fail := func(off int, format string, args ...any) ([]storage.Sample, []uint32, error) {
		clear(dst[start:]) // inline IDs alias b
		return dst[:start], hs[:hstart], malformedOf(f, off, format, args...)
	}
	if len(b) == 0 {
		return dst, hs, nil
	}
	off := 0
	ndefs, n := binary.Uvarint(b)
	if n <= 0 || ndefs > uint64(len(b)-n)/minSeqDefSize {
		return fail(0, "definition count: bad varint or %d cannot fit in %d bytes", ndefs, len(b))
	}
	off += n
	for d := uint64(0); d < ndefs; d++ {
		q, n := binary.Uvarint(b[off:])
		if n <= 0 || q == 0 || q > math.MaxUint32 {
			return fail(off, "definition %d: bad series number", d)
		}
		off += n
		if _, ok := x.lookup(uint32(q)); ok {
			return fail(off, "definition %d: series number %d defined before", d, q)
		}
		if len(x.series) >= maxStreamHandles {
			return fail(off, "definition %d: more than %d series in one stream", d, maxStreamHandles)
		}
		l, n := binary.Uvarint(b[off:])
		if n <= 0 || l > uint64(len(b)-off-n) {
			return fail(off, "definition %d: bad ID length", d)
		}
		off += n
		id := append([]byte(nil), b[off:off+int(l)]...)
		off += int(l)
		shard, n := binary.Uvarint(b[off:])
		if n <= 0 || shard > math.MaxUint32 {
			return fail(off, "definition %d: bad shard", d)
		}
		off += n
		x.define(uint32(q), streamSeries{id: id[:len(id):len(id)], shard: uint32(shard)})
	}
	for chunk := 0; off < len(b); chunk++ {
		total, n := binary.Uvarint(b[off:])
		if n <= 0 || total == 0 || total > uint64(len(b)-off-n)/minSampleSize {
			return fail(off, "chunk %d: sample count: bad varint, 0, or more than the bytes left hold", chunk)
		}
		off += n
		used := len(dst)
		dst = growSamples(dst, int(total))
		hs = growHandles(hs, int(total))
		end := used + int(total)
		base := int64(0)
		for e := 0; used < end; e++ {
			q, n := binary.Uvarint(b[off:])
			if n <= 0 || q > math.MaxUint32 {
				return fail(off, "chunk %d entry %d: bad series number", chunk, e)
			}
			off += n
			var id []byte
			var shard uint32
			var ref storage.SeriesRef
			h := uint32(noHandle)
			if q == 0 {
				l, n := binary.Uvarint(b[off:])
				if n <= 0 || l > uint64(len(b)-off-n) {
					return fail(off, "chunk %d entry %d: bad ID length", chunk, e)
				}
				off += n
				id = b[off : off+int(l) : off+int(l)]
				off += int(l)
				sh, n := binary.Uvarint(b[off:])
				if n <= 0 || sh > math.MaxUint32 {
					return fail(off, "chunk %d entry %d: bad shard", chunk, e)
				}
				off += n
				shard = uint32(sh)
			} else {
				i, ok := x.lookup(uint32(q))
				if !ok {
					return fail(off, "chunk %d entry %d: series number %d not defined", chunk, e, q)
				}
				ser := &x.series[i]
				id, shard, h = ser.id, ser.shard, i
				if ser.ns == ns {
					ref = ser.ref
				}
			}
			cnt, n := binary.Uvarint(b[off:])
			if n <= 0 || cnt == 0 || cnt > uint64(end-used) {
				return fail(off, "chunk %d entry %d: sample count %d with %d of %d samples left", chunk, e, cnt, end-used, total)
			}
			off += n
			prev := base
			for k := 0; k < int(cnt); k++ {
				u, n := binary.Uvarint(b[off:])
				if n <= 0 || len(b)-off-n < 8 {
					return fail(off, "chunk %d entry %d sample %d: truncated", chunk, e, k)
				}
				off += n
				ts := prev + unzigzag(u)
				if k == 0 {
					base = ts
				}
				prev = ts
				dst[used] = storage.Sample{ID: id, Shard: shard, T: ts, Ref: ref,
					V: math.Float64frombits(binary.LittleEndian.Uint64(b[off:]))}
				hs[used] = h
				off += 8
				used++
			}
		}
	}
	return dst, hs, nil
}
