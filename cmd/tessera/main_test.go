package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/client/hints"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
)

// The binary under test, built once with a version and commit stamped in
// through the linker, as deploy/build.sh does.
var binary string

const (
	testVersion  = "v9.8.7-test"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tessera-cmd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "tessera")
	pkg := "github.com/tessera-tsdb/tessera/internal/version"
	build := exec.Command("go", "build", "-o", binary,
		"-ldflags", "-X "+pkg+".Version="+testVersion+" -X "+pkg+".Revision="+testRevision, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build tessera:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(binary, args...).Output()
		require.NoError(t, err, args)
		require.Equal(t, 1, strings.Count(string(out), "\n"), "%v: %q", args, out)
		require.True(t, strings.HasPrefix(string(out), "tessera "+testVersion+" (commit "+testRevision), "%v: %q", args, out)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// node is the binary running the embedded default layout (a seed with
// embedded etcd that creates its one-node placement) on free ports.
type testNode struct {
	t    *testing.T
	cmd  *exec.Cmd
	http string
	out  *bytes.Buffer
	done chan struct{}
}

func startNode(t *testing.T) *testNode { return startNodeWith(t, nil) }

// startNodeWith is startNode with prepare (when not nil) called on the
// data directory before the node starts.
func startNodeWith(t *testing.T, prepare func(dataDir string)) *testNode {
	dir := t.TempDir()
	etcd := freeAddr(t)
	n := &testNode{t: t, http: freeAddr(t), out: &bytes.Buffer{}, done: make(chan struct{})}
	conf := fmt.Sprintf(`dataDir: %s
http:
  listen: %s
rpc:
  listen: %s
etcd:
  endpoints: [%s]
  embedded:
    enabled: true
    clientURL: http://%s
    peerURL: http://%s
cluster:
  autoInit: true
`, filepath.Join(dir, "data"), n.http, freeAddr(t), etcd, etcd, freeAddr(t))
	path := filepath.Join(dir, "node.yml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o644))
	if prepare != nil {
		prepare(filepath.Join(dir, "data"))
	}
	n.cmd = exec.Command(binary, "node", "-f", path)
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out // one buffer: Wait copies both before returning
	require.NoError(t, n.cmd.Start())
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	t.Cleanup(func() {
		select {
		case <-n.done:
		default:
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	})
	waitfor.Condition(t, 2*time.Minute, 100*time.Millisecond, "node ready", func() error {
		select {
		case <-n.done:
			t.Fatalf("node exited: %s", n.out)
		default:
		}
		resp, err := http.Get("http://" + n.http + "/ready")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/ready: %d %s", resp.StatusCode, body)
		}
		return nil
	})
	return n
}

// stop sends SIGTERM and returns everything the node printed.
func (n *testNode) stop() string {
	n.t.Helper()
	require.NoError(n.t, n.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-n.done:
	case <-time.After(2 * time.Minute):
		n.t.Fatalf("node did not stop within 2m after SIGTERM: %s", n.out)
	}
	require.True(n.t, n.cmd.ProcessState.Success(), "exit: %v: %s", n.cmd.ProcessState, n.out)
	return n.out.String()
}

func (n *testNode) get(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + n.http + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, b)
	return b
}

// TestNodeBuildInfoAndLogs: buildinfo reports Tessera's version and
// commit; a clean start and stop of the embedded default prints only our
// key=value lines: no JSON lines and no stack traces from embedded etcd.
func TestNodeBuildInfoAndLogs(t *testing.T) {
	n := startNode(t)
	var bi struct {
		Status string
		Data   map[string]string
	}
	require.NoError(t, json.Unmarshal(n.get(t, "/api/v1/status/buildinfo"), &bi))
	require.Equal(t, "success", bi.Status)
	require.Equal(t, testVersion, bi.Data["version"])
	require.Equal(t, testRevision, bi.Data["revision"])
	require.Equal(t, "Tessera", bi.Data["application"])
	require.NotEmpty(t, bi.Data["prometheusVersion"])

	out := n.stop()
	// Start, replay and stop each say so: an operator reading the log of a
	// slow start or of a stop sees which step it is in.
	for _, want := range []string{`msg="storage recovering: replaying commit log"`, `msg="node serving"`, `msg="node shutting down"`, `msg="node stopped"`} {
		require.Contains(t, out, want)
	}
	keyValue := regexp.MustCompile(`^time=\S+ level=(DEBUG|INFO|WARN|ERROR) msg=`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		require.Regexp(t, keyValue, line, "every line is ours, key=value")
		require.NotContains(t, line, "stacktrace")
		require.NotContains(t, line, "level=ERROR", "a clean start and stop logs no error")
	}
	require.NotContains(t, out, "\n{")
	require.NotContains(t, out, "\n\t", "no stack trace lines")
}

// TestGrafanaDashboardMetricsExist parses every PromQL expression of
// deploy/grafana/tessera.json and checks that each metric it reads is
// exported on a node's GET /metrics, after the node saw writes, queries,
// a refused write and hints left for an instance no longer in the
// placement (some series appear on first use).
func TestGrafanaDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana/tessera.json")
	require.NoError(t, err)
	var dash any
	require.NoError(t, json.Unmarshal(raw, &dash))
	exprs := dashboardExprs(dash)
	require.GreaterOrEqual(t, len(exprs), 20)

	wanted := map[string][]string{} // metric name -> expressions using it
	for _, e := range exprs {
		names, err := metricNames(e)
		require.NoError(t, err, "dashboard expression %q", e)
		require.NotEmpty(t, names, "expression %q reads no metric", e)
		for _, name := range names {
			wanted[name] = append(wanted[name], e)
		}
	}
	// The areas the dashboard covers, each by at least one metric.
	for _, prefix := range []string{"tessera_http_remote_write_", "tessera_query_", "tessera_storage_commitlog_",
		"tessera_storage_flush", "tessera_bootstrap_", "tessera_bootstrap_progress_", "tessera_placement_shards",
		"tessera_repair_", "tessera_hints_", "tessera_limits_refused_total", "tessera_backup_upload_"} {
		found := false
		for name := range wanted {
			found = found || strings.HasPrefix(name, prefix)
		}
		require.True(t, found, "no panel reads %s*", prefix)
	}

	// Hints a previous run left for an instance that has since left the
	// placement: the node opens that queue at start (its gauges and
	// counters appear) and drops its records, counted as
	// tessera_hints_dropped_total{reason="removed"}, which appears only then.
	n := startNodeWith(t, func(dataDir string) {
		st, err := hints.Open(filepath.Join(dataDir, "hints"), hints.Options{MaxBytes: 1 << 20, MaxAge: time.Hour})
		require.NoError(t, err)
		q, err := st.Queue("removed-node")
		require.NoError(t, err)
		require.NoError(t, q.Append("default", []storage.Sample{{ID: []byte("up"), T: time.Now().UnixMilli(), V: 1}}))
		require.NoError(t, st.Close())
	})
	base := "http://" + n.http
	bench := exec.Command(binary, "bench", "--url", base, "--series", "40", "--samples", "20", "--interval", "10s", "--verify")
	out, err := bench.CombinedOutput()
	require.NoError(t, err, "%s", out)
	n.get(t, "/api/v1/query?query="+url.QueryEscape("sum(rate(tessera_bench_0_total[5m]))"))
	n.get(t, "/api/v1/label/job/values")
	resp, err := http.Post(base+"/api/v1/prom/remote/write", "application/x-protobuf", strings.NewReader("not snappy"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// tally reports to /metrics every second: poll until every name is
	// there.
	waitfor.Condition(t, time.Minute, 200*time.Millisecond, "dashboard metrics exported", func() error {
		have, err := exported(base)
		if err != nil {
			return err
		}
		var missing []string
		for name, uses := range wanted {
			if !have[name] {
				missing = append(missing, fmt.Sprintf("%s (in %q)", name, uses[0]))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not exported: %s", strings.Join(missing, "; "))
		}
		return nil
	})
	n.stop()
}

// dashboardExprs collects the PromQL of every target ("expr") and of
// every query variable, anywhere in the dashboard (rows may nest panels).
func dashboardExprs(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || (k == "query" && strings.HasPrefix(s, "label_values("))) {
				out = append(out, s)
				continue
			}
			out = append(out, dashboardExprs(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, dashboardExprs(x)...)
		}
	}
	return out
}

var labelValues = regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*\w+\s*\)$`)

// metricNames parses a dashboard expression, Grafana's variables
// replaced by values of the right type, and returns the metric names its
// selectors read.
func metricNames(expr string) ([]string, error) {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	expr = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$instance", ".*").Replace(expr)
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// exported scrapes GET /metrics and returns every sample name in it
// (histograms as their _bucket, _sum and _count series).
func exported(base string) (map[string]bool, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	have := map[string]bool{}
	for name, f := range fams {
		if len(f.GetMetric()) == 0 {
			continue
		}
		have[name] = true
		switch f.GetType().String() {
		case "HISTOGRAM":
			have[name+"_bucket"], have[name+"_sum"], have[name+"_count"] = true, true, true
		case "SUMMARY":
			have[name+"_sum"], have[name+"_count"] = true, true
		}
	}
	return have, nil
}

// A typo in a subcommand exits non-zero naming it; before, `tessera placement
// getx` printed the group's help and exited 0.
func TestUnknownSubcommandFails(t *testing.T) {
	for _, args := range [][]string{{"placement", "getx"}, {"repair", "stat"}, {"nodex"}} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("tessera %v: err %v, want a non-zero exit; output:\n%s", args, err, out)
			continue
		}
		if !strings.Contains(string(out), "unknown command") || !strings.Contains(string(out), args[len(args)-1]) {
			t.Errorf("tessera %v: output does not name the unknown command:\n%s", args, out)
		}
	}
	if out, err := exec.Command(binary, "placement").CombinedOutput(); err != nil || !strings.Contains(string(out), "Available Commands") {
		t.Errorf("tessera placement alone: err %v, want its help:\n%s", err, out)
	}
}

// Every counter the node exports ends in _total, as Prometheus' naming
// conventions ask (Prometheus 3 annotates a rate() over a counter
// without it); before, tally's names went out bare.
func TestCountersEndInTotal(t *testing.T) {
	n := startNode(t)
	body := string(n.get(t, "/metrics"))
	counters := 0
	for _, line := range strings.Split(body, "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" && f[3] == "counter" && strings.HasPrefix(f[2], "tessera_") {
			counters++
			require.True(t, strings.HasSuffix(f[2], "_total"), "counter %s", f[2])
		}
	}
	require.Greater(t, counters, 10, "the node exports its counters")
	n.stop()
}
