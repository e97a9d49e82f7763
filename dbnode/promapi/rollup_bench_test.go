package promapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// procCPU is the process' user+system CPU so far.
func procCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestRollupBenchmark is issue 26's benchmark, scaled by
// TESSERA_ROLLUP_BENCH_SERIES (default 200 series; the figure is
// 2,000): that many counters x 30 days at 30 s, backfilled with old
// timestamps, rolled up to 5m and 1h. It logs bytes on disk per series
// per day for raw, 5m and 1h, the time of a 30-day
// sum by (region) (rate(x[1h])) at step 1h from raw and from the 1h
// rollup, and the CPU the rollup costs per raw sample against ingest's.
// Run: TESSERA_ROLLUP_BENCH=1 go test -run TestRollupBenchmark -v -timeout 30m ./dbnode/promapi/
func TestRollupBenchmark(t *testing.T) {
	if os.Getenv("TESSERA_ROLLUP_BENCH") == "" {
		t.Skip("set TESSERA_ROLLUP_BENCH=1 to run")
	}
	nSeries := 200
	if v := os.Getenv("TESSERA_ROLLUP_BENCH_SERIES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		nSeries = n
	}
	const days = 30
	t0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	end := t0.Add(days * 24 * time.Hour)
	now := end.Add(time.Hour)
	clock := func() time.Time { return now }
	cl := config.Default().CommitLog
	open := func(dir string, rollups bool) *tstorage.Database {
		nss := []tstorage.NamespaceOptions{{Name: "default", Retention: 40 * 24 * time.Hour, BlockSize: 2 * time.Hour,
			BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: true, Index: true}}
		if rollups {
			nss = append(nss,
				tstorage.NamespaceOptions{Name: "r5m", RollupOf: "default", Resolution: 5 * time.Minute, Retention: 90 * 24 * time.Hour,
					BlockSize: 24 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, Index: true},
				tstorage.NamespaceOptions{Name: "r1h", RollupOf: "r5m", Resolution: time.Hour, Retention: 400 * 24 * time.Hour,
					BlockSize: 24 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, Index: true})
		}
		db, err := tstorage.Open(tstorage.Options{Dir: dir, Namespaces: nss, NumShards: 64,
			CommitLogMode: commitlog.ModeAsync, CommitLogFlushEvery: cl.FlushEvery,
			CommitLogMaxFile: cl.MaxFileSize, CommitLogMaxPending: cl.MaxPendingBytes, Now: clock})
		require.NoError(t, err)
		return db
	}
	ids := make([][]byte, nSeries)
	for i := range ids {
		ids[i] = ident.FromLabels(labels.FromStrings("__name__", "x_total", "region", "r"+strconv.Itoa(i%10), "instance", "i"+strconv.Itoa(i)))
	}
	write := func(db *tstorage.Database) (samples int) {
		batch := make([]tstorage.Sample, 0, nSeries*240)
		for from := t0; from.Before(end); from = from.Add(2 * time.Hour) {
			batch = batch[:0]
			for ts := from.UnixMilli(); ts < from.Add(2*time.Hour).UnixMilli(); ts += 30_000 {
				for i, id := range ids {
					v := float64((ts-t0.UnixMilli())/30_000*int64(i%7+1)) + float64(i)
					batch = append(batch, tstorage.Sample{ID: id, Shard: db.Shard(id), T: ts, V: v})
				}
			}
			require.NoError(t, db.WriteBatch("default", batch))
			samples += len(batch)
		}
		return samples
	}

	// The same data into a database without rollups and one with them:
	// the difference of their flush CPU is the rollups'.
	var flushCPU [2]time.Duration
	var ingestCPU time.Duration
	var samples int
	var db *tstorage.Database
	for k, rollups := range []bool{false, true} {
		d := open(t.TempDir(), rollups)
		c0 := procCPU(t)
		samples = write(d)
		c1 := procCPU(t)
		require.NoError(t, d.Tick())
		c2 := procCPU(t)
		ingestCPU += c1 - c0
		flushCPU[k] = c2 - c1
		if rollups {
			db = d
			// The 1h level of the last day's blocks follows on the next ticks.
			for range 3 {
				require.NoError(t, db.Tick())
			}
		} else {
			require.NoError(t, d.Close())
		}
	}
	t.Cleanup(func() { _ = db.Close() })
	ingestCPU /= 2
	rollupCPU := flushCPU[1] - flushCPU[0]
	t.Logf("%d series x %d days at 30s: %d raw samples", nSeries, days, samples)
	t.Logf("ingest CPU %v (%.0f ns/sample); flush CPU without rollups %v, with %v; rollup CPU %.1f ns per raw sample = %.1f%% of ingest",
		ingestCPU, float64(ingestCPU.Nanoseconds())/float64(samples), flushCPU[0], flushCPU[1],
		float64(rollupCPU.Nanoseconds())/float64(samples), 100*float64(rollupCPU)/float64(ingestCPU))
	for _, ns := range []string{"default", "r5m", "r1h"} {
		b, err := db.NamespaceDiskBytes(ns)
		require.NoError(t, err)
		t.Logf("%s: %d bytes on disk, %.0f bytes per series per day", ns, b, float64(b)/float64(nSeries)/days)
	}
	t.Logf("%+v", db.RollupStatuses())

	mux := http.NewServeMux()
	newAPI(t, httpapi.Local{DB: db}, Options{
		Rollups:      map[string]Rollup{"r5m": {Resolution: 5 * time.Minute, Raw: "default"}, "r1h": {Resolution: time.Hour, Raw: "default"}},
		RollupReader: dbRollups{db}, Now: clock, MaxSamples: 500_000_000,
	}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	q := `sum by (region) (rate(x_total[1h]))`
	p := func(ns string) url.Values {
		return url.Values{"query": {q}, "namespace": {ns}, "step": {"3600"},
			"start": {strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}}
	}
	// Wall time and the process' CPU (the query is all it runs: steadier
	// than wall time on a shared machine) of each run.
	// TESSERA_ROLLUP_BENCH_PROFILE=DIR writes a CPU profile of each run
	// (DIR/<namespace>-<run>.pprof): the first run against the next.
	profDir := os.Getenv("TESSERA_ROLLUP_BENCH_PROFILE")
	var took, cpu [2][]time.Duration
	for run := range 3 { // interleaved A/B
		for k, ns := range []string{"default", "r1h"} {
			if profDir != "" {
				f, err := os.Create(filepath.Join(profDir, fmt.Sprintf("%s-%d.pprof", ns, run)))
				require.NoError(t, err)
				require.NoError(t, pprof.StartCPUProfile(f))
				defer f.Close()
			}
			s, c := time.Now(), procCPU(t)
			code, resp := get(t, srv.URL, "/api/v1/query_range", p(ns))
			if profDir != "" {
				pprof.StopCPUProfile()
			}
			took[k] = append(took[k], time.Since(s))
			cpu[k] = append(cpu[k], procCPU(t)-c)
			require.Equal(t, http.StatusOK, code, resp.Error)
			require.Empty(t, resp.Warnings)
		}
	}
	t.Logf("30-day %s at step 1h: raw %v, 1h rollup %v", q, took[0], took[1])
	t.Logf("the same, CPU: raw %v, 1h rollup %v", cpu[0], cpu[1])
	want, _ := rangeQuery(t, srv.URL, "default", q, t0.Add(time.Hour), end, time.Hour)
	got, _ := rangeQuery(t, srv.URL, "r1h", q, t0.Add(time.Hour), end, time.Hour)
	requireClose(t, q, want, got)
}

// BenchmarkRollupQuery times the 30-day
// sum by (region) (rate(x_total[1h])) at step 1h from a 1h rollup (5m ->
// 1h, 1-day rollup blocks) of TESSERA_ROLLUP_BENCH_SERIES counters
// (default 200): the rollup query path alone (index lookup, block reads,
// decode, step values, engine). Raw samples are 5 minutes apart, since
// the query reads windows, not samples (720 per series either way), and
// the setup stays short. sum_over_time of the same selector is the
// unaggregated shape (one step value per series through the engine).
// Run: go test -run '^$' -bench RollupQuery -benchtime 20x ./dbnode/promapi/
func BenchmarkRollupQuery(b *testing.B) {
	nSeries := 200
	if v := os.Getenv("TESSERA_ROLLUP_BENCH_SERIES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		nSeries = n
	}
	const days = 30
	t0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	end := t0.Add(days * 24 * time.Hour)
	now := end.Add(time.Hour)
	clock := func() time.Time { return now }
	cl := config.Default().CommitLog
	db, err := tstorage.Open(tstorage.Options{Dir: b.TempDir(), NumShards: 64,
		Namespaces: []tstorage.NamespaceOptions{
			{Name: "default", Retention: 40 * 24 * time.Hour, BlockSize: 2 * time.Hour,
				BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: true, Index: true},
			{Name: "r5m", RollupOf: "default", Resolution: 5 * time.Minute, Retention: 90 * 24 * time.Hour,
				BlockSize: 24 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, Index: true},
			{Name: "r1h", RollupOf: "r5m", Resolution: time.Hour, Retention: 400 * 24 * time.Hour,
				BlockSize: 24 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, Index: true},
		},
		CommitLogMode: commitlog.ModeAsync, CommitLogFlushEvery: cl.FlushEvery,
		CommitLogMaxFile: cl.MaxFileSize, CommitLogMaxPending: cl.MaxPendingBytes, Now: clock})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	ids := make([][]byte, nSeries)
	for i := range ids {
		ids[i] = ident.FromLabels(labels.FromStrings("__name__", "x_total", "region", "r"+strconv.Itoa(i%10), "instance", "i"+strconv.Itoa(i)))
	}
	var batch []tstorage.Sample
	for ts := t0.UnixMilli(); ts < end.UnixMilli(); ts += 300_000 {
		for i, id := range ids {
			v := float64((ts-t0.UnixMilli())/300_000*int64(i%7+1)) + float64(i)
			batch = append(batch, tstorage.Sample{ID: id, Shard: db.Shard(id), T: ts + int64(i%11)*1000, V: v})
		}
	}
	require.NoError(b, db.WriteBatch("default", batch))
	for range 4 {
		require.NoError(b, db.Tick())
	}
	mux := http.NewServeMux()
	newAPI(b, httpapi.Local{DB: db}, Options{
		Rollups:      map[string]Rollup{"r5m": {Resolution: 5 * time.Minute, Raw: "default"}, "r1h": {Resolution: time.Hour, Raw: "default"}},
		RollupReader: dbRollups{db}, Now: clock, MaxSamples: 500_000_000,
	}).Register(mux)
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	for _, c := range []struct{ name, q string }{
		{"sum_by_rate", `sum by (region) (rate(x_total[1h]))`},
		{"sum_over_time", `sum_over_time(x_total[1h])`},
	} {
		q := c.q
		p := url.Values{"query": {q}, "namespace": {"r1h"}, "step": {"3600"},
			"start": {strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}}
		b.Run(c.name, func(b *testing.B) {
			// CPU per query (the process' user+system time: the query is
			// all it runs), steadier than wall time on a shared machine.
			var ru0, ru1 syscall.Rusage
			require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru0))
			for b.Loop() {
				code, resp := get(b, srv.URL, "/api/v1/query_range", p)
				if code != http.StatusOK || len(resp.Warnings) > 0 {
					b.Fatalf("%s: %d %s %v", q, code, resp.Error, resp.Warnings)
				}
			}
			require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru1))
			cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
