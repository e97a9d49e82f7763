package promapi

// Review of the query fast path (rewrite.go, fasteval.go): requests whose
// answer, error or limit behaviour differs between the fast path and
// Prometheus' engine alone. Each test asks both (fastPair.diff) and
// expects the same answer.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
)

// newBackendPair serves b twice: with the fast path and with the engine
// alone.
func newBackendPair(t *testing.T, b httpapi.Backend, opts Options) fastPair {
	t.Helper()
	opts.Now = func() time.Time { return time.UnixMilli(testBase + 24*3600*1000) }
	serve := func(a *API) *httptest.Server {
		mux := http.NewServeMux()
		a.Register(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv
	}
	fastAPI := newAPI(t, b, opts)
	opts.DisableFastPath = true
	return fastPair{fast: serve(fastAPI), plain: serve(newAPI(t, b, opts)), api: fastAPI}
}

func msParam(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }

func instant(q string, ts int64) url.Values {
	return url.Values{"query": {q}, "time": {msParam(ts)}}
}

func ranged(q string, start, end int64, step string) url.Values {
	return url.Values{"query": {q}, "start": {msParam(start)}, "end": {msParam(end)}, "step": {step}}
}

// counters is a memBackend with x_total{job} for jobs a, b, c: a sample
// every 15 s for an hour from testBase.
func counters() *memBackend {
	b := &memBackend{}
	for _, job := range []string{"a", "b", "c"} {
		var ss []tsample
		for i := range 240 {
			ss = append(ss, tsample{testBase + int64(i)*15_000, float64(i)})
		}
		b.add(labels.FromStrings("__name__", "x_total", "job", job), ss...)
	}
	return b
}

// The engine counts, against query.maxSamples, the samples a matrix
// selector loads for each step's window (240 here, over a limit of 100)
// and refuses the query; the fast path counts only the step values it
// hands the engine (3), so it answers what the engine refuses.
func TestReviewMaxSamplesRateWindowNotCounted(t *testing.T) {
	pair := newBackendPair(t, counters(), Options{MaxSamples: 100})
	ts := testBase + 3600*1000
	code, body := rawGet(t, pair.plain.URL+"/api/v1/query?"+instant(`rate(x_total[1h])`, ts).Encode())
	require.Equal(t, http.StatusUnprocessableEntity, code, "the engine refuses: %s", body)
	for _, p := range []url.Values{
		instant(`rate(x_total[1h])`, ts),
		instant(`sum(rate(x_total[1h]))`, ts),
		ranged(`sum(increase(x_total[1h]))`, ts-10*60*1000, ts, "60"),
	} {
		if msg := rdiff(pair, t, "/api/v1/query"+map[bool]string{true: "_range"}[p.Has("step")], p); msg != "" {
			t.Error(msg)
		}
	}
}

// The fast path counts the stale markers it puts at the first step of
// each gap against query.maxSamples, points the engine never holds: a
// range query over series that each have a value at one step is refused
// by the fast path at a limit the engine's answer stays under.
func TestReviewMaxSamplesCountsStaleMarkers(t *testing.T) {
	b := &memBackend{}
	for i := range 60 {
		b.add(labels.FromStrings("__name__", "g", "i", strconv.Itoa(i)), tsample{testBase + int64(i)*600_000, 1})
	}
	pair := newBackendPair(t, b, Options{MaxSamples: 100})
	p := ranged(`g`, testBase, testBase+60*600_000, "600")
	code, body := rawGet(t, pair.plain.URL+"/api/v1/query_range?"+p.Encode())
	require.Equal(t, http.StatusOK, code, "the engine answers: %.300s", body)
	if msg := rdiff(pair, t, "/api/v1/query_range", p); msg != "" {
		t.Error(msg)
	}
	// The same with rate: one window with two samples per series.
	b2 := &memBackend{}
	for i := range 60 {
		t0 := testBase + int64(i)*600_000
		b2.add(labels.FromStrings("__name__", "c_total", "i", strconv.Itoa(i)), tsample{t0, 1}, tsample{t0 + 15_000, 2})
	}
	pair2 := newBackendPair(t, b2, Options{MaxSamples: 100})
	p = ranged(`rate(c_total[1m])`, testBase, testBase+60*600_000, "600")
	if msg := rdiff(pair2, t, "/api/v1/query_range", p); msg != "" {
		t.Error(msg)
	}
}

// With type-and-unit labels (as Prometheus' remote write sends them with
// that feature on), a metric whose type changed is two series that differ
// only in __type__. rate drops __name__, __type__ and __unit__; the engine
// then merges the two (range query, no overlap) or refuses
// ("vector cannot contain metrics with the same labelset", overlap), as it
// does for any function's output. The fast path hands the engine the
// dropped label sets as a vector selector's series, which the engine
// never checks: two series with the same labels in the answer.
func TestReviewTypeLabelDuplicates(t *testing.T) {
	b := &memBackend{}
	var before, after []tsample
	for i := range 240 {
		ts := testBase + int64(i)*15_000
		if i < 140 {
			before = append(before, tsample{ts, float64(i)})
		}
		if i >= 100 {
			after = append(after, tsample{ts, float64(i)})
		}
	}
	b.add(labels.FromStrings("__name__", "x_total", "__type__", "gauge", "job", "a"), before...)
	b.add(labels.FromStrings("__name__", "x_total", "__type__", "counter", "job", "a"), after...)
	pair := newBackendPair(t, b, Options{})
	for _, p := range []url.Values{
		// Overlap at 30m (both have samples): the engine refuses.
		instant(`rate(x_total[5m])`, testBase+30*60*1000),
		// No overlap at 10m and 55m: the engine merges the range query's two
		// series into one.
		ranged(`rate(x_total[1m])`, testBase+5*60*1000, testBase+10*60*1000, "60"),
		ranged(`rate(x_total[1m])`, testBase, testBase+60*60*1000, "300"),
	} {
		path := "/api/v1/query"
		if p.Has("step") {
			path += "_range"
		}
		if msg := rdiff(pair, t, path, p); msg != "" {
			t.Error(msg)
		}
	}
}

// The engine selects (t-range, t] and (t-lookback, t] (its hints start
// one ms after t-range); the fast path fetches [t-range, t]. (With
// Tessera's storage the fetched-series limit counts the same series
// either way: the index selects by block, not by sample.) The difference
// shows in the error of a failing backend, which names the range fetched.
func TestReviewBackendErrorRange(t *testing.T) {
	b := counters()
	b.err = errors.New("disk on fire")
	pair := newBackendPair(t, b, Options{})
	ts := testBase + 3600*1000
	for _, p := range []url.Values{instant(`rate(x_total[5m])`, ts), instant(`x_total`, ts)} {
		if msg := rdiff(pair, t, "/api/v1/query", p); msg != "" {
			t.Error(msg)
		}
	}
}

// errValuesBackend is a memBackend whose series iterators report err
// after their samples, as a damaged chunk read part way does.
type errValuesBackend struct {
	*memBackend
	err error
}

func (b errValuesBackend) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]tstorage.SeriesIterator, error) {
	its, err := b.memBackend.Query(ctx, ns, ms, start, end)
	for _, it := range its {
		it.Values.(*sliceIter).err = b.err
	}
	return its, err
}

// A read error of a series: the engine answers it as the iterator's
// error; the fast path wraps it in its own words.
func TestReviewSeriesReadError(t *testing.T) {
	pair := newBackendPair(t, errValuesBackend{counters(), errors.New("checksum mismatch")}, Options{})
	ts := testBase + 3600*1000
	for _, p := range []url.Values{instant(`rate(x_total[5m])`, ts), instant(`x_total`, ts),
		ranged(`rate(x_total[5m])`, testBase+600_000, ts, "60"), ranged(`x_total`, testBase+600_000, ts, "60"),
		ranged(`sum(irate(x_total[1m]))`, testBase, ts+600_000, "30")} {
		path := "/api/v1/query"
		if p.Has("step") {
			path += "_range"
		}
		if msg := rdiff(pair, t, path, p); msg != "" {
			t.Error(msg)
		}
	}
}

// badIDBackend is a memBackend whose series with job="bad" have an ID
// that does not decode (a stray byte at its end, as damage might leave).
type badIDBackend struct{ *memBackend }

func (b badIDBackend) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]tstorage.SeriesIterator, error) {
	its, err := b.memBackend.Query(ctx, ns, ms, start, end)
	for i := range its {
		if strings.Contains(string(its[i].ID), "bad") {
			its[i].ID = append(slices.Clone(its[i].ID), 5)
		}
	}
	return its, err
}

// A series whose ID does not decode to a label set: the engine's series
// set skips it with a warning as soon as it has a sample in the selected
// range; the fast path decodes, and warns, only for a series with a value
// at some step, so a series with one sample in the window (no rate) loses
// its warning.
func TestReviewSkippedSeriesWarning(t *testing.T) {
	b := counters()
	ts := testBase + 3600*1000
	b.add(labels.FromStrings("__name__", "x_total", "job", "bad"), tsample{ts - 10_000, 1})
	pair := newBackendPair(t, badIDBackend{b}, Options{})
	p := instant(`rate(x_total[5m])`, ts)
	code, body := rawGet(t, pair.plain.URL+"/api/v1/query?"+p.Encode())
	require.Equal(t, http.StatusOK, code, "%.500s", body)
	require.Contains(t, body, "series skipped", "the engine warns")
	if msg := rdiff(pair, t, "/api/v1/query", p); msg != "" {
		t.Error(msg)
	}
}

// panicValuesBackend is a memBackend whose series iterators panic, as a
// decoder might on data damaged in a way it does not check.
type panicValuesBackend struct{ *memBackend }

type panicIter struct{}

func (panicIter) Next() bool           { panic("decoder: index out of range") }
func (panicIter) At() (int64, float64) { return 0, 0 }
func (panicIter) Err() error           { return nil }

func (b panicValuesBackend) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]tstorage.SeriesIterator, error) {
	its, err := b.memBackend.Query(ctx, ns, ms, start, end)
	for i := range its {
		its[i].Values = panicIter{}
	}
	return its, err
}

// A panic while reading a series: the engine evaluates on the request's
// goroutine and turns a panic into the query's error (422); the fast path
// reads series on goroutines of its own, where a panic is not recovered
// and ends the process. The request runs in a child process of this test
// binary, which must survive it.
func TestReviewWorkerPanic(t *testing.T) {
	pair := newBackendPair(t, panicValuesBackend{counters()}, Options{})
	p := instant(`rate(x_total[5m])`, testBase+3600*1000)
	if os.Getenv("QREVIEW_PANIC_CHILD") == "1" {
		code, body := rawGet(t, pair.fast.URL+"/api/v1/query?"+p.Encode())
		t.Logf("fast path answered %d %s", code, body)
		return
	}
	code, body := rawGet(t, pair.plain.URL+"/api/v1/query?"+p.Encode())
	require.Equal(t, http.StatusUnprocessableEntity, code, "the engine answers the panic as an error: %s", body)
	cmd := exec.Command(os.Args[0], "-test.run=^TestReviewWorkerPanic$", "-test.count=1")
	cmd.Env = append(os.Environ(), "QREVIEW_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the process must survive a panic in the fast path:\n%.1500s", out)
}

// Many series on several workers at once, several queries concurrently,
// for the race detector (TestFastPathMatchesEngine exceeds go test's
// default 10 minute timeout under -race on a small machine).
func TestReviewConcurrentWorkers(t *testing.T) {
	b := &memBackend{}
	for i := range 700 {
		var ss []tsample
		for j := range 120 {
			v := float64(j * (i%7 + 1))
			if j == 60+i%13 {
				v = 0 // a reset
			}
			ss = append(ss, tsample{testBase + int64(j)*30_000 + int64(i%11)*1000, v})
		}
		b.add(labels.FromStrings("__name__", "x_total", "job", strconv.Itoa(i%5), "i", strconv.Itoa(i)), ss...)
	}
	pair := newBackendPair(t, b, Options{Parallelism: 4})
	ps := []url.Values{
		ranged(`sum by (job) (rate(x_total[2m]))`, testBase, testBase+3600*1000, "45"),
		ranged(`rate(x_total[1m]) > bool x_total`, testBase, testBase+3600*1000, "60"),
		instant(`topk(5, increase(x_total[10m]))`, testBase+1800*1000),
	}
	errs := make(chan string, 4*len(ps))
	var wg sync.WaitGroup
	for range 4 {
		for _, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				path := "/api/v1/query"
				if p.Has("step") {
					path += "_range"
				}
				errs <- rdiff(pair, t, path, p)
			}()
		}
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		if msg != "" {
			t.Error(msg[:min(len(msg), 2000)])
		}
	}
}

// query.maxSamples swept from 1 up: at every limit the fast path must
// refuse exactly the queries the engine refuses (and answer the others
// alike). The engine counts each rate window's samples on top of the
// outputs held so far, including other operands of the query.
func TestReviewMaxSamplesSweep(t *testing.T) {
	b := counters()
	ts := testBase + 3600*1000
	ps := []url.Values{
		instant(`rate(x_total[1h])`, ts),
		instant(`x_total + on(job) rate(x_total[1h])`, ts),
		instant(`rate(x_total[1h]) + on(job) x_total`, ts),
		ranged(`sum(rate(x_total[20m]))`, ts-10*60*1000, ts, "60"),
		ranged(`x_total * on(job) increase(x_total[20m])`, ts-10*60*1000, ts, "60"),
	}
	for _, limit := range []int{1, 3, 10, 40, 79, 80, 81, 82, 83, 84, 85, 100, 110, 115, 118, 119, 120, 121, 122, 123, 124, 125, 126, 130, 150, 200, 238, 239, 240, 241, 242, 243, 244, 245, 246, 247, 248, 250, 300} {
		pair := newBackendPair(t, b, Options{MaxSamples: limit})
		for _, p := range ps {
			path := "/api/v1/query"
			if p.Has("step") {
				path += "_range"
			}
			if msg := rdiff(pair, t, path, p); msg != "" {
				t.Errorf("query.maxSamples=%d: %.600s", limit, msg)
			}
		}
	}
}

// A lookback_delta under a millisecond: the engine keeps it (it is > 0)
// and its lookback window is then (ts-0ms, ts] extended by Seek to a
// sample exactly at ts; the fast path truncates it to 0 ms and its test
// T > ts-0 takes no sample at all.
func TestReviewSubMillisecondLookback(t *testing.T) {
	pair := newBackendPair(t, counters(), Options{})
	p := ranged(`x_total`, testBase+60_000, testBase+10*60_000, "15")
	p.Set("lookback_delta", "0.0001")
	code, body := rawGet(t, pair.plain.URL+"/api/v1/query_range?"+p.Encode())
	require.Equal(t, http.StatusOK, code, body)
	if msg := rdiff(pair, t, "/api/v1/query_range", p); msg != "" {
		t.Error(msg)
	}
}

// rdiff is fastPair.diff's description of a difference, "" when none.
func rdiff(p fastPair, t testing.TB, path string, params url.Values) string {
	t.Helper()
	msg, _ := p.diff(t, path, params)
	return msg
}
