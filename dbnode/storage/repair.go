package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// This file is the storage side of anti-entropy repair (package repair):
// checksums over a shard's samples, block by block, as the node would
// answer a read (filesets and memory merged), so two replicas that hold
// the same samples agree whether or not each has flushed the block yet;
// and the merge that applies a peer's samples under the repair rule.

// SeriesChecksum is one series' checksum over its samples in a range:
// xxhash64 over (timestamp, float64 bits) as 16 little-endian bytes per
// sample, in timestamp order. Equal checksums mean equal samples.
type SeriesChecksum struct {
	ID       []byte
	Checksum uint64
	Samples  int
}

// BlockDigest sums up one block of a shard over a range: Digest is
// xxhash64 over its series' (uvarint ID length, ID, 8-byte LE checksum)
// in ID order, series without samples in the range left out.
type BlockDigest struct {
	BlockStart int64
	Series     int
	Samples    int
	Digest     uint64
}

// BlockStartOf is the start of the block of namespace ns holding t.
func (db *Database) BlockStartOf(nsName string, t int64) (int64, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return 0, err
	}
	return ns.blockStart(t), nil
}

// BlockDigests returns the digest of every block of shard holding samples
// in [start, end) (unix ms, end exclusive), by block start. Only samples
// in the range count, so two nodes asked with the same range compare the
// same samples even when one holds more recent ones.
func (db *Database) BlockDigests(nsName string, shard uint32, start, end int64) ([]BlockDigest, error) {
	ns, sh, err := db.repairShard(nsName, shard)
	if err != nil || sh == nil {
		return nil, err
	}
	if ns.opts.RollupOf != "" {
		return rollupBlockDigests(ns, sh, start, end)
	}
	var out []BlockDigest
	for _, bs := range shardBlockStarts(ns, sh, start, end) {
		sums, err := db.blockChecksums(ns, sh, bs, start, end)
		if err != nil {
			return nil, err
		}
		if len(sums) == 0 {
			continue
		}
		out = append(out, digestOf(bs, sums))
	}
	return out, nil
}

// SeriesChecksums returns, in ID order, the checksum of every series of
// shard with samples in block blockStart restricted to [start, end).
func (db *Database) SeriesChecksums(nsName string, shard uint32, blockStart, start, end int64) ([]SeriesChecksum, error) {
	ns, sh, err := db.repairShard(nsName, shard)
	if err != nil || sh == nil {
		return nil, err
	}
	if blockStart != ns.blockStart(blockStart) {
		return nil, fmt.Errorf("block start %d is not aligned to the block size", blockStart)
	}
	if ns.opts.RollupOf != "" {
		return rollupChecksums(ns, sh, blockStart, start, end)
	}
	return db.blockChecksums(ns, sh, blockStart, start, end)
}

func (db *Database) repairShard(nsName string, shard uint32) (*namespace, *shard, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, nil, err
	}
	if shard >= db.opts.NumShards {
		return nil, nil, fmt.Errorf("shard %d out of range", shard)
	}
	return ns, ns.existingShard(shard), nil
}

// shardBlockStarts lists the blocks of sh, flushed or in memory, that
// overlap [start, end).
func shardBlockStarts(ns *namespace, sh *shard, start, end int64) []int64 {
	seen := map[int64]bool{}
	keep := func(bs int64) {
		if bs+ns.blockSize > start && bs < end {
			seen[bs] = true
		}
	}
	for _, bs := range sh.blockStarts() {
		keep(bs)
	}
	for _, s := range sh.snapshotSeries() {
		s.stats(func(bs int64, _, _ int) { keep(bs) })
	}
	out := make([]int64, 0, len(seen))
	for bs := range seen {
		out = append(out, bs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// blockChecksums walks block bs of sh once: the fileset in ID order, each
// series merged with its memory buckets of the block (memory last, as a
// read does), then the series only in memory.
func (db *Database) blockChecksums(ns *namespace, sh *shard, bs, start, end int64) ([]SeriesChecksum, error) {
	lo, hi := max(bs, start), min(bs+ns.blockSize, end)
	if lo >= hi {
		return nil, nil
	}
	mem := map[string]*Series{}
	for _, s := range sh.snapshotSeries() {
		if s.hasBlock(bs) {
			mem[s.id] = s
		}
	}
	var (
		out []SeriesChecksum
		h   sampleHasher
	)
	add := func(id []byte, it encoding.Iterator, hits []encoding.HistogramIterator) error {
		var hit encoding.HistogramIterator
		if len(hits) > 0 {
			hit = encoding.MergeHistogramIterators(hits...)
		}
		sum, n, err := h.sum(it, hit, lo, hi)
		if err != nil {
			return fmt.Errorf("checksum series of block %d of shard %d: %w", bs, sh.id, err)
		}
		if n > 0 {
			out = append(out, SeriesChecksum{ID: append([]byte(nil), id...), Checksum: sum, Samples: n})
		}
		return nil
	}
	if r := sh.reader(bs); r != nil {
		err := r.RangeData(func(id, data []byte) error {
			var its []encoding.Iterator
			var hits []encoding.HistogramIterator
			fl, hl := encoding.PayloadIterators(data)
			if fl != nil {
				its = append(its, fl)
			}
			if hl != nil {
				hits = append(hits, hl)
			}
			if s := mem[string(id)]; s != nil {
				delete(mem, string(id))
				its = append(its, s.iterators(bs, bs)...)
				hits = append(hits, s.histIterators(bs, bs)...)
			}
			return add(id, mergeAll(its), hits)
		})
		if err != nil {
			return nil, fmt.Errorf("read block %d of shard %d: %w", bs, sh.id, err)
		}
	}
	for _, s := range mem {
		if err := add(s.ID(), mergeAll(s.iterators(bs, bs)), s.histIterators(bs, bs)); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID, out[j].ID) < 0 })
	return out, nil
}

func mergeAll(its []encoding.Iterator) encoding.Iterator {
	switch len(its) {
	case 0:
		return emptyIterator{}
	case 1:
		return its[0]
	}
	return encoding.MergeIterators(its...)
}

// DigestOf folds series checksums (in ID order) into a block digest; both
// sides of a repair compute digests with it.
func DigestOf(blockStart int64, sums []SeriesChecksum) BlockDigest { return digestOf(blockStart, sums) }

func digestOf(bs int64, sums []SeriesChecksum) BlockDigest {
	d := BlockDigest{BlockStart: bs, Series: len(sums)}
	h := xxhash.New()
	var buf [binary.MaxVarintLen64 + 8]byte
	for _, s := range sums {
		_, _ = h.Write(binary.AppendUvarint(buf[:0], uint64(len(s.ID))))
		_, _ = h.Write(s.ID)
		binary.LittleEndian.PutUint64(buf[:8], s.Checksum)
		_, _ = h.Write(buf[:8])
		d.Samples += s.Samples
	}
	d.Digest = h.Sum64()
	return d
}

// sampleHasher hashes samples through a reused buffer, one Write per 64
// samples rather than per sample.
type sampleHasher struct {
	buf []byte
	d   *xxhash.Digest
}

// sum hashes the float samples of it in [lo, hi), then the native
// histograms of hit (nil: none) there. A series without histograms hashes
// exactly as before histograms existed, so nodes of either version agree
// on it; one with histograms differs from what an older node computes
// (which cannot read them: repair then names the series it fails on).
func (h *sampleHasher) sum(it encoding.Iterator, hit encoding.HistogramIterator, lo, hi int64) (uint64, int, error) {
	if h.d == nil {
		h.d = xxhash.New()
	}
	h.d.Reset()
	h.buf = h.buf[:0]
	n := 0
	for it.Next() {
		t, v := it.At()
		if t < lo {
			continue
		}
		if t >= hi {
			break
		}
		h.buf = binary.LittleEndian.AppendUint64(h.buf, uint64(t))
		h.buf = binary.LittleEndian.AppendUint64(h.buf, math.Float64bits(v))
		n++
		if len(h.buf) >= 64*16 {
			_, _ = h.d.Write(h.buf)
			h.buf = h.buf[:0]
		}
	}
	if err := it.Err(); err != nil {
		return 0, 0, err
	}
	if hit != nil {
		var fh *histogram.FloatHistogram
		var ih *histogram.Histogram
		for hit.Next() {
			t := hit.AtT()
			if t < lo {
				continue
			}
			if t >= hi {
				break
			}
			h.buf = binary.LittleEndian.AppendUint64(h.buf, uint64(t))
			if hit.IsFloat() {
				_, fh = hit.AtFloatHistogram(fh)
				h.buf = appendFloatHistogram(append(h.buf, 'F'), fh)
			} else {
				_, ih = hit.AtHistogram(ih)
				h.buf = appendHistogram(append(h.buf, 'H'), ih)
			}
			n++
			if len(h.buf) >= 64*16 {
				_, _ = h.d.Write(h.buf)
				h.buf = h.buf[:0]
			}
		}
		if err := hit.Err(); err != nil {
			return 0, 0, err
		}
	}
	_, _ = h.d.Write(h.buf)
	return h.d.Sum64(), n, nil
}

// appendHistogram appends every field of h, bit for bit, for hashing.
func appendHistogram(b []byte, h *histogram.Histogram) []byte {
	b = appendLayout(b, h.CounterResetHint, h.Schema, h.ZeroThreshold, h.PositiveSpans, h.NegativeSpans, h.CustomValues)
	b = binary.AppendUvarint(b, h.ZeroCount)
	b = binary.AppendUvarint(b, h.Count)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(h.Sum))
	for _, d := range [2][]int64{h.PositiveBuckets, h.NegativeBuckets} {
		b = binary.AppendUvarint(b, uint64(len(d)))
		for _, x := range d {
			b = binary.AppendVarint(b, x)
		}
	}
	return b
}

// appendFloatHistogram is appendHistogram for float histograms.
func appendFloatHistogram(b []byte, h *histogram.FloatHistogram) []byte {
	b = appendLayout(b, h.CounterResetHint, h.Schema, h.ZeroThreshold, h.PositiveSpans, h.NegativeSpans, h.CustomValues)
	for _, v := range []float64{h.ZeroCount, h.Count, h.Sum} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	for _, d := range [2][]float64{h.PositiveBuckets, h.NegativeBuckets} {
		b = binary.AppendUvarint(b, uint64(len(d)))
		for _, x := range d {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
	}
	return b
}

func appendLayout(b []byte, hint histogram.CounterResetHint, schema int32, zt float64, pos, neg []histogram.Span, custom []float64) []byte {
	b = append(b, byte(hint))
	b = binary.AppendVarint(b, int64(schema))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(zt))
	for _, sp := range [2][]histogram.Span{pos, neg} {
		b = binary.AppendUvarint(b, uint64(len(sp)))
		for _, s := range sp {
			b = binary.AppendVarint(b, int64(s.Offset))
			b = binary.AppendUvarint(b, uint64(s.Length))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(custom)))
	for _, c := range custom {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c))
	}
	return b
}

// hasBlock reports whether the series has a memory bucket of block bs.
func (s *Series) hasBlock(bs int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for b := range s.floatBuckets() {
		if b.start == bs {
			return true
		}
	}
	if h := s.histLocked(); h != nil {
		for _, b := range h.buckets {
			if b.start == bs {
				return true
			}
		}
	}
	return false
}

// RepairPoint is one sample of a series as a peer holds it.
type RepairPoint struct {
	T int64
	V float64
}

// Wins is the repair merge rule for two values at the same timestamp:
// the one whose float64 bit pattern is larger (as an unsigned integer)
// wins. It is a total order on bit patterns, NaNs included, so every
// replica picks the same value whichever side it sees first, and replicas
// converge.
func Wins(candidate, current float64) bool {
	return math.Float64bits(candidate) > math.Float64bits(current)
}

// RepairInput is one series as a peer holds it: its samples of every
// kind over the compared range, each kind sorted by timestamp (ID and
// Shard of the histogram samples are ignored: the series is ID).
type RepairInput struct {
	ID         []byte
	Points     []RepairPoint
	Histograms []HistogramSample
}

// RepairResult counts what RepairSeries wrote: Series is the number of
// series with at least one sample to write, Written the samples written,
// Skipped those storage refused (out of retention or too far in the
// future by the time they arrived).
type RepairResult struct {
	Series, Written, Skipped int
}

// RepairSeries merges peers' samples of series into this node, every
// kind through one merge (repairKind) with the kind's rule: a sample is
// written when the node has none of its kind at its timestamp, or has one
// the peer's Wins (floats) or HistogramWins (histograms) over. It reads
// each series' local samples over the peer's time span first, so what the
// node already holds costs no write. All the samples to write go in one
// batch, written as LoadBatch does (commit log, memory, index for every
// block a series opens a bucket in; accepted even when cold writes are
// off) and durable when it returns. Samples storage refuses for good (out
// of retention by now) are counted as skipped; any other error fails the
// repair.
func (db *Database) RepairSeries(nsName string, in []RepairInput) (RepairResult, error) {
	var (
		res   RepairResult
		batch Batch
	)
	for _, s := range in {
		n := batch.Len()
		var err error
		if batch.Floats, err = db.repairFloats(nsName, s, batch.Floats); err != nil {
			return RepairResult{}, err
		}
		if batch.Histograms, err = db.repairHistograms(nsName, s, batch.Histograms); err != nil {
			return RepairResult{}, err
		}
		if batch.Len() > n {
			res.Series++
		}
	}
	if batch.Len() == 0 {
		return res, nil
	}
	err := db.write(nsName, batch, true)
	var rej *RejectedError
	switch {
	case errors.As(err, &rej):
		res.Written, res.Skipped = batch.Len()-rej.Total, rej.Total
	case err != nil:
		return RepairResult{}, err
	default:
		res.Written = batch.Len()
	}
	return res, nil
}

// localWalk is the node's own samples of one kind of a series, in time
// order, as repairKind walks them (encoding.HistogramIterator; floatWalk).
type localWalk interface {
	Next() bool
	AtT() int64
	Err() error
}

// repairKind merges a peer's samples of one kind of a series (peer,
// sorted by time; t gives a sample's time) with the node's own samples
// of that kind over the peer's time span (read): it calls add for each
// peer sample the node lacks at its timestamp, or whose value wins over
// the node's current one there (wins, given the node's walk at it).
func repairKind[P any, L localWalk](peer []P, t func(*P) int64, read func(lo, hi int64) (L, error), wins func(L, *P) bool, add func(*P)) error {
	if len(peer) == 0 {
		return nil
	}
	local, err := read(t(&peer[0]), t(&peer[len(peer)-1]))
	if err != nil {
		return err
	}
	i := 0
	for local.Next() {
		lt := local.AtT()
		for ; i < len(peer) && t(&peer[i]) < lt; i++ {
			add(&peer[i])
		}
		if i < len(peer) && t(&peer[i]) == lt {
			if wins(local, &peer[i]) {
				add(&peer[i])
			}
			i++
		}
	}
	if err := local.Err(); err != nil {
		return err
	}
	for ; i < len(peer); i++ {
		add(&peer[i])
	}
	return nil
}

// floatWalk is an encoding.Iterator as a localWalk.
type floatWalk struct {
	it encoding.Iterator
	t  int64
	v  float64
}

func (w *floatWalk) Next() bool {
	if !w.it.Next() {
		return false
	}
	w.t, w.v = w.it.At()
	return true
}

func (w *floatWalk) AtT() int64 { return w.t }
func (w *floatWalk) Err() error { return w.it.Err() }

// repairFloats appends to batch the float samples of peer series s that
// win over (or are missing from) the local series.
func (db *Database) repairFloats(nsName string, s RepairInput, batch []Sample) ([]Sample, error) {
	id, shard := s.ID, db.Shard(s.ID)
	err := repairKind(s.Points, func(p *RepairPoint) int64 { return p.T },
		func(lo, hi int64) (*floatWalk, error) {
			it, err := db.Read(nsName, id, lo, hi)
			return &floatWalk{it: it}, err
		},
		func(l *floatWalk, p *RepairPoint) bool { return Wins(p.V, l.v) },
		func(p *RepairPoint) { batch = append(batch, Sample{ID: id, Shard: shard, T: p.T, V: p.V}) })
	if err != nil {
		return nil, fmt.Errorf("read local series: %w", err)
	}
	return batch, nil
}
