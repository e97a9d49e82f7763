package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/tessera-tsdb/tessera/repair"
)

// Rollup namespaces across nodes (docs/rollups.md "Replicas"): small
// clusters (16 shards) with a 1m rollup of default, a tick every 500ms.
const rollupShards = 16

// rollupCluster starts n nodes with a placement of rf replicas over
// rollupShards shards; edit (if set) changes each node's config.
func rollupCluster(t *testing.T, n, rf int, edit func(*config.Config)) (*etcdServer, []*tnode, *clientv3.Client) {
	e := startEtcd(t)
	var nodes []*tnode
	var ins []placement.Instance
	for i := 1; i <= n; i++ {
		cfg := rollupNodeConfig(t, fmt.Sprintf("node%d", i), fmt.Sprintf("rack%d", i), e.client, edit)
		nodes = append(nodes, startNode(t, cfg))
		ins = append(ins, nodes[i-1].instance())
	}
	c := etcdClient(t, e.client)
	p, err := placement.Init(ins, rollupShards, rf)
	require.NoError(t, err)
	putPlacement(t, c, p)
	for _, tn := range nodes {
		eventually(t, 60*time.Second, tn.cfg.ID+" ready", tn.ready)
	}
	return e, nodes, c
}

func rollupNodeConfig(t *testing.T, id, group, etcd string, edit func(*config.Config)) config.Config {
	cfg := nodeConfig(t, id, group, etcd)
	cfg.Cluster.NumShards = rollupShards
	cfg.Storage.TickInterval = 500 * time.Millisecond
	cfg.Namespaces = append(cfg.Namespaces, config.Namespace{
		Name: "r1m", RollupOf: "default", Resolution: time.Minute, Retention: 2 * cfg.Namespaces[0].Retention,
	})
	if edit != nil {
		edit(&cfg)
	}
	cfg.Defaults()
	require.NoError(t, cfg.Validate())
	return cfg
}

// writeRollupHistory writes 20 counters' 20 minutes at 15s inside a
// sealed block three blocks back (flushed, and rolled up, at the next
// tick) and returns the start of those samples.
func writeRollupHistory(t *testing.T, tn *tnode, name string) int64 {
	bs := tn.cfg.Namespaces[0].BlockSize.Milliseconds()
	b := (time.Now().UnixMilli()-3*bs)/bs*bs + 10*60_000
	var req prompb.WriteRequest
	for i := range 20 {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "i", Value: strconv.Itoa(i)}}}
		v := 0.0
		for t := b; t < b+20*60_000; t += 15_000 {
			v += float64((t/15_000)%(int64(i)+2)) + 0.5
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	raw, err := req.Marshal()
	require.NoError(t, err)
	resp, err := http.Post(tn.url()+"/api/v1/prom/remote/write", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, string(body))
	return b
}

// rollupDigestsOf is tn's r1m digests, "shard/blockStart" -> digest, of
// the shards keep accepts (nil: all).
func rollupDigestsOf(tn *tnode, keep func(uint32) bool) (map[string]uint64, error) {
	db := tn.n.DB()
	if db == nil {
		return nil, fmt.Errorf("%s: storage not open", tn.cfg.ID)
	}
	out := map[string]uint64{}
	for sh := range uint32(rollupShards) {
		if keep != nil && !keep(sh) {
			continue
		}
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

// TestRollupJoinStreamsRollupBlocks: a node joining a one-node cluster
// (RF 1, so it takes half the shards) gets the rollup blocks of its
// shards from the leaving owner, byte for byte: its rollup digests equal
// the ones the old owner held for those shards. Before, peer bootstrap
// skipped rollup namespaces and the joiner's backfill cursor started
// after the raw blocks it streamed, so it never held them.
func TestRollupJoinStreamsRollupBlocks(t *testing.T) {
	e, nodes, c := rollupCluster(t, 1, 1, nil)
	writeRollupHistory(t, nodes[0], "rollup_join_total")
	var before map[string]uint64
	eventually(t, 60*time.Second, "node1 rolled the history up", func() error {
		var err error
		if before, err = rollupDigestsOf(nodes[0], nil); err != nil {
			return err
		}
		if len(before) < 8 {
			return fmt.Errorf("%d rollup blocks yet", len(before))
		}
		return nil
	})

	n2 := startNode(t, rollupNodeConfig(t, "node2", "rack2", e.client, nil))
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) { return placement.Add(p, n2.instance()) })
	p := settled(t, c, 120*time.Second)
	in, ok := p.Instance("node2")
	require.True(t, ok)
	owned := map[uint32]bool{}
	for _, s := range in.Shards {
		owned[s.ID] = true
	}
	require.NotEmpty(t, owned)
	want := map[string]uint64{}
	for k, d := range before {
		var sh uint32
		_, err := fmt.Sscanf(k, "%d/", &sh)
		require.NoError(t, err)
		if owned[sh] {
			want[k] = d
		}
	}
	require.NotEmpty(t, want, "node2 took shards holding rollup blocks")
	got, err := rollupDigestsOf(n2, func(sh uint32) bool { return owned[sh] })
	require.NoError(t, err)
	require.Equal(t, want, got, "node2's rollup blocks are the old owner's bytes")
}

// TestRollupRepairRestoresLostRollupBlocks: two replicas (RF 2) agree on
// their rollup blocks; one loses its rollup namespace's filesets while
// stopped (its backfill cursor is past them, and its raw blocks do not
// flush again, so nothing local recomputes them). Repair compares the
// rollup digests as raw ones, pulls the missing entries and ends with
// both replicas' digests equal, counted under the rollup namespace.
func TestRollupRepairRestoresLostRollupBlocks(t *testing.T) {
	_, nodes, _ := rollupCluster(t, 2, 2, func(c *config.Config) {
		c.Repair.Every = time.Second
		c.Repair.SettleMargin = time.Second
		c.Repair.MaxBytesPerSecond = 0
		c.Hints.Enabled = new(bool)
	})
	writeRollupHistory(t, nodes[0], "rollup_repair_total")
	var want map[string]uint64
	eventually(t, 60*time.Second, "both replicas rolled the history up alike", func() error {
		a, err := rollupDigestsOf(nodes[0], nil)
		if err != nil {
			return err
		}
		b, err := rollupDigestsOf(nodes[1], nil)
		if err != nil {
			return err
		}
		if len(a) < 8 || fmt.Sprint(a) != fmt.Sprint(b) {
			return fmt.Errorf("%d and %d rollup blocks, or digests differ", len(a), len(b))
		}
		want = a
		return nil
	})

	n2 := nodes[1]
	n2.stop()
	dir := filepath.Join(n2.cfg.DataDir, "data", "r1m")
	_, err := os.Stat(dir)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(dir))
	// The commit log may still hold the history's samples (a later tick
	// deletes it); replayed, they would flush the raw block again and
	// recompute its rollup locally. Remove it, as on a node whose commit
	// log was cleaned up already (nothing else is unflushed here).
	require.NoError(t, os.RemoveAll(filepath.Join(n2.cfg.DataDir, "commitlog")))
	nodes[1] = n2.restart(t)
	eventually(t, 60*time.Second, "node2 ready", nodes[1].ready)
	eventually(t, 90*time.Second, "repair brought node2's rollup blocks back", func() error {
		got, err := rollupDigestsOf(nodes[1], nil)
		if err != nil {
			return err
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("node2 has %d rollup blocks, want %d (or digests differ)", len(got), len(want))
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := repair.FetchStatus(ctx, http.DefaultClient, nodes[1].url())
	require.NoError(t, err)
	// Raw data never differed (both replicas took every write), so what
	// repair pulled is the rollup entries.
	require.Positive(t, st.Total.SeriesRepaired, "rollup series came back through repair")
}

// TestRollupClusterReads: three nodes at RF 1 and at RF 2, so no node
// owns every shard; any node answers ?namespace=r1m and a stitched query
// (the steps raw may no longer hold answered from r1m, the rest from raw)
// by reading the rollup through the cluster session, as raw reads go:
// both equal the engine over raw. Raw's retention is chosen so that
// now-retention falls half way into a block, and the history starts a
// minute after it: raw still holds all of it, while the stitch plan
// answers the first steps from the rollup. Before, a node not owning
// every shard refused rollup reads.
func TestRollupClusterReads(t *testing.T) {
	for _, rf := range []int{1, 2} {
		t.Run(fmt.Sprintf("rf%d", rf), func(t *testing.T) {
			block := time.Hour
			now := time.Now()
			retention := 6*time.Hour + 30*time.Minute + now.Sub(now.Truncate(block)).Truncate(time.Minute)
			_, nodes, _ := rollupCluster(t, 3, rf, func(c *config.Config) {
				c.Namespaces[0].BlockSize = block
				c.Namespaces[0].Retention = retention
				c.Namespaces[1].BlockSize = block
				c.Namespaces[1].Retention = 2 * retention
			})
			// 20 counters over 3h from five minutes after now-retention
			// (one minute was too close: a cluster start over a minute
			// took the first samples out of retention).
			from := (now.Add(-retention).UnixMilli()/60_000 + 5) * 60_000
			var req prompb.WriteRequest
			for i := range 20 {
				ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "rollup_cluster_total"}, {Name: "i", Value: strconv.Itoa(i)}}}
				v := 0.0
				for t := from; t < from+3*3600_000; t += 15_000 {
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

			start, end := from+10*60_000, from+3*3600_000-60_000
			query := func(tn *tnode, ns, q string) (map[string][]float64, error) {
				params := url.Values{"query": {q}, "step": {"60"},
					"start": {strconv.FormatInt(start/1000, 10)}, "end": {strconv.FormatInt(end/1000, 10)}}
				if ns != "" {
					params.Set("namespace", ns)
				}
				resp, err := http.Get(tn.url() + "/api/v1/query_range?" + params.Encode())
				if err != nil {
					return nil, err
				}
				defer resp.Body.Close()
				var r struct {
					Status, Error string
					Warnings      []string
					Data          struct {
						Result []struct {
							Metric map[string]string `json:"metric"`
							Values [][2]any          `json:"values"`
						} `json:"result"`
					}
				}
				if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
					return nil, err
				}
				if r.Status != "success" || len(r.Warnings) > 0 {
					return nil, fmt.Errorf("%s on %q: %s %s %v", q, ns, r.Status, r.Error, r.Warnings)
				}
				out := map[string][]float64{}
				for _, s := range r.Data.Result {
					var vs []float64
					for _, p := range s.Values {
						f, err := strconv.ParseFloat(p[1].(string), 64)
						if err != nil {
							return nil, err
						}
						vs = append(vs, f)
					}
					out[s.Metric["i"]] = vs
				}
				return out, nil
			}
			same := func(want, got map[string][]float64) error {
				if len(want) != 20 || len(got) != len(want) {
					return fmt.Errorf("%d series from raw, %d from the rollup", len(want), len(got))
				}
				for k, w := range want {
					g := got[k]
					if len(g) != len(w) {
						return fmt.Errorf("series %s: %d steps from raw, %d from the rollup", k, len(w), len(g))
					}
					for i := range w {
						if math.Abs(w[i]-g[i]) > 1e-9*math.Max(math.Abs(w[i]), 1) {
							return fmt.Errorf("series %s step %d: raw %v rollup %v", k, i, w[i], g[i])
						}
					}
				}
				return nil
			}
			for _, q := range []string{`rate(rollup_cluster_total[5m])`, `max_over_time(rollup_cluster_total[3m])`} {
				for _, tn := range nodes {
					eventually(t, 60*time.Second, q+" on "+tn.cfg.ID, func() error {
						want, err := query(tn, "default", q)
						if err != nil {
							return err
						}
						got, err := query(tn, "r1m", q)
						if err != nil {
							return err
						}
						if err := same(want, got); err != nil {
							return fmt.Errorf("pinned r1m: %w", err)
						}
						stitched, err := query(tn, "", q)
						if err != nil {
							return err
						}
						if err := same(want, stitched); err != nil {
							return fmt.Errorf("stitched: %w", err)
						}
						return nil
					})
				}
			}
			// Remote read of the same range: stitched from r1m through the
			// session on every node, as the PromQL API is.
			for _, tn := range nodes {
				eventually(t, 60*time.Second, "remote read on "+tn.cfg.ID, func() error {
					return checkStitchedRemoteRead(tn, "rollup_cluster_total", start, end, 20)
				})
			}
		})
	}
}

// checkStitchedRemoteRead reads name over [start, end] by remote read
// (hints of a rate over whole minutes) pinned to raw and not pinned, and
// checks the stitched answer: it names r1m and its boundary, has every
// series, each in time order with no timestamp twice; up to the
// boundary, raw samples only (a counter without resets is answered by
// each window's first and last raw samples), every window's last raw
// sample among them; after it, exactly raw's samples.
func checkStitchedRemoteRead(tn *tnode, name string, start, end int64, series int) error {
	read := func(u string) (map[string][]prompb.Sample, http.Header, error) {
		q := &prompb.Query{StartTimestampMs: start, EndTimestampMs: end,
			Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: name}},
			Hints:    &prompb.ReadHints{Func: "rate", StartMs: start, EndMs: end, StepMs: 60_000, RangeMs: 5 * 60_000}}
		body, err := (&prompb.ReadRequest{Queries: []*prompb.Query{q}}).Marshal()
		if err != nil {
			return nil, nil, err
		}
		resp, err := http.Post(u, "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, body)))
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, nil, fmt.Errorf("remote read %s: %d %s %v", u, resp.StatusCode, b, err)
		}
		dec, err := snappy.Decode(nil, b)
		if err != nil {
			return nil, nil, err
		}
		var rr prompb.ReadResponse
		if err := rr.Unmarshal(dec); err != nil {
			return nil, nil, err
		}
		out := map[string][]prompb.Sample{}
		for _, ts := range rr.Results[0].Timeseries {
			for _, l := range ts.Labels {
				if l.Name == "i" {
					out[l.Value] = ts.Samples
				}
			}
		}
		return out, resp.Header, nil
	}
	raw, _, err := read(tn.url() + "/api/v1/read?namespace=default")
	if err != nil {
		return err
	}
	got, h, err := read(tn.url() + "/api/v1/read")
	if err != nil {
		return err
	}
	var boundary int64
	if _, err := fmt.Sscanf(h.Get("X-Tessera-Rollup"), "0:r1m until=%d shape=counter", &boundary); err != nil {
		return fmt.Errorf("header %s: %q: %w", "X-Tessera-Rollup", h.Get("X-Tessera-Rollup"), err)
	}
	if w := h.Get("X-Tessera-Rollup-Inexact"); w != "" {
		return fmt.Errorf("inexact: %s", w)
	}
	if len(raw) != series || len(got) != series {
		return fmt.Errorf("%d series from raw, %d stitched", len(raw), len(got))
	}
	for k, rs := range raw {
		gs := got[k]
		byT := map[int64]float64{}
		lastOf := map[int64]int64{} // window end -> its last raw sample's time
		var rawAfter []prompb.Sample
		for _, s := range rs {
			byT[s.Timestamp] = s.Value
			lastOf[(s.Timestamp+59_999)/60_000*60_000] = s.Timestamp
			if s.Timestamp > boundary {
				rawAfter = append(rawAfter, s)
			}
		}
		var after []prompb.Sample
		seen := map[int64]bool{}
		for i, s := range gs {
			if i > 0 && gs[i-1].Timestamp >= s.Timestamp {
				return fmt.Errorf("series %s: sample %d at %d not after %d", k, i, s.Timestamp, gs[i-1].Timestamp)
			}
			if s.Timestamp > boundary {
				after = append(after, s)
				continue
			}
			if v, ok := byT[s.Timestamp]; !ok || v != s.Value {
				return fmt.Errorf("series %s: %v at %d is not a raw sample", k, s.Value, s.Timestamp)
			}
			seen[s.Timestamp] = true
		}
		for end, last := range lastOf {
			if end <= boundary && !seen[last] {
				return fmt.Errorf("series %s: the window ending %d lacks its last sample", k, end)
			}
		}
		if len(after) != len(rawAfter) {
			return fmt.Errorf("series %s: %d samples after the boundary, raw %d", k, len(after), len(rawAfter))
		}
		for i := range after {
			if after[i].Timestamp != rawAfter[i].Timestamp || after[i].Value != rawAfter[i].Value {
				return fmt.Errorf("series %s: after the boundary %v, raw %v", k, after[i], rawAfter[i])
			}
		}
		if len(gs)-len(after) >= len(rs)-len(rawAfter) && boundary > start {
			return fmt.Errorf("series %s: %d samples up to the boundary, as many as raw's %d: not from the rollup", k, len(gs)-len(after), len(rs)-len(rawAfter))
		}
	}
	return nil
}
