package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/bench"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/promapi"
)

// benchSeries is how many series the pages' test writes with the bench
// workload (bench_0_total, bench_1..bench_3, 100 each).
const benchSeries = 400

// writeBench runs `tessera bench`'s workload against url: benchSeries
// series, 60 samples 5 s apart ending now.
func writeBench(t *testing.T, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := bench.Write(ctx, bench.Options{URL: url, Series: benchSeries, Samples: 60, Interval: 5 * time.Second,
		Batch: 4000, Concurrency: 2, Start: time.Now().Add(-5 * time.Minute).UnixMilli(), Metric: "bench"}, io.Discard)
	require.NoError(t, err)
}

func getTSDBStatus(url string) (promapi.TSDBStatus, error) {
	var out struct {
		Status string             `json:"status"`
		Data   promapi.TSDBStatus `json:"data"`
	}
	resp, err := http.Get(url + "/api/v1/status/tsdb?limit=5")
	if err != nil {
		return out.Data, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return out.Data, fmt.Errorf("status/tsdb: %d %s", resp.StatusCode, b)
	}
	return out.Data, json.Unmarshal(b, &out)
}

// otherNamespace is the second namespace of the pages' test, written
// with otherSeries series of the bench workload (metric names other_*).
const (
	otherNamespace = "second"
	otherSeries    = 40
)

// TestCardinalityPageAcrossTheCluster writes the bench workload to a
// three-node cluster (replica factor 3) with two namespaces and reads
// /api/v1/status/tsdb on another node: every series counted once, not
// once per replica, and each namespace on its own. Then the console's
// cardinality and query pages in headless Chromium: the counts the
// cardinality page draws (per node and namespace too), the query page's
// graph of a bench metric, its table view, its error for a bad
// expression, and a query cancelled while it runs.
func TestCardinalityPageAcrossTheCluster(t *testing.T) {
	_, nodes, _ := clusterNWith(t, 3, func(c *config.Config) {
		second := c.Namespaces[0]
		second.Name = otherNamespace
		c.Namespaces = append(c.Namespaces, second)
	})
	writeBench(t, nodes[0].url())
	writeOther := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := bench.Write(ctx, bench.Options{URL: nodes[2].url() + "/api/v1/prom/remote/write?namespace=" + otherNamespace,
			Series: otherSeries, Samples: 10, Interval: 5 * time.Second, Batch: 4000, Concurrency: 1,
			Start: time.Now().Add(-time.Minute).UnixMilli(), Metric: "other"}, io.Discard)
		require.NoError(t, err)
	}
	writeOther()
	var st promapi.TSDBStatus
	eventually(t, time.Minute, "the bench series counted once each", func() error {
		var err error
		if st, err = getTSDBStatus(nodes[1].url()); err != nil {
			return err
		}
		if st.HeadStats.NumSeries != benchSeries {
			// A block boundary may have passed since the write: write
			// again so the series have samples in the block of now.
			writeBench(t, nodes[0].url())
			return fmt.Errorf("numSeries %d, want %d", st.HeadStats.NumSeries, benchSeries)
		}
		if len(st.Namespaces) != 2 || st.Namespaces[1].NumSeries != otherSeries {
			writeOther()
			return fmt.Errorf("namespaces %+v, want %s with %d series second", st.Namespaces, otherNamespace, otherSeries)
		}
		return nil
	})
	require.Len(t, st.SeriesCountByMetricName, 4)
	for _, s := range st.SeriesCountByMetricName {
		require.Equal(t, uint64(benchSeries/4), s.Value, s.Name)
	}
	require.Equal(t, promapi.Stat{Name: "series", Value: benchSeries}, st.LabelValueCountByLabelName[0])
	byShard := 0
	for _, n := range st.SeriesCountByShard {
		byShard += n
	}
	require.Equal(t, benchSeries, byShard)
	require.Equal(t, "default", st.Namespaces[0].Namespace)
	require.Equal(t, benchSeries, st.Namespaces[0].NumSeries)
	require.Equal(t, otherNamespace, st.Namespaces[1].Namespace)
	otherByShard := 0
	for _, n := range st.Namespaces[1].SeriesCountByShard {
		otherByShard += n
	}
	require.Equal(t, otherSeries, otherByShard)

	bin := chromiumPath(t)
	url := nodes[1].url() + "/console/cardinality.html"
	b := startBrowser(t, bin, url)
	var page struct {
		NumSeries   string                    `json:"numSeries"`
		Metrics     map[string]int            `json:"metrics"`
		PerNode     map[string]int            `json:"perNode"`
		PerNodeNs   map[string]map[string]int `json:"perNodeNs"`
		NamespaceOf map[string]int            `json:"namespaceTotals"`
	}
	b.eval(t, pageHelpers+`(async () => {
  await until(() => document.body.dataset.loaded === "1", "the cardinality page to load");
  const rows = (id) => Object.fromEntries([...document.querySelectorAll("#" + id + " tr")].map((r) => [r.dataset.name, Number(r.dataset.value)]));
  const perNodeNs = {}, namespaceTotals = {};
  for (const c of document.querySelectorAll("#node-namespace-table td[data-namespace]")) {
    if (!c.dataset.node) { namespaceTotals[c.dataset.namespace] = Number(c.dataset.value); continue; }
    (perNodeNs[c.dataset.node] ||= {})[c.dataset.namespace] = Number(c.dataset.value);
  }
  return { numSeries: document.body.dataset.numSeries, metrics: rows("metric-table"), perNode: rows("per-node-table"), perNodeNs, namespaceTotals };
})()`, &page)
	require.Equal(t, fmt.Sprint(benchSeries), page.NumSeries)
	require.Equal(t, map[string]int{"bench_0_total": 100, "bench_1": 100, "bench_2": 100, "bench_3": 100}, page.Metrics)
	// Replica factor 3 on three nodes: each holds a copy of every series,
	// of both namespaces.
	both := benchSeries + otherSeries
	require.Equal(t, map[string]int{"node1": both, "node2": both, "node3": both}, page.PerNode)
	perNs := map[string]int{"default": benchSeries, otherNamespace: otherSeries}
	require.Equal(t, map[string]map[string]int{"node1": perNs, "node2": perNs, "node3": perNs}, page.PerNodeNs)
	require.Equal(t, perNs, page.NamespaceOf)
	screenshot(t, bin, url, "cardinality.png")

	// The query page graphs a bench counter's rate per group: one SVG
	// line per group, drawn by the page's own code.
	qurl := nodes[1].url() + "/console/query.html?expr=" + "sum+by+(group)+(rate(bench_0_total[1m]))" + "&range=900&view=graph"
	q := startBrowser(t, bin, qurl)
	var graph struct {
		Lines  int    `json:"lines"`
		Legend int    `json:"legend"`
		Error  string `json:"error"`
	}
	q.eval(t, pageHelpers+`(async () => {
  await until(() => document.body.dataset.state === "done" || document.body.dataset.state === "error", "the query to run");
  return { lines: document.querySelectorAll("svg.chart g.series polyline").length,
    legend: document.querySelectorAll(".legend-list li").length, error: document.getElementById("query-error").textContent };
})()`, &graph)
	require.Empty(t, graph.Error)
	require.Equal(t, 4, graph.Legend, "groups 0..3")
	require.GreaterOrEqual(t, graph.Lines, 4)
	screenshot(t, bin, qurl, "query-graph.png")

	// The table view, then a bad expression: the API's error is shown.
	var table struct {
		Rows  int    `json:"rows"`
		Error string `json:"error"`
	}
	q.eval(t, pageHelpers+`(async () => {
  const f = document.getElementById("query-form");
  for (const r of f.view) r.checked = r.value === "table";
  f.expr.value = "bench_1";
  f.requestSubmit();
  await until(() => document.body.dataset.state === "done" && document.getElementById("result-table"), "the table");
  const rows = document.querySelectorAll("#result-table tr").length - 1;
  f.expr.value = "rate(bench_0_total[1m]";
  f.requestSubmit();
  await until(() => document.body.dataset.state === "error", "the error");
  return { rows, error: document.getElementById("query-error").textContent };
})()`, &table)
	require.Equal(t, benchSeries/4, table.Rows)
	require.Contains(t, table.Error, "bad_data")

	// Cancel: the page's request is held (by a fetch that waits for its
	// signal, then asks the node with it, so the real fetch's abort is
	// what the page sees) until the Cancel button is clicked; the page
	// says cancelled, not an error, and the button is disabled again.
	var cancelled struct {
		Enabled  bool   `json:"enabled"`
		State    string `json:"state"`
		Status   string `json:"status"`
		Error    string `json:"error"`
		Disabled bool   `json:"disabled"`
	}
	q.eval(t, pageHelpers+`(async () => {
  const f = document.getElementById("query-form"), button = document.getElementById("cancel");
  const realFetch = window.fetch;
  window.fetch = (url, opts) => new Promise((resolve) => opts.signal.addEventListener("abort", resolve))
    .then(() => realFetch(url, opts));
  f.expr.value = "bench_2";
  f.requestSubmit();
  await until(() => document.body.dataset.state === "running", "the query to start");
  const enabled = !button.disabled;
  button.click();
  await until(() => document.body.dataset.state !== "running", "the query to end");
  window.fetch = realFetch;
  const err = document.getElementById("query-error");
  return { enabled, state: document.body.dataset.state, status: document.getElementById("query-status").textContent,
    error: err.hidden ? "" : err.textContent, disabled: button.disabled };
})()`, &cancelled)
	require.True(t, cancelled.Enabled, "Cancel is enabled while a query runs")
	require.Equal(t, "cancelled", cancelled.State)
	require.Contains(t, cancelled.Status, "cancelled")
	require.Empty(t, cancelled.Error)
	require.True(t, cancelled.Disabled, "Cancel is disabled once nothing runs")
}
