package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tessera-tsdb/tessera/bench/nodeexporter"
	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
)

// Workloads `tessera bench --workload` knows: the synthetic series x
// samples one (Write) and the node_exporter-like history the query
// comparison runs on (WriteNodeExporter).
const (
	WorkloadSynthetic    = "synthetic"
	WorkloadNodeExporter = "nodeexporter"
)

// writeURL is where remote writes go: o.URL with Tessera's remote write
// path appended, unless o.URL already names a write endpoint (its path
// ends in /write, as VictoriaMetrics' http://host:8428/api/v1/write does),
// so that the same workload can be sent to another store.
func (o Options) writeURL() string {
	if u, err := url.Parse(o.URL); err == nil && strings.HasSuffix(u.Path, "/write") {
		return o.URL
	}
	return strings.TrimSuffix(o.URL, "/") + "/api/v1/prom/remote/write"
}

// NodeExporterStart is the default start of the node_exporter workload:
// its last scrape about two minutes before now (inside Tessera's
// bufferPast, and older than VictoriaMetrics' 30 s search.latencyOffset,
// which would otherwise hide the newest points), on a multiple of
// nodeexporter.Step so that range queries over it need no alignment.
func NodeExporterStart(now time.Time) int64 {
	step := nodeexporter.Step.Milliseconds()
	start := now.Add(-nodeexporter.Span - 2*time.Minute).UnixMilli()
	return start / step * step
}

// ValidateNodeExporter reports options the node_exporter workload cannot
// run with.
func (o Options) ValidateNodeExporter() error {
	if o.Hosts <= 0 || o.Batch <= 0 || o.Concurrency <= 0 {
		return errors.New("bench: --hosts, --batch and --concurrency must be > 0")
	}
	if o.URL == "" {
		return errors.New("bench: --url is required")
	}
	if o.Protocol > 1 {
		return fmt.Errorf("bench: --workload %s sends remote write 1.0 only, got --protocol %d", WorkloadNodeExporter, o.Protocol)
	}
	return nil
}

// DescribeNodeExporter says what WriteNodeExporter writes and how to
// query it.
func DescribeNodeExporter(o Options) string {
	return fmt.Sprintf("nodeexporter: %d hosts (~125 series each: node_exporter metrics, job=\"node\", instance=\"10.0.x.y:9100\", "+
		"plus a classic prometheus_http_request_duration_seconds histogram), %d scrapes every %ds from %d to %d; "+
		"query with: tessera bench queries --url URL --start %d",
		o.Hosts, nodeexporter.Samples, nodeexporter.Interval/1000, o.Start, nodeexporter.End(o.Start), o.Start)
}

// WriteNodeExporter sends the node_exporter workload of o.Hosts hosts
// from o.Start: each host's history is generated in turn and cut, sample
// j of all its series then j+1, into requests of o.Batch samples (one
// sample per TimeSeries, as Prometheus sends them), o.Concurrency in
// flight. Requests are built while earlier ones are in flight, a few
// ahead: the whole history (18 M samples for 800 hosts) is too large to
// build first.
func WriteNodeExporter(ctx context.Context, o Options, out io.Writer) (Result, error) {
	if err := o.ValidateNodeExporter(); err != nil {
		return Result{}, err
	}
	client, err := newClient(o)
	if err != nil {
		return Result{}, err
	}
	defer client.CloseIdleConnections()
	type request struct {
		body []byte
		n    int64
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reqs := make(chan request, 2*o.Concurrency)
	var numSeries atomic.Int64
	go func() {
		defer close(reqs)
		var wr prompb.WriteRequest
		var raw []byte
		flush := func() bool {
			if len(wr.Timeseries) == 0 {
				return true
			}
			var err error
			raw, err = appendMarshal(raw[:0], &wr)
			if err != nil {
				panic(fmt.Sprintf("bench: marshal a write request: %v", err)) // prompb's own types: cannot fail
			}
			r := request{body: snappy.Encode(nil, raw), n: int64(len(wr.Timeseries))}
			wr.Timeseries = wr.Timeseries[:0]
			select {
			case reqs <- r:
				return true
			case <-ctx.Done():
				return false
			}
		}
		stopped := false
		nodeexporter.Hosts(o.Hosts, o.Start, func(_ int, series []encodingtest.Series) {
			if stopped {
				return
			}
			numSeries.Add(int64(len(series)))
			lbls := make([][]prompb.Label, len(series))
			for i, s := range series {
				s.Labels.Range(func(l labels.Label) { lbls[i] = append(lbls[i], prompb.Label{Name: l.Name, Value: l.Value}) })
			}
			for j := range series[0].T {
				for i, s := range series {
					wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{Labels: lbls[i],
						Samples: []prompb.Sample{{Timestamp: s.T[j], Value: s.V[j]}}})
					if len(wr.Timeseries) >= o.Batch && !flush() {
						stopped = true
						return
					}
				}
			}
		})
		if !stopped {
			flush()
		}
	}()
	var sent, failed, retried atomic.Int64
	var firstErr atomic.Pointer[string]
	var wg sync.WaitGroup
	start := time.Now()
	target := o.writeURL()
	for range o.Concurrency {
		wg.Go(func() {
			for r := range reqs {
				n, err := postRetrying(ctx, client, target, r.body, false, r.n)
				retried.Add(int64(n))
				if err != nil {
					failed.Add(r.n)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				sent.Add(r.n)
			}
		})
	}
	wg.Wait()
	res := Result{Sent: sent.Load(), Failed: failed.Load(), Retried: retried.Load(), Elapsed: time.Since(start)}
	fmt.Fprintf(out, "write: %d samples of %d series in %v: %.0f samples/s, %d failed samples, %d retried requests\n",
		res.Sent, numSeries.Load(), res.Elapsed.Round(time.Millisecond), float64(res.Sent)/res.Elapsed.Seconds(), res.Failed, res.Retried)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if p := firstErr.Load(); p != nil {
		return res, fmt.Errorf("write errors, first: %s", *p)
	}
	return res, nil
}

// appendMarshal marshals wr into b's storage when it is large enough.
func appendMarshal(b []byte, wr *prompb.WriteRequest) ([]byte, error) {
	size := wr.Size()
	if cap(b) < size {
		b = make([]byte, size)
	}
	b = b[:size]
	n, err := wr.MarshalToSizedBuffer(b)
	if err != nil {
		return nil, err
	}
	return b[size-n:], nil
}
