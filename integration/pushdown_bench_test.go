package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"
)

// BenchmarkClusterSmallQuery prices the fixed cost of a small fan-out
// query: a three-node RF 3 cluster in this process holding 200 series,
// queried through node 1 (pushed down: each node computes a third of the
// shards). What a query costs beyond its data (routing, per-part RPCs,
// goroutines, the replicas' request decoding) dominates here. It reports
// the process's CPU (user+sys, every node's) per query, cpu-us/query: a
// base and a branch test binary alternated give an A/B of that cost.
func BenchmarkClusterSmallQuery(b *testing.B) {
	_, nodes, _ := clusterNWith(b, 3, nil)
	d := newDataset()
	now := time.Now().UnixMilli()
	for j := 0; j < 6; j++ {
		if err := d.write(nodes[j%3].url(), 0, 200, now-int64(6-j)*10_000); err != nil {
			b.Fatal(err)
		}
	}
	get := func(q string) error {
		p := url.Values{"query": {q}, "start": {ms(now - 40_000)}, "end": {ms(now)}, "step": {"5"}}
		resp, err := http.Get(nodes[0].url() + "/api/v1/query_range?" + p.Encode())
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d %s", q, resp.StatusCode, body)
		}
		return nil
	}
	for _, q := range []string{`count(it_metric)`, `sum by (job) (rate(it_metric[1m]))`, `count(it_metric{series=~"1.*|2.*|3.*"})`} {
		b.Run(q, func(b *testing.B) {
			eventually(b, 60*time.Second, "pushdowns answered", func() error { return get(q) })
			before := cpuTime()
			for b.Loop() {
				if err := get(q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-us/query")
		})
	}
}

// cpuTime is this process's user+sys CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
