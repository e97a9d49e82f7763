package storage

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// replayOpts has two namespaces and a commit log rotated every few KiB, so
// that a series is written in many files under a different ref in each.
func replayOpts(dir string, clk *clock) Options {
	opts := testOpts(dir, clk)
	other := opts.Namespaces[0]
	other.Name = "other"
	opts.Namespaces = append(opts.Namespaces, other)
	opts.CommitLogMaxFile = 4 << 10
	return opts
}

// TestReplayAcrossFilesKeepsEverySampleInOrder: after a crash (no flush:
// everything is in the commit log only), every sample of every series in
// both namespaces is back, a timestamp rewritten in a later file holds
// the later value (per-series log order survives the parallel replay),
// and a namespace dropped from the config is skipped without harm.
func TestReplayAcrossFilesKeepsEverySampleInOrder(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	dir := t.TempDir()
	opts := replayOpts(dir, clk)
	db, err := Open(opts)
	require.NoError(t, err)

	const numSeries, rounds = 300, 6
	base := ms(t0)
	ids := make([][]byte, numSeries)
	for i := range ids {
		ids[i] = sid("replay_metric", "series", strconv.Itoa(i))
	}
	want := map[string]map[int64]float64{}
	for _, ns := range []string{"default", "other"} {
		for _, id := range ids {
			want[ns+string(id)] = map[int64]float64{}
		}
	}
	for r := range rounds {
		for _, ns := range []string{"default", "other"} {
			for lo := 0; lo < numSeries; lo += 50 {
				var batch []Sample
				for i := lo; i < lo+50; i++ {
					// Round r writes timestamp r, and rewrites r-2 with a
					// new value: the later write must win after replay.
					for _, ts := range []int64{int64(r), int64(r - 2)} {
						if ts < 0 {
							continue
						}
						v := float64(i*1000 + r*10 + len(ns))
						batch = append(batch, Sample{ID: ids[i], Shard: db.Shard(ids[i]), T: base + ts*1000, V: v})
						want[ns+string(ids[i])][base+ts*1000] = v
					}
				}
				require.NoError(t, db.WriteBatch(ns, batch))
			}
		}
	}
	require.NoError(t, db.Close()) // no flush: the commit log holds it all

	db, err = Open(opts)
	require.NoError(t, err)
	defer db.Close()
	require.Greater(t, db.Recovery().CommitLog.Files, 10, "the test needs series spread over many files")
	require.Equal(t, int64(2*numSeries), db.ActiveSeries())
	for _, ns := range []string{"default", "other"} {
		for _, id := range ids {
			it, err := db.Read(ns, id, base, base+rounds*1000)
			require.NoError(t, err)
			got := map[int64]float64{}
			for it.Next() {
				ts, v := it.At()
				got[ts] = v
			}
			require.NoError(t, it.Err())
			require.Equal(t, want[ns+string(id)], got, "namespace %s series %s", ns, id)
		}
		// The index stage indexed every series of the namespace: a query
		// by label finds each of them (and one by a single value, one).
		res, err := db.Query(context.Background(), ns, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "replay_metric")}, base, base+rounds*1000, QueryOptions{})
		require.NoError(t, err)
		require.Len(t, res, numSeries, "namespace %s", ns)
		res, err = db.Query(context.Background(), ns, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "series", "123")}, base, base+rounds*1000, QueryOptions{})
		require.NoError(t, err)
		require.Len(t, res, 1, "namespace %s", ns)
	}
	require.NoError(t, db.Close())

	// The "other" namespace removed from the config: its entries are
	// dropped, the default namespace's all replayed.
	opts.Namespaces = opts.Namespaces[:1]
	db, err = Open(opts)
	require.NoError(t, err)
	defer db.Close()
	require.Equal(t, int64(numSeries), db.ActiveSeries())
	for _, id := range ids {
		got := readAll(t, db, id, base, base+rounds*1000)
		require.Len(t, got, rounds, "series %s", id)
		for _, s := range got {
			require.Equal(t, want["default"+string(id)][s.T], s.V, "series %s at %d", id, s.T)
		}
	}
}

// BenchmarkReplay times Open replaying a commit log of N series x S
// samples written in rounds of all series (like scrapes, and like
// `tessera bench`), the restart after a crash with nothing flushed. It
// reports ns/entry (wall) and cpu-ns/entry (the process' user+system
// CPU: Open may use every core). Setup is not timed.
func BenchmarkReplay(b *testing.B) {
	for _, c := range []struct{ series, samples int }{{100_000, 4}, {20_000, 40}} {
		b.Run(fmt.Sprintf("series=%d/samples=%d", c.series, c.samples), func(b *testing.B) {
			clk := &clock{t: t0.Add(30 * time.Minute)}
			opts := testOpts(b.TempDir(), clk)
			opts.NumShards = 4096
			opts.Namespaces[0].BufferFuture = 2 * time.Hour
			db, err := Open(opts)
			require.NoError(b, err)
			base := ms(t0)
			batch := make([]Sample, 0, 5000)
			for k := range c.samples {
				for s := range c.series {
					id := sid("bench_replay", "instance", "host-"+strconv.Itoa(s%50)+":9100", "job", "bench", "series", strconv.Itoa(s))
					batch = append(batch, Sample{ID: id, Shard: db.Shard(id), T: base + int64(k)*1000, V: float64(s + k)})
					if len(batch) == cap(batch) {
						require.NoError(b, db.WriteBatch("default", batch))
						batch = batch[:0]
					}
				}
			}
			if len(batch) > 0 {
				require.NoError(b, db.WriteBatch("default", batch))
			}
			require.NoError(b, db.Close())
			entries := c.series * c.samples
			var cpu time.Duration
			b.ResetTimer()
			for range b.N {
				before := cpuTime()
				db, err := Open(opts)
				cpu += cpuTime() - before
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if got := db.ActiveSeries(); got != int64(c.series) {
					b.Fatalf("%d series after replay, want %d", got, c.series)
				}
				_ = db.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*entries), "ns/entry")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*entries), "cpu-ns/entry")
		})
	}
}

// A histogram that only the commit log holds still refuses a float at its
// timestamp after the restart: replay marks the namespace as holding
// histograms, as a live histogram write does. Before, the float was taken
// with a 2xx after a restart and a read returned the histogram alone.
func TestReplayedHistogramStillRefusesAFloatAtItsTimestamp(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	dir := t.TempDir()
	opts := testOpts(dir, clk)
	db, err := Open(opts)
	require.NoError(t, err)
	id := sid("mixed_replayed", "k", "v")
	base := ms(t0)
	require.NoError(t, db.WriteHistograms("default", []HistogramSample{{ID: id, Shard: db.Shard(id), T: base + 1000, H: testHist(1)}}))
	require.NoError(t, db.Close())

	db, err = Open(opts)
	require.NoError(t, err)
	defer db.Close()
	err = db.WriteBatch("default", []Sample{
		{ID: id, Shard: db.Shard(id), T: base + 1000, V: 1},
		{ID: id, Shard: db.Shard(id), T: base + 2000, V: 2},
	})
	var rej *RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 1, rej.ByReason[ReasonTypeConflict])
	require.Len(t, readHists(t, db, id, base, base+10_000), 1)
	require.Len(t, readAll(t, db, id, base, base+10_000), 1, "the float at another timestamp is written")
}
