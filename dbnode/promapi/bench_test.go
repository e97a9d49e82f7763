package promapi

import (
	"bytes"
	stdgzip "compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
)

// BenchmarkRangeQuerySumRate is the yardstick: the range query
// sum by (job) (rate(x[5m])) over 10,000 series x 1 hour at a 15 s step,
// through the HTTP handler (parameters, engine, storage reads, JSON).
//
//	go test -run '^$' -bench RangeQuerySumRate -benchtime 10x ./dbnode/promapi
func BenchmarkRangeQuerySumRate(b *testing.B) {
	const (
		numSeries = 10_000
		numJobs   = 10
		interval  = 15_000 // ms
		span      = 3600_000
	)
	end := time.Now().Truncate(time.Minute).UnixMilli()
	start := end - span
	// The clock follows the load, so writes land as live (warm) data, as
	// they would from a Prometheus scraping in real time.
	var clock atomic.Int64
	clock.Store(start)
	db := storagetest.Open(b, 64, func() time.Time { return time.UnixMilli(clock.Load()) })

	ids := make([][]byte, numSeries)
	shards := make([]uint32, numSeries)
	vals := make([]float64, numSeries)
	for i := range ids {
		ids[i] = ident.FromLabels(labels.FromStrings("__name__", "x",
			"job", fmt.Sprintf("job-%d", i%numJobs), "instance", fmt.Sprintf("host-%05d:9100", i)))
		shards[i] = db.Shard(ids[i])
	}
	batch := make([]tstorage.Sample, numSeries)
	for t := start; t <= end; t += interval {
		clock.Store(t + 1000)
		for i := range ids {
			vals[i] += float64((i*7+int(t/interval))%13) + 0.25
			batch[i] = tstorage.Sample{ID: ids[i], Shard: shards[i], T: t - int64(i%17), V: vals[i]}
		}
		require.NoError(b, db.WriteBatch("default", batch))
	}

	mux := http.NewServeMux()
	newAPI(b, httpapi.Local{DB: db}, Options{}).Register(mux)
	target := "/api/v1/query_range?" + url.Values{
		"query": {"sum by (job) (rate(x[5m]))"},
		"start": {strconv.FormatInt(start/1000, 10)},
		"end":   {strconv.FormatInt(end/1000, 10)},
		"step":  {"15s"},
	}.Encode()
	run := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		return rec
	}
	rec := run()
	require.Equal(b, http.StatusOK, rec.Code, rec.Body.String())
	b.ReportMetric(float64(rec.Body.Len()), "resp_bytes")

	// The machine is shared: besides wall time (ms/op), report the CPU
	// time the process spent per query (cpu-ms/op), which contention from
	// other processes does not inflate.
	cpu0 := cpuTime()
	t0 := time.Now()
	for b.Loop() {
		if rec := run(); rec.Code != http.StatusOK {
			b.Fatal(rec.Body.String())
		}
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// cpuTime is the user plus system time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWriteBody compresses a range query's JSON (800 series x 121
// steps of rate-like values, ~3 MB) as writeBody serves it, beside
// compress/gzip at its default level, which it used before: the served
// way must stay much cheaper, for a modestly larger body.
//
//	go test -run '^$' -bench WriteBody ./dbnode/promapi
func BenchmarkWriteBody(b *testing.B) {
	var m promql.Matrix
	for s := range 800 {
		ls := labels.FromStrings("cpu", strconv.Itoa(s%8), "instance", fmt.Sprintf("10.0.%d.%d:9100", s/250, s%250), "job", "node", "mode", "user")
		pts := make([]promql.FPoint, 121)
		for k := range pts {
			pts[k] = promql.FPoint{T: 1_700_000_000_000 + int64(k)*15_000, F: 0.01 * float64((s*7919+k*104729)%100_000) / 3}
		}
		m = append(m, promql.Series{Metric: ls, Floats: pts})
	}
	body, err := appendValue([]byte(successPrefix), m)
	require.NoError(b, err)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/query_range", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	b.Run("served", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		var n int
		for b.Loop() {
			rec := httptest.NewRecorder()
			require.NoError(b, writeBody(rec, req, http.StatusOK, body))
			n = rec.Body.Len()
		}
		b.ReportMetric(float64(n), "gz_bytes")
	})
	b.Run("stdlib-default-level", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			zw := stdgzip.NewWriter(&buf)
			_, err := zw.Write(body)
			require.NoError(b, err)
			require.NoError(b, zw.Close())
		}
		b.ReportMetric(float64(buf.Len()), "gz_bytes")
	})
}
