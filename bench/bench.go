// Package bench is the load generator behind `tessera bench`: a
// deterministic remote write workload (series x samples, time-major, so
// each request looks like one Prometheus shard's send) and a verifier that
// reads every sample back through remote read.
//
// The generator is meant to share a small machine with the node it
// measures, so it costs as little CPU as it can: each series' labels are
// encoded to protobuf once, a request is those bytes plus one sample each,
// written by hand into a buffer every worker reuses, and connections are
// kept alive. Whatever the generator burns is taken from the node.
package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// Options describe a workload and where to send it.
type Options struct {
	URL         string // node base URL, e.g. http://127.0.0.1:7201
	Series      int
	Samples     int // per series
	Interval    time.Duration
	Batch       int    // samples per request
	Concurrency int    // requests in flight
	Start       int64  // timestamp (ms) of every series' first sample
	Metric      string // metric name prefix
	// PregenBytes bounds the memory for building every request before the
	// run starts; 0 means DefaultPregenBytes, negative never pre-builds.
	PregenBytes int64
	// Security: credentials and TLS files for a secured node (see
	// security.go).
	Security
	// Hosts sizes the node_exporter workload (WriteNodeExporter).
	Hosts int
	// Protocol is the remote write version: 1 (prompb.WriteRequest, the
	// default when 0) or 2 (io.prometheus.write.v2.Request, whose
	// written-samples header is checked on every answer).
	Protocol int
}

// DefaultPregenBytes is the default Options.PregenBytes.
const DefaultPregenBytes = 1 << 30

func (o Options) pregenBytes() int64 {
	if o.PregenBytes == 0 {
		return DefaultPregenBytes
	}
	return o.PregenBytes
}

// Validate reports options no workload can run with.
func (o Options) Validate() error {
	if o.Series <= 0 || o.Samples <= 0 || o.Batch <= 0 || o.Concurrency <= 0 || o.Interval <= 0 {
		return errors.New("bench: --series, --samples, --batch, --concurrency and --interval must be > 0")
	}
	if o.Interval%time.Millisecond != 0 {
		return fmt.Errorf("bench: --interval %v is not a whole number of milliseconds", o.Interval)
	}
	if o.URL == "" {
		return errors.New("bench: --url is required")
	}
	if o.Protocol != 0 && o.Protocol != 1 && o.Protocol != 2 {
		return fmt.Errorf("bench: --protocol must be 1 or 2, got %d", o.Protocol)
	}
	return nil
}

// counterSteps shapes Value's large-integer series: values step in
// multiples of it, which compress as integers.
const counterSteps = 4096

// Value is the deterministic value of sample j of series i, mixing
// counters (integral), gauges (floats) and noisy floats, so Verify can
// recompute it.
func Value(i, j int) float64 {
	switch i % MetricNames {
	case 0:
		return float64(j * (i%97 + 1))
	case 1:
		return math.Round((50+30*math.Sin(float64(i+j)/10))*100) / 100
	case 2:
		x := uint64(i)*0x9E3779B97F4A7C15 ^ uint64(j)*0xBF58476D1CE4E5B9
		x ^= x >> 31
		return float64(x%1_000_000) / 7
	default:
		return float64(1e9 + (i*j)%counterSteps*counterSteps)
	}
}

// MetricNames is how many metric names the series are spread over: series
// i is named MetricName(o, i), each name with its own kind of values (see
// Value and Describe).
const MetricNames = 4

// MetricName is series i's metric name: Metric_(i % MetricNames), with the
// counters (kind 0) ending in _total as Prometheus' naming convention asks,
// so Prometheus 3 does not annotate every rate() over them as "might not be
// a counter".
func MetricName(o Options, i int) string {
	k := i % MetricNames
	if k == 0 {
		return o.Metric + "_0_total"
	}
	return o.Metric + "_" + strconv.Itoa(k)
}

// Describe says, in the words a PromQL user needs, which series a run
// writes: their metric names, what each holds, and their labels. `tessera
// bench` prints it before the run.
func Describe(o Options) string {
	per := func(k int) int { return (o.Series - k + MetricNames - 1) / MetricNames }
	return fmt.Sprintf("series: %d over %d metric names: %s_0_total (%d counters: rate() works), %s_1 (%d gauges), "+
		"%s_2 (%d noisy floats), %s_3 (%d large integers); labels job=\"bench\", instance=\"host-0:9100\"..\"host-%d:9100\", "+
		"group (series/100), series (0..%d); query all with {__name__=~\"%s_.*\"}",
		o.Series, MetricNames, o.Metric, per(0), o.Metric, per(1), o.Metric, per(2), o.Metric, per(3),
		min(o.Series, 50)-1, o.Series-1, o.Metric)
}

// Labels are series i's labels, sorted by name.
func Labels(o Options, i int) []prompb.Label {
	return []prompb.Label{
		{Name: "__name__", Value: MetricName(o, i)},
		{Name: "group", Value: strconv.Itoa(i / 100)},
		{Name: "instance", Value: "host-" + strconv.Itoa(i%50) + ":9100"},
		{Name: "job", Value: "bench"},
		{Name: "series", Value: strconv.Itoa(i)},
	}
}

// Result is what a Write run did.
type Result struct {
	Sent, Failed int64 // samples acknowledged / given up on
	Retried      int64 // requests retried after a 5xx or 429
	Elapsed      time.Duration
}

// Write sends the workload: sample j of every series, then j+1, cut into
// requests of Batch samples, Concurrency of them in flight. Requests a node
// answers with 5xx or 429 are retried a few times, as Prometheus would.
func Write(ctx context.Context, o Options, out io.Writer) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	total := o.Series * o.Samples
	numReqs := (total + o.Batch - 1) / o.Batch
	// A 1.0 encoder is shared (it only reads: one copy of every series'
	// labels, which at ten million series is a gigabyte); a 2.0 one keeps
	// its symbols table, so each goroutine building requests gets its own.
	enc1 := newRequestEncoder(o)
	newEncoder := func() func(b []byte, from, to int) []byte {
		if o.Protocol == 2 {
			return newRequestEncoderV2(o).appendRequest
		}
		return enc1.appendRequest
	}
	body := func(enc func(b []byte, from, to int) []byte, k int, raw, dst []byte) (rawOut, bodyOut []byte) {
		from, to := k*o.Batch, min((k+1)*o.Batch, total)
		if enc == nil {
			enc = enc1.appendRequest
		}
		raw = enc(raw[:0], from, to)
		return raw, snappy.Encode(dst[:cap(dst)], raw)
	}
	// Requests are built before the clock starts when they fit in
	// PregenBytes, as TSBS does: snappy encoding is most of what the
	// generator costs, and the node it shares the machine with should not
	// pay for it during the run. Larger workloads build them on the fly.
	var bodies [][]byte
	if _, first := body(newEncoder(), 0, nil, nil); int64(len(first))*int64(numReqs)*5/4 <= o.pregenBytes() {
		bodies = make([][]byte, numReqs)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range o.Concurrency {
			wg.Go(func() {
				var raw []byte
				enc := newEncoder()
				for k := int(next.Add(1) - 1); k < numReqs && ctx.Err() == nil; k = int(next.Add(1) - 1) {
					var b []byte
					raw, b = body(enc, k, raw, nil)
					bodies[k] = b
				}
			})
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		var size int
		for _, b := range bodies {
			size += len(b)
		}
		fmt.Fprintf(out, "write: built %d requests (%.1f MiB snappy) before the run\n", numReqs, float64(size)/(1<<20))
	}
	var next, sent, failed, retried atomic.Int64
	var firstErr atomic.Pointer[string]
	client, err := newClient(o)
	if err != nil {
		return Result{}, err
	}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Built on the fly, every worker encodes its requests into a
			// protobuf buffer it keeps, and compresses each into a new one:
			// the transport may still read a body after the response.
			var raw []byte
			var enc func(b []byte, from, to int) []byte
			if bodies == nil {
				enc = newEncoder()
			}
			for {
				k := int(next.Add(1) - 1)
				if k >= numReqs || ctx.Err() != nil {
					return
				}
				n := int64(min((k+1)*o.Batch, total) - k*o.Batch)
				var b []byte
				if bodies != nil {
					b, bodies[k] = bodies[k], nil
				} else {
					raw, b = body(enc, k, raw, nil)
				}
				retries, err := postRetrying(ctx, client, o.writeURL(), b, o.Protocol == 2, n)
				retried.Add(int64(retries))
				if err != nil {
					failed.Add(n)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				sent.Add(n)
			}
		}()
	}
	wg.Wait()
	res := Result{Sent: sent.Load(), Failed: failed.Load(), Retried: retried.Load(), Elapsed: time.Since(start)}
	fmt.Fprintf(out, "write: %d samples in %v: %.0f samples/s, %d failed samples, %d retried requests\n",
		res.Sent, res.Elapsed.Round(time.Millisecond), float64(res.Sent)/res.Elapsed.Seconds(), res.Failed, res.Retried)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if p := firstErr.Load(); p != nil {
		return res, fmt.Errorf("write errors, first: %s", *p)
	}
	return res, nil
}

// newClient keeps one connection per worker alive between requests: the
// default transport keeps two per host, so with more workers every extra
// request would pay (and make the node pay) a new TCP connection.
func newClient(o Options) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = o.Concurrency
	tr.MaxIdleConns = max(tr.MaxIdleConns, o.Concurrency)
	rt, err := o.Security.Wrap(tr)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 60 * time.Second, Transport: rt}, nil
}

// requestEncoder writes remote write requests of the workload as protobuf
// (prompb.WriteRequest, the bytes gogo's Marshal would produce) without
// building the message: each series' labels are encoded once.
type requestEncoder struct {
	o Options
	// labels holds every series' TimeSeries.labels fields back to back,
	// series i's at labels[ends[i-1]:ends[i]]: one allocation instead of
	// one a series, which at ten million series saved the bench ~300 MB
	// of slice headers and size-class rounding and seconds of building.
	labels []byte
	ends   []int
}

func newRequestEncoder(o Options) *requestEncoder {
	e := &requestEncoder{o: o, ends: make([]int, o.Series)}
	for i := range e.ends {
		for _, l := range Labels(o, i) {
			e.labels = binary.AppendUvarint(append(e.labels, 0x0a), uint64(protoStringLen(l.Name)+protoStringLen(l.Value)))
			e.labels = appendProtoString(e.labels, 0x0a, l.Name)
			e.labels = appendProtoString(e.labels, 0x12, l.Value)
		}
		e.ends[i] = len(e.labels)
	}
	return e
}

// seriesLabels is series i's encoded labels.
func (e *requestEncoder) seriesLabels(i int) []byte {
	from := 0
	if i > 0 {
		from = e.ends[i-1]
	}
	return e.labels[from:e.ends[i]]
}

// appendRequest appends the request holding samples [from, to) of the
// time-major order: flat index k is sample k/Series of series k%Series.
func (e *requestEncoder) appendRequest(b []byte, from, to int) []byte {
	step := e.o.Interval.Milliseconds()
	for k := from; k < to; k++ {
		i, j := k%e.o.Series, k/e.o.Series
		ts, v := e.o.Start+int64(j)*step, Value(i, j)
		// Sample: value (field 1, fixed64) and timestamp (field 2,
		// varint), each left out when zero as proto3 does.
		var sample [1 + 8 + 1 + binary.MaxVarintLen64]byte
		n := 0
		if bits := math.Float64bits(v); bits != 0 {
			sample[0] = 0x09
			binary.LittleEndian.PutUint64(sample[1:], bits)
			n = 9
		}
		if ts != 0 {
			sample[n] = 0x10
			n = len(binary.AppendUvarint(sample[:n+1], uint64(ts)))
		}
		lbl := e.seriesLabels(i)
		tsLen := len(lbl) + 1 + uvarintLen(uint64(n)) + n
		b = binary.AppendUvarint(append(b, 0x0a), uint64(tsLen))
		b = append(b, lbl...)
		b = binary.AppendUvarint(append(b, 0x12), uint64(n))
		b = append(b, sample[:n]...)
	}
	return b
}

// protoStringLen is the size of a string field with a one-byte tag.
func protoStringLen(s string) int {
	if s == "" {
		return 0 // proto3 leaves empty strings out
	}
	return 1 + uvarintLen(uint64(len(s))) + len(s)
}

func appendProtoString(b []byte, tag byte, s string) []byte {
	if s == "" {
		return b
	}
	return append(binary.AppendUvarint(append(b, tag), uint64(len(s))), s...)
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// newRequest is a POST of a snappy-compressed protobuf body with the
// headers Prometheus sends, versionHeader being its remote write or read
// version header.
func newRequest(ctx context.Context, url string, body []byte, versionHeader string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", contentTypeV1)
	req.Header.Set(versionHeader, "0.1.0")
	return req, nil
}

// postRetrying posts one remote write (post), retrying a few times,
// with growing pauses, what Prometheus would retry (5xx, 429); it returns
// how many times it retried and the last error.
func postRetrying(ctx context.Context, c *http.Client, url string, body []byte, v2 bool, n int64) (retries int, err error) {
	for attempt := 0; attempt < 5; attempt++ {
		var retry bool
		retry, err = post(ctx, c, url, body, v2, n)
		if err == nil || !retry || ctx.Err() != nil {
			return retries, err
		}
		retries++
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
	return retries, err
}

// post sends one remote write (2.0 when v2) of n samples; retry says
// whether the status is one Prometheus would retry (5xx, 429). A 2.0
// answer must say all n samples were written. The transport may still
// read body after post returns (when the node answered before reading
// it), so the caller must not reuse it.
func post(ctx context.Context, c *http.Client, url string, body []byte, v2 bool, n int64) (retry bool, err error) {
	req, err := newRequest(ctx, url, body, "X-Prometheus-Remote-Write-Version")
	if err != nil {
		return false, err
	}
	if v2 {
		req.Header.Set("Content-Type", contentTypeV2)
		req.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	}
	resp, err := c.Do(req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, resp.Body) // drain, so the connection is reused
	if resp.StatusCode/100 == 2 {
		if w := resp.Header.Get("X-Prometheus-Remote-Write-Samples-Written"); v2 && w != strconv.FormatInt(n, 10) {
			return false, fmt.Errorf("HTTP %d with X-Prometheus-Remote-Write-Samples-Written %q for %d samples sent", resp.StatusCode, w, n)
		}
		return false, nil
	}
	return resp.StatusCode >= 500 || resp.StatusCode == 429, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
}

// Verify reads every series of the workload back through remote read, 100
// series per query, and compares each sample bit for bit with what Write
// sent. It fails on the first run of problems it finds.
func Verify(ctx context.Context, o Options, out io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	client, err := newClient(o)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	// The last sample's timestamp: remote read's end is inclusive, so one
	// interval more would take the first sample of a later run on the same
	// series and fail a run that is intact.
	end := o.Start + int64(o.Samples-1)*o.Interval.Milliseconds()
	groups := (o.Series + 99) / 100
	var checked, bad atomic.Int64
	var firstErr atomic.Pointer[string]
	fail := func(format string, args ...any) {
		bad.Add(1)
		msg := fmt.Sprintf(format, args...)
		firstErr.CompareAndSwap(nil, &msg)
	}
	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < groups; g++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(g int) {
			defer wg.Done()
			defer func() { <-sem }()
			rr := &prompb.ReadRequest{Queries: []*prompb.Query{{
				StartTimestampMs: o.Start, EndTimestampMs: end,
				Matchers: []*prompb.LabelMatcher{
					{Type: prompb.LabelMatcher_RE, Name: "__name__", Value: o.Metric + "_.*"},
					{Type: prompb.LabelMatcher_EQ, Name: "group", Value: strconv.Itoa(g)},
					{Type: prompb.LabelMatcher_EQ, Name: "job", Value: "bench"},
				},
			}}}
			resp, err := remoteRead(ctx, client, o.URL, rr)
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
				if i < 0 || i >= o.Series {
					fail("group %d: unexpected series %v", g, ts.Labels)
					continue
				}
				seen[i] = true
				if len(ts.Samples) != o.Samples {
					fail("series %d: %d samples, want %d", i, len(ts.Samples), o.Samples)
					continue
				}
				for j, s := range ts.Samples {
					wantT := o.Start + int64(j)*o.Interval.Milliseconds()
					if s.Timestamp != wantT || math.Float64bits(s.Value) != math.Float64bits(Value(i, j)) {
						fail("series %d sample %d: got (%d, %v) want (%d, %v)", i, j, s.Timestamp, s.Value, wantT, Value(i, j))
						break
					}
				}
				checked.Add(int64(len(ts.Samples)))
			}
			for i := g * 100; i < (g+1)*100 && i < o.Series; i++ {
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
	req, err := newRequest(ctx, base+"/api/v1/prom/remote/read", snappy.Encode(nil, raw), "X-Prometheus-Remote-Read-Version")
	if err != nil {
		return nil, err
	}
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
