package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/placement"
)

// postWrite sends a snappy-compressed remote write body with the content
// type of its protocol version and returns the response.
func postWrite(t *testing.T, url string, raw []byte, v2 bool) *http.Response {
	t.Helper()
	hr, err := http.NewRequest(http.MethodPost, url+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	require.NoError(t, err)
	hr.Header.Set("Content-Encoding", "snappy")
	if v2 {
		hr.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
		hr.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	} else {
		hr.Header.Set("Content-Type", "application/x-protobuf")
		hr.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	}
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, string(b))
	return resp
}

type exemplarsAnswer struct {
	Status string `json:"status"`
	Data   []struct {
		SeriesLabels map[string]string `json:"seriesLabels"`
		Exemplars    []struct {
			Labels    map[string]string `json:"labels"`
			Value     string            `json:"value"`
			Timestamp float64           `json:"timestamp"`
		} `json:"exemplars"`
	} `json:"data"`
	Warnings []string `json:"warnings"`
}

// queryExemplars returns "job/trace_id@value" for every exemplar of the
// answer, sorted (a duplicate would show twice), and its warnings.
func queryExemplars(base, query string, start, end int64) ([]string, []string, error) {
	v := url.Values{"query": {query}, "start": {strconv.FormatFloat(float64(start)/1000, 'f', 3, 64)},
		"end": {strconv.FormatFloat(float64(end)/1000, 'f', 3, 64)}}
	resp, err := http.Get(base + "/api/v1/query_exemplars?" + v.Encode())
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, nil, fmt.Errorf("query_exemplars: %d %s", resp.StatusCode, b)
	}
	var a exemplarsAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, nil, fmt.Errorf("query_exemplars: %w: %s", err, b)
	}
	var out []string
	for _, s := range a.Data {
		for _, e := range s.Exemplars {
			out = append(out, s.SeriesLabels["job"]+"/"+e.Labels["trace_id"]+"@"+e.Value)
		}
	}
	sort.Strings(out)
	return out, a.Warnings, nil
}

func getMetadata(base, params string) (map[string][]map[string]string, error) {
	resp, err := http.Get(base + "/api/v1/metadata?" + params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("metadata: %d %s", resp.StatusCode, b)
	}
	var a struct {
		Data map[string][]map[string]string `json:"data"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("metadata: %w: %s", err, b)
	}
	return a.Data, nil
}

// TestClusterExemplarsAndMetadata: exemplars and metadata written through
// node1 with remote write 1.0 and 2.0 are answered through node3 (each
// exemplar once, though three replicas hold it), still with one node
// stopped, and by node3 itself after it restarted.
func TestClusterExemplarsAndMetadata(t *testing.T) {
	_, nodes, _ := cluster3(t)
	now := time.Now().UnixMilli()

	// Remote write 1.0: exemplars on samples, metadata in the request.
	v1 := &prompb.WriteRequest{Metadata: []prompb.MetricMetadata{
		{MetricFamilyName: "aux_requests_total", Type: prompb.MetricMetadata_COUNTER, Help: "Requests served.", Unit: ""},
	}}
	var want []string
	for i := range 5 {
		job := "v1job" + strconv.Itoa(i)
		v1.Timeseries = append(v1.Timeseries, prompb.TimeSeries{
			Labels:    []prompb.Label{{Name: "__name__", Value: "aux_requests_total"}, {Name: "job", Value: job}},
			Samples:   []prompb.Sample{{Timestamp: now - 2000, Value: float64(i)}},
			Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "v1t" + strconv.Itoa(i)}}, Value: float64(i), Timestamp: now - 2000}},
		})
		want = append(want, fmt.Sprintf("%s/v1t%d@%d", job, i, i))
	}
	raw, err := v1.Marshal()
	require.NoError(t, err)
	postWrite(t, nodes[0].url(), raw, false)

	// Remote write 2.0, built with Prometheus' v2 types.
	st := writev2.NewSymbolTable()
	v2 := &writev2.Request{}
	for i := range 5 {
		job := "v2job" + strconv.Itoa(i)
		v2.Timeseries = append(v2.Timeseries, writev2.TimeSeries{
			LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "aux_latency_seconds", "job", job), nil),
			Samples:    []writev2.Sample{{Value: float64(i) + 0.5, Timestamp: now - 1000}},
			Exemplars: []writev2.Exemplar{{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("trace_id", "v2t"+strconv.Itoa(i)), nil),
				Value: float64(i) + 0.5, Timestamp: now - 1000}},
			Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("Latency."), UnitRef: st.Symbolize("seconds")},
		})
		want = append(want, fmt.Sprintf("%s/v2t%d@%s", job, i, strconv.FormatFloat(float64(i)+0.5, 'f', -1, 64)))
	}
	v2.Symbols = st.Symbols()
	raw, err = v2.Marshal()
	require.NoError(t, err)
	resp := postWrite(t, nodes[0].url(), raw, true)
	require.Equal(t, "5", resp.Header.Get("X-Prometheus-Remote-Write-Exemplars-Written"))
	sort.Strings(want)

	query := `{__name__=~"aux_.+"}`
	allFound := func(base string) func() error {
		return func() error {
			got, _, err := queryExemplars(base, query, now-60_000, now+1000)
			if err != nil {
				return err
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				return fmt.Errorf("exemplars through %s: got %v, want %v", base, got, want)
			}
			return nil
		}
	}
	wantMeta := map[string][]map[string]string{
		"aux_requests_total":  {{"type": "counter", "help": "Requests served.", "unit": ""}},
		"aux_latency_seconds": {{"type": "gauge", "help": "Latency.", "unit": "seconds"}},
	}
	metaFound := func(base string) func() error {
		return func() error {
			got, err := getMetadata(base, "")
			if err != nil {
				return err
			}
			for name, es := range wantMeta {
				if fmt.Sprint(got[name]) != fmt.Sprint(es) {
					return fmt.Errorf("metadata of %s through %s: got %v, want %v", name, base, got[name], es)
				}
			}
			return nil
		}
	}
	// Delivery is asynchronous (best effort, after the samples): poll.
	eventually(t, 30*time.Second, "exemplars through node3", allFound(nodes[2].url()))
	eventually(t, 30*time.Second, "metadata through node3", metaFound(nodes[2].url()))
	one, err := getMetadata(nodes[2].url(), "limit=1")
	require.NoError(t, err)
	require.Len(t, one, 1, "limit=1")
	one, err = getMetadata(nodes[2].url(), "metric=aux_requests_total&limit_per_metric=1")
	require.NoError(t, err)
	require.Equal(t, wantMeta["aux_requests_total"], one["aux_requests_total"])
	require.Len(t, one, 1, "metric=")
	// Every replica got them, not only the node that received the write.
	for _, n := range nodes {
		c, err := rpc.Dial(n.cfg.RPC.Advertise, rpc.ClientOptions{Timeout: 10 * time.Second})
		require.NoError(t, err)
		eventually(t, 30*time.Second, "exemplars on "+n.cfg.ID, func() error {
			res, err := c.ExemplarsQuery(context.Background(), now-60_000, now+1000,
				[][]*labels.Matcher{{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "aux_.+")}})
			if err != nil {
				return err
			}
			if len(res) != 10 {
				return fmt.Errorf("%s holds exemplars of %d series, want 10", n.cfg.ID, len(res))
			}
			return nil
		})
		require.NoError(t, c.Close())
	}

	// One node stopped: the other two still answer everything.
	nodes[1].stop()
	require.NoError(t, allFound(nodes[2].url())(), "with node2 stopped")
	require.NoError(t, metaFound(nodes[2].url())(), "with node2 stopped")
	require.NoError(t, allFound(nodes[0].url())(), "with node2 stopped")
	// What node2 misses now is counted, not retried: best effort.
	late := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:    []prompb.Label{{Name: "__name__", Value: "aux_late_total"}},
		Samples:   []prompb.Sample{{Timestamp: now - 500, Value: 1}},
		Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "late"}}, Value: 1, Timestamp: now - 500}},
	}}}
	raw, err = late.Marshal()
	require.NoError(t, err)
	postWrite(t, nodes[0].url(), raw, false)
	want = append(want, "/late@1")
	sort.Strings(want)
	eventually(t, 30*time.Second, "node1 counts the exemplar node2 missed", func() error {
		resp, err := http.Get(nodes[0].url() + "/metrics")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`tessera_session_aux_writes_total{kind="exemplars",result="failed"} `,
			`tessera_session_aux_writes_total{kind="exemplars",result="sent"} `} {
			if !strings.Contains(string(b), want) {
				return fmt.Errorf("no %s in node1's metrics", want)
			}
		}
		return nil
	})

	// node3 restarted: its own store (asked over its RPC, not through the
	// cluster) holds them again, from its snapshot.
	nodes[2] = nodes[2].restart(t)
	eventually(t, 60*time.Second, "node3 ready", nodes[2].ready)
	c, err := rpc.Dial(nodes[2].cfg.RPC.Advertise, rpc.ClientOptions{Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer c.Close()
	res, err := c.ExemplarsQuery(context.Background(), now-60_000, now+1000,
		[][]*labels.Matcher{{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "aux_.+")}})
	require.NoError(t, err)
	require.Len(t, res, 11, "node3's exemplars after its restart")
	m, err := c.MetadataQuery(context.Background(), "", -1, -1)
	require.NoError(t, err)
	require.Len(t, m, 2, "node3's metadata after its restart: %v", m)
	require.NoError(t, allFound(nodes[2].url())(), "after node3's restart")
}

// TestFrozenReplicaExemplars: with one of three replicas frozen (SIGSTOP
// on a real tessera process), exemplar and metadata queries through the
// other nodes answer everything within the request timeout (waiting on
// node3 would use all of it): the hedge asks the third owner.
func TestFrozenReplicaExemplars(t *testing.T) {
	e := startEtcd(t)
	n1 := startNode(t, nodeConfig(t, "node1", "rack1", e.client))
	n2 := startNode(t, nodeConfig(t, "node2", "rack2", e.client))
	n3, cmd := startBinaryReplica(t, "node3", "rack3", e.client)
	c := etcdClient(t, e.client)
	p, err := placement.Init([]placement.Instance{n1.instance(), n2.instance(), n3.instance()}, 4096, 3)
	require.NoError(t, err)
	putPlacement(t, c, p)
	for _, n := range []*tnode{n1, n2, n3} {
		eventually(t, 60*time.Second, n.cfg.ID+" ready", n.ready)
	}
	now := time.Now().UnixMilli()
	req := &prompb.WriteRequest{Metadata: []prompb.MetricMetadata{{MetricFamilyName: "aux_f", Type: prompb.MetricMetadata_GAUGE, Help: "F."}}}
	var want []string
	for i := range 20 {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels:    []prompb.Label{{Name: "__name__", Value: "aux_f"}, {Name: "job", Value: strconv.Itoa(i)}},
			Samples:   []prompb.Sample{{Timestamp: now - 1000, Value: 1}},
			Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "f"}}, Value: 1, Timestamp: now - 1000}},
		})
		want = append(want, strconv.Itoa(i)+"/f@1")
	}
	sort.Strings(want)
	raw, err := req.Marshal()
	require.NoError(t, err)
	postWrite(t, n1.url(), raw, false)
	rc, err := rpc.Dial(n3.cfg.RPC.Advertise, rpc.ClientOptions{Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer rc.Close()
	eventually(t, 30*time.Second, "node3 holds the exemplars and metadata", func() error {
		res, err := rc.ExemplarsQuery(context.Background(), now-60_000, now+1000,
			[][]*labels.Matcher{{labels.MustNewMatcher(labels.MatchEqual, "__name__", "aux_f")}})
		if err != nil {
			return err
		}
		m, err := rc.MetadataQuery(context.Background(), "aux_f", -1, -1)
		if err != nil {
			return err
		}
		if len(res) != 20 || len(m) != 1 {
			return fmt.Errorf("node3 holds exemplars of %d series, metadata of %d metrics", len(res), len(m))
		}
		return nil
	})

	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	// Waiting on the frozen replica would take the whole request timeout;
	// the hedge answers from the third owner well before it. Half the
	// timeout was too tight for two race-enabled suites side by side on
	// two cores (10.96 s once), so the bound is the timeout itself.
	fast := n1.cfg.Cluster.RequestTimeout
	for _, n := range []*tnode{n1, n2} {
		for range 3 {
			start := time.Now()
			got, _, err := queryExemplars(n.url(), "aux_f", now-60_000, now+1000)
			took := time.Since(start)
			require.NoError(t, err)
			require.Equal(t, want, got, "exemplars through %s with node3 frozen", n.cfg.ID)
			t.Logf("query_exemplars through %s with a frozen replica: %v", n.cfg.ID, took)
			require.Less(t, took, fast)

			start = time.Now()
			m, err := getMetadata(n.url(), "metric=aux_f")
			took = time.Since(start)
			require.NoError(t, err)
			require.Equal(t, map[string][]map[string]string{"aux_f": {{"type": "gauge", "help": "F.", "unit": ""}}}, m)
			t.Logf("metadata through %s with a frozen replica: %v", n.cfg.ID, took)
			require.Less(t, took, fast)
		}
	}
}

// TestDamagedAuxSnapshot: a node whose exemplar snapshot is damaged
// starts, serves, keeps the records before the damage and reports it on
// /ready; the damaged file is kept aside.
func TestDamagedAuxSnapshot(t *testing.T) {
	e := startEtcd(t)
	cfg := nodeConfig(t, "node1", "rack1", e.client)
	cfg.Cluster.AutoInit = true
	n := startNode(t, cfg)
	eventually(t, 60*time.Second, "node1 ready", n.ready)
	now := time.Now().UnixMilli()
	req := &prompb.WriteRequest{}
	for i := range 3 {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels:    []prompb.Label{{Name: "__name__", Value: "aux_m"}, {Name: "job", Value: strconv.Itoa(i)}},
			Samples:   []prompb.Sample{{Timestamp: now - 1000, Value: 1}},
			Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "t" + strconv.Itoa(i)}}, Value: 1, Timestamp: now - 1000}},
		})
	}
	raw, err := req.Marshal()
	require.NoError(t, err)
	postWrite(t, n.url(), raw, false)
	n.stop()

	path := filepath.Join(cfg.DataDir, "aux", "exemplars.snap")
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the graceful stop wrote the snapshot")
	b[len(b)-3] ^= 0x40 // in the last record: the first two survive
	require.NoError(t, os.WriteFile(path, b, 0o644))

	n = n.restart(t)
	eventually(t, 60*time.Second, "node1 ready after the damage", n.ready)
	got, _, err := queryExemplars(n.url(), "aux_m", now-60_000, now+1000)
	require.NoError(t, err)
	require.Equal(t, []string{"0/t0@1", "1/t1@1"}, got)
	resp, err := http.Get(n.url() + "/ready")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), "exemplars.snap")
	require.Contains(t, string(body), "checksum mismatch")
	_, err = os.Stat(path + ".corrupt")
	require.NoError(t, err, "the damaged snapshot is kept aside")
}
