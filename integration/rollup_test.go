package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/placement"
)

// TestRollupNamespaceEndToEnd: a one-node cluster with a 1m rollup of
// default takes a counter's history by remote write (a sealed block, so
// the next tick flushes it), rolls it up as the block flushes, shows the
// progress at /api/v1/status/namespaces, and answers rate over the rollup
// (?namespace=r1m) as over raw.
func TestRollupNamespaceEndToEnd(t *testing.T) {
	e := startEtcd(t)
	cfg := nodeConfig(t, "s1", "rack1", e.client)
	cfg.Cluster.NumShards = 64
	cfg.Storage.TickInterval = 500 * time.Millisecond
	cfg.Namespaces = append(cfg.Namespaces, config.Namespace{
		Name: "r1m", RollupOf: "default", Resolution: time.Minute, Retention: 2 * cfg.Namespaces[0].Retention,
	})
	cfg.Defaults()
	require.NoError(t, cfg.Validate())
	n := startNode(t, cfg)
	p, err := placement.Init([]placement.Instance{n.instance()}, 64, 1)
	require.NoError(t, err)
	putPlacement(t, etcdClient(t, e.client), p)
	eventually(t, 60*time.Second, "s1 ready", n.ready)

	bs := cfg.Namespaces[0].BlockSize.Milliseconds()
	b := (time.Now().UnixMilli()-3*bs)/bs*bs + 10*60_000 // inside an old, sealed block
	var ts prompb.TimeSeries
	ts.Labels = []prompb.Label{{Name: "__name__", Value: "rollup_it_total"}, {Name: "job", Value: "it"}}
	v := 0.0
	for t := b; t < b+30*60_000; t += 15_000 {
		v += float64(t%7) + 1
		if t == b+15*60_000 {
			v = 3 // a counter reset
		}
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
	}
	raw, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}).Marshal()
	require.NoError(t, err)
	resp, err := http.Post(n.url()+"/api/v1/prom/remote/write", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, string(body))

	// The cold write is flushed at the next tick, and rolled up with it.
	type nsStatus struct {
		Name         string     `json:"name"`
		Resolution   string     `json:"resolution"`
		RolledUpTo   *time.Time `json:"rolledUpTo"`
		RollupBlocks int64      `json:"rollupBlocks"`
	}
	eventually(t, 60*time.Second, "rollup written", func() error {
		resp, err := http.Get(n.url() + "/api/v1/status/namespaces")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var st struct{ Data []nsStatus }
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return err
		}
		for _, s := range st.Data {
			if s.Name == "r1m" && s.Resolution == "1m0s" && s.RollupBlocks > 0 && s.RolledUpTo != nil {
				return nil
			}
		}
		return fmt.Errorf("no rollup progress yet: %+v", st.Data)
	})

	query := func(ns, q string) (map[int64]float64, []string) {
		params := url.Values{"query": {q}, "namespace": {ns}, "step": {"60"},
			"start": {strconv.FormatInt((b+5*60_000)/1000, 10)}, "end": {strconv.FormatInt((b+30*60_000)/1000, 10)}}
		resp, err := http.Get(n.url() + "/api/v1/query_range?" + params.Encode())
		require.NoError(t, err)
		defer resp.Body.Close()
		var r struct {
			Status   string
			Error    string
			Warnings []string
			Data     struct {
				Result []struct {
					Values [][2]any `json:"values"`
				} `json:"result"`
			}
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		require.Equal(t, "success", r.Status, r.Error)
		require.Len(t, r.Data.Result, 1, "%s on %s", q, ns)
		out := map[int64]float64{}
		for _, p := range r.Data.Result[0].Values {
			f, err := strconv.ParseFloat(p[1].(string), 64)
			require.NoError(t, err)
			out[int64(p[0].(float64))] = f
		}
		return out, r.Warnings
	}
	for _, q := range []string{`rate(rollup_it_total[5m])`, `increase(rollup_it_total[2m])`, `max_over_time(rollup_it_total[3m])`} {
		want, _ := query("default", q)
		got, warns := query("r1m", q)
		require.Empty(t, warns, q)
		require.Equal(t, len(want), len(got), q)
		for ts, w := range want {
			g, ok := got[ts]
			require.True(t, ok, "%s at %d", q, ts)
			require.LessOrEqual(t, math.Abs(w-g), 1e-9*math.Max(math.Abs(w), 1), "%s at %d: raw %v rollup %v", q, ts, w, g)
		}
	}
}

// TestRollupReplicasAgree: a rollup namespace on RF 3; a replica is
// stopped while a block's history is written and sealed, comes back,
// gets the missed samples by hinted handoff, rolls the block up at its
// own flush, and every replica then holds the same rollup bytes (equal
// digests per shard and block).
func TestRollupReplicasAgree(t *testing.T) {
	_, nodes, _ := clusterNWith(t, 3, func(c *config.Config) {
		c.Storage.TickInterval = 500 * time.Millisecond
		c.Namespaces = append(c.Namespaces, config.Namespace{
			Name: "r1m", RollupOf: "default", Resolution: time.Minute, Retention: 2 * c.Namespaces[0].Retention,
		})
		c.Defaults()
	})
	nodes[2].stop()

	bs := nodes[0].cfg.Namespaces[0].BlockSize.Milliseconds()
	b := (time.Now().UnixMilli()-3*bs)/bs*bs + 10*60_000
	var req prompb.WriteRequest
	for i := range 20 {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "rollup_rf_total"}, {Name: "i", Value: strconv.Itoa(i)}}}
		v := 0.0
		for t := b; t < b+20*60_000; t += 15_000 {
			v += float64((t/15_000)%(int64(i)+2)) + 0.5
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	raw, err := req.Marshal()
	require.NoError(t, err)
	resp, err := http.Post(nodes[0].url()+"/api/v1/prom/remote/write", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, string(body))

	digests := func(tn *tnode) (map[string]uint64, error) {
		db := tn.n.DB()
		if db == nil {
			return nil, fmt.Errorf("%s: storage not open", tn.cfg.ID)
		}
		out := map[string]uint64{}
		for sh := range uint32(tn.cfg.Cluster.NumShards) {
			ds, err := db.RollupDigests("r1m", sh)
			if err != nil {
				return nil, err
			}
			for _, d := range ds {
				out[fmt.Sprintf("%d/%d", sh, d.BlockStart)] = d.Digest
			}
		}
		return out, nil
	}
	var want map[string]uint64
	eventually(t, 60*time.Second, "the two live replicas rolled the block up alike", func() error {
		a, err := digests(nodes[0])
		if err != nil {
			return err
		}
		c, err := digests(nodes[1])
		if err != nil {
			return err
		}
		if len(a) == 0 {
			return fmt.Errorf("no rollup block yet")
		}
		if fmt.Sprint(a) != fmt.Sprint(c) {
			return fmt.Errorf("digests differ: %v vs %v", a, c)
		}
		want = a
		return nil
	})

	// RF 3 on three nodes: each owns every shard, so each answers rollup
	// queries from its own storage, as raw does.
	q := url.Values{"query": {`sum(rate(rollup_rf_total[5m]))`}, "step": {"60"},
		"start": {strconv.FormatInt((b+5*60_000)/1000, 10)}, "end": {strconv.FormatInt((b+20*60_000)/1000, 10)}}
	answer := func(ns string) []float64 {
		q.Set("namespace", ns)
		resp, err := http.Get(nodes[1].url() + "/api/v1/query_range?" + q.Encode())
		require.NoError(t, err)
		defer resp.Body.Close()
		var r struct {
			Status, Error string
			Warnings      []string
			Data          struct {
				Result []struct {
					Values [][2]any `json:"values"`
				} `json:"result"`
			}
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		require.Equal(t, "success", r.Status, r.Error)
		require.Empty(t, r.Warnings)
		require.Len(t, r.Data.Result, 1)
		var out []float64
		for _, p := range r.Data.Result[0].Values {
			f, err := strconv.ParseFloat(p[1].(string), 64)
			require.NoError(t, err)
			out = append(out, f)
		}
		return out
	}
	fromRaw, rolled := answer("default"), answer("r1m")
	require.Len(t, rolled, len(fromRaw))
	for i := range fromRaw {
		require.InEpsilon(t, fromRaw[i], rolled[i], 1e-9, "step %d", i)
	}

	nodes[2] = nodes[2].restart(t)
	// Its storage is read (n.DB) only once it is open and serving.
	eventually(t, 60*time.Second, "node3 ready", nodes[2].ready)
	eventually(t, 90*time.Second, "the stopped replica caught up", func() error {
		got, err := digests(nodes[2])
		if err != nil {
			return err
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("node3 has %d rollup blocks, want %d (or digests differ)", len(got), len(want))
		}
		return nil
	})
}
