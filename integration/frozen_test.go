package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"github.com/tessera-tsdb/tessera/placement"
)

// TestFrozenReplicaThroughHTTP freezes one of three RF 3 replicas (SIGSTOP
// on a real tessera process: its connections stay open, nothing answers)
// and queries through a healthy node's HTTP API. At unstrict_majority (the
// default) and majority, a PromQL range query and a remote read answer
// correctly without waiting for the frozen replica: the read asks two
// replicas, and the hedge asks the third after hedgeAfter. At all, once
// health checks mark the frozen replica down, both fail fast naming it.
// The bounds are far under the 20 s request timeout but loose enough for
// a loaded 2-core machine running the race detector; the latencies are
// logged.
func TestFrozenReplicaThroughHTTP(t *testing.T) {
	e := startEtcd(t)
	cfg1 := nodeConfig(t, "node1", "rack1", e.client)
	cfg1.Cluster.HedgeAfter = 100 * time.Millisecond // the default
	// The default probe timeout (nodeConfig lengthens it for live nodes
	// in a loaded test process): this test is about how fast a frozen
	// replica is noticed, as a user would run it.
	cfg1.Cluster.HealthCheckTimeout = time.Second
	n1 := startNode(t, cfg1)
	n2 := startNode(t, nodeConfig(t, "node2", "rack2", e.client))
	n3, cmd := startBinaryReplica(t, "node3", "rack3", e.client)

	c := etcdClient(t, e.client)
	p, err := placement.Init([]placement.Instance{n1.instance(), n2.instance(), n3.instance()}, 4096, 3)
	require.NoError(t, err)
	putPlacement(t, c, p)
	for _, n := range []*tnode{n1, n2, n3} {
		eventually(t, 60*time.Second, n.cfg.ID+" ready", n.ready)
	}
	d := newDataset()
	now := time.Now().UnixMilli()
	require.NoError(t, d.write(n1.url(), 0, 200, now-2000))
	require.NoError(t, d.write(n1.url(), 0, 200, now-1000))
	// Every replica has both writes (a majority write returns before the
	// third replica applied it).
	for _, n := range []*tnode{n1, n2, n3} {
		eventually(t, 30*time.Second, n.cfg.ID+" has the data", func() error { return d.check(n.url(), now-60_000, now+1) })
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	// Far below the 20 s request timeout the old session waited out, and
	// not tighter: the first reads after a restart hedge across 4096 shards
	// under -race on a loaded 2-core machine. The latencies are logged.
	fast := n1.cfg.Cluster.RequestTimeout / 2
	for _, level := range []string{"unstrict_majority", "majority"} {
		if level != n1.cfg.Cluster.ReadConsistency {
			n1.cfg.Cluster.ReadConsistency = level
			n1 = n1.restart(t)
			eventually(t, 60*time.Second, "node1 ready at "+level, n1.ready)
		}
		for i := 0; i < 3; i++ {
			start := time.Now()
			require.NoError(t, d.check(n1.url(), now-60_000, now+1), "remote read at %s", level)
			took := time.Since(start)
			t.Logf("remote read at %s with a frozen replica: %v", level, took)
			require.Less(t, took, fast)

			start = time.Now()
			series, err := queryRange(n1.url(), `count(it_metric)`, now-2000, now)
			took = time.Since(start)
			require.NoError(t, err, "query_range at %s", level)
			t.Logf("query_range at %s with a frozen replica: %v", level, took)
			require.Less(t, took, fast)
			require.Equal(t, "200", series, "count of series at the last step")
		}
	}

	n1.cfg.Cluster.ReadConsistency = "all"
	n1 = n1.restart(t)
	eventually(t, 60*time.Second, "node1 ready at all", n1.ready)
	// The first read at all waits on the frozen replica until the health
	// probes mark it down (about healthCheckInterval + 2 x timeout), which
	// cancels the call.
	waited := waitfor.Condition(t, 30*time.Second, 50*time.Millisecond, "frozen replica marked down", func() error {
		_, err := remoteRead(n1.url(), now-60_000, now+1)
		if err == nil {
			return errors.New("remote read at all succeeded with a frozen replica")
		}
		return wantFrozenNamed(err)
	})
	t.Logf("reads at all named the frozen replica %v after node1 restarted", waited)
	for i := 0; i < 3; i++ {
		start := time.Now()
		_, err := remoteRead(n1.url(), now-60_000, now+1)
		took := time.Since(start)
		require.Error(t, err)
		require.NoError(t, wantFrozenNamed(err))
		t.Logf("remote read at all with a frozen replica failed in %v: %v", took, err)
		require.Less(t, took, fast)

		start = time.Now()
		_, err = queryRange(n1.url(), `count(it_metric)`, now-2000, now)
		took = time.Since(start)
		require.Error(t, err)
		require.NoError(t, wantFrozenNamed(err))
		t.Logf("query_range at all with a frozen replica failed in %v", took)
		require.Less(t, took, fast)
	}
}

func wantFrozenNamed(err error) error {
	msg := err.Error()
	for _, want := range []string{"read consistency all not met", "node3 (", "not answering health checks since"} {
		if !strings.Contains(msg, want) {
			return fmt.Errorf("error %q does not say %q", msg, want)
		}
	}
	return nil
}

// startBinaryReplica runs the real tessera binary as a cluster member
// (no embedded etcd), so the test can SIGSTOP it; cleanup resumes and
// kills it.
func startBinaryReplica(t *testing.T, id, group, etcd string) (*tnode, *exec.Cmd) {
	return startBinaryReplicaWith(t, id, group, etcd, "")
}

// startBinaryReplicaWith is startBinaryReplica with extra lines of YAML
// appended to the node's config.
func startBinaryReplicaWith(t *testing.T, id, group, etcd, extra string) (*tnode, *exec.Cmd) {
	dir := t.TempDir()
	httpAddr, rpcAddr := freePort(t), freePort(t)
	conf := filepath.Join(dir, id+".yml")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`id: %s
isolationGroup: %s
dataDir: %s
http:
  listen: %s
rpc:
  listen: %s
etcd:
  endpoints: [%s]
%s`, id, group, filepath.Join(dir, "data"), httpAddr, rpcAddr, etcd, extra)), 0o644))
	cmd := exec.Command(tesseraBinary(t), "node", "-f", conf)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	n := &tnode{cfg: config.Config{}}
	n.cfg.ID, n.cfg.IsolationGroup, n.cfg.RPC.Advertise, n.cfg.HTTP.Listen = id, group, rpcAddr, httpAddr
	return n, cmd
}

// queryRange runs a PromQL range query with a 1 s step and returns the
// value of the first series at the last step.
func queryRange(base, q string, start, end int64) (string, error) {
	u := base + "/api/v1/query_range?query=" + url.QueryEscape(q) +
		"&start=" + strconv.FormatFloat(float64(start)/1000, 'f', 3, 64) +
		"&end=" + strconv.FormatFloat(float64(end)/1000, 'f', 3, 64) + "&step=1"
	resp, err := http.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return "", fmt.Errorf("query_range: %d %s", resp.StatusCode, body)
	}
	if out.Status != "success" {
		return "", fmt.Errorf("query_range: %d %s", resp.StatusCode, out.Error)
	}
	if len(out.Data.Result) != 1 || len(out.Data.Result[0].Values) == 0 {
		return "", fmt.Errorf("query_range: want one series with values, got %s", body)
	}
	vs := out.Data.Result[0].Values
	v, _ := vs[len(vs)-1][1].(string)
	return v, nil
}
