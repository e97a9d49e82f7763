package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/spf13/cobra"
)

type benchOpts struct {
	url         string
	series      int
	samples     int
	interval    time.Duration
	batch       int
	concurrency int
	verify      bool
	verifyOnly  bool
	start       int64
	metric      string
}

func benchCommand() *cobra.Command {
	var o benchOpts
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load a node through Prometheus remote write and optionally read every sample back",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.series <= 0 || o.samples <= 0 || o.batch <= 0 || o.concurrency <= 0 || o.interval <= 0 {
				return fmt.Errorf("--series, --samples, --batch, --concurrency and --interval must be > 0")
			}
			if o.start == 0 {
				// End the data a little before now so nothing lands past
				// bufferFuture; older samples are inside retention.
				o.start = time.Now().Add(-time.Duration(o.samples)*o.interval - 10*time.Second).UnixMilli()
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "bench: %d series x %d samples at %v, batch %d, concurrency %d, start %d, target %s\n",
				o.series, o.samples, o.interval, o.batch, o.concurrency, o.start, o.url)
			if !o.verifyOnly {
				if err := runWrite(cmd.Context(), o, out); err != nil {
					return err
				}
			}
			if o.verify || o.verifyOnly {
				return runVerify(cmd.Context(), o, out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.url, "url", "http://127.0.0.1:7201", "node base URL")
	f.IntVar(&o.series, "series", 10000, "number of series")
	f.IntVar(&o.samples, "samples", 360, "samples per series")
	f.DurationVar(&o.interval, "interval", time.Second, "interval between samples of a series")
	f.IntVar(&o.batch, "batch", 5000, "samples per remote write request")
	f.IntVar(&o.concurrency, "concurrency", 4, "concurrent writers")
	f.BoolVar(&o.verify, "verify", false, "after writing, read every series back through remote read and compare bit for bit")
	f.BoolVar(&o.verifyOnly, "verify-only", false, "only verify data written by an earlier run with the same --start")
	f.Int64Var(&o.start, "start", 0, "timestamp (ms) of the first sample; default now - samples*interval")
	f.StringVar(&o.metric, "metric", "tessera_bench", "metric name prefix")
	return cmd
}

// benchValue is the deterministic value of sample j of series i, mixing
// counters (integral), gauges (floats) and noisy floats, so verify can
// recompute it.
func benchValue(i, j int) float64 {
	switch i % 4 {
	case 0:
		return float64(j * (i%97 + 1))
	case 1:
		return math.Round((50+30*math.Sin(float64(i+j)/10))*100) / 100
	case 2:
		x := uint64(i)*0x9E3779B97F4A7C15 ^ uint64(j)*0xBF58476D1CE4E5B9
		x ^= x >> 31
		return float64(x%1_000_000) / 7
	default:
		return float64(1e9 + (i*j)%4096*4096)
	}
}

func benchLabels(o benchOpts, i int) []prompb.Label {
	return []prompb.Label{
		{Name: "__name__", Value: o.metric + "_" + strconv.Itoa(i%4)},
		{Name: "group", Value: strconv.Itoa(i / 100)},
		{Name: "instance", Value: "host-" + strconv.Itoa(i%50) + ":9100"},
		{Name: "job", Value: "bench"},
		{Name: "series", Value: strconv.Itoa(i)},
	}
}

func runWrite(ctx context.Context, o benchOpts, out io.Writer) error {
	type job struct {
		body []byte
		n    int
	}
	jobs := make(chan job, o.concurrency*2)
	var sent, failed, retried atomic.Int64
	var firstErr atomic.Pointer[string]
	client := &http.Client{Timeout: 60 * time.Second}
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < o.concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					var retry bool
					retry, err = post(ctx, client, o.url+"/api/v1/prom/remote/write", j.body)
					if err == nil || !retry {
						break
					}
					retried.Add(1)
					time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
				}
				if err != nil {
					failed.Add(int64(j.n))
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				sent.Add(int64(j.n))
			}
		}()
	}
	// Batches walk time-major: every series' sample j, then j+1, so each
	// request looks like a Prometheus shard's send of many series.
	req := &prompb.WriteRequest{}
	n := 0
	flush := func() {
		if n == 0 {
			return
		}
		raw, err := req.Marshal()
		if err != nil {
			panic(err)
		}
		jobs <- job{body: snappy.Encode(nil, raw), n: n}
		req = &prompb.WriteRequest{}
		n = 0
	}
	labelsOf := make([][]prompb.Label, o.series)
	for i := range labelsOf {
		labelsOf[i] = benchLabels(o, i)
	}
	for j := 0; j < o.samples; j++ {
		ts := o.start + int64(j)*o.interval.Milliseconds()
		for i := 0; i < o.series; i++ {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  labelsOf[i],
				Samples: []prompb.Sample{{Timestamp: ts, Value: benchValue(i, j)}},
			})
			n++
			if n >= o.batch {
				flush()
			}
		}
	}
	flush()
	close(jobs)
	wg.Wait()
	el := time.Since(start)
	fmt.Fprintf(out, "write: %d samples in %v: %.0f samples/s, %d failed samples, %d retried requests\n",
		sent.Load(), el.Round(time.Millisecond), float64(sent.Load())/el.Seconds(), failed.Load(), retried.Load())
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("write errors, first: %s", *p)
	}
	return nil
}

// post sends one remote write; retry says whether the status is one
// Prometheus would retry (5xx, 429).
func post(ctx context.Context, c *http.Client, url string, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := c.Do(req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	return resp.StatusCode >= 500 || resp.StatusCode == 429, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
}

func runVerify(ctx context.Context, o benchOpts, out io.Writer) error {
	client := &http.Client{Timeout: 60 * time.Second}
	end := o.start + int64(o.samples)*o.interval.Milliseconds()
	groups := (o.series + 99) / 100
	var checked, bad atomic.Int64
	var firstErr atomic.Pointer[string]
	fail := func(format string, args ...any) {
		bad.Add(1)
		msg := fmt.Sprintf(format, args...)
		firstErr.CompareAndSwap(nil, &msg)
	}
	sem := make(chan struct{}, o.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < groups; g++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(g int) {
			defer wg.Done()
			defer func() { <-sem }()
			rr := &prompb.ReadRequest{Queries: []*prompb.Query{{
				StartTimestampMs: o.start, EndTimestampMs: end,
				Matchers: []*prompb.LabelMatcher{
					{Type: prompb.LabelMatcher_RE, Name: "__name__", Value: o.metric + "_.*"},
					{Type: prompb.LabelMatcher_EQ, Name: "group", Value: strconv.Itoa(g)},
					{Type: prompb.LabelMatcher_EQ, Name: "job", Value: "bench"},
				},
			}}}
			resp, err := remoteRead(ctx, client, o.url, rr)
			if err != nil {
				fail("group %d: %v", g, err)
				return
			}
			seen := map[int]bool{}
			for _, ts := range resp.Results[0].Timeseries {
				var i = -1
				for _, l := range ts.Labels {
					if l.Name == "series" {
						i, _ = strconv.Atoi(l.Value)
					}
				}
				if i < 0 || i >= o.series {
					fail("group %d: unexpected series %v", g, ts.Labels)
					continue
				}
				seen[i] = true
				if len(ts.Samples) != o.samples {
					fail("series %d: %d samples, want %d", i, len(ts.Samples), o.samples)
					continue
				}
				for j, s := range ts.Samples {
					wantT := o.start + int64(j)*o.interval.Milliseconds()
					if s.Timestamp != wantT || math.Float64bits(s.Value) != math.Float64bits(benchValue(i, j)) {
						fail("series %d sample %d: got (%d, %v) want (%d, %v)", i, j, s.Timestamp, s.Value, wantT, benchValue(i, j))
						break
					}
				}
				checked.Add(int64(len(ts.Samples)))
			}
			for i := g * 100; i < (g+1)*100 && i < o.series; i++ {
				if !seen[i] {
					fail("series %d missing", i)
				}
			}
		}(g)
	}
	wg.Wait()
	fmt.Fprintf(out, "verify: %d samples compared bit for bit in %v, %d problems\n", checked.Load(), time.Since(start).Round(time.Millisecond), bad.Load())
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("verify failed: %s", *p)
	}
	fmt.Fprintln(out, "verify: OK")
	return nil
}

func remoteRead(ctx context.Context, c *http.Client, base string, rr *prompb.ReadRequest) (*prompb.ReadResponse, error) {
	raw, err := rr.Marshal()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/prom/remote/read", bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Read-Version", "0.1.0")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("remote read: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	dec, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, fmt.Errorf("remote read: bad snappy: %w", err)
	}
	var out prompb.ReadResponse
	if err := out.Unmarshal(dec); err != nil {
		return nil, fmt.Errorf("remote read: bad protobuf: %w", err)
	}
	if len(out.Results) != len(rr.Queries) {
		return nil, fmt.Errorf("remote read: %d results for %d queries", len(out.Results), len(rr.Queries))
	}
	return &out, nil
}
