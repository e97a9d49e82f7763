package promapi

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"pgregory.net/rapid"
)

// The generative equivalence proof: rapid draws a data set (counters with
// resets, gauges with NaN and infinities, stale markers, gaps, jittered
// and grid-aligned scrapes, several series per group) and expressions
// over it (plain and range-function selectors, aggregations with and
// without grouping, arithmetic and comparison operators, functions over
// them), and every expression is answered, instant and range, by this
// package's API (the pushdown planner and its evaluator, then Prometheus'
// engine above the pushed-down leaves) and by Prometheus' engine over
// Prometheus' own chunk storage (refStorage) holding the same samples.
// The answers must be identical to the last bit: on one node every float
// operation is the engine's, in the engine's order.
//
// In CI it runs rapid's default number of cases (-rapid.checks, 100);
// longer as FuzzGeneratedQueriesMatchPrometheus. Not generated yet: native
// histograms (histogram_compare_test.go holds them to the engine over a
// fixed data set) and out-of-order writes (the backend here is the reader
// after storage has merged them).

// genStart is the first sample time of a generated data set.
const genStart = testBase

// genTolerated counts the answers equal to the engine's only within the
// tolerance (merged partial sums).
var genTolerated atomic.Int64

// genChecked counts the expressions compared (instant and range count as
// one each), for the test's log.
var genChecked atomic.Int64

var (
	genVerbose = flag.Bool("gen.verbose", false, "log every generated query of the equivalence test")
	genBudget  = flag.Duration("gen.budget", 5*time.Second, "how long TestGeneratedQueriesMatchPrometheus draws new cases (rapid.Check rounds of -rapid.checks cases)")
)

// genSeries draws up to 10 series of the metrics c_total (counters) and
// g (gauges), labelled grp (a, b, c) and i (0-3), no two with one label
// set, in label order.
func genSeries(t *rapid.T) []memSeries {
	n := rapid.IntRange(1, 10).Draw(t, "series")
	rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 7))
	seen := map[string]bool{}
	var out []memSeries
	for range n {
		counter := rapid.Bool().Draw(t, "counter")
		name := "g"
		if counter {
			name = "c_total"
		}
		lset := labels.FromStrings("__name__", name,
			"grp", rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "grp"),
			"i", strconv.Itoa(rapid.IntRange(0, 3).Draw(t, "i")))
		if seen[lset.String()] {
			continue
		}
		seen[lset.String()] = true
		interval := rapid.SampledFrom([]int64{10_000, 15_000, 30_000}).Draw(t, "interval")
		jitter := rapid.SampledFrom([]int64{0, 0, 50, 3000}).Draw(t, "jitter")
		pReset := rapid.SampledFrom([]float64{0, 0.02, 0.2}).Draw(t, "resets")
		pStale := rapid.SampledFrom([]float64{0, 0.02, 0.1}).Draw(t, "stale")
		pGap := rapid.SampledFrom([]float64{0, 0.03, 0.1}).Draw(t, "gaps")
		pOdd := rapid.SampledFrom([]float64{0, 0, 0.05}).Draw(t, "odd")
		count := rapid.IntRange(0, 90).Draw(t, "samples")
		ts := genStart + rapid.Int64Range(0, 12).Draw(t, "phase")*5_000
		last := int64(math.MinInt64)
		v := rng.Float64() * 100
		var ss []tsample
		for range count {
			at := ts
			if jitter > 0 {
				at += rng.Int64N(2*jitter+1) - jitter
			}
			ts += interval
			if at <= last {
				continue
			}
			last = at
			switch r := rng.Float64(); {
			case r < pStale:
				ss = append(ss, tsample{at, math.Float64frombits(value.StaleNaN)})
				continue
			case r < pStale+pGap:
				ts += interval * rng.Int64N(20)
				continue
			}
			if counter {
				v += rng.ExpFloat64() * 10
				if rng.Float64() < pReset {
					v = rng.Float64() * 5
				}
			} else {
				v = rng.NormFloat64() * 50
				if rng.Float64() < pOdd {
					v = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1e308}[rng.IntN(6)]
				}
			}
			ss = append(ss, tsample{at, v})
		}
		out = append(out, memSeries{lset: lset, samples: ss})
	}
	slices.SortFunc(out, func(a, b memSeries) int { return labels.Compare(a.lset, b.lset) })
	return out
}

// genExpr draws a PromQL expression over genSeries' metrics.
func genExpr(t *rapid.T) string {
	sel := func(label string) string {
		return rapid.SampledFrom([]string{"c_total", "g"}).Draw(t, label+"name") +
			rapid.SampledFrom([]string{"", "", `{grp="a"}`, `{grp=~"a|b"}`, `{i!="0"}`}).Draw(t, label+"matcher")
	}
	inner := func(label string) string {
		s := sel(label)
		if rapid.IntRange(0, 2).Draw(t, label+"plain") == 0 {
			return s
		}
		fn := rapid.SampledFrom([]string{"rate", "irate", "increase", "delta", "idelta",
			"avg_over_time", "sum_over_time", "count_over_time", "min_over_time", "max_over_time",
			"last_over_time", "resets", "changes"}).Draw(t, label+"fn")
		w := rapid.SampledFrom([]string{"15s", "30s", "45s", "1m", "90s", "2m", "5m", "10m"}).Draw(t, label+"window")
		return fn + "(" + s + "[" + w + "])"
	}
	agg := func(label, in string) string {
		op := rapid.SampledFrom([]string{"sum", "count", "avg", "min", "max", "group", "stddev", "count_values"}).Draw(t, label+"agg")
		by := rapid.SampledFrom([]string{"", " by (grp)", " by (i)", " by (grp, i)", " without (i)", " by (nope)"}).Draw(t, label+"by")
		if op == "count_values" {
			// The value label sometimes one the grouping keeps too.
			return op + by + ` ("` + rapid.SampledFrom([]string{"v", "grp"}).Draw(t, label+"vl") + `", ` + in + ")"
		}
		return op + by + " (" + in + ")"
	}
	switch rapid.IntRange(0, 9).Draw(t, "shape") {
	case 0, 1:
		return inner("a")
	case 2, 3:
		return agg("a", inner("a"))
	case 4:
		return inner("a") + " " + rapid.SampledFrom([]string{"*", "/", "-", "+", ">", "<=", "== bool"}).Draw(t, "op") + " " +
			rapid.SampledFrom([]string{"2", "0", "-1.5", "NaN"}).Draw(t, "num")
	case 5:
		return "1 - " + agg("a", inner("a")) + " / 100"
	case 6:
		op := rapid.SampledFrom([]string{"/", "-", ">", "+"}).Draw(t, "vvop")
		return "sum by (grp) (" + inner("a") + ") " + op + " on (grp) count by (grp) (" + inner("b") + ")"
	case 7:
		return inner("a") + " / on (grp, i) " + inner("b")
	case 8:
		fn := rapid.SampledFrom([]string{"abs", "clamp_min", "sort_desc", "round"}).Draw(t, "outer")
		arg := agg("a", inner("a"))
		if fn == "clamp_min" {
			return fn + "(" + arg + ", 0)"
		}
		return fn + "(" + arg + ")"
	default:
		return rapid.SampledFrom([]string{"topk(2, ", "bottomk(1, ", "quantile(0.5, "}).Draw(t, "k") + inner("a") + ")"
	}
}

// genRequest draws the query's evaluation: an instant or a range with a
// step shorter or longer than the windows, inside, around or past the
// data.
func genRequest(t *rapid.T, q string) (url.Values, func(*promql.Engine, *refStorage) (promql.Query, error)) {
	start := genStart + rapid.Int64Range(-12, 600).Draw(t, "start")*5_000
	if rapid.Bool().Draw(t, "instant") {
		return url.Values{"query": {q}, "time": {msParam(start)}},
			func(e *promql.Engine, r *refStorage) (promql.Query, error) {
				return e.NewInstantQuery(context.Background(), r, nil, q, time.UnixMilli(start))
			}
	}
	step := time.Duration(rapid.SampledFrom([]int64{5, 15, 30, 37, 60, 300}).Draw(t, "step")) * time.Second
	end := start + int64(rapid.IntRange(0, 40).Draw(t, "steps"))*step.Milliseconds()
	return url.Values{"query": {q}, "start": {msParam(start)}, "end": {msParam(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}},
		func(e *promql.Engine, r *refStorage) (promql.Query, error) {
			return e.NewRangeQuery(context.Background(), r, nil, q, time.UnixMilli(start), time.UnixMilli(end), step)
		}
}

// genStore holds a generated data set for the API under test: it returns
// the reader and the series as stored (a store may add labels), which the
// reference storage then holds too.
type genStore func(t *rapid.T, series []memSeries) (query.Reader, []memSeries)

// inMemory is a memBackend: the evaluator over exactly the drawn samples.
func inMemory(_ *rapid.T, series []memSeries) (query.Reader, []memSeries) {
	b := &memBackend{}
	// memBackend answers newest first: add in reverse so that both sides
	// see the series in label order.
	for i := len(series) - 1; i >= 0; i-- {
		b.add(series[i].lset, series[i].samples...)
	}
	return b, series
}

// genProperty is the property: every drawn query answers as the engine
// over Prometheus' storage answers it. tb fails the outer test on
// transport errors only.
func genProperty(tb testing.TB, stats *fastStats, store genStore) func(*rapid.T) {
	return genPropertyTol(tb, stats, store, false)
}

// genPropertyTol is genProperty; tolerant accepts values within 1e-12
// relative of the engine's, in any vector order, where the partial sums of
// several replicas were added in another order than the engine's.
func genPropertyTol(tb testing.TB, stats *fastStats, store genStore, tolerant bool) func(*rapid.T) {
	engine := promql.NewEngine(testOptions(Options{}).resolved().engineOpts())
	return func(t *rapid.T) {
		b, series := store(t, genSeries(t))
		ref := &refStorage{}
		for _, s := range series {
			ref.add(s.lset, s.samples)
		}
		opts := testOptions(Options{Now: func() time.Time { return time.UnixMilli(genStart + 24*3600*1000) }, Parallelism: 2}).resolved()
		api := newAPI(tb, b, opts)
		mux := http.NewServeMux()
		api.Register(mux)
		for k := range rapid.IntRange(1, 10).Draw(t, "queries") {
			q := genExpr(t)
			p, mk := genRequest(t, q)
			path := "/api/v1/query_range"
			if p.Has("time") {
				path = "/api/v1/query"
			}
			if *genVerbose {
				t.Logf("%d: %s %v", k, path, p)
			}
			qry, err := mk(engine, ref)
			if err != nil {
				t.Fatalf("reference engine refused %q: %v", q, err)
			}
			want := qry.Exec(context.Background())
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path+"?"+p.Encode(), nil))
			genChecked.Add(1)
			var got apiResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("%s %v: undecodable answer %d %q", path, p, rec.Code, rec.Body.String())
			}
			if want.Err != nil {
				if rec.Code == http.StatusOK {
					t.Fatalf("%s %v: the engine fails (%v), the API answers %s", path, p, want.Err, rec.Body.String())
				}
				qry.Close()
				continue
			}
			if rec.Code != http.StatusOK {
				t.Fatalf("%s %v: the engine answers, the API fails: %d %s", path, p, rec.Code, rec.Body.String())
			}
			w, g := normFromEngine(*want), normFromJSON(tb, got.Data)
			byMetric := func(a, b normSeries) int { return strings.Compare(a.Metric, b.Metric) }
			if w.Type == "vector" && !tolerant && strings.HasPrefix(q, "sort") {
				// sort and sort_desc order by value only: series with equal
				// values come out in the order they went in, and the engine's
				// own count_values feeds them from a Go map, so two engine
				// runs differ there too. The value sequence must match; the
				// series are then compared as a set below.
				if !slices.EqualFunc(w.Series, g.Series, func(a, b normSeries) bool {
					return reflect.DeepEqual(a.Points, b.Points) && reflect.DeepEqual(a.Hist, b.Hist)
				}) {
					t.Fatalf("%s %v: values out of the engine's order:\nengine %+v\napi    %+v", path, p, w, g)
				}
			}
			if w.Type == "vector" {
				slices.SortFunc(w.Series, byMetric)
				slices.SortFunc(g.Series, byMetric)
			}
			if !reflect.DeepEqual(w, g) && tolerant && closeResults(w, g, 1e-12) {
				if genTolerated.Add(1) <= 5 {
					tb.Logf("within 1e-12, not bit-identical: %s", q)
				}
			} else if !reflect.DeepEqual(w, g) {
				t.Fatalf("%s %v:\nengine %+v\napi    %+v", path, p, w, g)
			}
			wantWarn, wantInfo := want.Warnings.AsStrings(q, 10, 10)
			slices.Sort(wantWarn)
			slices.Sort(wantInfo)
			slices.Sort(got.Warnings)
			slices.Sort(got.Infos)
			if !slices.Equal(wantWarn, got.Warnings) || !slices.Equal(wantInfo, got.Infos) {
				t.Fatalf("%s %v: annotations: engine %q %q, api %q %q", path, p, wantWarn, wantInfo, got.Warnings, got.Infos)
			}
			qry.Close()
		}
		if stats != nil {
			stats.computed.Add(api.fastStats.computed.Load())
			stats.declined.Add(api.fastStats.declined.Load())
			stats.aggregated.Add(api.fastStats.aggregated.Load())
			stats.binops.Add(api.fastStats.binops.Load())
			stats.pushed.Add(api.fastStats.pushed.Load())
		}
	}
}

// TestGeneratedQueriesMatchPrometheus is the generative proof in CI:
// rounds of rapid.Check (each -rapid.checks cases from a new seed) for
// -gen.budget.
func TestGeneratedQueriesMatchPrometheus(t *testing.T) {
	var stats fastStats
	before := genChecked.Load()
	deadline := time.Now().Add(*genBudget)
	rounds := 0
	for rounds == 0 || time.Now().Before(deadline) {
		rapid.Check(t, genProperty(t, &stats, inMemory))
		rounds++
		if t.Failed() {
			return
		}
	}
	t.Logf("%d rounds, %d queries compared; pushed down: %d selectors (%d aggregated), %d binary operators; %d queries declined to the engine",
		rounds, genChecked.Load()-before, stats.computed.Load(), stats.aggregated.Load(), stats.binops.Load(), stats.declined.Load())
	require.Positive(t, stats.computed.Load(), "the comparison must exercise the pushdown")
}

// TestGeneratedQueriesMatchPrometheusOverStorage is the property over
// Tessera's storage: each case's series (labelled run="N" apart from the
// other cases' in one database) are written in shuffled batches, so most
// series arrive out of order, and read back through the database's
// index, buffers and merge.
func TestGeneratedQueriesMatchPrometheusOverStorage(t *testing.T) {
	db := storagetest.Open(t, 16, func() time.Time { return time.UnixMilli(genStart + 4*3600*1000) })
	var runs int
	store := func(rt *rapid.T, series []memSeries) (query.Reader, []memSeries) {
		runs++
		run := strconv.Itoa(runs)
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "order"), 3))
		var batches [][]tstorage.Sample
		nb := 1 + rng.IntN(6)
		batches = make([][]tstorage.Sample, nb)
		out := make([]memSeries, len(series))
		for i, s := range series {
			lset := labels.NewBuilder(s.lset).Set("run", run).Labels()
			out[i] = memSeries{lset: lset, samples: s.samples}
			id := ident.FromLabels(lset)
			for _, smp := range s.samples {
				k := rng.IntN(nb)
				batches[k] = append(batches[k], tstorage.Sample{ID: id, Shard: db.Shard(id), T: smp.t, V: smp.v})
			}
		}
		for _, b := range batches {
			if len(b) > 0 {
				require.NoError(t, db.WriteBatch("default", b))
			}
		}
		return runReader{Reader: httpapi.Local{DB: db}, run: labels.MustNewMatcher(labels.MatchEqual, "run", run)}, out
	}
	var stats fastStats
	before := genChecked.Load()
	rapid.Check(t, genProperty(t, &stats, store))
	t.Logf("%d queries compared over storage, %d selectors pushed down", genChecked.Load()-before, stats.computed.Load())
	require.Positive(t, stats.computed.Load())
}

// runReader reads one case's series out of a shared database.
type runReader struct {
	query.Reader
	run *labels.Matcher
}

func (r runReader) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]tstorage.SeriesIterator, error) {
	return r.Reader.Query(ctx, ns, append(slices.Clip(ms), r.run), start, end)
}

func (r runReader) LabelNames(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return r.Reader.LabelNames(ctx, ns, append(slices.Clip(ms), r.run), start, end)
}

func (r runReader) LabelValues(ctx context.Context, ns, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return r.Reader.LabelValues(ctx, ns, name, append(slices.Clip(ms), r.run), start, end)
}

// splitPusher is a data set split over parts as a cluster splits it over
// shards: Query reads all the series (the raw path), Push evaluates the
// request on every part (Evaluate, as each replica would) and merges the
// partial aggregates.
type splitPusher struct {
	*memBackend
	parts []*memBackend
}

func (p splitPusher) Push(ctx context.Context, req *query.Request) (*query.Result, error) {
	var all *query.Result
	for _, part := range p.parts {
		res, err := Evaluate(ctx, part, req, testOptions(Options{Parallelism: 2}))
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = res
			continue
		}
		if err := all.MergeFor(req.Agg, res); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// split stores the series over parts by a hash of their labels.
func split(parts int) genStore {
	return func(t *rapid.T, series []memSeries) (query.Reader, []memSeries) {
		all, _ := inMemory(t, series)
		p := splitPusher{memBackend: all.(*memBackend), parts: make([]*memBackend, parts)}
		for i := range p.parts {
			p.parts[i] = &memBackend{}
		}
		for i := len(series) - 1; i >= 0; i-- {
			part := p.parts[series[i].lset.Hash()%uint64(parts)]
			part.add(series[i].lset, series[i].samples...)
		}
		return p, series
	}
}

// closeResults reports whether g is w with every value within rel of
// w's (relative to the larger magnitude; NaN equal to NaN, infinities
// exact).
func closeResults(w, g normResult, rel float64) bool {
	if w.Type != g.Type || len(w.Series) != len(g.Series) {
		return false
	}
	for i := range w.Series {
		ws, gs := w.Series[i], g.Series[i]
		if ws.Metric != gs.Metric || len(ws.Points) != len(gs.Points) || !reflect.DeepEqual(ws.Hist, gs.Hist) {
			return false
		}
		for k := range ws.Points {
			a, b := ws.Points[k], gs.Points[k]
			if a.T != b.T {
				return false
			}
			if a.V == b.V {
				continue
			}
			x, err1 := strconv.ParseFloat(a.V, 64)
			y, err2 := strconv.ParseFloat(b.V, 64)
			if err1 != nil || err2 != nil || math.IsInf(x, 0) || math.IsInf(y, 0) ||
				math.Abs(x-y) > rel*math.Max(math.Abs(x), math.Abs(y)) {
				return false
			}
		}
	}
	return true
}

// TestGeneratedQueriesMatchPrometheusSplit is the property over a data
// set split in three parts whose partial aggregates (Evaluate) are merged,
// as replicas' would be: counts exactly, sums and averages (and what is
// computed over them) within 1e-12 relative, their partial sums being
// added in another order than the engine's.
func TestGeneratedQueriesMatchPrometheusSplit(t *testing.T) {
	var stats fastStats
	before := genChecked.Load()
	rapid.Check(t, genPropertyTol(t, &stats, split(3), true))
	t.Logf("%d queries compared over 3 parts; %d selections pushed down (aggregations and step values) and merged, %d declined to raw series; %d answers within 1e-12 but not bit-identical",
		genChecked.Load()-before, stats.pushed.Load(), stats.declined.Load(), genTolerated.Load())
	require.Positive(t, stats.pushed.Load(), "the comparison must exercise the pushdown")
}

// FuzzGeneratedQueriesMatchPrometheus runs the same property for as long
// as asked: go test -fuzz FuzzGeneratedQueriesMatchPrometheus -fuzztime 10m.
func FuzzGeneratedQueriesMatchPrometheus(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(genProperty(f, nil, inMemory)))
}

// failRecorder is a rapid.TB that records a failure instead of failing
// the test, for running the property against a deliberately broken
// evaluator.
type failRecorder struct {
	*testing.T
	failed atomic.Bool
	msg    atomic.Value
}

func (r *failRecorder) Errorf(format string, args ...any) {
	r.failed.Store(true)
	r.msg.Store(fmt.Sprintf(format, args...))
}
func (r *failRecorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *failRecorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
}
func (r *failRecorder) Fatal(args ...any) { r.Error(args...) }
func (r *failRecorder) FailNow()          { r.failed.Store(true) }
func (r *failRecorder) Fail()             { r.failed.Store(true) }
func (r *failRecorder) Failed() bool      { return r.failed.Load() }

// setFlag sets a command-line flag of rapid's for the rest of the test.
func setFlag(t *testing.T, name, v string) {
	f := flag.Lookup(name)
	require.NotNil(t, f, name)
	old := f.Value.String()
	require.NoError(t, f.Value.Set(v))
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// TestGeneratedQueriesCatchMutations shows the property fails, within the
// CI budget of cases, on an evaluator with a window edge off by one (a
// sample exactly at ts-range counted in the window) and on one that drops
// counter resets.
func TestGeneratedQueriesCatchMutations(t *testing.T) {
	setFlag(t, "rapid.nofailfile", "true")
	setFlag(t, "rapid.shrinktime", "1s")
	for name, mutate := range map[string]func() func(){
		"window edge off by one": func() func() {
			windowStart = func(ts, rng int64) int64 { return ts - rng - 1 }
			return func() { windowStart = func(ts, rng int64) int64 { return ts - rng } }
		},
		"counter reset dropped": func() func() {
			rateFunc = func(pts []promql.FPoint, rs, re int64, secs float64, isCounter, _, isRate bool) (float64, bool) {
				return extrapolatedRate(pts, rs, re, secs, isCounter, false, isRate)
			}
			return func() { rateFunc = extrapolatedRate }
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Cleanup(mutate())
			rec := &failRecorder{T: t}
			before := genChecked.Load()
			rapid.Check(rec, genProperty(t, nil, inMemory))
			require.True(t, rec.Failed(), "the generated comparison must catch: %s", name)
			t.Logf("caught after %d queries (shrinking included): %v", genChecked.Load()-before, rec.msg.Load())
		})
	}
}
