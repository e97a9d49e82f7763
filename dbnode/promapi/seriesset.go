package promapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// checkContextEvery is how many series a set walks between context checks.
const checkContextEvery = 128

// seriesSet is the lazy result of one Select.
//
// Like Prometheus' TSDB it reports only series that have a sample in
// [start, end]: the tag index answers at block granularity, so Next reads
// the first sample of each candidate and skips series without one. That
// sample is handed to the series' iterator, never read twice.
type seriesSet struct {
	ctx        context.Context
	b          query.Reader
	ns         string
	q          *querier // counts the series fetched against the limit
	matchers   []*labels.Matcher
	start, end int64
	sorted     bool
	limit      int

	loaded  bool
	entries []candidate
	i       int
	n       int // series returned so far
	cur     *series
	err     error
	// lb decodes the labels of every series the set returns: one builder
	// for all of them (the label sets are copied out of it).
	lb labels.ScratchBuilder
	// warnings name the series left out: their stored data is damaged, or
	// their ID cannot become a Prometheus label set (stored before the
	// label limits refused such series): the query answers the others.
	warnings annotations.Annotations
}

// candidate is a series the index matched; lset is decoded up front only
// when the set must be sorted, else on demand.
type candidate struct {
	it   tstorage.SeriesIterator
	lset labels.Labels
}

func (s *seriesSet) load() error {
	s.loaded = true
	its, err := s.b.Query(s.ctx, s.ns, s.matchers, s.start, s.end)
	var partial *tstorage.PartialError
	if errors.As(err, &partial) {
		// Damaged stored data cost only its own series: answer with the
		// others and say which are missing, as Prometheus does for a
		// partial answer (warnings in the response).
		for _, w := range partial.Warnings(maxDamageWarnings) {
			s.warnings.Add(errors.New(w))
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("query %v in [%d, %d]: %w", s.matchers, s.start, s.end, err)
	}
	if q := s.q; q != nil {
		if err := q.limits.CheckFetchedSeries(int(q.fetched.Add(int64(len(its))))); err != nil {
			return err
		}
	}
	s.entries = make([]candidate, 0, len(its))
	for _, it := range its {
		c := candidate{it: it}
		if s.sorted {
			if c.lset, err = ident.LabelsWith(&s.lb, it.ID); err != nil {
				s.skip(it.ID, err)
				continue
			}
		}
		s.entries = append(s.entries, c)
	}
	if s.sorted {
		slices.SortFunc(s.entries, func(a, b candidate) int { return labels.Compare(a.lset, b.lset) })
	}
	return nil
}

func (s *seriesSet) Next() bool {
	if s.err != nil {
		return false
	}
	if !s.loaded {
		if s.err = s.load(); s.err != nil {
			return false
		}
	}
	if s.limit > 0 && s.n >= s.limit {
		return false
	}
	for ; s.i < len(s.entries); s.i++ {
		if s.i%checkContextEvery == 0 {
			if s.err = s.ctx.Err(); s.err != nil {
				return false
			}
		}
		e := &s.entries[s.i]
		src := e.it.Floats()
		var first chunkenc.Iterator
		if e.it.Histograms != nil {
			// A series with native histograms (and maybe floats too).
			m := newSampleIterator(e.it.Samples())
			if m.Peek() == chunkenc.ValNone {
				if s.err = m.Err(); s.err != nil {
					s.err = fmt.Errorf("read series %q: %w", e.it.ID, s.err)
					return false
				}
				continue
			}
			first = m
		} else if !src.Next() {
			if s.err = src.Err(); s.err != nil {
				s.err = fmt.Errorf("read series %q: %w", e.it.ID, s.err)
				return false
			}
			continue // no sample in range
		}
		lset := e.lset
		if !s.sorted {
			var err error
			if lset, err = ident.LabelsWith(&s.lb, e.it.ID); err != nil {
				s.skip(e.it.ID, err)
				*e = candidate{}
				continue
			}
		}
		cur := &series{set: s, lset: lset, first: first}
		if first == nil {
			// The float iterator lives in the series: one allocation.
			t, v := src.At()
			cur.peeked = peekedIterator(src, t, v)
			cur.first = &cur.peeked
		}
		s.cur = cur
		*e = candidate{} // the set forgets it; the series owns it now
		s.i++
		s.n++
		return true
	}
	return false
}

func (s *seriesSet) At() storage.Series                { return s.cur }
func (s *seriesSet) Err() error                        { return s.err }
func (s *seriesSet) Warnings() annotations.Annotations { return s.warnings }

// maxDamageWarnings bounds the series a query names as left out for
// damaged data; one more warning counts the rest.
const maxDamageWarnings = 10

// skip leaves out a series whose ID does not decode to a label set,
// with a warning naming it, instead of failing (or, before ErrLabelTooLong,
// corrupting) the whole query.
func (s *seriesSet) skip(id []byte, err error) {
	s.warnings = s.warnings.Add(fmt.Errorf("series skipped: %w (ID %.120q..., %d bytes)", err, id, len(id)))
}

// series is one selected series. Its first Iterator streams the samples
// the backend already opened; the engine iterates each series once, but the
// storage.Series contract allows more, so later calls read the series
// again from the backend.
type series struct {
	set   *seriesSet
	lset  labels.Labels
	first chunkenc.Iterator // nil once handed out
	// peeked backs first for a float-only series, whose first sample
	// Next already read.
	peeked floatIterator
}

func (s *series) Labels() labels.Labels { return s.lset }

func (s *series) Iterator(reuse chunkenc.Iterator) chunkenc.Iterator {
	if it := s.first; it != nil {
		s.first = nil
		return it
	}
	it := s.reread()
	if it.Histograms != nil {
		return newSampleIterator(it.Samples())
	}
	return newFloatIterator(reuse, it.Floats())
}

// reread fetches this series' samples again, selecting it by all of its
// labels and keeping the one series whose ID is exactly ours.
func (s *series) reread() tstorage.SeriesIterator {
	set := s.set
	id := ident.FromLabels(s.lset)
	ms := make([]*labels.Matcher, 0, s.lset.Len())
	s.lset.Range(func(l labels.Label) {
		ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, l.Name, l.Value))
	})
	its, err := set.b.Query(set.ctx, set.ns, ms, set.start, set.end)
	if err != nil {
		return tstorage.SeriesIterator{Values: errIterator{fmt.Errorf("re-read series %s: %w", s.lset, err)}}
	}
	for _, it := range its {
		if bytes.Equal(it.ID, id) {
			return it
		}
	}
	return tstorage.SeriesIterator{Values: errIterator{}} // gone since (expired): no samples
}
