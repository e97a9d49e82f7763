package promapi

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/cespare/xxhash/v2"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
)

// A pushed-down part's replicas prove they agree with a digest of the
// samples they read (query.Result.Digest), not of the step values they
// computed from them: equal samples give equal answers, and a replica
// asked only for its digest (query.Request.DigestOnly) then reads and
// hashes the series without computing the function, the grouping labels
// or the aggregation, which at read level unstrict_majority was half of
// every node's work on a query. The replica answering in full hashes the
// samples as its workers decode them (sampleHasher), so the two hash the
// same thing: every float sample of the read, in series order, whatever
// part of it the function used.

// dataDigestSeed sets this digest apart from the step-value digest nodes
// before it sent: a part with owners of both kinds never agrees, and is
// read raw (correct, only slower, while a rolling upgrade runs).
const dataDigestSeed = 0x7465737365726131 // "tessera1"

// sampleHasher passes a series' samples through, hashing each one its
// reader takes (bit-exact: stale markers and NaN payloads count).
type sampleHasher struct {
	it encoding.Iterator
	h  uint64
	n  int
}

func (s *sampleHasher) reset(it encoding.Iterator) { *s = sampleHasher{it: it, h: dataDigestSeed} }

func (s *sampleHasher) Next() bool {
	if !s.it.Next() {
		return false
	}
	t, v := s.it.At()
	s.h = mixSample(s.h, t, v)
	s.n++
	return true
}

func (s *sampleHasher) At() (int64, float64) { return s.it.At() }
func (s *sampleHasher) Err() error           { return s.it.Err() }

// drain hashes what its reader left unread.
func (s *sampleHasher) drain() {
	for s.Next() {
	}
}

// sum is the series' digest, 0 without samples: summed over series, the
// part's digest is the same in whatever order its series were read.
func (s *sampleHasher) sum(id []byte) uint64 {
	if s.n == 0 {
		return 0
	}
	return fmix(xxhash.Sum64(id) ^ fmix(s.h+uint64(s.n)))
}

// mixSample folds one sample into h (a multiply-rotate step per word,
// as in the xxhash rounds: cheap per sample, every bit of t and v felt).
func mixSample(h uint64, t int64, v float64) uint64 {
	h = bits.RotateLeft64(h^(uint64(t)*0x9e3779b185ebca87), 31) * 0xc2b2ae3d27d4eb4f
	return bits.RotateLeft64(h^(math.Float64bits(v)*0x165667b19e3779f9), 27) * 0x9e3779b185ebca87
}

// fmix is murmur3's 64-bit finaliser.
func fmix(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// digestSeries is a digest-only replica's work for one series: its
// samples hashed as the full answer's worker hashes them, nothing else.
func (w *fastWorker) digestSeries(it tstorage.SeriesIterator) (uint64, error) {
	w.hv.reset(w.samples(it))
	w.hv.drain()
	if err := w.hv.Err(); err != nil && w.hv.n == 0 {
		return 0, fmt.Errorf("read series %q: %w", it.ID, err)
	}
	return w.hv.sum(it.ID), nil
}
