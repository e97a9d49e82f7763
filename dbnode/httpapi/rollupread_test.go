package httpapi

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	pstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// rollT0 is a 2h block boundary; the data covers [rollT0, rollT0+4h).
var rollT0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// dbRollupReader reads rollups from one database, as the node's reader
// does on a node owning every shard.
type dbRollupReader struct{ db *storage.Database }

func (d dbRollupReader) QueryRollup(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.RollupSeries, error) {
	return d.db.QueryRollup(ctx, ns, ms, start, end, storage.QueryOptions{})
}

// rollupReadServer writes counters (one resetting across 5m window
// edges, one resetting inside windows, some windows with a reset after
// which the counter passes its value before the reset), a gauge and a
// native histogram counter over [rollT0, rollT0+4h) into a database
// with a 5m rollup, rolls them up, and serves remote read over it with
// raw taken to hold only what is after rollT0+2h (the database keeps
// all of raw, so a read pinned to ?namespace=default is the engine's
// reference over raw data).
func rollupReadServer(t *testing.T) (*httptest.Server, int64) {
	t.Helper()
	now := rollT0.Add(4 * time.Hour)
	clock := func() time.Time { return now }
	cl := config.Default().CommitLog
	db, err := storage.Open(storage.Options{
		Dir: t.TempDir(),
		Namespaces: []storage.NamespaceOptions{
			{Name: "default", Retention: 48 * time.Hour, BlockSize: 2 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: true, Index: true},
			{Name: "r5m", RollupOf: "default", Resolution: 5 * time.Minute, Retention: 96 * time.Hour, BlockSize: 2 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, Index: true},
			{Name: "r1h", RollupOf: "r5m", Resolution: time.Hour, Retention: 400 * time.Hour, BlockSize: 2 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, Index: true},
		},
		NumShards: 16, CommitLogMode: commitlog.ModeSync, CommitLogFlushEvery: cl.FlushEvery,
		CommitLogMaxFile: cl.MaxFileSize, CommitLogMaxPending: cl.MaxPendingBytes, Now: clock,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	id := func(name string, extra ...string) []byte {
		return ident.FromLabels(labels.FromStrings(append([]string{"__name__", name, "job", "rollup"}, extra...)...))
	}
	ctr, ctr2, edge, inner, gauge, hist := id("c_total"), id("c_total", "instance", "b"), id("r_total"), id("q_total"), id("g"), id("h")
	var fl []storage.Sample
	var hs []storage.HistogramSample
	c, r, q := 0.0, 0.0, 0.0
	start, end := rollT0.UnixMilli(), rollT0.Add(4*time.Hour).UnixMilli()
	for i, ts := 0, start; ts < end; i, ts = i+1, ts+15_000 {
		t := ts + int64(i%7)*311 // off the window edges, but for i%7 == 0
		c += float64(i%5) + 0.25
		fl = append(fl, storage.Sample{ID: ctr, Shard: db.Shard(ctr), T: t, V: c},
			storage.Sample{ID: ctr2, Shard: db.Shard(ctr2), T: t, V: 3*c + 0.5},
			storage.Sample{ID: gauge, Shard: db.Shard(gauge), T: t, V: math.Sin(float64(i)/9)*100 + float64(i%13)})
		// r_total resets at every 40-minute mark: the last sample before
		// the edge is in one 5m window, the reset in the next.
		if (ts-start)%(40*60_000) == 0 && ts > start {
			r = 2
		} else {
			r += 3
		}
		// q_total resets every 23 samples, mostly inside a window; it
		// grows by 1 or by 10 in turns of 23, so after some resets it
		// passes its value before the reset within the window, and
		// twice an hour it resets twice in one window.
		switch {
		case i%23 == 11 || i%240 == 15:
			q = float64(i % 3)
		case (i/23)%2 == 0:
			q++
		default:
			q += 10
		}
		fl = append(fl, storage.Sample{ID: edge, Shard: db.Shard(edge), T: t, V: r},
			storage.Sample{ID: inner, Shard: db.Shard(inner), T: t, V: q})
		h := &histogram.Histogram{
			Schema: 0, ZeroThreshold: 0.001, ZeroCount: uint64(i), Count: uint64(4*i + 3), Sum: float64(i) * 1.25,
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{int64(i + 1), int64(i + 1)},
		}
		hs = append(hs, storage.HistogramSample{ID: hist, Shard: db.Shard(hist), T: t, H: h})
	}
	require.NoError(t, db.WriteBatch("default", fl))
	require.NoError(t, db.WriteHistograms("default", hs))
	now = now.Add(11 * time.Minute)
	require.NoError(t, db.Tick())
	for _, st := range db.RollupStatuses() {
		require.Equal(t, rollT0.Add(4*time.Hour), st.RolledUpTo, st.Namespace)
	}

	a := newAPI(t, Options{Namespace: "default", NumShards: 16, Backend: Local{DB: db},
		Rollups: []RollupNamespace{{Name: "r5m", Resolution: 5 * time.Minute, Retention: 96 * time.Hour, BlockSize: 2 * time.Hour},
			{Name: "r1h", Resolution: time.Hour, Retention: 400 * time.Hour, BlockSize: 2 * time.Hour}},
		// now-3h is in the block [t0, t0+2h): raw surely holds from t0+2h.
		RawRetention: 3 * time.Hour, RawBlockSize: 2 * time.Hour,
		RollupReader: dbRollupReader{db}, Now: clock})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv, rollT0.Add(2 * time.Hour).UnixMilli()
}

// remoteQueryable reads over u by remote read as a Prometheus server
// with a remote_read section (read_recent: true) does
// (storage/remote's querier, which this module does not build): each
// selector the engine evaluates is one snappy protobuf ReadRequest of
// the querier's time range carrying the engine's hints, answered as
// samples or streamed XOR chunks.
// The rollup headers of its answers are appended to *used when set.
func remoteQueryable(t *testing.T, u string, streamed bool, used ...*[]string) pstorage.Queryable {
	return pstorage.QueryableFunc(func(mint, maxt int64) (pstorage.Querier, error) {
		q := &remoteQuerier{t: t, u: u, streamed: streamed, mint: mint, maxt: maxt}
		if len(used) > 0 {
			q.used = used[0]
		}
		return q, nil
	})
}

type remoteQuerier struct {
	t          *testing.T
	u          string
	streamed   bool
	mint, maxt int64
	used       *[]string
}

func (q *remoteQuerier) Select(_ context.Context, _ bool, h *pstorage.SelectHints, ms ...*labels.Matcher) pstorage.SeriesSet {
	t := q.t
	pq := &prompb.Query{StartTimestampMs: q.mint, EndTimestampMs: q.maxt}
	for _, m := range ms {
		pq.Matchers = append(pq.Matchers, &prompb.LabelMatcher{Type: prompb.LabelMatcher_Type(m.Type), Name: m.Name, Value: m.Value})
	}
	if h != nil {
		pq.Hints = &prompb.ReadHints{StartMs: h.Start, EndMs: h.End, StepMs: h.Step, Func: h.Func, Grouping: h.Grouping, By: h.By, RangeMs: h.Range}
	}
	req := &prompb.ReadRequest{Queries: []*prompb.Query{pq}, AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_SAMPLES}}
	if q.streamed {
		req.AcceptedResponseTypes = []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}
	}
	body, err := req.Marshal()
	require.NoError(t, err)
	resp, err := http.Post(q.u, "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, body)))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Empty(t, resp.Header.Get(RollupInexactHeader))
	if q.used != nil {
		*q.used = append(*q.used, resp.Header.Get(RollupHeader))
	}
	var series []pstorage.Series
	lset := func(ls []prompb.Label) labels.Labels {
		bl := labels.NewScratchBuilder(len(ls))
		for _, l := range ls {
			bl.Add(l.Name, l.Value)
		}
		bl.Sort()
		return bl.Labels()
	}
	if q.streamed {
		for _, fr := range readFrames(t, b) {
			for _, cs := range fr.ChunkedSeries {
				var smp []chunks.Sample
				for _, c := range cs.Chunks {
					chk, err := chunkenc.FromData(chunkenc.Encoding(c.Type), c.Data)
					require.NoError(t, err)
					it := chk.Iterator(nil)
					for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
						switch vt {
						case chunkenc.ValFloat:
							ts, v := it.At()
							smp = append(smp, sample{t: ts, f: v})
						default:
							ts, fh := it.AtFloatHistogram(nil)
							smp = append(smp, sample{t: ts, fh: fh})
						}
					}
					require.NoError(t, it.Err())
				}
				series = append(series, pstorage.NewListSeries(lset(cs.Labels), smp))
			}
		}
	} else {
		dec, err := snappy.Decode(nil, b)
		require.NoError(t, err)
		var rr prompb.ReadResponse
		require.NoError(t, rr.Unmarshal(dec))
		for _, ts := range rr.Results[0].Timeseries {
			var smp []chunks.Sample
			fi, hi := 0, 0
			for fi < len(ts.Samples) || hi < len(ts.Histograms) {
				if hi >= len(ts.Histograms) || (fi < len(ts.Samples) && ts.Samples[fi].Timestamp < ts.Histograms[hi].Timestamp) {
					smp = append(smp, sample{t: ts.Samples[fi].Timestamp, f: ts.Samples[fi].Value})
					fi++
					continue
				}
				hp := ts.Histograms[hi]
				fh := hp.ToFloatHistogram()
				if !hp.IsFloatHistogram() {
					fh = hp.ToIntHistogram().ToFloat(nil)
				}
				smp = append(smp, sample{t: hp.Timestamp, fh: fh})
				hi++
			}
			series = append(series, pstorage.NewListSeries(lset(ts.Labels), smp))
		}
	}
	sort.Slice(series, func(i, j int) bool { return labels.Compare(series[i].Labels(), series[j].Labels()) < 0 })
	return &listSeriesSet{ss: series, i: -1}
}

func (q *remoteQuerier) LabelValues(context.Context, string, *pstorage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *remoteQuerier) LabelNames(context.Context, *pstorage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *remoteQuerier) Close() error { return nil }

type listSeriesSet struct {
	ss []pstorage.Series
	i  int
}

func (s *listSeriesSet) Next() bool                        { s.i++; return s.i < len(s.ss) }
func (s *listSeriesSet) At() pstorage.Series               { return s.ss[s.i] }
func (s *listSeriesSet) Err() error                        { return nil }
func (s *listSeriesSet) Warnings() annotations.Annotations { return nil }

// sample is a float or a float histogram sample (chunks.Sample).
type sample struct {
	t  int64
	f  float64
	fh *histogram.FloatHistogram
}

func (s sample) T() int64                      { return s.t }
func (s sample) ST() int64                     { return 0 }
func (s sample) F() float64                    { return s.f }
func (s sample) H() *histogram.Histogram       { return nil }
func (s sample) FH() *histogram.FloatHistogram { return s.fh }
func (s sample) Type() chunkenc.ValueType {
	if s.fh != nil {
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}
func (s sample) Copy() chunks.Sample {
	if s.fh != nil {
		s.fh = s.fh.Copy()
	}
	return s
}

// rangeEval runs q over [start, end] at step with the engine.
func rangeEval(t *testing.T, eng *promql.Engine, q pstorage.Queryable, qs string, start, end time.Time, step time.Duration) promql.Matrix {
	t.Helper()
	qry, err := eng.NewRangeQuery(context.Background(), q, nil, qs, start, end, step)
	require.NoError(t, err, qs)
	defer qry.Close()
	res := qry.Exec(context.Background())
	require.NoError(t, res.Err, qs)
	m, err := res.Matrix()
	require.NoError(t, err, qs)
	// Close hands the points back to the engine's pools: copy them.
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		out[i] = promql.Series{Metric: s.Metric, Floats: slices.Clone(s.Floats)}
		for _, p := range s.Histograms {
			out[i].Histograms = append(out[i].Histograms, promql.HPoint{T: p.T, H: p.H.Copy()})
		}
	}
	return out
}

// requireMatrixClose requires got to hold want's series, steps and
// values, floats within 1e-9 relative.
func requireMatrixClose(t *testing.T, qs string, want, got promql.Matrix) {
	t.Helper()
	require.Len(t, got, len(want), "%s: series", qs)
	close := func(a, b float64) bool {
		return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
	}
	for i, w := range want {
		g := got[i]
		require.Equal(t, w.Metric.String(), g.Metric.String(), qs)
		require.Len(t, g.Floats, len(w.Floats), "%s %s: float steps", qs, w.Metric)
		for k, p := range w.Floats {
			require.Equal(t, p.T, g.Floats[k].T, "%s %s", qs, w.Metric)
			require.Truef(t, close(p.F, g.Floats[k].F), "%s %s at %s: raw %v, stitched %v", qs, w.Metric,
				time.UnixMilli(p.T).UTC().Format(time.TimeOnly), p.F, g.Floats[k].F)
		}
		require.Len(t, g.Histograms, len(w.Histograms), "%s %s: histogram steps", qs, w.Metric)
	}
}

func TestRemoteReadStitchesRollupsAsEngineOverRaw(t *testing.T) {
	srv, _ := rollupReadServer(t)
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 50e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	// Steps before rollT0+2h read time raw no longer holds (by the
	// server's options): from the rollup; the others from raw.
	start, end := rollT0.Add(30*time.Minute), rollT0.Add(4*time.Hour)
	for _, streamed := range []bool{false, true} {
		raw := remoteQueryable(t, srv.URL+"/api/v1/read?namespace=default", streamed)
		var used []string
		stitched := remoteQueryable(t, srv.URL+"/api/v1/read", streamed, &used)
		for _, q := range []string{
			`rate(c_total[15m])`,
			`increase(c_total[5m])`,
			`sum by (job) (rate(c_total[30m]))`,
			`increase(r_total[10m])`,
			`increase(q_total[5m])`,
			`increase(q_total[15m])`,
			`rate(q_total[1h])`,
			`max_over_time(g[15m])`,
			`min_over_time(g[5m])`,
			`sum_over_time(g[10m])`,
			`avg_over_time(g[5m])`,
			`last_over_time(g[15m])`,
			`g`,
			`max(g)`,
			`histogram_count(rate(h[15m]))`,
			`histogram_sum(sum_over_time(h[10m]))`,
		} {
			want := rangeEval(t, eng, raw, q, start, end, 15*time.Minute)
			require.NotEmpty(t, want, q)
			got := rangeEval(t, eng, stitched, q, start, end, 15*time.Minute)
			requireMatrixClose(t, q, want, got)
			require.Contains(t, used[len(used)-1], ":r5m until=", q)
		}
		// Steps and ranges of whole hours: read from r1h (the coarsest
		// that fits), as exact.
		for _, q := range []string{
			`rate(c_total[1h])`,
			`increase(q_total[2h])`,
			`max_over_time(g[1h])`,
			`sum_over_time(g[1h])`,
			`g`,
		} {
			want := rangeEval(t, eng, raw, q, rollT0.Add(time.Hour), end, time.Hour)
			require.NotEmpty(t, want, q)
			got := rangeEval(t, eng, stitched, q, rollT0.Add(time.Hour), end, time.Hour)
			requireMatrixClose(t, q, want, got)
			require.Contains(t, used[len(used)-1], ":r1h until=", q)
		}
	}
}

// readRaw posts a SAMPLES remote read of one query and returns the
// answer and its headers.
func readRaw(t *testing.T, u string, q *prompb.Query) (*prompb.ReadResponse, http.Header) {
	t.Helper()
	body, err := (&prompb.ReadRequest{Queries: []*prompb.Query{q}}).Marshal()
	require.NoError(t, err)
	resp, err := http.Post(u, "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, body)))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	dec, err := snappy.Decode(nil, b)
	require.NoError(t, err)
	var rr prompb.ReadResponse
	require.NoError(t, rr.Unmarshal(dec))
	return &rr, resp.Header
}

func TestRemoteReadStitchNoGapNoDuplicate(t *testing.T) {
	srv, boundary := rollupReadServer(t)
	start, end := rollT0.Add(time.Hour).UnixMilli(), rollT0.Add(3*time.Hour).UnixMilli()
	q := &prompb.Query{StartTimestampMs: start, EndTimestampMs: end,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "q_total"}},
		Hints:    &prompb.ReadHints{Func: "increase", StartMs: start, EndMs: end, StepMs: 15 * 60_000, RangeMs: 15 * 60_000}}
	got, h := readRaw(t, srv.URL+"/api/v1/read", q)
	require.Equal(t, "0:r5m until="+strconv.FormatInt(boundary, 10)+" shape=counter", h.Get(RollupHeader))
	require.Empty(t, h.Get(RollupInexactHeader))
	want, h := readRaw(t, srv.URL+"/api/v1/read?namespace=default", q)
	require.Empty(t, h.Get(RollupHeader), "a read pinned to a namespace is not stitched")
	require.Len(t, got.Results[0].Timeseries, 1)
	gs, ws := got.Results[0].Timeseries[0].Samples, want.Results[0].Timeseries[0].Samples
	for i := 1; i < len(gs); i++ {
		require.Less(t, gs[i-1].Timestamp, gs[i].Timestamp, "samples in time order, none twice")
	}
	var before, after []prompb.Sample
	for _, s := range gs {
		if s.Timestamp <= boundary {
			before = append(before, s)
		} else {
			after = append(after, s)
		}
	}
	var rawAfter []prompb.Sample
	for _, s := range ws {
		if s.Timestamp > boundary {
			rawAfter = append(rawAfter, s)
		}
	}
	require.Equal(t, rawAfter, after, "raw answers every sample after the boundary")
	// Two to four samples a 5m window before it (first, last and a
	// reset's), the window ending at the boundary included.
	require.GreaterOrEqual(t, len(before), 2*12)
	require.Less(t, len(before), 4*12+1)
	require.Greater(t, before[len(before)-1].Timestamp, boundary-5*60_000)

	// Functions a window's samples cannot give are answered and named.
	q.Hints.Func = "quantile_over_time"
	_, h = readRaw(t, srv.URL+"/api/v1/read", q)
	require.Contains(t, h.Get(RollupInexactHeader), "quantile_over_time")
	q.Hints = &prompb.ReadHints{Func: "max_over_time", StartMs: start, EndMs: end, StepMs: 60_000, RangeMs: 15 * 60_000}
	_, h = readRaw(t, srv.URL+"/api/v1/read", q)
	require.Contains(t, h.Get(RollupInexactHeader), "not whole 5m0s windows")
	// A read raw holds entirely is raw's alone.
	q.StartTimestampMs = boundary + 1
	_, h = readRaw(t, srv.URL+"/api/v1/read", q)
	require.Empty(t, h.Get(RollupHeader))
	require.False(t, strings.Contains(h.Get(RollupInexactHeader), "r5m"))
}

// TestRollupSegmentsChain: over a chain raw 3h -> 5m 24h -> 1h 400d a
// read reaching ten days back is answered from 1h, then 5m, then raw,
// each part starting the millisecond after the one before ends, at
// window ends of both levels it joins; hints whose range is not whole
// hours leave 1h out, hints of whole hours read 1h alone.
func TestRollupSegmentsChain(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 17, 0, 0, time.UTC)
	a := &API{opts: Options{Namespace: "default", RawRetention: 3 * time.Hour, RawBlockSize: 2 * time.Hour,
		Rollups: []RollupNamespace{
			{Name: "r1h", Resolution: time.Hour, Retention: 400 * 24 * time.Hour, BlockSize: 24 * time.Hour},
			{Name: "r5m", Resolution: 5 * time.Minute, Retention: 24 * time.Hour, BlockSize: 2 * time.Hour},
		},
		RollupReader: dbRollupReader{}, Now: func() time.Time { return now }}}
	start, end := now.Add(-240*time.Hour).UnixMilli(), now.UnixMilli()
	segs, rawFrom := a.rollupSegments(start, end, nil)
	require.Len(t, segs, 2)
	require.Equal(t, "r1h", segs[0].ns)
	require.Equal(t, "r5m", segs[1].ns)
	require.Equal(t, start, segs[0].from)
	// raw surely holds from the 2h block after now-3h (08:00), r5m from
	// the one after now-24h (yesterday 12:00).
	rawHeld := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC).UnixMilli()
	r5mHeld := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC).UnixMilli()
	require.Equal(t, r5mHeld, segs[0].to)
	require.Equal(t, segs[0].to+1, segs[1].from)
	require.Equal(t, rawHeld, segs[1].to)
	require.Equal(t, segs[1].to+1, rawFrom)

	segs, rawFrom = a.rollupSegments(start, end, &prompb.ReadHints{StepMs: 15 * 60_000, RangeMs: 15 * 60_000})
	require.Len(t, segs, 1)
	require.Equal(t, readSegment{ns: "r5m", res: 5 * 60_000, from: start, to: rawHeld}, segs[0])
	require.Equal(t, rawHeld+1, rawFrom)

	// A step and range of whole hours: the coarsest that fits, alone.
	segs, rawFrom = a.rollupSegments(start, end, &prompb.ReadHints{StepMs: 3600_000, RangeMs: 3600_000})
	require.Equal(t, []readSegment{{ns: "r1h", res: 3600_000, from: start, to: rawHeld}}, segs)
	require.Equal(t, rawHeld+1, rawFrom)

	// A 5m level whose one-day blocks surely hold nothing raw does not
	// (its retention is raw's) is left out: 1h from raw's boundary.
	a.opts.Rollups[1] = RollupNamespace{Name: "r5m", Resolution: 5 * time.Minute, Retention: 3 * time.Hour, BlockSize: 24 * time.Hour}
	segs, rawFrom = a.rollupSegments(start, end, nil)
	require.Equal(t, []readSegment{{ns: "r1h", res: 3600_000, from: start, to: rawHeld}}, segs)
	require.Equal(t, rawHeld+1, rawFrom)
	a.opts.Rollups[1] = RollupNamespace{Name: "r5m", Resolution: 5 * time.Minute, Retention: 24 * time.Hour, BlockSize: 2 * time.Hour}

	// Raw holds the whole read: no rollup.
	segs, rawFrom = a.rollupSegments(rawHeld, end, nil)
	require.Empty(t, segs)
	require.Equal(t, rawHeld, rawFrom)
	// A read ending before the boundary: rollups only.
	segs, rawFrom = a.rollupSegments(start, r5mHeld-1, nil)
	require.Len(t, segs, 1)
	require.Equal(t, r5mHeld-1, segs[0].to)
	require.Greater(t, rawFrom, r5mHeld-1)
}

// TestRemoteReadRollupAnswerSize: the two hours only rollups hold, read
// by remote read with rate hints at 15m (from r5m) and 1h (from r1h)
// steps and max_over_time hints, against the same read pinned to raw
// (the figures of docs/performance.md "rollread", with -v).
func TestRemoteReadRollupAnswerSize(t *testing.T) {
	srv, _ := rollupReadServer(t)
	start, end := rollT0.UnixMilli(), rollT0.Add(2*time.Hour).UnixMilli()
	size := func(u, fn string, step int64) (samples, n int) {
		q := &prompb.Query{StartTimestampMs: start, EndTimestampMs: end,
			Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "__name__", Value: "c_total|q_total|r_total|g"}},
			Hints:    &prompb.ReadHints{Func: fn, StartMs: start, EndMs: end, StepMs: step, RangeMs: step}}
		body, err := (&prompb.ReadRequest{Queries: []*prompb.Query{q}}).Marshal()
		require.NoError(t, err)
		resp, err := http.Post(srv.URL+u, "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, body)))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		dec, err := snappy.Decode(nil, b)
		require.NoError(t, err)
		var rr prompb.ReadResponse
		require.NoError(t, rr.Unmarshal(dec))
		require.Len(t, rr.Results[0].Timeseries, 5)
		for _, ts := range rr.Results[0].Timeseries {
			samples += len(ts.Samples)
		}
		t.Logf("%s %s step %dms: %d samples, %d bytes (snappy), %s %q", u, fn, step, samples, len(b), RollupHeader, resp.Header.Get(RollupHeader))
		return samples, len(b)
	}
	rawN, rawB := size("/api/v1/read?namespace=default", "rate", 900_000)
	for _, c := range []struct {
		fn   string
		step int64
		// samples at most: per 5m or 1h window (the one ending at the
		// read's start too) first, last and reset samples
		max int
	}{{"rate", 900_000, 5 * 25 * 4}, {"rate", 3600_000, 5 * 3 * 4}, {"max_over_time", 900_000, 5 * 25}} {
		n, b := size("/api/v1/read", c.fn, c.step)
		require.LessOrEqual(t, n, c.max)
		require.Less(t, b, rawB/5)
	}
	require.Equal(t, 5*480, rawN)
}
