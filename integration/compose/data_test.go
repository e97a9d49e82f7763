package compose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
)

const metric = "compose_test_metric"

var httpClient = &http.Client{Timeout: 30 * time.Second}

// written is every sample the cluster acknowledged, by series label.
type written map[string][]prompb.Sample

func seriesLabels(i int) []prompb.Label {
	return []prompb.Label{{Name: "__name__", Value: metric}, {Name: "job", Value: "compose"}, {Name: "series", Value: strconv.Itoa(i)}}
}

// write sends one Prometheus remote write (snappy protobuf) of n series,
// one sample each at ts, and records them once acknowledged.
func (w written) write(base string, n int, ts time.Time) error {
	return w.writeVia(httpClient, base, n, ts)
}

// writeVia is write through c (TLS settings and credentials of the secure
// cluster).
func (w written) writeVia(c *http.Client, base string, n int, ts time.Time) error {
	req := &prompb.WriteRequest{}
	for i := 0; i < n; i++ {
		v := float64(i)*1e3 + float64(ts.UnixMilli()%1e5)/7
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: seriesLabels(i),
			Samples: []prompb.Sample{{Timestamp: ts.UnixMilli(), Value: v}}})
	}
	raw, err := req.Marshal()
	if err != nil {
		return err
	}
	hr, err := http.NewRequest(http.MethodPost, base+"/api/v1/prom/remote/write", bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := c.Do(hr)
	if err != nil {
		return fmt.Errorf("remote write: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("remote write: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	for _, s := range req.Timeseries {
		w[s.Labels[2].Value] = append(w[s.Labels[2].Value], s.Samples...)
	}
	return nil
}

// check reads the metric back through remote read and compares every
// acknowledged sample bit for bit.
func (w written) check(base string, from, to time.Time) error {
	return w.checkVia(httpClient, base, from, to)
}

// checkVia is check through c.
func (w written) checkVia(c *http.Client, base string, from, to time.Time) error {
	rr := &prompb.ReadRequest{Queries: []*prompb.Query{{
		StartTimestampMs: from.UnixMilli(), EndTimestampMs: to.UnixMilli(),
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: metric}},
	}}}
	raw, err := rr.Marshal()
	if err != nil {
		return err
	}
	hr, err := http.NewRequest(http.MethodPost, base+"/api/v1/prom/remote/read", bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("X-Prometheus-Remote-Read-Version", "0.1.0")
	resp, err := c.Do(hr)
	if err != nil {
		return fmt.Errorf("remote read: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("remote read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("remote read: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	dec, err := snappy.Decode(nil, body)
	if err != nil {
		return fmt.Errorf("remote read: snappy: %w", err)
	}
	var out prompb.ReadResponse
	if err := out.Unmarshal(dec); err != nil {
		return fmt.Errorf("remote read: protobuf: %w", err)
	}
	if len(out.Results) != 1 {
		return fmt.Errorf("remote read: %d results for 1 query", len(out.Results))
	}
	got := map[string]map[int64]float64{}
	for _, ts := range out.Results[0].Timeseries {
		for _, l := range ts.Labels {
			if l.Name == "series" {
				got[l.Value] = map[int64]float64{}
				for _, s := range ts.Samples {
					got[l.Value][s.Timestamp] = s.Value
				}
			}
		}
	}
	if len(got) != len(w) {
		return fmt.Errorf("remote read: %d series, want %d", len(got), len(w))
	}
	for k, want := range w {
		for _, s := range want {
			v, ok := got[k][s.Timestamp]
			if !ok || math.Float64bits(v) != math.Float64bits(s.Value) {
				return fmt.Errorf("series %s at %d: got %v (present %v), want %v", k, s.Timestamp, v, ok, s.Value)
			}
		}
		if len(got[k]) != len(want) {
			return fmt.Errorf("series %s: %d samples, want %d", k, len(got[k]), len(want))
		}
	}
	return nil
}

// instantQuery runs a PromQL instant query and returns its vector result
// as a single number (the README's curl example, from Go).
func instantQuery(base, query string) (float64, error) {
	return instantQueryVia(httpClient, base, query)
}

// instantQueryVia is instantQuery through c.
func instantQueryVia(c *http.Client, base, query string) (float64, error) {
	resp, err := c.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, fmt.Errorf("query %q: %w", query, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, fmt.Errorf("query %q: HTTP %d: %w", query, resp.StatusCode, err)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" || len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("query %q: HTTP %d, status %s, error %q, %d results", query, resp.StatusCode, r.Status, r.Error, len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}
