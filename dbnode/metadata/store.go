// Package metadata keeps what remote write says about metrics (type, unit,
// help) per metric name, in memory and bounded, for /api/v1/metadata.
//
// Prometheus keeps metadata per scrape target and answers the distinct
// entries of each metric name; a remote write receiver sees no targets,
// only what senders send (1.0 WriteRequest.metadata every minute, 2.0
// metadata on every series), so this keeps the distinct entries of each
// name, newest first. It is bounded by the number of metric names, in two
// generations like the series cache: when the current one is full it
// becomes the old one and the previous old one is dropped; a name written
// again moves back to the current one. Senders resend metadata (1.0 every
// minute, 2.0 with every sample), so a name that ages out comes back with
// its next write.
package metadata

import (
	"sort"
	"sync"

	"github.com/prometheus/common/model"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
)

// MaxPerMetric bounds the distinct entries kept for one metric name (the
// newest are kept): senders normally agree on a metric's metadata, and a
// name whose help text changes on every write must not grow without end.
const MaxPerMetric = 10

// Entry is one metric's metadata, in Prometheus' API shape.
type Entry struct {
	Type model.MetricType `json:"type"`
	Help string           `json:"help"`
	Unit string           `json:"unit"`
}

// Store is goroutine safe.
type Store struct {
	perGen   int
	mu       sync.RWMutex
	cur, old map[string][]Entry
}

// New keeps the metadata of about maxMetrics metric names (at least 2).
func New(maxMetrics int) *Store {
	perGen := max(maxMetrics/2, 1)
	return &Store{perGen: perGen, cur: make(map[string][]Entry)}
}

// types maps the MetricType numbers of prompb and of the 2.0 types (they
// agree) to Prometheus' names; anything else is unknown.
var types = []model.MetricType{model.MetricTypeUnknown, model.MetricTypeCounter, model.MetricTypeGauge,
	model.MetricTypeHistogram, model.MetricTypeGaugeHistogram, model.MetricTypeSummary,
	model.MetricTypeInfo, model.MetricTypeStateset}

func typeOf(t int32) model.MetricType {
	if t < 0 || int(t) >= len(types) {
		return model.MetricTypeUnknown
	}
	return types[t]
}

func same(e Entry, m *remote.Metadata) bool {
	return e.Type == typeOf(m.Type) && e.Help == string(m.Help) && e.Unit == string(m.Unit)
}

// Add records the metadata of one request, under one lock. The common
// case, a name whose newest entry is the same, costs one map lookup and
// allocates nothing (consecutive repeats of a name, as a 2.0 request
// carries for every series of a metric, are skipped without a lookup).
func (s *Store) Add(ms []remote.Metadata) {
	if len(ms) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ms {
		m := &ms[i]
		if i > 0 {
			if p := &ms[i-1]; string(p.Name) == string(m.Name) && p.Type == m.Type &&
				string(p.Help) == string(m.Help) && string(p.Unit) == string(m.Unit) {
				continue
			}
		}
		es, inCur := s.cur[string(m.Name)]
		if inCur && len(es) > 0 && same(es[0], m) {
			continue
		}
		if !inCur {
			es = s.old[string(m.Name)]
		}
		e := Entry{Type: typeOf(m.Type), Help: string(m.Help), Unit: string(m.Unit)}
		// Newest first, without a duplicate of e.
		out := make([]Entry, 0, min(len(es)+1, MaxPerMetric))
		out = append(out, e)
		for _, x := range es {
			if x != e && len(out) < MaxPerMetric {
				out = append(out, x)
			}
		}
		s.put(string(m.Name), out, inCur)
	}
}

// put stores es under name in the current generation, turning it over
// when full.
func (s *Store) put(name string, es []Entry, inCur bool) {
	if !inCur && len(s.cur) >= s.perGen {
		s.old, s.cur = s.cur, make(map[string][]Entry, s.perGen)
	}
	delete(s.old, name)
	s.cur[name] = es
}

// Query answers /api/v1/metadata: the entries of metric (every metric
// when empty), at most limit metrics (negative: no limit) and
// limitPerMetric entries each (0 or negative: no limit), as Prometheus
// reads its parameters. Names are visited in order, so a limit gives the
// same answer twice.
func (s *Store) Query(metric string, limit, limitPerMetric int) map[string][]Entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]Entry{}
	add := func(name string, es []Entry) {
		if limitPerMetric > 0 && len(es) > limitPerMetric {
			es = es[:limitPerMetric]
		}
		if len(es) > 0 {
			out[name] = append([]Entry(nil), es...)
		}
	}
	if metric != "" {
		es, ok := s.cur[metric]
		if !ok {
			es = s.old[metric]
		}
		add(metric, es)
		return out
	}
	names := make([]string, 0, len(s.cur)+len(s.old))
	for n := range s.cur {
		names = append(names, n)
	}
	for n := range s.old {
		if _, ok := s.cur[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if limit >= 0 && len(out) >= limit {
			break
		}
		es, ok := s.cur[n]
		if !ok {
			es = s.old[n]
		}
		add(n, es)
	}
	return out
}

// Len is the number of metric names kept.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.cur) + len(s.old)
}
