package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/placement"
)

func postHistograms(t *testing.T, url string, series ...prompb.TimeSeries) (int, string) {
	t.Helper()
	raw, err := (&prompb.WriteRequest{Timeseries: series}).Marshal()
	require.NoError(t, err)
	resp, err := http.Post(url+"/api/v1/prom/remote/write", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// readHistogramCounts reads every series named name through url's remote
// read (SAMPLES) and counts each one's native histogram samples.
func readHistogramCounts(t *testing.T, url, name string, start, end int64) (map[string]int, error) {
	rr, err := (&prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: start, EndTimestampMs: end,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: name}}}}}).Marshal()
	require.NoError(t, err)
	resp, err := http.Post(url+"/api/v1/read", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, rr)))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("remote read: %d %s", resp.StatusCode, body)
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, err
	}
	var out prompb.ReadResponse
	if err := out.Unmarshal(raw); err != nil {
		return nil, err
	}
	got := map[string]int{}
	for _, ts := range out.Results[0].Timeseries {
		for _, l := range ts.Labels {
			if l.Name == "i" {
				got[l.Value] = len(ts.Histograms)
			}
		}
	}
	return got, nil
}

// A one-node cluster stores native histograms (flushed and in memory);
// when a node joins, the shards that move stream their histograms to it
// (block containers and unflushed histogram streams over the node RPC),
// and reads through either node, now a cluster fan-out, return every one.
// New histogram writes then go to both replicas.
func TestOneNodeHistogramsSurviveANodeJoining(t *testing.T) {
	e := startEtcd(t)
	n1 := startNode(t, nodeConfig(t, "node1", "rack1", e.client))
	c := etcdClient(t, e.client)
	p, err := placement.Init([]placement.Instance{n1.instance()}, 4096, 1)
	require.NoError(t, err)
	putPlacement(t, c, p)
	eventually(t, 60*time.Second, "node1 ready", n1.ready)

	const series = 16
	old := time.Now().Add(-3 * time.Hour).UnixMilli()
	now := time.Now().UnixMilli()
	h := func(i int) *histogram.Histogram {
		return &histogram.Histogram{Schema: 1, Count: uint64(2 * (i + 1)), Sum: float64(i), PositiveSpans: []histogram.Span{{Length: 2}},
			PositiveBuckets: []int64{int64(i + 1), 0}}
	}
	var req []prompb.TimeSeries
	for s := 0; s < series; s++ {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "join_latency"}, {Name: "i", Value: fmt.Sprint(s)}}}
		for k := 0; k < 5; k++ {
			ts.Histograms = append(ts.Histograms, prompb.FromIntHistogram(old+int64(k)*1000, h(k)))
		}
		for k := 0; k < 3; k++ {
			ts.Histograms = append(ts.Histograms, prompb.FromFloatHistogram(now-int64(3-k)*1000, h(k).ToFloat(nil)))
		}
		req = append(req, ts)
	}
	code, msg := postHistograms(t, n1.url(), req...)
	require.Equal(t, http.StatusNoContent, code, msg)
	// The old ones are a cold write to a sealed block: flushed by the next tick.
	eventually(t, 60*time.Second, "history flushed on node1", func() error {
		if n := flushedBlocks(t, n1); n == 0 {
			return fmt.Errorf("no flushed block yet")
		}
		return nil
	})

	n2 := startNode(t, nodeConfig(t, "node2", "rack2", e.client))
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) { return placement.Add(p, n2.instance()) })
	p = settled(t, c, 120*time.Second)
	require.Len(t, p.Instances, 2)
	require.Greater(t, flushedBlocks(t, n2), 0, "node2 received sealed blocks with histograms")

	for _, n := range []*tnode{n1, n2} {
		eventually(t, 30*time.Second, n.cfg.ID+" reads every histogram", func() error {
			got, err := readHistogramCounts(t, n.url(), "join_latency", old-1000, now+1000)
			if err != nil {
				return err
			}
			for s := 0; s < series; s++ {
				if got[fmt.Sprint(s)] != 8 {
					return fmt.Errorf("series %d: %d histograms, want 8 (%v)", s, got[fmt.Sprint(s)], got)
				}
			}
			return nil
		})
	}

	// Now a cluster: new histograms are stored on both replicas.
	code, msg = postHistograms(t, n1.url(), prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "join_latency"}, {Name: "i", Value: "new"}},
		Histograms: []prompb.Histogram{prompb.FromIntHistogram(now, h(1))}})
	require.Equal(t, http.StatusNoContent, code, msg)
	for _, n := range []*tnode{n1, n2} {
		got, err := readHistogramCounts(t, n.url(), "join_latency", now, now)
		require.NoError(t, err)
		require.Equal(t, 1, got["new"], "through %s", n.cfg.ID)
	}
}
