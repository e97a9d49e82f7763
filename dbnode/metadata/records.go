package metadata

import (
	"sort"
	"sync"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/remote"
)

// Record is one metadata entry with its metric's name: what travels
// between nodes (node RPC) and into the snapshot file.
type Record struct {
	Metric string
	Entry
}

// Records converts decoded remote write metadata, skipping consecutive
// repeats (a 2.0 request repeats a metric's metadata on every series).
func Records(ms []remote.Metadata, dst []Record) []Record {
	for i := range ms {
		m := &ms[i]
		if i > 0 {
			if p := &ms[i-1]; string(p.Name) == string(m.Name) && p.Type == m.Type &&
				string(p.Help) == string(m.Help) && string(p.Unit) == string(m.Unit) {
				continue
			}
		}
		dst = append(dst, Record{Metric: string(m.Name), Entry: Entry{Type: typeOf(m.Type), Help: string(m.Help), Unit: string(m.Unit)}})
	}
	return dst
}

// AddRecords records each entry as the newest of its metric, in order (so
// a metric's oldest entry goes first, as a snapshot restores them).
func (s *Store) AddRecords(rs []Record) {
	if len(rs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		s.addEntry(r.Metric, r.Entry)
	}
}

// addEntry makes e the newest entry of name. Called with mu held.
func (s *Store) addEntry(name string, e Entry) {
	es, inCur := s.cur[name]
	if inCur && len(es) > 0 && es[0] == e {
		return
	}
	if !inCur {
		es = s.old[name]
	}
	out := make([]Entry, 0, min(len(es)+1, MaxPerMetric))
	out = append(out, e)
	for _, x := range es {
		if x != e && len(out) < MaxPerMetric {
			out = append(out, x)
		}
	}
	s.put(name, out, inCur)
}

// Snapshot returns every entry the store holds, the old generation first
// and each metric's entries oldest first, so that AddRecords of the
// result rebuilds the same store.
func (s *Store) Snapshot() []Record {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Record
	for _, gen := range []map[string][]Entry{s.old, s.cur} {
		names := make([]string, 0, len(gen))
		for n := range gen {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			es := gen[n]
			for i := len(es) - 1; i >= 0; i-- {
				out = append(out, Record{Metric: n, Entry: es[i]})
			}
		}
	}
	return out
}

// Merge adds the entries of src to dst, per metric a set union: dst's
// entries keep their order, src's new ones follow in theirs. It is how
// the answers of several nodes to /api/v1/metadata become one.
func Merge(dst, src map[string][]Entry) {
	for name, es := range src {
		have := dst[name]
		for _, e := range es {
			dup := false
			for _, h := range have {
				if h == e {
					dup = true
					break
				}
			}
			if !dup {
				have = append(have, e)
			}
		}
		dst[name] = have
	}
}

// Limit applies /api/v1/metadata's limits to a merged answer as Query
// does to one store's: at most limit metrics (negative: no limit), the
// first by name, and limitPerMetric entries each (0 or negative: no limit).
func Limit(m map[string][]Entry, limit, limitPerMetric int) map[string][]Entry {
	if limitPerMetric > 0 {
		for n, es := range m {
			if len(es) > limitPerMetric {
				m[n] = es[:limitPerMetric]
			}
		}
	}
	if limit < 0 || len(m) <= limit {
		return m
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names[limit:] {
		delete(m, n)
	}
	return m
}

// Resend decides which metadata a coordinator forwards to the cluster:
// an entry it forwarded less than Every ago is not sent again. Remote
// write 2.0 carries every series' metadata in every request; forwarding
// all of it would cost a node RPC per request for nothing, while sending
// again after Every repairs an owner that missed it (it was down). It
// remembers at most Max metrics and forgets them all past it.
type Resend struct {
	Every time.Duration
	Max   int

	mu   sync.Mutex
	sent map[string]sent
}

type sent struct {
	e  Entry
	at time.Time
}

// Due returns the records of ms to forward now, appended to dst, and
// marks them forwarded. The common case, nothing due, allocates nothing.
func (r *Resend) Due(ms []remote.Metadata, now time.Time, dst []Record) []Record {
	if len(ms) == 0 {
		return dst
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent == nil {
		r.sent = map[string]sent{}
	}
	for i := range ms {
		m := &ms[i]
		if i > 0 {
			if p := &ms[i-1]; string(p.Name) == string(m.Name) && p.Type == m.Type &&
				string(p.Help) == string(m.Help) && string(p.Unit) == string(m.Unit) {
				continue
			}
		}
		if x, ok := r.sent[string(m.Name)]; ok && same(x.e, m) && now.Sub(x.at) < r.Every {
			continue
		}
		e := Entry{Type: typeOf(m.Type), Help: string(m.Help), Unit: string(m.Unit)}
		if len(r.sent) >= max(r.Max, 1) {
			clear(r.sent)
		}
		name := string(m.Name)
		r.sent[name] = sent{e: e, at: now}
		dst = append(dst, Record{Metric: name, Entry: e})
	}
	return dst
}
