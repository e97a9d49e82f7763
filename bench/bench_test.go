package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi/httpapitest"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The hand-written request must be the bytes prompb's own Marshal makes of
// the same samples, zero timestamps and zero values included (proto3 leaves
// them out), and must decode back to them.
func TestRequestEncoderMatchesMarshal(t *testing.T) {
	for _, o := range []Options{
		{Series: 7, Samples: 5, Interval: time.Second, Start: 0, Metric: "m"},
		{Series: 300, Samples: 3, Interval: 15 * time.Second, Start: 1_700_000_000_000, Metric: "tessera_bench"},
		{Series: 1, Samples: 200, Interval: time.Millisecond, Start: -5, Metric: strings.Repeat("x", 200)},
	} {
		enc := newRequestEncoder(o)
		total := o.Series * o.Samples
		for _, r := range [][2]int{{0, total}, {0, 1}, {total / 2, total}, {3, 4}} {
			from, to := r[0], min(r[1], total)
			want := &prompb.WriteRequest{}
			for k := from; k < to; k++ {
				i, j := k%o.Series, k/o.Series
				want.Timeseries = append(want.Timeseries, prompb.TimeSeries{Labels: Labels(o, i),
					Samples: []prompb.Sample{{Timestamp: o.Start + int64(j)*o.Interval.Milliseconds(), Value: Value(i, j)}}})
			}
			wantRaw, err := want.Marshal()
			require.NoError(t, err)
			got := enc.appendRequest([]byte("junk")[:0], from, to)
			require.True(t, bytes.Equal(wantRaw, got), "options %+v, samples [%d,%d): encoded request differs from prompb Marshal", o, from, to)
			var back prompb.WriteRequest
			require.NoError(t, back.Unmarshal(got))
			require.Len(t, back.Timeseries, to-from)
		}
	}
}

// The hand-written 2.0 request must be the bytes the v2 types' Marshal
// makes of the same series, symbols numbered as Prometheus' SymbolsTable
// numbers them, and must decode back to the workload's labels, samples
// and metadata.
func TestRequestEncoderV2MatchesV2Types(t *testing.T) {
	for _, o := range []Options{
		{Series: 7, Samples: 5, Interval: time.Second, Start: 0, Metric: "m"},
		{Series: 300, Samples: 3, Interval: 15 * time.Second, Start: 1_700_000_000_000, Metric: "tessera_bench"},
		{Series: 1, Samples: 200, Interval: time.Millisecond, Start: -5, Metric: strings.Repeat("x", 200)},
	} {
		enc := newRequestEncoderV2(o)
		total := o.Series * o.Samples
		for _, r := range [][2]int{{0, total}, {0, 1}, {total / 2, total}, {3, 4}} {
			from, to := r[0], min(r[1], total)
			st := writev2.NewSymbolTable()
			want := &writev2.Request{}
			for k := from; k < to; k++ {
				i, j := k%o.Series, k/o.Series
				var b labels.ScratchBuilder
				for _, l := range Labels(o, i) {
					b.Add(l.Name, l.Value)
				}
				want.Timeseries = append(want.Timeseries, writev2.TimeSeries{
					LabelsRefs: st.SymbolizeLabels(b.Labels(), nil),
					Samples:    []writev2.Sample{{Timestamp: o.Start + int64(j)*o.Interval.Milliseconds(), Value: Value(i, j)}},
					Metadata:   writev2.Metadata{Type: writev2.Metadata_MetricType(MetricType(i)), HelpRef: st.Symbolize(Help(i))},
				})
			}
			want.Symbols = st.Symbols()
			wantRaw, err := want.Marshal()
			require.NoError(t, err)
			got := enc.appendRequest([]byte("junk")[:0], from, to)
			require.True(t, bytes.Equal(wantRaw, got), "options %+v, samples [%d,%d): encoded request differs from the v2 types' Marshal", o, from, to)
			var back writev2.Request
			require.NoError(t, back.Unmarshal(got))
			require.Len(t, back.Timeseries, to-from)
			var sb labels.ScratchBuilder
			ls, err := back.Timeseries[0].ToLabels(&sb, back.Symbols)
			require.NoError(t, err)
			require.Equal(t, Labels(o, from%o.Series)[4].Value, ls.Get("series"))
			md, err := back.Timeseries[0].ToMetadata(back.Symbols)
			require.NoError(t, err)
			require.Equal(t, Help(from%o.Series), md.Help)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{URL: "http://x", Series: 1, Samples: 1, Interval: time.Second, Batch: 1, Concurrency: 1}
	require.NoError(t, ok.Validate())
	for name, mut := range map[string]func(*Options){
		"series":      func(o *Options) { o.Series = 0 },
		"samples":     func(o *Options) { o.Samples = -1 },
		"interval":    func(o *Options) { o.Interval = 0 },
		"sub-ms":      func(o *Options) { o.Interval = 1500 * time.Microsecond },
		"batch":       func(o *Options) { o.Batch = 0 },
		"concurrency": func(o *Options) { o.Concurrency = 0 },
		"url":         func(o *Options) { o.URL = "" },
		"protocol":    func(o *Options) { o.Protocol = 3 },
	} {
		o := ok
		mut(&o)
		require.Error(t, o.Validate(), name)
	}
}

// newNode serves a real storage engine's remote write and read on loopback.
func newNode(t *testing.T) string {
	t.Helper()
	db := storagetest.Open(t, 64, nil)
	api := httpapitest.New(t, httpapi.Options{Namespace: "default", NumShards: 64, Backend: httpapi.Local{DB: db}})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// Write then Verify against a node: every sample acknowledged and read back
// bit for bit; verifying a workload that was never written fails.
// Both ways of building requests (all before the run, or on the fly) are
// covered.
func TestWriteThenVerify(t *testing.T) {
	for name, pregen := range map[string]int64{"pregen": 0, "on the fly": -1} {
		for _, proto := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s protocol %d", name, proto), func(t *testing.T) { testWriteThenVerify(t, pregen, proto) })
		}
	}
}

func testWriteThenVerify(t *testing.T, pregen int64, proto int) {
	o := Options{URL: newNode(t), Series: 250, Samples: 30, Interval: 10 * time.Second, Batch: 333,
		Concurrency: 3, Start: time.Now().Add(-time.Hour).UnixMilli(), Metric: "bench_test", PregenBytes: pregen, Protocol: proto}
	res, err := Write(context.Background(), o, io.Discard)
	require.NoError(t, err)
	require.Equal(t, int64(o.Series*o.Samples), res.Sent)
	require.Zero(t, res.Failed)

	var out bytes.Buffer
	require.NoError(t, Verify(context.Background(), o, &out))
	require.Contains(t, out.String(), "7500 samples compared")
	require.Contains(t, out.String(), "verify: OK")

	other := o
	other.Start -= 1000 // same series, timestamps one second off
	err = Verify(context.Background(), other, io.Discard)
	require.ErrorContains(t, err, "verify failed")
}

// A node that refuses every write is reported, with the first error, not
// counted as sent.
func TestWriteReportsRefusals(t *testing.T) {
	o := Options{URL: newNode(t), Series: 10, Samples: 2, Interval: time.Second, Batch: 5,
		Concurrency: 2, Start: 1000, Metric: "bench_test"} // 1970: out of retention
	res, err := Write(context.Background(), o, io.Discard)
	require.ErrorContains(t, err, "HTTP 400")
	require.Zero(t, res.Sent)
	require.Equal(t, int64(20), res.Failed)
}

// A cancelled run reports the cancellation, not write errors, whether
// requests are built first or on the fly.
func TestWriteCancelled(t *testing.T) {
	for name, pregen := range map[string]int64{"pregen": 0, "on the fly": -1} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			o := Options{URL: newNode(t), Series: 100, Samples: 10, Interval: time.Second, Batch: 50,
				Concurrency: 2, Start: time.Now().Add(-time.Hour).UnixMilli(), Metric: "bench_test", PregenBytes: pregen}
			res, err := Write(ctx, o, io.Discard)
			require.ErrorIs(t, err, context.Canceled)
			require.Zero(t, res.Sent)
			require.Zero(t, res.Retried)
		})
	}
}

// Cancelled while requests are in flight: no retries of the cancelled
// requests, and the cancellation is what Write reports.
func TestWriteCancelledInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	arrived := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // read it all: the server then notices the client leaving
		arrived <- struct{}{}
		<-r.Context().Done() // hold the request until the client gives up
	}))
	t.Cleanup(srv.Close)
	go func() { <-arrived; cancel() }()
	o := Options{URL: srv.URL, Series: 100, Samples: 10, Interval: time.Second, Batch: 50,
		Concurrency: 2, Start: 1000, Metric: "bench_test", PregenBytes: -1}
	res, err := Write(ctx, o, io.Discard)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, res.Sent)
	require.Zero(t, res.Retried, "a cancelled request is not retried")
}

// TestDescribeMatchesLabels: what the bench prints about metric names
// agrees with the series it writes.
func TestDescribeMatchesLabels(t *testing.T) {
	o := Options{Series: 1001, Metric: "m"}
	count := map[string]int{}
	for i := 0; i < o.Series; i++ {
		count[Labels(o, i)[0].Value]++
	}
	require.Len(t, count, MetricNames)
	d := Describe(o)
	for name, n := range count {
		require.Contains(t, d, fmt.Sprintf("%s (%d ", name, n))
	}
	require.Contains(t, d, "series: 1001 over 4 metric names")
	require.Contains(t, d, `host-49:9100`)
	require.Contains(t, Describe(Options{Series: 3, Metric: "m"}), `host-2:9100`)
}

// A run followed by another on the same series (the next --start right
// after its last sample) still verifies: verify reads only its own range.
func TestVerifyRunFollowedByAnother(t *testing.T) {
	o := Options{URL: newNode(t), Series: 20, Samples: 10, Interval: time.Second, Batch: 100,
		Concurrency: 2, Start: time.Now().Add(-time.Hour).UnixMilli(), Metric: "bench_test"}
	next := o
	next.Start = o.Start + int64(o.Samples)*o.Interval.Milliseconds()
	for _, run := range []Options{o, next} {
		_, err := Write(context.Background(), run, io.Discard)
		require.NoError(t, err)
	}
	for _, run := range []Options{o, next} {
		var out bytes.Buffer
		require.NoError(t, Verify(context.Background(), run, &out), "start %d", run.Start)
		require.Contains(t, out.String(), "200 samples compared")
	}
}
