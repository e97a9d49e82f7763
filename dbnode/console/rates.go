package console

import (
	"sync"
	"time"
)

// The counters the rates are computed from (this node's own metrics).
const (
	// MetricIngest counts samples received by this node's remote write.
	MetricIngest = "tessera_http_remote_write_samples_total"
	// MetricStored counts samples this node's storage wrote (its own and
	// replicas' shares).
	MetricStored = "tessera_storage_samples_written_total"
	// MetricQueries counts PromQL API requests served by this node.
	MetricQueries = "tessera_query_requests_total"
)

// Rates are per-second rates of this node's counters between two polls of
// the console (any client's). Known is false until two readings exist.
type Rates struct {
	Known                  bool    `json:"known"`
	WindowSeconds          float64 `json:"windowSeconds"`
	IngestSamplesPerSecond float64 `json:"ingestSamplesPerSecond"`
	StoredSamplesPerSecond float64 `json:"storedSamplesPerSecond"`
	QueriesPerSecond       float64 `json:"queriesPerSecond"`
	Error                  string  `json:"error,omitempty"`
}

// minRateWindow is the shortest interval a rate is computed over: with
// several pages open the polls come closer together, and the metrics
// reporter updates the counters once a second.
const minRateWindow = 1500 * time.Millisecond

// rateKeeper remembers the previous reading of the counters.
type rateKeeper struct {
	mu   sync.Mutex
	at   time.Time
	prev map[string]float64
	last Rates
}

func (k *rateKeeper) update(now time.Time, read func() (map[string]float64, error)) Rates {
	if read == nil {
		return Rates{Error: "no metrics"}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.prev != nil && now.Sub(k.at) < minRateWindow {
		return k.last
	}
	cur, err := read()
	if err != nil {
		return Rates{Error: err.Error()}
	}
	r := Rates{}
	if k.prev != nil {
		dt := now.Sub(k.at).Seconds()
		r = Rates{Known: true, WindowSeconds: dt,
			IngestSamplesPerSecond: perSecond(cur[MetricIngest], k.prev[MetricIngest], dt),
			StoredSamplesPerSecond: perSecond(cur[MetricStored], k.prev[MetricStored], dt),
			QueriesPerSecond:       perSecond(cur[MetricQueries], k.prev[MetricQueries], dt),
		}
	}
	k.at, k.prev, k.last = now, cur, r
	return r
}

// perSecond is the counter's increase over dt; a counter that went down
// (a restart cannot happen in-process, but a series can disappear) counts
// from zero, as Prometheus' rate() does.
func perSecond(cur, prev, dt float64) float64 {
	if dt <= 0 {
		return 0
	}
	if cur < prev {
		return cur / dt
	}
	return (cur - prev) / dt
}
