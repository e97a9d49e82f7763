package promapi

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// dbRollups reads rollups from one database (what the node's
// rollupReader does on a node owning every shard).
type dbRollups struct{ db *tstorage.Database }

func (d dbRollups) QueryRollup(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]tstorage.RollupSeries, error) {
	return d.db.QueryRollup(ctx, ns, ms, start, end, tstorage.QueryOptions{})
}

func (d dbRollups) ScanRollup(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64, fn func(int, tstorage.RollupSeries) error) error {
	return d.db.ScanRollup(ctx, ns, ms, start, end, tstorage.QueryOptions{}, fn)
}

var rollupT0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // a 2h block boundary

// rollupNode writes a counter, a gauge, a counter reset across a 5m
// window edge and a native histogram counter over [t0, t0+4h) into a
// database with a 5m rollup namespace, flushes the two source blocks
// (which computes the rollup), and serves the query API over it: the
// engine alone over raw ("default"), the rollup engine over "r5m".
func rollupNode(t *testing.T) (string, *API) {
	t.Helper()
	now := rollupT0.Add(4 * time.Hour)
	clock := func() time.Time { return now }
	cl := config.Default().CommitLog
	db, err := tstorage.Open(tstorage.Options{
		Dir: t.TempDir(),
		Namespaces: []tstorage.NamespaceOptions{
			{Name: "default", Retention: 48 * time.Hour, BlockSize: 2 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: true, Index: true},
			{Name: "r5m", RollupOf: "default", Resolution: 5 * time.Minute, Retention: 96 * time.Hour, BlockSize: 2 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, Index: true},
		},
		NumShards: 16, CommitLogMode: commitlog.ModeSync, CommitLogFlushEvery: cl.FlushEvery,
		CommitLogMaxFile: cl.MaxFileSize, CommitLogMaxPending: cl.MaxPendingBytes, Now: clock,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })

	id := func(name string) []byte {
		return ident.FromLabels(labels.FromStrings("__name__", name, "job", "rollup"))
	}
	ctr, gauge, reset, hist := id("c_total"), id("g"), id("r_total"), id("h")
	// A second counter of the name, so sums by label add series.
	ctr2 := ident.FromLabels(labels.FromStrings("__name__", "c_total", "job", "rollup", "instance", "b"))
	var fl []tstorage.Sample
	var hs []tstorage.HistogramSample
	c, r := 0.0, 0.0
	start, end := rollupT0.UnixMilli(), rollupT0.Add(4*time.Hour).UnixMilli()
	for i, ts := 0, start; ts < end; i, ts = i+1, ts+15_000 {
		t := ts + int64(i%7)*311 // off the window edges, but for i%7 == 0
		c += float64(i%5) + 0.25
		fl = append(fl, tstorage.Sample{ID: ctr, Shard: db.Shard(ctr), T: t, V: c})
		fl = append(fl, tstorage.Sample{ID: ctr2, Shard: db.Shard(ctr2), T: t, V: 3*c + 0.5})
		fl = append(fl, tstorage.Sample{ID: gauge, Shard: db.Shard(gauge), T: t, V: math.Sin(float64(i)/9)*100 + float64(i%13)})
		// r_total resets at every 40-minute mark: the last sample before
		// the edge is in one 5m window, the reset in the next.
		if (ts-start)%(40*60_000) == 0 && ts > start {
			r = 2
		} else {
			r += 3
		}
		fl = append(fl, tstorage.Sample{ID: reset, Shard: db.Shard(reset), T: t, V: r})
		h := &histogram.Histogram{
			Schema: 0, ZeroThreshold: 0.001, ZeroCount: uint64(i), Count: uint64(4*i + 3), Sum: float64(i) * 1.25,
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{int64(i + 1), int64(i + 1)},
		}
		if i >= 500 { // a histogram counter reset
			j := i - 500
			h.ZeroCount, h.Count, h.Sum, h.PositiveBuckets = uint64(j), uint64(4*j+3), float64(j)*1.25, []int64{int64(j + 1), int64(j + 1)}
		}
		hs = append(hs, tstorage.HistogramSample{ID: hist, Shard: db.Shard(hist), T: t, H: h})
	}
	require.NoError(t, db.WriteBatch("default", fl))
	require.NoError(t, db.WriteHistograms("default", hs))
	now = now.Add(11 * time.Minute)
	require.NoError(t, db.Tick())
	st := db.RollupStatuses()
	require.Len(t, st, 1)
	require.Equal(t, rollupT0.Add(4*time.Hour), st[0].RolledUpTo)

	mux := http.NewServeMux()
	a := newAPI(t, httpapi.Local{DB: db}, Options{
		DisableFastPath: true, // the engine alone over raw data
		Rollups:         map[string]Rollup{"r5m": {Resolution: 5 * time.Minute, Raw: "default"}},
		RollupReader:    dbRollups{db},
		// The API takes raw to hold only its last 3h (the database keeps
		// 48h): a query without ?namespace= reaching further back is
		// stitched, and the raw data it no longer reads is there to
		// compare with.
		RawRetention: 3 * time.Hour,
		BlockSize:    (2 * time.Hour).Milliseconds(),
		Now:          clock,
	})
	a.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, a
}

// rangeQuery runs a query_range over ns and returns its normalised
// result and warnings.
func rangeQuery(t *testing.T, base, ns, q string, start, end time.Time, step time.Duration) (normResult, []string) {
	t.Helper()
	p := url.Values{"query": {q}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
		"start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}}
	if ns != "" {
		p.Set("namespace", ns)
	}
	code, resp := get(t, base, "/api/v1/query_range", p)
	require.Equal(t, http.StatusOK, code, "%s on %s: %s", q, ns, resp.Error)
	return normFromJSON(t, resp.Data), resp.Warnings
}

// requireClose holds got to want: the same series and timestamps, float
// values equal within 1e-9 relative.
func requireClose(t *testing.T, q string, want, got normResult) {
	t.Helper()
	require.Equal(t, want.Type, got.Type, q)
	require.Equal(t, len(want.Series), len(got.Series), "%s: series", q)
	for i, ws := range want.Series {
		gs := got.Series[i]
		require.Equal(t, ws.Metric, gs.Metric, q)
		require.Equal(t, len(ws.Points), len(gs.Points), "%s %s: points", q, ws.Metric)
		for j, wp := range ws.Points {
			gp := gs.Points[j]
			require.Equal(t, wp.T, gp.T, "%s %s point %d", q, ws.Metric, j)
			w, err := strconv.ParseFloat(wp.V, 64)
			require.NoError(t, err)
			g, err := strconv.ParseFloat(gp.V, 64)
			require.NoError(t, err)
			if w == g || (math.IsNaN(w) && math.IsNaN(g)) {
				continue
			}
			require.LessOrEqual(t, math.Abs(w-g), 1e-9*math.Max(math.Abs(w), math.Abs(g)),
				"%s %s at %d: raw %v, rollup %v", q, ws.Metric, wp.T, w, g)
		}
		require.Empty(t, ws.Hist, "%s: compare histogram results as quantiles", q)
	}
}

// TestRollupQueriesMatchEngine is issue 26's "done when": over
// window-aligned ranges and steps, the rollup answers rate, increase,
// the *_over_time functions, plain selectors and
// histogram_quantile(rate(...)) as the engine does over the raw samples,
// with no warning; a function it cannot answer exactly warns.
func TestRollupQueriesMatchEngine(t *testing.T) {
	base, _ := rollupNode(t)
	start, end := rollupT0.Add(30*time.Minute), rollupT0.Add(4*time.Hour)
	queries := []string{
		`rate(c_total[5m])`,
		`rate(c_total[15m])`,
		`increase(c_total[1h])`,
		`rate(r_total[5m])`,
		`increase(r_total[10m])`,
		`increase(r_total[30m])`,
		`delta(g[15m])`,
		`max_over_time(g[15m])`,
		`min_over_time(g[15m])`,
		`avg_over_time(g[30m])`,
		`sum_over_time(g[10m])`,
		`count_over_time(g[15m])`,
		`last_over_time(g[5m])`,
		`g`,
		`sum by (job) (rate(c_total[15m])) + on (job) sum by (job) (increase(r_total[15m]))`,
		`sum(rate(c_total[5m]))`,
		`sum by (instance) (increase(c_total[15m]))`,
		`sum without (instance) (rate(c_total[15m]))`,
		`sum(sum_over_time(g[10m]))`,
		`sum(rate({job="rollup", instance="b"}[15m]))`,
		`histogram_count(sum by (job) (rate(h[15m])))`,
		`histogram_quantile(0.9, rate(h[15m]))`,
		`histogram_quantile(0.5, increase(h[1h]))`,
		`histogram_count(rate(h[10m]))`,
		`histogram_sum(sum_over_time(h[5m]))`,
	}
	for _, step := range []time.Duration{5 * time.Minute, 15 * time.Minute} {
		for _, q := range queries {
			want, _ := rangeQuery(t, base, "default", q, start, end, step)
			require.NotEmpty(t, want.Series, "%s has a result over raw", q)
			got, warns := rangeQuery(t, base, "r5m", q, start, end, step)
			require.Empty(t, warns, "%s: exact on a rollup", q)
			requireClose(t, q, want, got)
		}
	}

	// Not exact: a warning says so, naming the function.
	_, warns := rangeQuery(t, base, "r5m", `quantile_over_time(0.5, g[15m])`, start, end, 5*time.Minute)
	require.Len(t, warns, 1)
	require.Contains(t, warns[0], "quantile_over_time")
	require.Contains(t, warns[0], "not exact")
	// Steps off the window ends: a warning too.
	_, warns = rangeQuery(t, base, "r5m", `rate(c_total[15m])`, start.Add(time.Minute), end, 5*time.Minute)
	require.NotEmpty(t, warns)
	require.True(t, strings.Contains(warns[0], "not exact"), warns[0])
}

// TestRollupStitchedQueriesMatchEngine: without ?namespace=, a range
// query reaching past raw's (API-side) retention is answered from the
// rollup for the early steps and from raw for the others; the stitched
// answer equals the engine's over raw, with no step twice or missing.
func TestRollupStitchedQueriesMatchEngine(t *testing.T) {
	base, a := rollupNode(t)
	start, end := rollupT0.Add(30*time.Minute), rollupT0.Add(4*time.Hour)
	for i, q := range []string{
		`rate(c_total[15m])`,
		`increase(r_total[10m])`,
		`max_over_time(g[15m])`,
		`sum_over_time(g[5m])`,
		`g`,
		`histogram_quantile(0.9, rate(h[15m]))`,
	} {
		want, _ := rangeQuery(t, base, "default", q, start, end, 15*time.Minute)
		require.NotEmpty(t, want.Series)
		got, warns := rangeQuery(t, base, "", q, start, end, 15*time.Minute)
		require.Empty(t, warns, q)
		requireClose(t, q, want, got)
		require.Equal(t, int64(i+1), a.stitched.Load(), "%s was split between the rollup and raw", q)
	}
	// An instant query at a time raw may no longer hold is answered
	// from the rollup, as raw would.
	for _, q := range []string{`rate(c_total[15m])`, `max_over_time(g[30m])`, `g`} {
		at := strconv.FormatInt(rollupT0.Add(time.Hour).Unix(), 10)
		code, raw := get(t, base, "/api/v1/query", url.Values{"query": {q}, "time": {at}, "namespace": {"default"}})
		require.Equal(t, http.StatusOK, code)
		code, st := get(t, base, "/api/v1/query", url.Values{"query": {q}, "time": {at}})
		require.Equal(t, http.StatusOK, code)
		require.Empty(t, st.Warnings)
		requireClose(t, q, normFromJSON(t, raw.Data), normFromJSON(t, st.Data))
	}
	require.Equal(t, int64(9), a.stitched.Load(), "the instant queries went to the rollup")
	// A query raw covers entirely stays on raw.
	_, warns := rangeQuery(t, base, "", `rate(c_total[15m])`, rollupT0.Add(3*time.Hour), end, 15*time.Minute)
	require.Empty(t, warns)
	require.Equal(t, int64(9), a.stitched.Load())
}

// TestRollupStitchedMixedFunctions: a query mixing a call the rollup
// answers exactly with one it cannot is stitched per selector: before
// raw's boundary (rawFrom) the exact call from the rollup's windows, the
// other from each window's first and last samples, said in a warning
// naming the function; from rawFrom on both from raw samples. A query
// the stitch cannot place stays on raw and says it read no rollup.
func TestRollupStitchedMixedFunctions(t *testing.T) {
	base, a := rollupNode(t)
	// now is t0+4h11m, raw (API-side) keeps 3h of 2h blocks: rawFrom is
	// the block after the one holding t0+1h11m.
	rawFrom := rollupT0.Add(2 * time.Hour).UnixMilli()
	start, end, step := rollupT0.Add(30*time.Minute), rollupT0.Add(4*time.Hour), 15*time.Minute
	for _, q := range []string{
		`max_over_time(g[15m]) - quantile_over_time(0.5, g[15m])`,
		`sum(rate(c_total[15m])) / sum(changes(c_total[15m]))`,
		`quantile_over_time(0.25, g[15m])`,
	} {
		stitched := a.stitched.Load()
		got, warns := rangeQuery(t, base, "", q, start, end, step)
		require.Equal(t, stitched+1, a.stitched.Load(), "%s was stitched", q)
		fn := "quantile_over_time"
		if strings.Contains(q, "changes") {
			fn = "changes"
		}
		require.True(t, slices.ContainsFunc(warns, func(w string) bool {
			return strings.Contains(w, fn) && strings.Contains(w, `"r5m"`) && strings.Contains(w, "not exact")
		}), "%s: %q", q, warns)
		raw, _ := rangeQuery(t, base, "default", q, start, end, step)
		roll, _ := rangeQuery(t, base, "r5m", q, start, end, step)
		// Steps whose ranges lie before rawFrom are the rollup's answer,
		// those whose ranges lie after it raw's; and the two differ
		// somewhere before rawFrom, or the test could not tell them apart.
		differ := false
		for i, gs := range got.Series {
			require.Less(t, i, len(raw.Series), q)
			require.Equal(t, raw.Series[i].Metric, gs.Metric, q)
			at := func(n normResult, ts int64) (float64, bool) {
				for _, p := range n.Series[i].Points {
					if p.T == ts {
						v, err := strconv.ParseFloat(p.V, 64)
						require.NoError(t, err)
						return v, true
					}
				}
				return 0, false
			}
			// Every step before rawFrom the rollup answers is in the
			// stitched answer: its rollup part was read.
			before := func(n normResult) (k int) {
				for _, p := range n.Series[i].Points {
					if p.T < rawFrom {
						k++
					}
				}
				return k
			}
			require.Less(t, i, len(roll.Series), q)
			require.Equal(t, before(roll), before(got), "%s %s: steps before rawFrom", q, gs.Metric)
			require.NotZero(t, before(got), "%s %s: steps before rawFrom", q, gs.Metric)
			for _, p := range gs.Points {
				g, err := strconv.ParseFloat(p.V, 64)
				require.NoError(t, err)
				var want float64
				var ok bool
				switch {
				case p.T < rawFrom:
					want, ok = at(roll, p.T)
					if r, rok := at(raw, p.T); rok && r != want {
						differ = true
					}
				case p.T-step.Milliseconds() >= rawFrom:
					want, ok = at(raw, p.T)
				default:
					continue // its range has both
				}
				require.True(t, ok, "%s %s at %d: no reference point", q, gs.Metric, p.T)
				require.InDelta(t, want, g, 1e-9*math.Max(1, math.Abs(want)), "%s %s at %d", q, gs.Metric, p.T)
			}
		}
		require.NotEmpty(t, got.Series, q)
		require.True(t, differ, "%s: the rollup's approximation equals raw before rawFrom, so the test cannot tell which was read", q)
	}
	// An instant query before rawFrom: the rollup's answer, with the warning.
	q := `max_over_time(g[15m]) - quantile_over_time(0.5, g[15m])`
	at := strconv.FormatInt(rollupT0.Add(time.Hour).Unix(), 10)
	code, roll := get(t, base, "/api/v1/query", url.Values{"query": {q}, "time": {at}, "namespace": {"r5m"}})
	require.Equal(t, http.StatusOK, code)
	code, st := get(t, base, "/api/v1/query", url.Values{"query": {q}, "time": {at}})
	require.Equal(t, http.StatusOK, code)
	require.True(t, slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "quantile_over_time") }), "%q", st.Warnings)
	requireClose(t, q, normFromJSON(t, roll.Data), normFromJSON(t, st.Data))
	// A plain selector under an aggregation or a function is exact at
	// window ends: stitched or pinned, no warning.
	for _, q := range []string{`sum(g)`, `abs(g)`, `max by (job) (g) * 2`} {
		_, warns := rangeQuery(t, base, "", q, start, end, step)
		require.Empty(t, warns, q)
		_, warns = rangeQuery(t, base, "r5m", q, start, end, step)
		require.Empty(t, warns, q)
	}
	// A subquery whose steps are not window ends reads a window's last
	// sample before its end: pinned to the rollup, it says so.
	_, warns := rangeQuery(t, base, "r5m", `max_over_time(g[30m:1m])`, start, end, step)
	require.True(t, slices.ContainsFunc(warns, func(w string) bool { return strings.Contains(w, "window ends") }), "%q", warns)
	// A subquery cannot be split: raw only, and the answer says so.
	stitched := a.stitched.Load()
	_, warns = rangeQuery(t, base, "", `max_over_time(rate(c_total[5m])[30m:5m])`, start, end, step)
	require.Equal(t, stitched, a.stitched.Load())
	require.True(t, slices.ContainsFunc(warns, func(w string) bool { return strings.Contains(w, "not answered from rollups") }), "%q", warns)
	// Within raw, no such warning.
	_, warns = rangeQuery(t, base, "", `max_over_time(rate(c_total[5m])[30m:5m])`, rollupT0.Add(3*time.Hour), end, step)
	require.Empty(t, warns)
}
