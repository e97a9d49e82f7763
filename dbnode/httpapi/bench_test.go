package httpapi

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/limits"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// BenchmarkRemoteWrite runs the node's remote write handler, without the
// network, over the workload of `tessera bench`: 10,000 series written
// time-major (each request holds one sample of each of 5,000 series), four
// requests in flight, synchronous commit log, 4096 shards. One op is one
// request; it reports process CPU per sample (both cores), which is what
// the node's figure is made of, besides HTTP and the kernel's TCP.
// Run with -benchtime 720x at most (720 requests pre-built).
func BenchmarkRemoteWrite(b *testing.B) { benchmarkRemoteWrite(b, 1) }

// BenchmarkRemoteWriteV2 is BenchmarkRemoteWrite in remote write 2.0, as
// Prometheus sends it: a symbols table per request and the metric's
// metadata (type, help) on every series.
func BenchmarkRemoteWriteV2(b *testing.B) { benchmarkRemoteWrite(b, 2) }

func benchmarkRemoteWrite(b *testing.B, proto int) {
	const numSeries, batch, samples = 10_000, 5000, 360
	// The node's default limits, as a node runs: new series have their
	// labels checked against them, known ones skip the check.
	var cfg config.Config
	cfg.Defaults()
	l := limits.New(limits.Config(cfg.Limits), nil)
	db := storagetest.OpenWithLimits(b, 4096, l)
	api := newAPI(b, Options{Namespace: "default", Limits: l, Backend: Local{DB: db}})
	h := api.Handler()

	start := time.Now().Add(-30 * time.Minute).UnixMilli()
	labelsOf := make([][]prompb.Label, numSeries)
	for i := range labelsOf {
		labelsOf[i] = []prompb.Label{
			{Name: "__name__", Value: "tessera_bench_" + strconv.Itoa(i%4)},
			{Name: "group", Value: strconv.Itoa(i / 100)},
			{Name: "instance", Value: "host-" + strconv.Itoa(i%50) + ":9100"},
			{Name: "job", Value: "bench"},
			{Name: "series", Value: strconv.Itoa(i)},
		}
	}
	var bodies [][]byte
	req := &prompb.WriteRequest{}
	req2 := &writev2.Request{}
	st := writev2.NewSymbolTable()
	for j := 0; j < samples; j++ {
		for i := 0; i < numSeries; i++ {
			smp := prompb.Sample{Timestamp: start + int64(j)*1000, Value: float64(1e9 + (i*j)%4096*4096)}
			if proto == 2 {
				var sb labels.ScratchBuilder
				for _, l := range labelsOf[i] {
					sb.Add(l.Name, l.Value)
				}
				req2.Timeseries = append(req2.Timeseries, writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(sb.Labels(), nil),
					Samples:  []writev2.Sample{{Timestamp: smp.Timestamp, Value: smp.Value}},
					Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("A benchmark gauge.")}})
			} else {
				req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: labelsOf[i], Samples: []prompb.Sample{smp}})
			}
			if len(req.Timeseries) == batch || len(req2.Timeseries) == batch {
				var raw []byte
				var err error
				if proto == 2 {
					req2.Symbols = st.Symbols()
					raw, err = req2.Marshal()
					req2 = &writev2.Request{}
					st.Reset()
				} else {
					raw, err = req.Marshal()
					req = &prompb.WriteRequest{}
				}
				if err != nil {
					b.Fatal(err)
				}
				bodies = append(bodies, snappy.Encode(nil, raw))
			}
		}
	}
	if b.N > len(bodies) {
		b.Fatalf("b.N %d > %d pre-built requests: use -benchtime %dx", b.N, len(bodies), len(bodies))
	}
	req, req2, labelsOf = nil, nil, nil
	runtime.GC() // the request building's garbage is not the handler's
	var next atomic.Int64
	cpu0 := cpuTime()
	b.ResetTimer()
	b.SetParallelism(2) // 4 requests in flight on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := bodies[next.Add(1)-1]
			r := httptest.NewRequest(http.MethodPost, "/api/v1/prom/remote/write", bytes.NewReader(body))
			if proto == 2 {
				r.Header.Set("Content-Type", ContentTypeV2)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusNoContent {
				b.Errorf("status %d: %s", w.Code, w.Body.String())
				return
			}
		}
	})
	b.StopTimer()
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*batch), "cpu-ns/sample")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/sample")
}

// cpuTime is the process' user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkOTLP is BenchmarkRemoteWrite's workload sent as OTLP, as the
// OpenTelemetry collector's otlphttp exporter sends it (protobuf, gzip):
// the 10,000 gauges are data points of 4 metrics under 50 resources (one
// per instance, service.name "bench"), with group and series as data
// point attributes, and each request is 5,000 data points. It reports
// process CPU per data point; each request also writes one target_info
// sample per resource, as Prometheus' translation does. Run with
// -benchtime 120x at most (120 requests pre-built).
func BenchmarkOTLP(b *testing.B) {
	const numSeries, batch, samples, instances = 10_000, 5000, 60, 50
	var cfg config.Config
	cfg.Defaults()
	l := limits.New(limits.Config(cfg.Limits), nil)
	db := storagetest.OpenWithLimits(b, 4096, l)
	api := newAPI(b, Options{Namespace: "default", Limits: l, Backend: Local{DB: db}})
	h := api.Handler()

	start := time.Now().Add(-30 * time.Minute)
	var bodies [][]byte
	for j := 0; j < samples; j++ {
		ts := pcommon.NewTimestampFromTime(start.Add(time.Duration(j) * time.Second))
		for from := 0; from < numSeries; from += batch {
			md := pmetric.NewMetrics()
			gauges := make([][4]pmetric.NumberDataPointSlice, instances)
			for k := range gauges {
				rm := md.ResourceMetrics().AppendEmpty()
				rm.Resource().Attributes().PutStr("service.name", "bench")
				rm.Resource().Attributes().PutStr("service.instance.id", "host-"+strconv.Itoa(k)+":9100")
				ms := rm.ScopeMetrics().AppendEmpty().Metrics()
				for m := range 4 {
					mt := ms.AppendEmpty()
					mt.SetName("tessera_bench_" + strconv.Itoa(m))
					mt.SetDescription("A benchmark gauge.")
					gauges[k][m] = mt.SetEmptyGauge().DataPoints()
				}
			}
			for i := from; i < from+batch; i++ {
				dp := gauges[i%instances][i%4].AppendEmpty()
				dp.SetTimestamp(ts)
				dp.SetDoubleValue(float64(1e9 + (i*j)%4096*4096))
				dp.Attributes().PutStr("group", strconv.Itoa(i/100))
				dp.Attributes().PutStr("series", strconv.Itoa(i))
			}
			raw, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
			if err != nil {
				b.Fatal(err)
			}
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(raw)
			_ = zw.Close()
			bodies = append(bodies, buf.Bytes())
		}
	}
	if b.N > len(bodies) {
		b.Fatalf("b.N %d > %d pre-built requests: use -benchtime %dx", b.N, len(bodies), len(bodies))
	}
	runtime.GC()
	var next atomic.Int64
	cpu0 := cpuTime()
	b.ResetTimer()
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest(http.MethodPost, "/api/v1/otlp/v1/metrics", bytes.NewReader(bodies[next.Add(1)-1]))
			r.Header.Set("Content-Type", "application/x-protobuf")
			r.Header.Set("Content-Encoding", "gzip")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Errorf("status %d: %s", w.Code, w.Body.String())
				return
			}
		}
	})
	b.StopTimer()
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*batch), "cpu-ns/sample")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/sample")
}
