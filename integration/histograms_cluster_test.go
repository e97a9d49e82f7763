package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
)

// clusterHist is the i-th histogram of the cluster test.
func clusterHist(i int) *histogram.Histogram {
	return &histogram.Histogram{Schema: 2, Count: uint64(2*i + 3), Sum: float64(i) * 1.5, ZeroCount: 1, ZeroThreshold: 0.001,
		PositiveSpans: []histogram.Span{{Offset: 1, Length: 2}}, PositiveBuckets: []int64{int64(i + 1), 0},
		NegativeSpans: []histogram.Span{{Length: 1}}, NegativeBuckets: []int64{0}}
}

// histWant is what a test wrote: per series name label value, the
// histograms by timestamp, as strings ("i ..." or "f ...").
type histWant map[string]map[int64]string

func (w histWant) add(name, i string, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) {
	key := name + "/" + i
	if w[key] == nil {
		w[key] = map[int64]string{}
	}
	if fh != nil {
		w[key][t] = "f " + fh.String()
	} else {
		w[key][t] = "i " + h.String()
	}
}

// histogramsV1 is a remote write 1.0 request of series series of name,
// each with an integer and a float histogram at t and t+1000, recorded in w.
func histogramsV1(name string, series int, t int64, w histWant) []prompb.TimeSeries {
	var out []prompb.TimeSeries
	for s := 0; s < series; s++ {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "i", Value: strconv.Itoa(s)}}}
		h, fh := clusterHist(s), clusterHist(s+1).ToFloat(nil)
		ts.Histograms = append(ts.Histograms, prompb.FromIntHistogram(t, h), prompb.FromFloatHistogram(t+1000, fh))
		w.add(name, strconv.Itoa(s), t, h, nil)
		w.add(name, strconv.Itoa(s), t+1000, nil, fh)
		out = append(out, ts)
	}
	return out
}

// postHistogramsV2 sends series series of name, each with an integer and
// a float histogram at t and t+1000, as one remote write 2.0 request,
// records them in w, and returns the status, body and histograms-written
// header.
func postHistogramsV2(t *testing.T, url, name string, series int, ts int64, w histWant) (int, string, string) {
	t.Helper()
	st := writev2.NewSymbolTable()
	req := &writev2.Request{}
	for s := 0; s < series; s++ {
		ls := labels.FromStrings("__name__", name, "i", strconv.Itoa(s))
		h, fh := clusterHist(s+2), clusterHist(s+3).ToFloat(nil)
		req.Timeseries = append(req.Timeseries, writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(ls, nil),
			Histograms: []writev2.Histogram{writev2.FromIntHistogram(0, ts, h), writev2.FromFloatHistogram(0, ts+1000, fh)},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM}})
		w.add(name, strconv.Itoa(s), ts, h, nil)
		w.add(name, strconv.Itoa(s), ts+1000, nil, fh)
	}
	req.Symbols = st.Symbols()
	raw, err := req.Marshal()
	require.NoError(t, err)
	hr, err := http.NewRequest(http.MethodPost, url+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	require.NoError(t, err)
	hr.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header.Get("X-Prometheus-Remote-Write-Histograms-Written")
}

// holdsHistograms checks that node n's own storage (no fan-out) holds
// exactly the histograms of w in [from, to].
func holdsHistograms(n *tnode, w histWant, from, to int64) error {
	for key, want := range w {
		var name, i string
		for j := range key {
			if key[j] == '/' {
				name, i = key[:j], key[j+1:]
			}
		}
		id := ident.FromLabels(labels.FromStrings("__name__", name, "i", i))
		it, err := n.n.DB().ReadHistograms("default", id, from, to)
		if err != nil {
			return fmt.Errorf("%s: read %s: %w", n.cfg.ID, key, err)
		}
		got := map[int64]string{}
		for it.Next() {
			if it.IsFloat() {
				t, fh := it.AtFloatHistogram(nil)
				got[t] = "f " + fh.String()
			} else {
				t, h := it.AtHistogram(nil)
				got[t] = "i " + h.String()
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("%s: read %s: %w", n.cfg.ID, key, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("%s alone holds %d histograms of %s, want %d: got %v want %v", n.cfg.ID, len(got), key, len(want), got, want)
		}
	}
	return nil
}

// Native histograms in a 3-node RF 3 cluster: remote write 1.0 and 2.0
// through node 1 at majority reach every replica's own storage, and
// remote read through each node returns them all. With node 3 down, a
// write is still acknowledged at majority and node 3 catches up from
// node 1's hint queue once it is back, with no repair.
func TestClusterStoresHistogramsOnEveryReplica(t *testing.T) {
	_, nodes, _ := cluster3(t)
	n1, n3 := nodes[0], nodes[2]
	now := time.Now().UnixMilli()
	w := histWant{}
	code, msg := postHistograms(t, n1.url(), histogramsV1("cl_v1", 12, now-60_000, w)...)
	require.Equal(t, http.StatusNoContent, code, msg)
	code, msg, written := postHistogramsV2(t, n1.url(), "cl_v2", 12, now-50_000, w)
	require.Equal(t, http.StatusNoContent, code, msg)
	require.Equal(t, "24", written)

	// Majority returned; the third replica is written right after.
	for _, n := range nodes {
		eventually(t, 30*time.Second, n.cfg.ID+" alone holds every histogram", func() error {
			return holdsHistograms(n, w, now-120_000, now)
		})
	}
	for _, n := range nodes {
		for _, name := range []string{"cl_v1", "cl_v2"} {
			got, err := readHistogramCounts(t, n.url(), name, now-120_000, now)
			require.NoError(t, err)
			require.Len(t, got, 12, "remote read of %s through %s", name, n.cfg.ID)
			for i, c := range got {
				require.Equal(t, 2, c, "series %s of %s through %s", i, name, n.cfg.ID)
			}
		}
	}

	// PromQL through each node: the float histograms of cl_v2 at
	// now-49s, clusterHist(s+3) with count 2(s+3)+3, summed over s < 12.
	for _, n := range nodes {
		require.Equal(t, "240", promScalar(t, n.url(), "sum(histogram_count(cl_v2))", now-49_000), "through %s", n.cfg.ID)
	}

	// A pushed-down selection holding histograms: the replicas decline
	// (before decoding), node 1 reads the raw series and the engine
	// computes the selection over that read (engineset.go), answering as
	// the plain engine does (an @ selector is never pushed down).
	at := now - 49_000
	plain := promScalar(t, n1.url(), fmt.Sprintf("histogram_quantile(0.5, sum(cl_v2 @ %.3f))", float64(at)/1000), at)
	require.Equal(t, plain, promScalar(t, n1.url(), "histogram_quantile(0.5, sum(cl_v2))", at))

	// Node 3 down: the write meets majority on nodes 1 and 2, node 3's
	// share is hinted and replayed when it is back.
	n3.stop()
	late := histWant{}
	code, msg = postHistograms(t, n1.url(), histogramsV1("cl_late", 8, now-40_000, late)...)
	require.Equal(t, http.StatusNoContent, code, msg)
	waitHinted(t, n1.url(), "node3")
	require.NoError(t, holdsHistograms(nodes[1], late, now-120_000, now))
	n3 = n3.restart(t)
	eventually(t, 60*time.Second, "node3 ready", n3.ready)
	eventually(t, 60*time.Second, "node3 caught up through hints", func() error {
		return holdsHistograms(n3, late, now-120_000, now)
	})
	require.NoError(t, holdsHistograms(n3, w, now-120_000, now), "node3 kept what it had")
	eventually(t, 30*time.Second, "hint queue drained", func() error {
		n, err := hintStatus(n1.url(), "node3")
		if err == nil && n > 0 {
			err = fmt.Errorf("%d records left", n)
		}
		return err
	})
}
