package node

import (
	"strings"

	"github.com/uber-go/tally/v4"
	promreporter "github.com/uber-go/tally/v4/prometheus"
)

// totalCounters exports every tally counter with the `_total` suffix
// Prometheus' naming conventions ask of counters (and the OpenMetrics
// parser of Prometheus 3 expects: it annotates every rate() over a
// counter without it). Packages keep naming their counters by what they
// count (`samples_written`); the suffix is added here, once, where the
// names leave the process.
type totalCounters struct{ promreporter.Reporter }

func (r totalCounters) AllocateCounter(name string, tags map[string]string) tally.CachedCount {
	if !strings.HasSuffix(name, "_total") {
		name += "_total"
	}
	return r.Reporter.AllocateCounter(name, tags)
}
