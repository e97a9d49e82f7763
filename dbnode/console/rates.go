package console

import (
	"context"
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

// RateWindow is what the console's rates average over ("last 1 m").
const RateWindow = time.Minute

// DefaultSampleEvery is how often the console reads its node's counters
// for the rates when Options.SampleEvery is not set.
const DefaultSampleEvery = 5 * time.Second

// Rates are per-second rates of this node's counters over the last
// RateWindow, from readings a background ticker takes (Console.Run), not
// from page views: every viewer sees the same numbers, and no viewer's
// polling shortens or stretches the window. Until a full window of
// readings exists WindowSeconds says how much the rates cover; Known is
// false until two readings exist.
type Rates struct {
	Known                  bool    `json:"known"`
	WindowSeconds          float64 `json:"windowSeconds"`
	IngestSamplesPerSecond float64 `json:"ingestSamplesPerSecond"`
	StoredSamplesPerSecond float64 `json:"storedSamplesPerSecond"`
	QueriesPerSecond       float64 `json:"queriesPerSecond"`
	Error                  string  `json:"error,omitempty"`
}

type reading struct {
	at   time.Time
	vals map[string]float64
}

// rateRing keeps the readings of the last RateWindow (and the one just
// before it, the window's base), oldest first.
type rateRing struct {
	mu       sync.Mutex
	readings []reading
	err      string // the last reading's error, "" when it worked
}

// take reads the counters once and drops readings the window no longer
// needs.
func (k *rateRing) take(now time.Time, read func() (map[string]float64, error)) {
	if read == nil {
		k.mu.Lock()
		k.err = "no metrics"
		k.mu.Unlock()
		return
	}
	vals, err := read()
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.err = err.Error()
		return
	}
	k.err = ""
	k.readings = append(k.readings, reading{at: now, vals: vals})
	if b := k.base(); b > 0 {
		k.readings = append(k.readings[:0], k.readings[b:]...)
	}
}

// base is the index of the newest reading at least RateWindow older than
// the newest one, or 0 (the oldest) while less than a window is kept.
func (k *rateRing) base() int {
	newest := k.readings[len(k.readings)-1].at
	b := 0
	for i, r := range k.readings {
		if newest.Sub(r.at) >= RateWindow {
			b = i
		}
	}
	return b
}

// rates compares the newest reading with the window's base.
func (k *rateRing) rates() Rates {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != "" {
		return Rates{Error: k.err}
	}
	if len(k.readings) < 2 {
		return Rates{}
	}
	cur, prev := k.readings[len(k.readings)-1], k.readings[k.base()]
	dt := cur.at.Sub(prev.at).Seconds()
	return Rates{Known: true, WindowSeconds: dt,
		IngestSamplesPerSecond: perSecond(cur.vals[MetricIngest], prev.vals[MetricIngest], dt),
		StoredSamplesPerSecond: perSecond(cur.vals[MetricStored], prev.vals[MetricStored], dt),
		QueriesPerSecond:       perSecond(cur.vals[MetricQueries], prev.vals[MetricQueries], dt),
	}
}

// Run reads the node's counters every Options.SampleEvery until ctx ends,
// feeding the rates. Without it the rates stay unknown.
func (c *Console) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.SampleEvery)
	defer t.Stop()
	for {
		c.ring.take(c.opts.Now(), c.opts.Counters)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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
