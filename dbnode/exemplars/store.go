// Package exemplars keeps the exemplars remote write brings in a bounded
// in-memory ring per node, for /api/v1/query_exemplars.
//
// Like Prometheus' circular exemplar storage (its default size is 100000),
// the ring holds the newest exemplars of all series together: once full,
// each new exemplar takes the place of the oldest. An exemplar equal to
// its series' newest one (same labels, value and timestamp: a sender's
// retry) is not stored twice. Unlike Prometheus, an exemplar older than
// its series' newest is kept too: remote write can deliver out of order,
// and the query filters by time anyway.
package exemplars

import (
	"sort"
	"sync"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/ident"
)

// Item is one exemplar to add: the ID of its series (copied if kept).
type Item struct {
	SeriesID []byte
	Labels   labels.Labels
	V        float64
	T        int64
}

// series is what the ring knows of one series: its labels (decoded from
// its ID once) and the slot of its newest exemplar.
type series struct {
	id     string
	labels labels.Labels
	newest int
}

type slot struct {
	s  *series // nil: empty
	ex exemplar.Exemplar
}

// Store is goroutine safe.
type Store struct {
	mu     sync.RWMutex
	ring   []slot
	next   int
	series map[string]*series
}

// New keeps the newest size exemplars (at least 1).
func New(size int) *Store {
	return &Store{ring: make([]slot, max(size, 1)), series: map[string]*series{}}
}

// Add stores items under one lock and returns how many it stored (the
// others repeated their series' newest exemplar). An item whose series ID
// does not decode is skipped and not counted: IDs come from the decoders,
// which only build valid ones.
func (s *Store) Add(items []Item) int {
	if len(items) == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := 0
	for _, it := range items {
		sr := s.series[string(it.SeriesID)]
		if sr != nil {
			if n := s.ring[sr.newest]; n.s == sr && n.ex.Ts == it.T && n.ex.Value == it.V && labels.Equal(n.ex.Labels, it.Labels) {
				stored++ // already stored: a retry is not a loss
				continue
			}
		} else {
			ls, err := ident.Labels(it.SeriesID)
			if err != nil {
				continue
			}
			sr = &series{id: string(it.SeriesID), labels: ls}
			s.series[sr.id] = sr
		}
		old := &s.ring[s.next]
		if old.s != nil && old.s.newest == s.next && old.s != sr {
			// The oldest exemplar was its series' last one.
			delete(s.series, old.s.id)
		}
		*old = slot{s: sr, ex: exemplar.Exemplar{Labels: it.Labels, Value: it.V, Ts: it.T, HasTs: true}}
		sr.newest = s.next
		s.next = (s.next + 1) % len(s.ring)
		stored++
	}
	return stored
}

// Select answers /api/v1/query_exemplars: the exemplars in [start, end]
// (ms) of every series matching all matchers of any of the sets, grouped
// by series (sorted by labels), each series' exemplars oldest first.
func (s *Store) Select(start, end int64, matcherSets ...[]*labels.Matcher) []exemplar.QueryResult {
	s.mu.RLock()
	defer s.mu.RUnlock()
	byLabels := map[*series]int{}
	out := make([]exemplar.QueryResult, 0)
	matches := map[*series]bool{}
	for k := range s.ring {
		sl := &s.ring[(s.next+k)%len(s.ring)] // oldest first
		if sl.s == nil || sl.ex.Ts < start || sl.ex.Ts > end {
			continue
		}
		ok, seen := matches[sl.s]
		if !seen {
			ok = matchAny(sl.s.labels, matcherSets)
			matches[sl.s] = ok
		}
		if !ok {
			continue
		}
		i, found := byLabels[sl.s]
		if !found {
			i = len(out)
			byLabels[sl.s] = i
			out = append(out, exemplar.QueryResult{SeriesLabels: sl.s.labels})
		}
		out[i].Exemplars = append(out[i].Exemplars, sl.ex)
	}
	for i := range out {
		sort.SliceStable(out[i].Exemplars, func(a, b int) bool { return out[i].Exemplars[a].Ts < out[i].Exemplars[b].Ts })
	}
	sort.Slice(out, func(a, b int) bool { return labels.Compare(out[a].SeriesLabels, out[b].SeriesLabels) < 0 })
	return out
}

func matchAny(ls labels.Labels, sets [][]*labels.Matcher) bool {
	for _, ms := range sets {
		ok := true
		for _, m := range ms {
			if !m.Matches(ls.Get(m.Name)) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// Len is the number of exemplars held.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for i := range s.ring {
		if s.ring[i].s != nil {
			n++
		}
	}
	return n
}

// Snapshot returns the exemplars held, oldest first, so that Add of the
// result into an empty store of the same size rebuilds the ring.
func (s *Store) Snapshot() []Item {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Item
	for k := range s.ring {
		sl := &s.ring[(s.next+k)%len(s.ring)]
		if sl.s == nil {
			continue
		}
		out = append(out, Item{SeriesID: []byte(sl.s.id), Labels: sl.ex.Labels, V: sl.ex.Value, T: sl.ex.Ts})
	}
	return out
}
