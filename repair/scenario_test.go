package repair

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Times of the scenarios: now is 13:00; the block [10:00, 12:00) is
// flushed by a tick, [12:00, 14:00) is in memory, settled up to 12:49
// (bufferPast 10m + margin 1m).
var (
	flushedFrom = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	memFrom     = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	settled     = time.Date(2026, 11, 20, 12, 49, 0, 0, time.UTC)
)

func flat(v float64) func(int64) float64 { return func(int64) float64 { return v } }
func ramp(t int64) float64               { return float64(t%100000) / 7 }

// seed writes the same series to every given node: four series with a
// flushed block and settled memory.
func seed(c *cluster, nodes ...int) [][]byte {
	var ids [][]byte
	for _, job := range []string{"api", "db", "web", "cache"} {
		id := seriesID("up", job)
		ids = append(ids, id)
		c.write(nodes, id, every(flushedFrom, memFrom, time.Minute), ramp)
		c.write(nodes, id, every(memFrom, settled, time.Minute), ramp)
	}
	return ids
}

func tickAll(t *testing.T, c *cluster) {
	for _, db := range c.dbs {
		require.NoError(t, db.Tick())
	}
}

func TestAgreeExchangesDigestsOnly(t *testing.T) {
	c := newCluster(t, 3)
	seed(c, 0, 1, 2)
	tickAll(t, c)
	r := c.repairer(0, nil)
	p, err := r.RunPass(context.Background())
	require.NoError(t, err)
	require.Equal(t, testShards, p.ShardsDone)
	require.NotZero(t, p.BlocksCompared)
	require.Zero(t, p.BlocksDiffering)
	require.Zero(t, p.SeriesCompared, "agreeing digests must not be narrowed")
	require.Zero(t, p.Errors)
	for _, peer := range c.peers[1:] {
		d, cs, f, _ := peer.calls()
		require.Equal(t, testShards, d, "one digest call per shard")
		require.Zero(t, cs)
		require.Zero(t, f)
	}
}

func TestOneSeriesDiffersIsPulledAndIndexed(t *testing.T) {
	c := newCluster(t, 2)
	ids := seed(c, 0, 1)
	// Node 1 alone holds a new series in the flushed block and extra
	// samples of "db" in memory.
	lonely := seriesID("lonely", "batch")
	c.write([]int{1}, lonely, every(flushedFrom.Add(30*time.Minute), flushedFrom.Add(90*time.Minute), 30*time.Second), ramp)
	c.write([]int{1}, ids[1], every(memFrom.Add(30*time.Second), settled, 10*time.Minute), flat(42))
	tickAll(t, c)

	r := c.repairer(0, nil)
	p, err := r.RunPass(context.Background())
	require.NoError(t, err)
	require.Zero(t, p.Errors)
	require.Equal(t, int64(2), p.SeriesDiffering)
	require.Equal(t, int64(2), p.SeriesRepaired)
	require.Equal(t, int64(120+5), p.SamplesRepaired)
	_, _, _, fetched := c.peers[1].calls()
	require.Equal(t, 2, fetched, "only the differing series are pulled")

	lo, hi := Window(c.dbs[0].Namespaces()[0], c.clk.Now(), time.Minute)
	for _, id := range append(ids, lonely) {
		require.Equal(t, readAll(t, c.dbs[1], id, lo, hi-1), readAll(t, c.dbs[0], id, lo, hi-1))
	}
	// The pulled series is found by a label matcher on node 0.
	found, err := c.dbs[0].Query(context.Background(), testNS,
		[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "job", "batch")}, lo, hi, storage.QueryOptions{})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, lonely, found[0].ID)
	n := 0
	for found[0].Values.Next() {
		n++
	}
	require.Equal(t, 120, n)

	// Converged: the next pass finds nothing.
	p, err = r.RunPass(context.Background())
	require.NoError(t, err)
	require.Zero(t, p.BlocksDiffering)
	require.Equal(t, c.digests(1), c.digests(0))
}

func TestMissingBlockComesBack(t *testing.T) {
	c := newCluster(t, 2)
	ids := seed(c, 1) // node 0 has nothing at all
	c.write([]int{0}, ids[0], every(memFrom, settled, time.Minute), ramp)
	tickAll(t, c)
	require.NotEqual(t, c.digests(1), c.digests(0))

	r := c.repairer(0, nil)
	p, err := r.RunPass(context.Background())
	require.NoError(t, err)
	require.Zero(t, p.Errors)
	require.Equal(t, c.digests(1), c.digests(0))

	// The block is flushed to a fileset of node 0 at its next tick and the
	// series are found by label.
	require.NoError(t, c.dbs[0].Tick())
	for s := uint32(0); s < testShards; s++ {
		want, err := c.dbs[1].FlushedBlocks(testNS, s)
		require.NoError(t, err)
		got, err := c.dbs[0].FlushedBlocks(testNS, s)
		require.NoError(t, err)
		require.Equal(t, len(want), len(got), "shard %d", s)
	}
	found, err := c.dbs[0].Query(context.Background(), testNS,
		[]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "job", ".+")},
		flushedFrom.UnixMilli(), memFrom.UnixMilli()-1, storage.QueryOptions{})
	require.NoError(t, err)
	require.Len(t, found, len(ids))
	for _, s := range found {
		n := 0
		for s.Values.Next() {
			n++
		}
		require.Equal(t, 120, n, "samples of %q in the flushed block", s.ID)
	}
}

func TestSameTimestampDifferentValuesConverge(t *testing.T) {
	c := newCluster(t, 2)
	id := seriesID("conflict", "x")
	ts := every(flushedFrom, flushedFrom.Add(5*time.Minute), time.Minute) // 5 samples
	// Per timestamp, which node holds which value: the winner by the rule
	// is the larger bit pattern (-1 > 2 > 1 as bits: the sign bit is the
	// top bit).
	vals0 := []float64{1, 2, -1, 5, math.NaN()}
	vals1 := []float64{2, 1, 3, 5, 0}
	for i, t0 := range ts {
		c.write([]int{0}, id, []int64{t0}, flat(vals0[i]))
		c.write([]int{1}, id, []int64{t0}, flat(vals1[i]))
	}
	tickAll(t, c)
	r0, r1 := c.repairer(0, nil), c.repairer(1, nil)
	_, err := r0.RunPass(context.Background())
	require.NoError(t, err)
	_, err = r1.RunPass(context.Background())
	require.NoError(t, err)

	got0 := readAll(t, c.dbs[0], id, ts[0], ts[len(ts)-1])
	got1 := readAll(t, c.dbs[1], id, ts[0], ts[len(ts)-1])
	require.Len(t, got0, len(ts))
	for i := range ts {
		want := vals1[i]
		if storage.Wins(vals0[i], vals1[i]) {
			want = vals0[i]
		}
		require.Equal(t, math.Float64bits(want), math.Float64bits(got0[i].V), "node 0 sample %d", i)
		require.Equal(t, math.Float64bits(want), math.Float64bits(got1[i].V), "node 1 sample %d", i)
	}
	require.Equal(t, c.digests(1), c.digests(0))
	// And the rule is what the doc says.
	require.True(t, storage.Wins(2, 1))
	require.True(t, storage.Wins(-1, 2))
	require.False(t, storage.Wins(5, 5))
}

func TestPeerFailingMidwayKeepsWhatWasMergedAndRetries(t *testing.T) {
	c := newCluster(t, 2)
	var ids [][]byte
	for _, job := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		id := seriesID("only1", job)
		ids = append(ids, id)
		c.write([]int{1}, id, every(flushedFrom, memFrom, 5*time.Minute), ramp)
	}
	tickAll(t, c)
	c.peers[1].failFetchAfter = 1 // the second Fetch fails
	r := c.repairer(0, func(o *Options) { o.SeriesPerFetch = 1 })
	p, err := r.RunPass(context.Background())
	require.NoError(t, err)
	require.NotZero(t, p.Errors)
	require.Less(t, p.SeriesRepaired, int64(len(ids)))
	st := r.Status()
	failed := 0
	for _, s := range st.Shards {
		if s.Error != "" {
			failed++
			require.Contains(t, s.Error, "connection reset")
			require.Contains(t, s.Error, "peer b")
		}
	}
	require.NotZero(t, failed)

	// The peer recovers: the next pass repairs the rest.
	c.peers[1].mu.Lock()
	c.peers[1].failFetchAfter = 0
	c.peers[1].mu.Unlock()
	p, err = r.RunPass(context.Background())
	require.NoError(t, err)
	require.Zero(t, p.Errors)
	require.Equal(t, c.digests(1), c.digests(0))
}

func TestCompareOnlyChangesNothing(t *testing.T) {
	c := newCluster(t, 2)
	seed(c, 1)
	tickAll(t, c)
	before := c.digests(0)
	r := c.repairer(0, func(o *Options) { o.CompareOnly = true })
	p, err := r.RunPass(context.Background())
	require.NoError(t, err)
	require.NotZero(t, p.BlocksDiffering)
	require.Equal(t, int64(4*2), p.SeriesDiffering, "4 series in 2 blocks")
	require.Zero(t, p.SeriesRepaired)
	_, _, fetches, _ := c.peers[1].calls()
	require.Zero(t, fetches)
	require.Equal(t, before, c.digests(0))
	require.True(t, r.Status().CompareOnly)
}

func TestPassResumesAfterRestartAndKeepsResults(t *testing.T) {
	c := newCluster(t, 2)
	seed(c, 0, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.peers[1].onDigests = func(shard uint32) {
		if shard == 2 {
			cancel() // the node stops while comparing shard 2
		}
	}
	r := c.repairer(0, nil)
	_, err := r.RunPass(ctx)
	require.ErrorIs(t, err, context.Canceled) // and its progress saved

	// "Restart": a new repairer over the same state dir resumes pass 1 at
	// shard 2, never asking about shards 0 and 1 again.
	var asked []uint32
	c.peers[1].onDigests = func(shard uint32) { asked = append(asked, shard) }
	r2 := c.repairer(0, nil)
	st := r2.Status()
	require.Equal(t, uint64(1), st.Pass.Number)
	require.Len(t, st.Shards, 2)
	p, err := r2.RunPass(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(1), p.Number)
	require.Equal(t, testShards, p.ShardsDone)
	require.Equal(t, []uint32{2, 3}, asked)
	require.False(t, p.Finished.IsZero())

	// The next pass is pass 2 and covers every shard.
	asked = nil
	p, err = r2.RunPass(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(2), p.Number)
	require.Equal(t, []uint32{0, 1, 2, 3}, asked)
}

func TestCorruptStateStartsAfresh(t *testing.T) {
	c := newCluster(t, 2)
	require.NoError(t, os.WriteFile(filepath.Join(c.dirs[0], "state.json"), []byte("{not json"), 0o644))
	r := c.repairer(0, nil)
	require.Zero(t, r.Status().Pass.Number)
	p, err := r.RunPass(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(1), p.Number)
}

func TestRunRepeatsEveryInterval(t *testing.T) {
	c := newCluster(t, 2)
	seed(c, 1)
	r := c.repairer(0, func(o *Options) { o.Every = 10 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitfor.Condition(t, 30*time.Second, 5*time.Millisecond, "three repair passes", func() error {
		if n := r.Status().Pass.Number; n < 3 {
			return fmt.Errorf("%d passes", n)
		}
		return nil
	})
	require.Equal(t, c.digests(1), c.digests(0))
}

// TestTwoPeersEachGiveWhatTheyHave: node 0 lacks one series node 1 has
// and another node 2 has; one pass gets both, and the comparison with the
// second peer is against the data repaired from the first (the series
// node 1 gave is not pulled again from node 2, which also has it).
func TestTwoPeersEachGiveWhatTheyHave(t *testing.T) {
	c := newCluster(t, 3)
	seed(c, 0, 1, 2)
	fromB, fromC := seriesID("fromb", "x"), seriesID("fromc", "x")
	c.write([]int{1, 2}, fromB, every(flushedFrom, memFrom, 10*time.Minute), ramp)
	c.write([]int{2}, fromC, every(memFrom, settled, 10*time.Minute), ramp)
	tickAll(t, c)
	r := c.repairer(0, nil)
	p, err := r.RunPass(context.Background())
	require.NoError(t, err)
	require.Zero(t, p.Errors)
	require.Equal(t, int64(2), p.SeriesRepaired)
	require.Equal(t, int64(12+5), p.SamplesRepaired)
	_, _, _, fromPeer1 := c.peers[1].calls()
	_, _, _, fromPeer2 := c.peers[2].calls()
	require.Equal(t, 1, fromPeer1)
	require.Equal(t, 1, fromPeer2, "only the series node 1 could not give")
	require.Equal(t, c.digests(2), c.digests(0))
}

// lockedBuffer is a log sink safe to read while the repairer may write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPeerDownLogsBoundedPerPass: a peer that is down fails every shard;
// the pass counts each, but the log gets a few lines, not one per shard
// (4096 per pass on the example cluster).
func TestPeerDownLogsBoundedPerPass(t *testing.T) {
	c := newCluster(t, 2)
	seed(c, 0, 1)
	c.peers[1].failAll = true
	var logs lockedBuffer
	r := c.repairer(0, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	p, err := r.RunPass(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(testShards), p.Errors, "every shard failed and is counted")
	require.Greater(t, testShards, maxShardErrorsLogged, "the test needs more failing shards than are logged")
	out := logs.String()
	require.Equal(t, maxShardErrorsLogged, strings.Count(out, `msg="repair shard"`), out)
	require.Equal(t, 1, strings.Count(out, "more shards failed this pass"), out)
	require.Contains(t, out, "errors="+strconv.Itoa(testShards), out)

	// The next pass logs its own first failures again.
	p, err = r.RunPass(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(testShards), p.Errors)
	require.Equal(t, 2*maxShardErrorsLogged, strings.Count(logs.String(), `msg="repair shard"`))
}
