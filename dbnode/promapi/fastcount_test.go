package promapi

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
)

// countDataset is 600 series of one gauge and one counter, in groups
// that span many fast path chunks (so that several workers count each
// group): series that start late, stop early, pause, end with a
// staleness marker and come back, or hold NaN values (present, unlike a
// marker).
func countDataset(start int64) *dataset {
	rng := rand.New(rand.NewPCG(18, 3))
	d := &dataset{start: start, end: start + time.Hour.Milliseconds()}
	stale := math.Float64frombits(value.StaleNaN)
	step := int64(15_000)
	for inst := range 60 {
		for cpu := range 2 {
			for _, mode := range []string{"idle", "user", "system", "iowait", "steal"} {
				from, to := d.start, d.end
				switch rng.IntN(6) {
				case 0:
					from += rng.Int64N(40 * 60_000)
				case 1:
					to -= rng.Int64N(40 * 60_000)
				}
				pauseAt, pauseLen := from+rng.Int64N(to-from+1), int64(0)
				if rng.IntN(4) == 0 {
					pauseLen = rng.Int64N(10 * 60_000)
				}
				staleAt := int64(math.MaxInt64)
				if rng.IntN(5) == 0 {
					staleAt = from + rng.Int64N(to-from+1)
				}
				var gauge, counter []tsample
				c := float64(rng.IntN(1000))
				for t := from + rng.Int64N(step); t <= to; t += step {
					if t >= pauseAt && t < pauseAt+pauseLen {
						continue
					}
					ts := t + rng.Int64N(30) - 15
					if ts >= staleAt && staleAt != math.MaxInt64 {
						gauge = append(gauge, tsample{ts, stale})
						counter = append(counter, tsample{ts, stale})
						staleAt = math.MaxInt64 // back at the next scrape
						continue
					}
					v := float64(rng.IntN(10000)) / 100
					if rng.IntN(50) == 0 {
						v = math.NaN()
					}
					c += float64(rng.IntN(500)) / 100
					gauge = append(gauge, tsample{ts, v})
					counter = append(counter, tsample{ts, c})
				}
				ls := []string{"instance", fmt.Sprintf("i%d", inst), "cpu", fmt.Sprint(cpu), "mode", mode}
				d.series = append(d.series,
					memSeries{lset: labels.FromStrings(append([]string{"__name__", "cnt_gauge"}, ls...)...), samples: gauge},
					memSeries{lset: labels.FromStrings(append([]string{"__name__", "cnt_seconds_total"}, ls...)...), samples: counter})
			}
		}
	}
	return d
}

// TestFastPathGroupsMatchEngine holds count by (...), computed in the
// fast path's workers (countGroups), and sum and avg by (...), whose
// groups are added up on several goroutines (aggregateGroups), to the
// engine: every answer byte-identical, with groups that several workers
// count, at steps shorter and longer than the scrape interval and a
// lookback shorter than the step.
func TestFastPathGroupsMatchEngine(t *testing.T) {
	d := countDataset(time.Now().Add(-90 * time.Minute).Truncate(time.Hour).UnixMilli())
	node := newTesseraNode(t, time.UnixMilli(d.end+30_000), Options{})
	node.remoteWrite(t, d)
	pair := newFastPair(t, node, Options{Parallelism: 4})
	queries := []string{
		`count by (mode) (cnt_gauge)`,
		`count(cnt_gauge)`,
		`count by (instance) (cnt_gauge)`,
		`count by (cpu, nope) (cnt_gauge)`,
		`count by (mode) (rate(cnt_seconds_total[1m]))`,
		`count by (cpu) (irate(cnt_seconds_total[45s]))`,
		`count(count_over_time(cnt_gauge[30s]))`,
		`count by (mode) (cnt_gauge) / ignoring(mode) group_left count(cnt_gauge)`,
		`sum by (mode) (rate(cnt_seconds_total[1m]))`,
		`avg by (instance) (cnt_gauge)`,
		`sum by (cpu) (cnt_seconds_total)`,
		`avg by (mode, cpu) (irate(cnt_seconds_total[45s]))`,
	}
	var cases []url.Values
	for _, q := range queries {
		for _, ts := range []int64{d.start + 61_000, d.start + 31*60_000 + 7, d.end, d.end + 4*60_000} {
			cases = append(cases, url.Values{"query": {q}, "time": {fmtTime(ts, false)}})
		}
		for i, r := range []struct {
			start, end int64
			step       string
		}{
			{d.start - 5*60_000, d.end + 10*60_000, "60"},
			{d.start + 3*60_000 + 13_000, d.end - 60_000, "7s"},
			{d.start, d.end, "15s"},
		} {
			p := url.Values{"query": {q}, "start": {fmtTime(r.start, false)}, "end": {fmtTime(r.end, false)}, "step": {r.step}}
			if i == 1 {
				p.Set("lookback_delta", "10s")
			}
			cases = append(cases, p)
		}
	}
	before, nonEmpty := pair.api.fastStats.aggregated.Load(), 0
	for _, p := range cases {
		path := "/api/v1/query_range"
		if p.Has("time") {
			path = "/api/v1/query"
		}
		msg, body := pair.diff(t, path, p)
		require.Empty(t, msg)
		if !strings.Contains(body, `"result":[]`) {
			nonEmpty++
		}
	}
	require.Greater(t, nonEmpty, len(cases)*9/10, "answers the comparison could get wrong")
	require.GreaterOrEqual(t, pair.api.fastStats.aggregated.Load()-before, int64(len(cases)), "the fast path must aggregate")
}

// TestMergeCounts: the workers' partial counts add up, and the groups
// come in the order of their first series, labelled by it, whichever
// worker saw it (the engine's order, which the comparison above does not
// see: it sorts instant vectors).
func TestMergeCounts(t *testing.T) {
	series := func(lset labels.Labels, first int, vals ...float64) *fastSeries {
		return &fastSeries{lset: lset, first: first, vals: vals}
	}
	a, b := labels.FromStrings("g", "a", "x", "1"), labels.FromStrings("g", "b", "x", "2")
	w0, w1 := newCountGroups([]string{"g"}, 4), newCountGroups([]string{"g"}, 4)
	w0.add(64, nil, series(a, 1, 1, staleNaN, 3))
	w0.add(65, nil, series(b, 0, 5))
	w1.add(2, nil, series(b, 2, 1, 1))
	w1.add(3, nil, series(labels.FromStrings("g", "b", "x", "3"), 0, 7, math.NaN()))
	w1.add(130, nil, series(a, 0, 2))
	got := mergeCounts([]*countGroups{w0, nil, w1}, 4)
	require.Len(t, got, 2)
	require.Equal(t, "{g=\"b\"}", got[0].lset.String())
	require.Equal(t, []float64{2, 1, 1, 1}, got[0].vals)
	require.Equal(t, "{g=\"a\"}", got[1].lset.String())
	require.Equal(t, 0, got[1].first)
	require.Equal(t, 4, got[1].n)
	require.Equal(t, 1., got[1].vals[0])
	require.Equal(t, 1., got[1].vals[1])
	require.True(t, value.IsStaleNaN(got[1].vals[2]))
	require.Equal(t, 1., got[1].vals[3])
}

// The samples limit's check over a count's chunks (chunkPoints) decides
// as the check over each series (fastSet.load's, for every other set)
// does: for random step value counts and windows, at every limit around
// where the verdict changes.
func TestChunkPointsCheckMatchesPerSeries(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 1))
	for round := range 200 {
		n := 1 + rng.IntN(5*fastChunk)
		vals, wins := make([]int, n), make([]int, n)
		for i := range n {
			if rng.IntN(4) > 0 {
				vals[i] = rng.IntN(20)
			}
			wins[i] = rng.IntN(60)
		}
		chunks := make([]chunkPoints, (n+fastChunk-1)/fastChunk)
		for i := range n {
			chunks[i/fastChunk].add(vals[i], wins[i])
		}
		base := rng.IntN(100)
		perSeries := func(limit int) bool {
			acc := base
			for i := range n {
				if acc+wins[i]+vals[i] > limit {
					return false
				}
				acc += vals[i]
			}
			return true
		}
		chunked := func(limit int) bool {
			acc := base
			for _, c := range chunks {
				if acc+c.peak > limit {
					return false
				}
				acc += c.n
			}
			return true
		}
		flips := 0
		for limit := 0; limit < base+n*80; limit++ {
			want := perSeries(limit)
			require.Equal(t, want, chunked(limit), "round %d, limit %d", round, limit)
			if want && !perSeries(limit-1) {
				flips++
			}
		}
		require.Equal(t, 1, flips, "round %d: the verdict changes once", round)
	}
}

// streamsReader is the local backend recording how the fast path's reads
// asked for their order.
type streamsReader struct {
	httpapi.Local
	unsorted, sorted atomic.Int64
}

func (r *streamsReader) QueryStreams(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64, unsorted bool) ([]tstorage.SeriesIterator, error) {
	if unsorted {
		r.unsorted.Add(1)
	} else {
		r.sorted.Add(1)
	}
	return r.Local.QueryStreams(ctx, ns, ms, start, end, unsorted)
}

// A count reads its series in the index's ref order (unsorted) and still
// answers exactly as the engine over the sorted read does, group order
// included (the bodies are compared as they are, not sorted): the series
// are created in an order far from their IDs' (and from their groups'),
// over several workers. Declined, the read handed to the engine is
// sorted first.
func TestCountReadUnsortedKeepsEngineOrder(t *testing.T) {
	const n = 3000
	start := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC).UnixMilli()
	last := start + 9*15_000
	db := storagetest.Open(t, 64, func() time.Time { return time.UnixMilli(last + 10_000) })
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	var batch []tstorage.Sample
	for i := range n {
		// Created from the largest x down, its group cycling: the first
		// series created in each group is far from its smallest ID.
		id := ident.FromLabels(labels.FromStrings("__name__", "m", "g", fmt.Sprint((i*5)%7), "h", fmt.Sprint(i%3), "x", fmt.Sprintf("%05d", n-i)))
		for k := range 10 {
			if (i+k)%11 == 0 {
				continue // gaps: not every series has a value at every step
			}
			batch = append(batch, tstorage.Sample{ID: id, Shard: db.Shard(id), T: start + int64(k)*15_000, V: float64(i)})
		}
	}
	require.NoError(t, db.WriteBatch("default", batch))

	serve := func(b httpapi.Backend, opts Options) (*API, string) {
		opts.Now = func() time.Time { return time.UnixMilli(last + 10_000) }
		a := newAPI(t, b, opts)
		mux := http.NewServeMux()
		a.Register(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return a, srv.URL
	}
	reader := &streamsReader{Local: httpapi.Local{DB: db}}
	fast, fastURL := serve(reader, Options{Parallelism: 4})
	_, plainURL := serve(httpapi.Local{DB: db}, Options{DisableFastPath: true})
	queries := []url.Values{
		instant(`count by (g) (m)`, last),
		instant(`count by (h, g) (m)`, last-15_000),
		instant(`group by (g) (m)`, last),
		instant(`count(m)`, last),
		ranged(`count by (g) (m)`, start, last, "15"),
		ranged(`count by (g) ({__name__="m", h!="1"})`, start, last, "30"),
	}
	for _, q := range queries {
		code, want := rawGet(t, plainURL+"/api/v1/query?"+q.Encode())
		path := "/api/v1/query"
		if q.Has("step") {
			path = "/api/v1/query_range"
			code, want = rawGet(t, plainURL+path+"?"+q.Encode())
		}
		require.Equal(t, http.StatusOK, code, want)
		require.Contains(t, want, `"result":[{`, q.Get("query"))
		if strings.Contains(q.Get("query"), "g)") {
			require.Greater(t, strings.Count(want, `"g":`), 2, q.Get("query"))
		}
		code, got := rawGet(t, fastURL+path+"?"+q.Encode())
		require.Equal(t, http.StatusOK, code, got)
		require.Equal(t, want, got, q.Get("query"))
	}
	require.Equal(t, int64(len(queries)), reader.unsorted.Load(), "every count read unsorted")
	require.Equal(t, int64(len(queries)), fast.fastStats.aggregated.Load())

	// Past what no order could take past the samples limit, the fast
	// path declines and the engine decides over the read, sorted.
	q := instant(`count by (g) (m)`, last)
	limited, limURL := serve(reader, Options{MaxSamples: n})
	_, plainLimURL := serve(httpapi.Local{DB: db}, Options{MaxSamples: n, DisableFastPath: true})
	code, want := rawGet(t, plainLimURL+"/api/v1/query?"+q.Encode())
	require.Equal(t, http.StatusOK, code, want)
	_, got := rawGet(t, limURL+"/api/v1/query?"+q.Encode())
	require.Equal(t, want, got)
	require.Equal(t, int64(1), limited.fastStats.declined.Load())
}
