package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/limits"
)

// BenchmarkActiveSeriesMemory is the memory a node pays per active series:
// it writes `tessera bench --samples 4`'s workload (the bench's labels, 4
// samples per series, time-major requests of 5,000 samples) through the
// remote write handler into real storage (4096 shards, sync commit log,
// indexed namespace, the node's default series cache and limits), then
// reports, per series:
//
//   - heap-B/series: live heap after a GC, less the live heap before the
//     storage was opened: what the series themselves hold (storage, index,
//     series cache);
//   - rss-B/series: the process' resident memory growth, which also
//     counts the garbage the Go runtime keeps room for (GOGC) and so
//     depends on how the collector ran; noisier, closer to what top shows.
//
// Each op is one fill of a fresh database: run with -benchtime 1x.
func BenchmarkActiveSeriesMemory(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			for range b.N {
				benchmarkActiveSeriesMemory(b, n)
			}
		})
	}
}

func benchmarkActiveSeriesMemory(b *testing.B, numSeries int) {
	const samples, batch = 4, 5000
	b.StopTimer()
	var cfg config.Config
	cfg.Defaults()
	runtime.GC()
	heap0, rss0 := liveHeap(), rss(b)

	l := limits.New(limits.Config(cfg.Limits), nil)
	db := storagetest.OpenWithLimits(b, 4096, l)
	defer db.Close()
	api := newAPI(b, Options{Namespace: "default", Limits: l, SeriesCacheSize: cfg.HTTP.SeriesCacheSize, Backend: Local{DB: db}})
	h := api.Handler()

	start := time.Now().Add(-time.Minute).UnixMilli()
	req := &prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, 0, batch)}
	send := func() {
		raw, err := req.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		body := snappy.Encode(nil, raw)
		req.Timeseries = req.Timeseries[:0]
		r := httptest.NewRequest(http.MethodPost, "/api/v1/prom/remote/write", bytes.NewReader(body))
		w := httptest.NewRecorder()
		b.StartTimer()
		h.ServeHTTP(w, r)
		b.StopTimer()
		if w.Code != http.StatusNoContent {
			b.Fatalf("status %d: %s", w.Code, w.Body.String())
		}
	}
	for j := range samples {
		for i := range numSeries {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels: []prompb.Label{
					{Name: "__name__", Value: "tessera_bench_" + strconv.Itoa(i%4)},
					{Name: "group", Value: strconv.Itoa(i / 100)},
					{Name: "instance", Value: "host-" + strconv.Itoa(i%50) + ":9100"},
					{Name: "job", Value: "bench"},
					{Name: "series", Value: strconv.Itoa(i)},
				},
				Samples: []prompb.Sample{{Timestamp: start + int64(j)*1000, Value: float64(i*j + j)}},
			})
			if len(req.Timeseries) == batch {
				send()
			}
		}
	}
	if len(req.Timeseries) > 0 {
		send()
	}
	req = nil
	runtime.GC()
	heap, rssNow := liveHeap(), rss(b)
	if got := db.ActiveSeries(); got != int64(numSeries) {
		b.Fatalf("%d active series, want %d", got, numSeries)
	}
	b.ReportMetric(float64(heap-heap0)/float64(numSeries), "heap-B/series")
	b.ReportMetric(float64(rssNow-rss0)/float64(numSeries), "rss-B/series")
	runtime.KeepAlive(api)
}

func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// rss is the process' resident set size from /proc/self/status (VmRSS).
func rss(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
