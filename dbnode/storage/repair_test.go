package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// TestDigestsSameFlushedOrInMemory: two replicas with the same samples
// agree whether one flushed the block and the other did not, and a
// cold write on top of a flushed block is part of the digest.
func TestDigestsSameFlushedOrInMemory(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	a := openDB(t, testOpts(t.TempDir(), clk))
	b := openDB(t, testOpts(t.TempDir(), clk))
	id, id2 := sid("m", "k", "1"), sid("m", "k", "2")
	for _, db := range []*Database{a, b} {
		require.NoError(t, db.WriteBatch("default", samples(db, id, ms(t0), ms(t0)+1000, ms(t0)+2000)))
		require.NoError(t, db.WriteBatch("default", samples(db, id2, ms(t0)+500)))
	}
	clk.Add(2*time.Hour + 11*time.Minute)
	require.NoError(t, a.Tick()) // a flushes, b keeps the block in memory
	fb, err := a.FlushedBlocks("default", a.Shard(id))
	require.NoError(t, err)
	require.Len(t, fb, 1)

	all := func(db *Database, shard uint32) []BlockDigest {
		d, err := db.BlockDigests("default", shard, 0, math.MaxInt64)
		require.NoError(t, err)
		return d
	}
	sh := a.Shard(id)
	require.NotEmpty(t, all(a, sh))
	require.Equal(t, all(b, sh), all(a, sh))
	require.Equal(t, 3+boolSamples(a.Shard(id2) == sh), all(a, sh)[0].Samples)

	// A range cut inside the block sees only the samples before the cut.
	cut, err := a.BlockDigests("default", sh, 0, ms(t0)+1500)
	require.NoError(t, err)
	sums, err := a.SeriesChecksums("default", sh, ms(t0), 0, ms(t0)+1500)
	require.NoError(t, err)
	require.Equal(t, DigestOf(ms(t0), sums), cut[0])

	// A cold write on the flushed block changes a's digest until b has it.
	require.NoError(t, a.WriteBatch("default", []Sample{{ID: id, Shard: sh, T: ms(t0) + 3000, V: 9}}))
	require.NotEqual(t, all(b, sh), all(a, sh))
	res, err := b.RepairSeries("default", []RepairInput{{ID: id, Points: []RepairPoint{{T: ms(t0), V: 0}, {T: ms(t0) + 3000, V: 9}}}})
	require.NoError(t, err)
	require.Equal(t, RepairResult{Series: 1, Written: 1}, res, "the sample b already holds with a winning value is not rewritten")
	require.Equal(t, all(a, sh), all(b, sh))
}

func boolSamples(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRepairSeriesRule: the larger bit pattern wins at equal timestamps,
// whichever side holds it; samples out of retention are skipped.
func TestRepairSeriesRule(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("m", "k", "x")
	sh := db.Shard(id)
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: id, Shard: sh, T: ms(t0), V: 1}, {ID: id, Shard: sh, T: ms(t0) + 1, V: -1}}))
	same := sid("m", "k", "same")
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: same, Shard: db.Shard(same), T: ms(t0), V: 7}}))
	res, err := db.RepairSeries("default", []RepairInput{{ID: id, Points: []RepairPoint{
		{T: ms(t0) - 72*3600_000, V: 1}, // out of retention
		{T: ms(t0), V: 2},               // wins over 1
		{T: ms(t0) + 1, V: 2},           // loses to -1 (sign bit)
		{T: ms(t0) + 2, V: 3},           // new
	}}, {ID: same, Points: []RepairPoint{{T: ms(t0), V: 7}}}}) // already held
	require.NoError(t, err)
	require.Equal(t, RepairResult{Series: 1, Written: 2, Skipped: 1}, res)
	require.Equal(t, []tv{{ms(t0), 2}, {ms(t0) + 1, -1}, {ms(t0) + 2, 3}}, readAll(t, db, id, ms(t0), ms(t0)+10))
}

// Repair checksums cover native histograms: replicas agree when they hold
// the same ones, flushed or in memory, and differ when one misses one; a
// float-only series hashes as it did before histograms existed.
func TestDigestsCoverHistograms(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	a := openDB(t, testOpts(t.TempDir(), clk))
	b := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("lat", "k", "1")
	sh := a.Shard(id)
	hs := mixedSamples(a, id, ms(t0), 6)
	for _, db := range []*Database{a, b} {
		require.NoError(t, db.WriteHistograms("default", hs))
		require.NoError(t, db.WriteBatch("default", samples(db, id, ms(t0)+500)))
	}
	sums := func(db *Database) []SeriesChecksum {
		s, err := db.SeriesChecksums("default", sh, ms(t0), 0, math.MaxInt64)
		require.NoError(t, err)
		return s
	}
	require.Equal(t, sums(a), sums(b))
	require.Equal(t, 7, sums(a)[0].Samples)
	clk.Add(2*time.Hour + 11*time.Minute)
	require.NoError(t, a.Tick()) // a flushes, b keeps the block in memory
	require.Equal(t, sums(a), sums(b))

	// One more histogram on a: the checksums differ.
	require.NoError(t, a.WriteHistograms("default", []HistogramSample{{ID: id, Shard: sh, T: ms(t0) + 60_000, H: testHist(1)}}))
	require.NotEqual(t, sums(a), sums(b))

	// Floats alone hash as (t, value bits) pairs, as before.
	var h sampleHasher
	fl := samples(a, id, ms(t0)+500)
	it := readIter(t, b, id)
	got, n, err := h.sum(it, nil, 0, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	want := xxhashOf(uint64(fl[0].T), math.Float64bits(fl[0].V))
	require.Equal(t, want, got)
}

func readIter(t *testing.T, db *Database, id []byte) encoding.Iterator {
	t.Helper()
	it, err := db.Read("default", id, 0, math.MaxInt64)
	require.NoError(t, err)
	return it
}

func xxhashOf(words ...uint64) uint64 {
	var b []byte
	for _, w := range words {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return xxhash.Sum64(b)
}

// histStrings reads a series' histograms as "t kind histogram" strings.
func histStrings(t *testing.T, db *Database, id []byte, from, to int64) []string {
	t.Helper()
	it, err := db.ReadHistograms("default", id, from, to)
	require.NoError(t, err)
	var out []string
	for it.Next() {
		if it.IsFloat() {
			tt, h := it.AtFloatHistogram(nil)
			out = append(out, fmt.Sprintf("%d f %s", tt, h))
		} else {
			tt, h := it.AtHistogram(nil)
			out = append(out, fmt.Sprintf("%d i %s", tt, h))
		}
	}
	require.NoError(t, it.Err())
	return out
}

// RepairSeries fills what a replica lacks and, where two replicas
// hold different histograms at one timestamp, both keep the one
// HistogramWins picks whichever side repairs first: they converge.
func TestRepairHistogramsConverge(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	a := openDB(t, testOpts(t.TempDir(), clk))
	b := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("lat", "k", "1")
	all := mixedSamples(a, id, ms(t0), 6)
	require.NoError(t, a.WriteHistograms("default", all))
	other := all[3]
	other.H, other.FH = testHist(40), nil // a different histogram at all[3].T
	require.NoError(t, b.WriteHistograms("default", []HistogramSample{all[0], other}))

	res, err := b.RepairSeries("default", []RepairInput{{ID: id, Histograms: all}})
	require.NoError(t, err)
	aWins := HistogramWins(all[3].H, all[3].FH, other.H, other.FH)
	want := 4 // all but all[0] (held) and all[3] (held, different)
	if aWins {
		want = 5
	}
	require.Equal(t, RepairResult{Series: 1, Written: want}, res)
	res, err = a.RepairSeries("default", []RepairInput{{ID: id, Histograms: []HistogramSample{all[0], other}}})
	require.NoError(t, err)
	if aWins {
		require.Equal(t, RepairResult{}, res)
	} else {
		require.Equal(t, RepairResult{Series: 1, Written: 1}, res)
	}
	ra, rb := histStrings(t, a, id, 0, ms(t0)+10_000), histStrings(t, b, id, 0, ms(t0)+10_000)
	require.Len(t, ra, 6)
	require.Equal(t, ra, rb)
	// The rule is a strict order: a histogram never wins over itself,
	// and exactly one of two different ones wins.
	require.False(t, HistogramWins(other.H, nil, other.H, nil))
	require.NotEqual(t, aWins, HistogramWins(other.H, other.FH, all[3].H, all[3].FH))
}

// One repair input carries a series' samples of every kind: both merge
// in one pass (one write), each by its kind's rule, and the series counts
// once. A float at a timestamp does not hide the peer's histogram there
// (the kinds merge separately).
func TestRepairSeriesEveryKindAtOnce(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("req", "k", "both")
	hs := mixedSamples(db, id, ms(t0), 3)
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: id, Shard: db.Shard(id), T: hs[2].T + 1000, V: 1}}))
	require.NoError(t, db.WriteHistograms("default", hs[:1]))
	pts := []RepairPoint{{T: hs[2].T + 1000, V: 1}, {T: hs[2].T + 2000, V: 2}}
	res, err := db.RepairSeries("default", []RepairInput{{ID: id, Points: pts, Histograms: hs}})
	require.NoError(t, err)
	require.Equal(t, RepairResult{Series: 1, Written: 3}, res, "histograms 1 and 2, float at +2000")
	require.Len(t, histStrings(t, db, id, 0, ms(t0)+10_000), 3)
	it, err := db.Read("default", id, 0, ms(t0)+10_000)
	require.NoError(t, err)
	n := 0
	for it.Next() {
		n++
	}
	require.NoError(t, it.Err())
	require.Equal(t, 2, n)
	res, err = db.RepairSeries("default", []RepairInput{{ID: id, Points: pts, Histograms: hs}})
	require.NoError(t, err)
	require.Equal(t, RepairResult{}, res, "nothing left to repair")
}
