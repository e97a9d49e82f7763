package promapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/schema"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/kahansum"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// errFallback asks the API to run the query again without the fast path:
// a selected series holds something fastEval does not compute the way
// the engine does (native histograms).
var errFallback = errors.New("fast path declined: evaluate with the engine")

// fastChunk is how many series a worker takes at a time: large enough
// that the shared counter is not contended, small enough that the
// workers finish together.
const fastChunk = 64

// fastRange is the evaluation a query's marked selectors compute: the
// query's steps, how many goroutines may compute them and the engine's
// samples limit.
type fastRange struct {
	marker          string
	start, end, stp int64 // ms; stp 0 for an instant query
	lookback        int64 // ms, the query's lookback delta
	parallelism     int
	maxSamples      int
	stats           *fastStats
	// engine evaluates a selection holding native histograms over the
	// series already read (engineset.go): the plain engine, without the
	// API's concurrency slots (the query calling it holds one). Nil
	// (Evaluate, on a replica): such a selection is declined.
	engine *promql.Engine
	opts   promql.QueryOpts // the query's, for engine
	// handover receives the reads the fast path declined before decoding
	// them, for the plain engine's run of the query; nil on a replica.
	handover *handover
}

// fastStats count the fast path's work, for tests and operators.
type fastStats struct {
	computed atomic.Int64 // marked selectors answered by the fast path
	declined atomic.Int64 // queries handed back to the engine (errFallback)
	// aggregated counts the computed selectors that stood for a sum or
	// count (fastSet.aggregate).
	aggregated atomic.Int64
	binops     atomic.Int64 // binary operators computed (fastbinop.go)
	// pushed counts the aggregations a query.Pusher answered (Evaluate
	// where the data lives) instead of raw series.
	pushed atomic.Int64
	// engine counts the selections holding native histograms the engine
	// computed over the fast path's read (engineset.go).
	engine atomic.Int64
}

// steps is the number of evaluation steps.
func (r *fastRange) steps() int {
	if r.stp <= 0 {
		return 1
	}
	return int((r.end-r.start)/r.stp) + 1
}

// fastSet is the SeriesSet of a marked selector: one precomputed series
// per selected series with at least one value, in the backend's order
// (the order the engine would have evaluated the call in), computed on
// the first Next.
type fastSet struct {
	ctx      context.Context
	q        *querier
	spec     fastSpec
	matchers []*labels.Matcher
	sorted   bool // by labels, as Select was asked (the engine asks unsorted)
	// unsorted: the set's own read asked the index's ref order (a count:
	// computed here, its groups are then ordered by their smallest ID,
	// as in the ID order the read otherwise has, countGroups.byID; a
	// replica's partial groups have no order). A read handed to the
	// engine is sorted by ID first.
	unsorted bool
	// partial, when set (Evaluate, with an aggregation), receives the
	// groups' partial aggregates instead of out.
	partial *query.Result
	// digestOnly (with partial): the read's samples are hashed into
	// partial.Digest and nothing is computed (digest.go).
	digestOnly bool

	// haveRead is set once read has read its (the selected series, not
	// yet decoded), key and readErr (the read's own error, for a handover).
	haveRead bool
	its      []tstorage.SeriesIterator
	key      string
	readErr  error

	loaded   bool
	out      []fastSeries
	i        int
	err      error
	warnings annotations.Annotations
}

type fastSeries struct {
	lset labels.Labels
	// vals are the values at steps first, first+1, ...: a StaleNaN where
	// a step has none (so the engine's lookback does not carry the value
	// before over it), one after the last value unless it is the last
	// step. Timestamps follow from the index: half the memory of FPoints.
	vals  []float64
	first int
	// n is the number of step values (len(vals)), kept when a count
	// computed in the workers (countGroups) has taken the values.
	n   int
	win int // the most samples one of its windows holds
	// err is the series' read error after some samples: the engine meets
	// it evaluating the series, through its iterator.
	err error
	// hists, when not nil, holds a native histogram value at the steps
	// where one is not nil (vals is then ignored there): a selection
	// holding histograms is computed by the engine (engineSet).
	hists []*histogram.FloatHistogram
}

func (s *fastSet) Next() bool {
	if s.err != nil {
		return false
	}
	if !s.loaded {
		s.loaded = true
		if s.err = s.load(); s.err != nil {
			return false
		}
		s.i = -1
	}
	s.i++
	return s.i < len(s.out)
}

func (s *fastSet) At() storage.Series { return s.q.fast.series(&s.out[s.i]) }

// series is fs as the engine reads it: its step values from its first
// step on.
func (r *fastRange) series(fs *fastSeries) *precomputed {
	return &precomputed{lset: fs.lset, vals: fs.vals, hists: fs.hists, t0: r.start + int64(fs.first)*r.stp, stp: r.stp, err: fs.err}
}

func (s *fastSet) Err() error                        { return s.err }
func (s *fastSet) Warnings() annotations.Annotations { return s.warnings }

// read reads the set's series once, decoding none of their samples.
func (s *fastSet) read() error {
	if s.haveRead {
		return nil
	}
	s.haveRead = true
	q, r := s.q, s.q.fast
	rng := s.spec.Range.Milliseconds()
	if s.spec.Func == query.FuncSelect {
		rng = r.lookback
	}
	// The engine's selection: (start-range, end], its hints starting one
	// ms after start-range (getTimeRangesForSelector); the same range, so
	// that errors naming it read the same, and so that a read handed over
	// (handover.go) is the one the engine's selector asks for.
	from := r.start - rng + 1
	// Streams: each worker decodes its series with one StreamReader,
	// and a read handed over is read through SeriesIterator.Floats.
	its, err := query.QueryStreams(s.ctx, q.b, q.ns, s.matchers, from, r.end, s.unsorted)
	s.key, s.readErr = readKey(q.ns, s.matchers, from, r.end), err
	var partial *tstorage.PartialError
	if errors.As(err, &partial) {
		for _, w := range partial.Warnings(maxDamageWarnings) {
			s.warnings.Add(errors.New(w))
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("query %v in [%d, %d]: %w", s.matchers, from, r.end, err)
	}
	if err := q.limits.CheckFetchedSeries(int(q.fetched.Add(int64(len(its))))); err != nil {
		return err
	}
	s.its = its
	return nil
}

// precheck decides, from the series list the read returned and before a
// sample of it is decoded, whether the fast path declines the set
// (errFallback); byEngine reports a set holding native histograms that the
// engine computes over the read instead (engineOK: a one-node query whose
// set stands for an expression the engine can evaluate). extra is the
// step values others will add to the query's (a binary operator's
// results), besides this set's.
func (s *fastSet) precheck(engineOK bool, extra int) (byEngine bool, err error) {
	q, r := s.q, s.q.fast
	if hasHistograms(s.its) {
		if engineOK && r.engine != nil && s.spec.src != "" && s.partial == nil {
			return true, nil
		}
		return false, errFallback
	}
	// The engine holds every output step value at once (and copies them
	// into its matrix): past half its samples limit, let it evaluate the
	// query alone. A series has at most one value a step.
	if int(q.fastPoints.Load())+len(s.its)*r.steps()+extra > r.maxSamples/2 {
		return false, errFallback
	}
	if s.spec.Func != query.FuncSelect && mayCollide(s.its, r.parallelism) {
		// The engine merges, or refuses ("vector cannot contain metrics
		// with the same labelset"), outputs of a function that are equal
		// once the name and metadata labels are dropped; a vector
		// selector's series are never checked: let the engine evaluate
		// the call itself.
		return false, errFallback
	}
	return false, nil
}

// mayCollide reports whether two of its series have equal label sets once
// the name and the metadata labels (__type__, __unit__) are dropped, as a
// function's outputs are: only possible when one of them has a metadata
// label, which its ID's bytes show without decoding the labels. The IDs
// are looked through on up to procs goroutines: a million of them took a
// tenth of a second on one.
func mayCollide(its []tstorage.SeriesIterator, procs int) bool {
	var meta atomic.Bool
	parts := max(1, min(procs, len(its)/4096))
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*len(its)/parts, (p+1)*len(its)/parts
		wg.Go(func() {
			for i := lo; i < hi && (i%1024 != 0 || !meta.Load()); i++ {
				if bytes.Contains(its[i].ID, []byte("__type__")) || bytes.Contains(its[i].ID, []byte("__unit__")) {
					meta.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	if !meta.Load() {
		return false
	}
	var (
		lb   labels.ScratchBuilder
		outs = make([]fastSeries, 0, len(its))
	)
	for i := range its {
		lset, err := ident.LabelsWith(&lb, its[i].ID)
		if err != nil {
			continue // skipped with a warning, by the engine as by the fast path
		}
		outs = append(outs, fastSeries{lset: lset.DropReserved(schema.IsMetadataLabel)})
	}
	return sameLabelset(outs)
}

// load reads the selected series (unless a binary operator read them
// first), decides whether to decline them before decoding any, and
// computes them on up to parallelism goroutines. A set declined hands its
// read over to the plain engine's run of the query (handover.go).
func (s *fastSet) load() error {
	q, r := s.q, s.q.fast
	// A function over a selection that may hold several metric names:
	// its outputs, named no more, may be equal (checked below, over all
	// of them). Replicas do not answer it, as each sees only its own
	// series: the coordinator reads them raw.
	manyNames := s.spec.Func != query.FuncSelect && !oneName(s.matchers)
	if manyNames && s.partial != nil {
		return errFallback
	}
	if p, ok := q.b.(query.Pusher); ok && s.partial == nil && !s.haveRead && !manyNames {
		if done, err := s.loadPushed(p); done || err != nil {
			return err
		}
	}
	// A count's answer depends on the order of its series only through
	// the order of its groups, which the workers take from each group's
	// smallest ID: its own read (not a binary operator's) may come in the
	// index's ref order, unsorted. A replica's partial groups are in no
	// order at all (query.Result).
	s.unsorted = !s.haveRead && counted(s.spec.Agg)
	if err := s.read(); err != nil {
		return err
	}
	byEngine, err := s.precheck(true, 0)
	its := s.its
	s.its = nil
	if s.unsorted && (err != nil || byEngine) {
		// The engine reads the set in ID order, as if read sorted.
		slices.SortFunc(its, func(a, b tstorage.SeriesIterator) int { return bytes.Compare(a.ID, b.ID) })
	}
	if err != nil {
		if errors.Is(err, errFallback) {
			r.handover.keep(s.key, its, s.readErr)
		}
		return err
	}
	if byEngine {
		if err := s.loadEngine(its); err != nil {
			return err
		}
		if s.sorted {
			slices.SortFunc(s.out, func(a, b fastSeries) int { return labels.Compare(a.lset, b.lset) })
		}
		return nil
	}
	// A count's series are counted in the workers (countGroups): of
	// each it keeps only what the samples limit's check below reads, per
	// chunk of fastChunk series (chunks), not a fastSeries (~100 bytes a
	// series, a gigabyte live at ten million).
	var (
		out    []fastSeries
		chunks []chunkPoints
	)
	if s.digestOnly {
		// Nothing is kept of a series: its samples' hash only.
	} else if counted(s.spec.Agg) {
		chunks = make([]chunkPoints, (len(its)+fastChunk-1)/fastChunk)
	} else {
		out = make([]fastSeries, len(its))
	}
	workers := min(r.parallelism, (len(its)+fastChunk-1)/fastChunk)
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errs    = make([]error, workers)
		panics  = make([]any, workers)
		slabs   = make([][][]float64, workers)
		counts  = make([]*countGroups, workers)
		annos   = make([]annotations.Annotations, workers)
		names   = make([][]string, workers)
		digests = make([]uint64, workers)
		hashes  = make([][]uint64, workers)
		fn      = fastFuncs[s.spec.Func.String()]
		evalOne = func(w *fastWorker, i int) error {
			if s.digestOnly {
				d, err := w.digestSeries(its[i])
				w.digest += d
				return err
			}
			fs, err := w.series(its[i], fn)
			if err != nil {
				return err
			}
			if w.hashing {
				w.hv.drain()
				w.digest += w.hv.sum(its[i].ID)
			}
			fs.n = len(fs.vals)
			if manyNames && fs.n > 0 {
				if w.keep != nil {
					// fs.lset holds the grouping only: hash the output's
					// labels from the ID.
					w.hashes = append(w.hashes, outputHash(&w.digester, its[i].ID))
				} else {
					w.hashes = append(w.hashes, fs.lset.Hash())
				}
			}
			if w.counts != nil && fs.n > 0 && fs.err == nil {
				w.counts.add(i, its[i].ID, &fs)
				fs.vals = nil
			}
			if w.transient {
				fs.lset = labels.EmptyLabels() // the worker's next series overwrites it
			}
			if chunks != nil {
				w.chunk.add(fs.n, fs.win)
				if fs.err != nil {
					return errFallback // as countOut would: the engine fails on it
				}
			} else {
				out[i] = fs // with its win, even without values
			}
			if fs.n == 0 {
				return nil
			}
			// The engine copies these points into its own matrix: past
			// half its samples limit, let it evaluate the query alone, so
			// that the fast path never holds more memory than the limit
			// allows, and the engine refuses what it would refuse.
			if int(q.fastPoints.Add(int64(fs.n))) > r.maxSamples/2 {
				return errFallback
			}
			return nil
		}
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// A panic (a decoder on damaged data) must not end the
				// process: it is raised again on the engine's goroutine
				// below, where the engine turns it into the query's error
				// as it would have had it read the series itself.
				if v := recover(); v != nil {
					panics[w] = v
					next.Store(int64(len(its))) // stop the others
				}
			}()
			wk := &fastWorker{r: r, spec: s.spec, annos: &annos[w], hashing: s.partial != nil && !s.digestOnly}
			if s.spec.Agg != query.AggNone {
				wk.slabs = &slabs[w]
			}
			if counted(s.spec.Agg) {
				wk.counts = newCountGroups(s.spec.Grouping, r.steps())
				// A replica's partial groups carry no order: no smallest
				// ID to keep per series.
				wk.counts.byID = s.unsorted && s.partial == nil
				counts[w] = wk.counts
				// The series' labels go only to countGroups.add (and, with
				// several names, the output's hash from the ID; for a
				// replica, the name of a non-counter).
				wk.keep = keepGrouping(s.spec.Grouping)
				wk.transient = true
			} else if aggregated(s.spec.Agg) && s.spec.K == 0 {
				// aggregate (and a replica's partials) reads only the
				// grouping labels of a series (and the name, for the
				// non-counter info); with several names the output's hash
				// is read from the ID. A sum by over ten million series
				// held each one's whole label set until the end of the
				// query (a gigabyte).
				wk.keep = keepGrouping(s.spec.Grouping)
			}
			defer func() {
				names[w], digests[w] = wk.nonCounters, wk.digest
				slices.Sort(wk.hashes) // on the worker's goroutine: sameHash merges them
				hashes[w] = wk.hashes
			}()
			for {
				lo := int(next.Add(1)-1) * fastChunk
				if lo >= len(its) {
					return
				}
				if err := s.ctx.Err(); err != nil {
					errs[w] = err
					next.Store(int64(len(its))) // stop the others
					return
				}
				for i := lo; i < min(lo+fastChunk, len(its)); i++ {
					if err := evalOne(wk, i); err != nil {
						errs[w] = err
						next.Store(int64(len(its)))
						return
					}
				}
				if chunks != nil {
					chunks[lo/fastChunk], wk.chunk = wk.chunk, chunkPoints{}
				}
			}
		}()
	}
	wg.Wait()
	for _, v := range panics {
		if v != nil {
			panic(v)
		}
	}
	if err := errors.Join(errs...); err != nil {
		if errors.Is(err, errFallback) {
			return errFallback
		}
		return err
	}
	if manyNames && sameHash(hashes) {
		// Two outputs may have the same label set: the engine says
		// what it makes of them.
		return errFallback
	}
	for i := range annos {
		s.warnings.Merge(annos[i])
	}
	if s.partial != nil {
		for w, ns := range names {
			s.partial.NonCounters = append(s.partial.NonCounters, ns...)
			s.partial.Digest += digests[w]
		}
	}
	if s.digestOnly {
		return nil
	}
	// The engine, computing a call itself, holds the outputs of the
	// series before this one and this one's window (counted against
	// query.maxSamples as it loads them): when that could pass the limit,
	// let it evaluate the query and decide. What the engine holds besides
	// is estimated by the points of the query's marked selectors so far.
	mine := 0
	for i := range out {
		mine += out[i].n
	}
	for _, c := range chunks {
		mine += c.n
	}
	acc := int(q.fastPoints.Load()) - mine
	for i := range out {
		if acc+out[i].win+out[i].n > r.maxSamples {
			return errFallback
		}
		acc += out[i].n
	}
	if s.unsorted {
		// The engine would have held the series in ID order, not this
		// one: accept only what no order could take past the limit
		// (every series' values plus the largest window), and let the
		// engine decide the rest.
		win := 0
		for _, c := range chunks {
			win = max(win, c.win)
		}
		if acc+mine+win > r.maxSamples {
			return errFallback
		}
		chunks = nil
	}
	for _, c := range chunks {
		if acc+c.peak > r.maxSamples {
			return errFallback
		}
		acc += c.n
	}
	// Keep the series with values, in order.
	kept := out[:0]
	for _, fs := range out {
		if fs.n > 0 || fs.err != nil {
			kept = append(kept, fs)
		}
	}
	s.out = kept
	if s.partial != nil && s.spec.Agg == query.AggNone {
		if slices.ContainsFunc(s.out, func(fs fastSeries) bool { return fs.err != nil }) {
			// The engine fails the query reading this series: let it.
			return errFallback
		}
		if s.spec.K > 0 {
			keepCandidates(s.out, s.spec.Pushdown, r.steps())
		}
		s.partial.Groups = seriesPartials(s.out, r.steps())
		s.out = nil
	}
	if s.spec.Agg != query.AggNone {
		switch {
		case s.spec.Agg == query.AggCountValues:
			var groups []query.Partial
			if groups, err = countValues(s.out, s.spec.Pushdown, r.steps()); err == nil {
				if s.partial != nil {
					s.partial.Groups = groups
					s.out = nil
				} else {
					s.out = partialsOut(groups, query.AggCountValues, r.steps())
				}
			}
		case s.partial != nil && counted(s.spec.Agg):
			var cs []fastSeries
			if cs, err = s.countOut(counts); err == nil {
				s.partial.Groups = countPartials(cs, r.steps())
			}
			s.out = nil
		case s.partial != nil:
			s.partial.Groups, err = s.partials(s.out)
			s.out = nil
		case counted(s.spec.Agg):
			s.out, err = s.countOut(counts) // counted in the workers
		default:
			s.out, err = s.aggregate(s.out)
		}
		// Nothing refers to the series' values any more.
		clear(out)
		for _, ss := range slabs {
			for _, sl := range ss {
				slabPool.Put(&sl)
			}
		}
		if err != nil {
			return err
		}
		if r.stats != nil {
			r.stats.aggregated.Add(1)
		}
	}
	if s.sorted {
		slices.SortFunc(s.out, func(a, b fastSeries) int { return labels.Compare(a.lset, b.lset) })
	}
	if r.stats != nil {
		r.stats.computed.Add(1)
	}
	return nil
}

// chunkPoints is what the samples limit's check in load reads of a chunk
// of consecutive series: their step values in all (n), and the most the
// engine would hold at once within the chunk (peak: the values of the
// chunk's series before one, plus that one's largest window and values).
// win is the largest window of the chunk's series.
type chunkPoints struct{ n, peak, win int }

func (c *chunkPoints) add(n, win int) {
	c.peak = max(c.peak, c.n+win+n)
	c.n += n
	c.win = max(c.win, win)
}

// aggregate computes the spec's aggregation (sum, count or avg by
// grouping) of in, the step values the engine would have aggregated, in
// its order: the engine's rangeEvalAgg and aggregation for float samples,
// with the same grouping keys (a hash of the grouping labels, the group's
// labels those of its first series), groups in the order their first
// series comes, and at each step the same operations on the same operands
// in the same order (sum: kahansum.Inc over the present values in series
// order, plus the compensation at the end; count: the number present;
// avg: the Kahan sum divided by the count, or the incremental mean once
// the sum would overflow). A value is present at a step when it is not a
// StaleNaN, as the engine's lookback over the series would find it. The
// output is in fastSeries form, StaleNaN where a group has no value.
func (s *fastSet) aggregate(in []fastSeries) ([]fastSeries, error) {
	steps, op := s.q.fast.steps(), s.spec.Agg
	groups, err := s.groups(in, op)
	if err != nil {
		return nil, err
	}
	out := make([]fastSeries, 0, len(groups))
	for _, g := range groups {
		if g.first < 0 {
			continue
		}
		st := stepper{steps: steps, first: g.first, vals: make([]float64, 0, steps-g.first)}
		for step := g.first; step < steps; step++ {
			if g.count[step] == 0 {
				continue
			}
			v := g.result(op, step)
			if value.IsStaleNaN(v) {
				return nil, errFallback // would read as a gap
			}
			st.value(step, v)
		}
		st.end()
		out = append(out, fastSeries{lset: g.lset, vals: st.vals, first: st.first})
	}
	return out, nil
}

// partials are the groups of in as partial aggregates (Evaluate): the
// Kahan sums and compensations before they are added, and the counts.
// An avg whose sum would overflow (the engine then switches to an
// incremental mean, which does not merge) is declined.
func (s *fastSet) partials(in []fastSeries) ([]query.Partial, error) {
	groups, err := s.groups(in, s.spec.Agg)
	if err != nil {
		return nil, err
	}
	out := make([]query.Partial, 0, len(groups))
	for _, g := range groups {
		if g.first < 0 {
			continue
		}
		if slices.Contains(g.incr, true) {
			return nil, query.ErrDeclined
		}
		out = append(out, query.Partial{Labels: g.lset, Count: g.count, Sum: g.value, Comp: g.comp})
	}
	return out, nil
}

// counted reports an aggregation computed by counting series in the
// workers: count, and group (the counts read as 1).
func counted(a query.Agg) bool { return a == query.AggCount || a == query.AggGroup }

// aggregated reports whether aggregate computes a: an aggregation whose
// output labels are its groups' (by) labels, read of no series' others.
func aggregated(a query.Agg) bool {
	return a == query.AggSum || a == query.AggAvg || a == query.AggMin || a == query.AggMax
}

// countValues is count_values over in, the step values the engine would
// have counted (its aggregationCountValues at each step): each value adds
// one to the group of its series' labels with p.ValueLabel set to the
// value's text (strconv 'f', -1, as the engine formats it) and kept to
// the grouping and that label. Groups come in the order their first
// value does. As partials they merge exactly (counts add); a series the
// engine fails reading is left to it (errFallback).
func countValues(in []fastSeries, p query.Pushdown, steps int) ([]query.Partial, error) {
	// A group's labels are the series' grouping labels and the value
	// label set to the value (which replaces the series' own, when the
	// grouping names it too).
	grouping := slices.DeleteFunc(slices.Clone(p.Grouping), func(l string) bool { return l == p.ValueLabel })
	var (
		out   []query.Partial
		index = map[string]int{}
		lb    = labels.NewBuilder(labels.EmptyLabels())
		key   []byte
	)
	for i := range in {
		fs := &in[i]
		if fs.err != nil {
			return nil, errFallback
		}
		var (
			base labels.Labels
			kb   []byte
		)
		for k, v := range fs.vals {
			if value.IsStaleNaN(v) {
				continue
			}
			if kb == nil {
				lb.Reset(fs.lset)
				lb.Keep(grouping...)
				base = lb.Labels()
				kb = base.Bytes(nil)
			}
			text := strconv.FormatFloat(v, 'f', -1, 64)
			key = append(append(append(key[:0], kb...), 0xff), text...)
			g, ok := index[string(key)]
			if !ok {
				lb.Reset(base)
				lb.Set(p.ValueLabel, text)
				g = len(out)
				index[string(key)] = g
				out = append(out, query.Partial{Labels: lb.Labels(), Count: make([]float64, steps)})
			}
			out[g].Count[fs.first+k]++
		}
	}
	return out, nil
}

// partialsOut is groups, whole (every series counted), as the set's
// series: each group's value at each step, StaleNaN where it has none.
func partialsOut(groups []query.Partial, agg query.Agg, steps int) []fastSeries {
	out := make([]fastSeries, 0, len(groups))
	for i := range groups {
		g := &groups[i]
		first := slices.IndexFunc(g.Count, func(n float64) bool { return n != 0 })
		if first < 0 {
			continue
		}
		st := stepper{steps: steps, first: first, vals: make([]float64, 0, steps-first)}
		for step := first; step < steps; step++ {
			if v, ok := g.Value(agg, step); ok {
				st.value(step, v)
			}
		}
		st.end()
		out = append(out, fastSeries{lset: g.Labels, vals: st.vals, first: st.first, n: len(st.vals)})
	}
	return out
}

// keepCandidates leaves in out, at each step, only the values of the
// topk (bottomk) candidates of pd's groups: the series fewer than pd.K
// others of its group beat there, in the engine's order (topk: a greater
// value, or any number over a NaN; bottomk: a smaller one, or any number
// over a NaN). Ties at the k-th value are all kept. The others' values
// become StaleNaN, no value.
func keepCandidates(out []fastSeries, pd query.Pushdown, steps int) {
	beats := func(a, b float64) bool { // a beats b
		if math.IsNaN(b) {
			return !math.IsNaN(a)
		}
		if pd.Bottom {
			return a < b
		}
		return a > b
	}
	groups := map[uint64][]int{}
	var buf []byte
	for i := range out {
		var key uint64
		if len(pd.Grouping) > 0 {
			key, buf = out[i].lset.HashForLabels(buf, pd.Grouping...)
		}
		groups[key] = append(groups[key], i)
	}
	var vals, best []float64
	for _, members := range groups {
		if len(members) <= pd.K {
			continue // every member is a candidate at every step
		}
		for step := range steps {
			vals = vals[:0]
			for _, i := range members {
				if v, ok := out[i].at(step); ok {
					vals = append(vals, v)
				}
			}
			if len(vals) <= pd.K {
				continue
			}
			// The k-th best value: a member is a candidate unless K
			// values beat it, i.e. unless the k-th best beats it. For a
			// small k, the k best kept in order as the values come (a
			// few comparisons a value; sorting every step's values was a
			// third of a replica's work for topk(5, ...)).
			var kth float64
			if pd.K <= 64 {
				best = best[:0]
				for _, v := range vals {
					if len(best) == pd.K && !beats(v, best[pd.K-1]) {
						continue
					}
					j := len(best)
					if j == pd.K {
						j-- // the last is dropped
					} else {
						best = append(best, 0)
					}
					for j > 0 && beats(v, best[j-1]) {
						best[j] = best[j-1]
						j--
					}
					best[j] = v
				}
				kth = best[pd.K-1]
			} else {
				slices.SortFunc(vals, func(a, b float64) int {
					switch {
					case beats(a, b):
						return -1
					case beats(b, a):
						return 1
					}
					return 0
				})
				kth = vals[pd.K-1]
			}
			for _, i := range members {
				if v, ok := out[i].at(step); ok && beats(kth, v) {
					out[i].vals[step-out[i].first] = staleNaN
				}
			}
		}
	}
}

// at is the series' value at step, false where it has none.
func (fs *fastSeries) at(step int) (float64, bool) {
	k := step - fs.first
	if k < 0 || k >= len(fs.vals) || value.IsStaleNaN(fs.vals[k]) {
		return 0, false
	}
	return fs.vals[k], true
}

// seriesPartials are series' step values as partials (a request without
// an aggregation): the value in Sum, Count 1 where there is one.
func seriesPartials(in []fastSeries, steps int) []query.Partial {
	out := make([]query.Partial, 0, len(in))
	for i := range in {
		fs := &in[i]
		p := query.Partial{Labels: fs.lset, Count: make([]float64, steps), Sum: make([]float64, steps), Comp: make([]float64, steps)}
		any := false
		for k, v := range fs.vals {
			if !value.IsStaleNaN(v) {
				p.Count[fs.first+k], p.Sum[fs.first+k], any = 1, v, true
			}
		}
		if any { // a topk candidate at some step (keepCandidates)
			out = append(out, p)
		}
	}
	return out
}

// countPartials are a count's output series as partials.
func countPartials(cs []fastSeries, steps int) []query.Partial {
	out := make([]query.Partial, 0, len(cs))
	for _, fs := range cs {
		p := query.Partial{Labels: fs.lset, Count: make([]float64, steps)}
		for k, v := range fs.vals {
			if !value.IsStaleNaN(v) {
				p.Count[fs.first+k] = v
			}
		}
		out = append(out, p)
	}
	return out
}

// groups aggregates in by the spec's grouping with op.
func (s *fastSet) groups(in []fastSeries, op query.Agg) ([]*aggGroup, error) {
	steps := s.q.fast.steps()
	var (
		groups []*aggGroup
		index  = map[uint64]int{}
		buf    = make([]byte, 0, 1024)
		gis    = make([]int, len(in)) // each series' group
	)
	for i := range in {
		fs := &in[i]
		if fs.err != nil {
			// The engine fails the query reading this series: let it.
			return nil, errFallback
		}
		var key uint64
		if len(s.spec.Grouping) > 0 {
			key, buf = fs.lset.HashForLabels(buf, s.spec.Grouping...)
		}
		gi, ok := index[key]
		if !ok {
			g := newAggGroup(op, steps)
			if len(s.spec.Grouping) > 0 {
				g.lset = labels.NewBuilder(fs.lset).Keep(s.spec.Grouping...).Labels()
			} else {
				g.lset = labels.EmptyLabels()
			}
			gi = len(groups)
			index[key] = gi
			groups = append(groups, g)
		}
		gis[i] = gi
	}
	aggregateGroups(in, gis, groups, op, min(s.q.fast.parallelism, len(groups)))
	return groups, nil
}

// aggregateGroups adds each series of in to its group (gis) at every
// step where it has a value, in series order, on up to par goroutines:
// each takes the groups whose index is its own modulo par, so every
// group's operations are the same, in the same order, as on one
// goroutine, and no two goroutines touch a group. Alone on one goroutine
// this pass was a tenth of sum by (mode) (rate(...))'s CPU with the other
// cores idle.
func aggregateGroups(in []fastSeries, gis []int, groups []*aggGroup, op query.Agg, par int) {
	add := func(part int) {
		for i := range in {
			if gis[i]%par != part {
				continue
			}
			fs, g := &in[i], groups[gis[i]]
			for k, v := range fs.vals {
				if value.IsStaleNaN(v) {
					continue
				}
				g.add(op, fs.first+k, v)
			}
		}
	}
	if par <= 1 || len(in) < fastChunk {
		par = 1
		add(0)
		return
	}
	var wg sync.WaitGroup
	for part := range par {
		wg.Go(func() { add(part) })
	}
	wg.Wait()
}

// aggGroup is one output group of aggregate: per step the engine's
// groupedAggregation fields for floats.
type aggGroup struct {
	lset  labels.Labels
	count []float64 // groupCount; 0: not seen at that step
	value []float64 // floatValue (sum, avg)
	comp  []float64 // floatKahanC (sum, avg)
	mean  []float64 // floatMean (avg)
	incr  []bool    // floatIncrementalMean (avg)
	first int       // first step with a value, -1 before one
}

func newAggGroup(op query.Agg, steps int) *aggGroup {
	g := &aggGroup{count: make([]float64, steps), first: -1}
	if op != query.AggCount {
		g.value, g.comp = make([]float64, steps), make([]float64, steps)
	}
	if op == query.AggAvg {
		g.mean, g.incr = make([]float64, steps), make([]bool, steps)
	}
	return g
}

// add is the engine's aggregation of float f into the group at step.
func (g *aggGroup) add(op query.Agg, step int, f float64) {
	if g.count[step] == 0 {
		g.count[step] = 1
		if op != query.AggCount {
			g.value[step] = f
		}
		if op == query.AggAvg {
			g.mean[step] = f
		}
		if g.first < 0 || step < g.first {
			g.first = step
		}
		return
	}
	switch op {
	case query.AggCount:
		g.count[step]++
	case query.AggMin, query.AggMax:
		g.count[step]++
		if query.CompareStep(op, g.value[step], f) {
			g.value[step] = f
		}
	case query.AggSum:
		g.value[step], g.comp[step] = sumInc(f, g.value[step], g.comp[step])
	case query.AggAvg:
		g.count[step]++
		n := g.count[step]
		if !g.incr[step] {
			newV, newC := sumInc(f, g.value[step], g.comp[step])
			if !math.IsInf(newV, 0) {
				g.value[step], g.comp[step] = newV, newC
				return
			}
			// The sum would overflow: the incremental mean from here on.
			g.incr[step] = true
			g.mean[step] = g.value[step] / (n - 1)
			g.comp[step] /= n - 1
		}
		q := (n - 1) / n
		g.mean[step], g.comp[step] = sumInc(f/n, q*g.mean[step], q*g.comp[step])
	}
}

// result is the engine's output of the group at step.
func (g *aggGroup) result(op query.Agg, step int) float64 {
	switch op {
	case query.AggCount:
		return g.count[step]
	case query.AggSum:
		return g.value[step] + g.comp[step]
	case query.AggMin, query.AggMax:
		return g.value[step]
	}
	if g.incr[step] {
		return g.mean[step] + g.comp[step]
	}
	return g.value[step]/g.count[step] + g.comp[step]/g.count[step]
}

// outputHash is a hash of the label set a function's output over the
// series of id has (its labels but the name and the metadata labels,
// which the function drops): equal for equal output label sets, as
// labels.Hash of them is, read from the ID's canonical bytes without
// building the labels.
func outputHash(d *xxhash.Digest, id []byte) uint64 {
	d.Reset()
	var n [binary.MaxVarintLen64]byte
	_ = ident.Range(id, func(name, value []byte) {
		if schema.IsMetadataLabel(string(name)) {
			return
		}
		_, _ = d.Write(n[:binary.PutUvarint(n[:], uint64(len(name)))])
		_, _ = d.Write(name)
		_, _ = d.Write(n[:binary.PutUvarint(n[:], uint64(len(value)))])
		_, _ = d.Write(value)
	})
	return d.Sum64()
}

// keepGrouping accepts the labels a count by (grouping) reads of a
// series: the grouping's and the metric name.
func keepGrouping(grouping []string) func(name []byte) bool {
	return func(name []byte) bool {
		return string(name) == labels.MetricName || slices.Contains(grouping, string(name))
	}
}

// oneName reports whether matchers select series of one metric name
// only (a __name__="..." matcher).
func oneName(matchers []*labels.Matcher) bool {
	for _, m := range matchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual && m.Value != "" {
			return true
		}
	}
	return false
}

// sameHash reports whether two of the sorted lists hold the same hash,
// within one list or across two: the label set hashes of a function's
// outputs, where an equal pair may be two equal label sets (or, rarely,
// a collision, which only sends the query to the engine).
func sameHash(lists [][]uint64) bool {
	heads := make([]int, len(lists))
	var (
		prev uint64
		seen bool
	)
	for {
		k := -1
		for j, l := range lists {
			if heads[j] < len(l) && (k < 0 || l[heads[j]] < lists[k][heads[k]]) {
				k = j
			}
		}
		if k < 0 {
			return false
		}
		h := lists[k][heads[k]]
		if seen && h == prev {
			return true
		}
		prev, seen = h, true
		heads[k]++
	}
}

// sameLabelset reports whether two of out have the same label set.
func sameLabelset(out []fastSeries) bool {
	seen := make(map[uint64][]int, len(out))
	for i := range out {
		h := out[i].lset.Hash()
		for _, j := range seen[h] {
			if labels.Equal(out[i].lset, out[j].lset) {
				return true
			}
		}
		seen[h] = append(seen[h], i)
	}
	return false
}

// fastWorker is one goroutine's state: the decoded samples of its
// current series and a label builder, reused across series.
type fastWorker struct {
	// digest sums the digests of its series' samples, for a partial
	// result (digest.go); hashing says whether series hashes them, as it
	// decodes them, into hv.
	digest  uint64
	hashing bool
	hv      sampleHasher
	// nonCounters are the metric names of its PossibleNonCounterInfo
	// annotations, for a partial result (query.Result.NonCounters).
	nonCounters   []string
	nonCounterSet map[string]struct{} // nonCounters, to look up
	r             *fastRange
	spec          fastSpec
	annos         *annotations.Annotations
	buf           []promql.FPoint
	slab          []float64 // room for the step values of the next series
	// slabs, when the selector is aggregated, collects the worker's slabs
	// so that load gives them back to slabPool once aggregate is done.
	slabs *[][]float64
	// counts, for a count by (...), counts each series' values as it is
	// computed, which then need no slab (countGroups).
	counts *countGroups
	// keep, when not nil, is the labels a series' label set needs: a
	// count by (...) reads only the grouping (and the name, for the
	// non-counter info) of each series (ident.LabelsKeeping).
	keep func(name []byte) bool
	// transient says the series' labels go only to counts: they are
	// built in lb's buffer, valid until the next series (no allocation
	// per series), and dropped once counted.
	transient bool
	chunk     chunkPoints // the current chunk's, for a count
	digester  xxhash.Digest
	// hashes are the label set hashes of the outputs with values, when
	// the selection may hold several names (fastSet.load).
	hashes []uint64
	lb     labels.ScratchBuilder
	// sampled says whether the current series has a sample in range;
	// win is the most samples one of its windows holds (the engine counts
	// them against query.maxSamples).
	sampled bool
	win     int
	dec     encoding.StreamReader // decodes a series read as its stream
}

// samples is its float samples: its iterator, or its stream through the
// worker's one StreamReader.
func (w *fastWorker) samples(it tstorage.SeriesIterator) encoding.Iterator {
	if it.Values != nil {
		return it.Values
	}
	w.dec.Reset(it.Stream)
	return &w.dec
}

// series decodes it and computes the function (or the selector's
// looked-back value) at every step. A step without a value right after
// one with a value gets a StaleNaN, so that the engine's lookback does not
// carry the earlier value over the gap.
func (w *fastWorker) series(it tstorage.SeriesIterator, fn fastFunc) (fastSeries, error) {
	isCounter, instant := fn.isCounter, fn.instant
	sel := w.spec.Func == query.FuncSelect
	w.sampled, w.win = false, 0
	var pts stepper
	vals := w.samples(it)
	if w.hashing {
		w.hv.reset(vals)
		vals = &w.hv
	}
	if sel {
		pts = w.selectSteps(vals)
	} else {
		buf := w.buf[:0]
		resets := false
		for vals.Next() {
			t, v := vals.At()
			w.sampled = true
			if value.IsStaleNaN(v) {
				continue // the engine drops them from range selections
			}
			if n := len(buf); n > 0 && v < buf[n-1].F {
				resets = true
			}
			buf = append(buf, promql.FPoint{T: t, F: v})
		}
		w.buf = buf
		if vals.Err() == nil {
			var err error
			if pts, err = w.rateSteps(buf, fn, resets); err != nil {
				return fastSeries{}, err
			}
		}
	}
	readErr := vals.Err()
	if !w.sampled {
		if readErr != nil {
			// The engine's series set fails on it the same way, before
			// the engine reads any series.
			return fastSeries{}, fmt.Errorf("read series %q: %w", it.ID, readErr)
		}
		return fastSeries{}, nil
	}
	// The engine's series set decodes the labels of every series with a
	// sample in range, and skips one that does not decode with a warning,
	// whether or not the series then has a value at some step.
	var (
		lset labels.Labels
		err  error
	)
	if w.transient {
		err = ident.LabelsKeepingOver(&w.lb, it.ID, w.keep, &lset)
	} else {
		lset, err = ident.LabelsKeeping(&w.lb, it.ID, w.keep)
	}
	if err != nil {
		w.annos.Add(fmt.Errorf("series skipped: %w (ID %.120q..., %d bytes)", err, it.ID, len(it.ID)))
		return fastSeries{win: w.win}, nil
	}
	if readErr != nil {
		// The engine meets it reading this series, and answers it as it
		// is: the series' iterator reports it (no values, so the engine's
		// first Seek finds none and asks), in series order.
		if !sel {
			lset = lset.DropReserved(schema.IsMetadataLabel)
		}
		return fastSeries{lset: lset, err: readErr, win: w.win}, nil
	}
	if pts.vals == nil {
		return fastSeries{win: w.win}, nil
	}
	pts.end()
	if sel {
		return fastSeries{lset: lset, vals: pts.vals, first: pts.first}, nil
	}
	if isCounter && !instant { // the engine says so for rate and increase only
		if name := lset.Get(labels.MetricName); name != "" && !strings.HasSuffix(name, "_total") &&
			!strings.HasSuffix(name, "_sum") && !strings.HasSuffix(name, "_count") &&
			!strings.HasSuffix(name, "_bucket") {
			// Once a name: the annotation is the same for every series
			// of it (a selection without a name may hold a million
			// series of gauges, each formatting it again).
			if _, done := w.nonCounterSet[name]; !done {
				name = strings.Clone(name) // lset may be transient
				if w.nonCounterSet == nil {
					w.nonCounterSet = map[string]struct{}{}
				}
				w.nonCounterSet[name] = struct{}{}
				w.annos.Add(annotations.NewPossibleNonCounterInfo(name, w.spec.pos))
				w.nonCounters = append(w.nonCounters, name)
			}
		}
	}
	// Dropping more than the name (__type__, __unit__) could make two
	// outputs equal: precheck declined such sets before this.
	dropped := lset.DropReserved(schema.IsMetadataLabel)
	return fastSeries{lset: dropped, vals: pts.vals, first: pts.first, win: w.win}, nil
}

// stepper collects a series' step values: from its first step with a
// value, StaleNaN at the steps without. At most one value per step, so
// the slice, cut from the worker's slab with room for every step, never
// grows.
type stepper struct {
	w     *fastWorker
	vals  []float64
	first int
	steps int
}

func (s *stepper) value(step int, v float64) {
	if s.vals == nil {
		s.vals, s.first = s.w.floats(), step
	}
	for len(s.vals) < step-s.first {
		s.vals = append(s.vals, staleNaN)
	}
	s.vals = append(s.vals, v)
}

// end closes the series: a StaleNaN after its last value unless that is
// at the last step.
func (s *stepper) end() {
	if n := s.first + len(s.vals); n < s.steps {
		s.vals = append(s.vals, staleNaN)
	}
}

// floats returns an empty slice with room for every step, cut from a
// slab shared by fastChunk series: one allocation per chunk, not per
// series.
func (w *fastWorker) floats() []float64 {
	if w.counts != nil {
		return w.counts.floats()
	}
	n := w.r.steps()
	if cap(w.slab)-len(w.slab) < n {
		w.slab = nil
		if w.slabs != nil {
			// The series' values die with the aggregation: take a slab
			// an earlier aggregation gave back, big enough.
			if p, _ := slabPool.Get().(*[]float64); p != nil && cap(*p) >= n*fastChunk {
				w.slab = (*p)[:0]
			}
		}
		if w.slab == nil {
			w.slab = make([]float64, 0, n*fastChunk)
		}
		if w.slabs != nil {
			*w.slabs = append(*w.slabs, w.slab)
		}
	}
	l := len(w.slab)
	w.slab = w.slab[:l+n]
	return w.slab[l : l : l+n]
}

// rateSteps computes fn (rate, increase, delta, irate, idelta or a
// *_over_time function) over buf (stale markers dropped) at every step:
// the window is (ts-range, ts], as the engine's. resets says whether to
// look for counter resets: false when no sample of the series is below
// the one before, which skips no operation the engine would do on a
// value.
func (w *fastWorker) rateSteps(buf []promql.FPoint, fn fastFunc, resets bool) (stepper, error) {
	r, rng, secs := w.r, w.spec.Range.Milliseconds(), w.spec.Range.Seconds()
	isCounter, isRate, instant := fn.isCounter, fn.isRate, fn.instant
	out := stepper{w: w, steps: r.steps()}
	w.win = min(len(buf), 1)
	if len(buf) == 0 || (len(buf) < 2 && fn.over == nil) {
		return out, nil // no window holds the samples a value needs
	}
	lo, hi := 0, 0
	for ts, step := r.start, 0; ts <= r.end; ts, step = ts+r.stp, step+1 {
		mint := windowStart(ts, rng)
		for lo < len(buf) && buf[lo].T <= mint {
			lo++
		}
		hi = max(hi, lo)
		for hi < len(buf) && buf[hi].T <= ts {
			hi++
		}
		w.win = max(w.win, hi-lo)
		var (
			v  float64
			ok bool
		)
		switch {
		case fn.over != nil:
			// The engine calls the function only on a window with samples.
			if hi > lo {
				v, ok = fn.over(buf[lo:hi]), true
			}
		case instant:
			v, ok = instantRate(buf[lo:hi], isRate)
		default:
			v, ok = rateFunc(buf[lo:hi], mint, ts, secs, isCounter, resets, isRate)
		}
		if ok {
			if value.IsStaleNaN(v) {
				return out, errFallback // would read as a gap
			}
			out.value(step, v)
		}
		if r.stp <= 0 {
			break
		}
	}
	return out, nil
}

// selectSteps is the engine's instant selector (vectorSelectorSingle)
// at every step: the latest sample at or before ts, unless it is older
// than the lookback delta or a staleness marker. It streams src, holding
// only the sample before and the one after the step.
func (w *fastWorker) selectSteps(src encoding.Iterator) stepper {
	var (
		r          = w.r
		out        = stepper{w: w, steps: r.steps()}
		prev, next promql.FPoint
		hasPrev    bool
		hasNext    = src.Next()
	)
	if !hasNext {
		return out
	}
	w.sampled = true
	next.T, next.F = src.At()
	for ts, step := r.start, 0; ts <= r.end; ts, step = ts+r.stp, step+1 {
		for hasNext && next.T <= ts {
			prev, hasPrev = next, true
			if hasNext = src.Next(); hasNext {
				next.T, next.F = src.At()
			}
		}
		// A sample at ts is the engine's (its Seek finds it) whatever the
		// lookback, which in ms may be 0 (lookback_delta under 1ms).
		if hasPrev && (prev.T == ts || prev.T > ts-r.lookback) && !value.IsStaleNaN(prev.F) {
			out.value(step, prev.F)
		}
		if r.stp <= 0 {
			break
		}
	}
	return out
}

// slabPool holds the step value slabs of aggregated selectors, whose
// values die with the aggregation (dashboards repeat the same queries,
// so the slabs fit the next): a 30,000-series count allocated 28 MB of
// them per query, garbage the collector paid for marking the node's
// whole heap more often.
var slabPool sync.Pool

// sumInc is the engine's Kahan step; tests replace it with wrong
// versions to show the comparison with the engine catches them.
var sumInc = kahansum.Inc

// windowStart is the excluded left edge of the window ending at ts: the
// engine's windows are (ts-range, ts]. A variable so that the generative
// test can show an off-by-one here is caught (equivalence_test.go).
var windowStart = func(ts, rng int64) int64 { return ts - rng }

// The engine arithmetic below is copied from Prometheus copiedFromPrometheus
// (version_test.go) and must be re-checked when go.mod moves.

// rateFunc is extrapolatedRate; tests replace it with wrong versions to
// show the comparison with the engine catches them.
var rateFunc = extrapolatedRate

var staleNaN = math.Float64frombits(value.StaleNaN)

// extrapolatedRate is Prometheus' rate, increase and delta of float
// samples (promql/functions.go, without start timestamps, anchored or
// smoothed selectors, which the fast path never sees), written so that
// every floating-point operation happens in the same order with the same
// operands: the answer must be bit-identical to the engine's. pts are the
// window's samples, (rangeStart, rangeEnd]; resets false promises that no
// sample in pts is below the one before (the engine's loop would add
// nothing).
func extrapolatedRate(pts []promql.FPoint, rangeStart, rangeEnd int64, rangeSecs float64, isCounter, resets, isRate bool) (float64, bool) {
	if len(pts) < 2 {
		return 0, false
	}
	n1 := len(pts) - 1
	first, last := pts[0], pts[n1]
	result := last.F - first.F
	if isCounter && resets {
		for i := 1; i <= n1; i++ {
			if pts[i].F < pts[i-1].F {
				result += pts[i-1].F // a counter reset
			}
		}
	}
	toStart := float64(first.T-rangeStart) / 1000
	toEnd := float64(rangeEnd-last.T) / 1000
	sampled := float64(last.T-first.T) / 1000
	avg := sampled / float64(n1)
	threshold := avg * 1.1
	if toStart >= threshold {
		toStart = avg / 2
	}
	if isCounter {
		// A counter does not go below zero: extrapolate at most to the
		// time it would have been zero.
		toZero := toStart
		if result > 0 && first.F >= 0 {
			toZero = sampled * (first.F / result)
		}
		if toZero < toStart {
			toStart = toZero
		}
	}
	if toEnd >= threshold {
		toEnd = avg / 2
	}
	factor := 1.0
	if sampled != 0 {
		factor = (sampled + toStart + toEnd) / sampled
	}
	if isRate {
		factor /= rangeSecs
	}
	return result * factor, true
}

// instantRate is Prometheus' irate (isRate) and idelta of float samples
// without start timestamps (promql/functions.go instantValue), with the
// same operations in the same order: the last two samples of the window.
func instantRate(pts []promql.FPoint, isRate bool) (float64, bool) {
	if len(pts) < 2 {
		return 0, false
	}
	prev, last := pts[len(pts)-2], pts[len(pts)-1]
	interval := last.T - prev.T
	if interval == 0 {
		return 0, false
	}
	v := last.F
	if !isRate || !(last.F < prev.F) {
		v = last.F - prev.F // a gauge, or a counter without reset
	}
	if isRate {
		v /= float64(interval) / 1000
	}
	return v, true
}

// The *_over_time functions of a window's floats (never empty), as
// Prometheus' funcAvgOverTime, funcSumOverTime, funcCountOverTime and
// compareOverTime compute them for float samples: the same operations on
// the same operands in the same order, so the values are bit-identical.

// avgOverTime is the Kahan sum over the count, switching to an
// incremental mean once the sum would overflow.
func avgOverTime(pts []promql.FPoint) float64 {
	var (
		sum, count      = pts[0].F, 1.
		mean, kahanC    float64
		incrementalMean bool
	)
	for i, f := range pts[1:] {
		count = float64(i + 2)
		if !incrementalMean {
			newSum, newC := sumInc(f.F, sum, kahanC)
			if !math.IsInf(newSum, 0) {
				sum, kahanC = newSum, newC
				continue
			}
			incrementalMean = true
			mean = sum / (count - 1)
			kahanC /= count - 1
		}
		q := (count - 1) / count
		mean, kahanC = sumInc(f.F/count, q*mean, q*kahanC)
	}
	if incrementalMean {
		return mean + kahanC
	}
	return sum/count + kahanC/count
}

// sumOverTime is the Kahan sum, without the compensation once infinite.
func sumOverTime(pts []promql.FPoint) float64 {
	var sum, c float64
	for _, f := range pts {
		sum, c = sumInc(f.F, sum, c)
	}
	if math.IsInf(sum, 0) {
		return sum
	}
	return sum + c
}

func countOverTime(pts []promql.FPoint) float64 { return float64(len(pts)) }

// maxOverTime and minOverTime: the first sample's value replaced by any
// greater (smaller) one, and any value replacing a NaN.
func maxOverTime(pts []promql.FPoint) float64 {
	m := pts[0].F
	for _, f := range pts {
		if f.F > m || math.IsNaN(m) {
			m = f.F
		}
	}
	return m
}

func minOverTime(pts []promql.FPoint) float64 {
	m := pts[0].F
	for _, f := range pts {
		if f.F < m || math.IsNaN(m) {
			m = f.F
		}
	}
	return m
}

// precomputed is a series of step values as the engine reads it: vals[i]
// at t0 + i*stp.
type precomputed struct {
	lset    labels.Labels
	vals    []float64
	hists   []*histogram.FloatHistogram // nil, or a histogram where not nil
	t0, stp int64
	err     error // reported by Err once vals are done
}

func (p *precomputed) Labels() labels.Labels { return p.lset }

func (p *precomputed) Iterator(reuse chunkenc.Iterator) chunkenc.Iterator {
	it, ok := reuse.(*stepIterator)
	if !ok {
		it = &stepIterator{}
	}
	*it = stepIterator{vals: p.vals, hists: p.hists, t0: p.t0, stp: p.stp, i: -1, err: p.err}
	return it
}

// stepIterator walks step values with chunkenc's Next and Seek contract.
type stepIterator struct {
	vals    []float64
	hists   []*histogram.FloatHistogram
	t0, stp int64
	i       int
	err     error
}

func (it *stepIterator) t(i int) int64 { return it.t0 + int64(i)*it.stp }

func (it *stepIterator) Next() chunkenc.ValueType {
	if it.i < len(it.vals) {
		it.i++
	}
	return it.typ()
}

// typ is the type of the value at i, which is in range unless ValNone.
func (it *stepIterator) typ() chunkenc.ValueType {
	switch {
	case it.i >= len(it.vals):
		return chunkenc.ValNone
	case it.hists != nil && it.hists[it.i] != nil:
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

func (it *stepIterator) Seek(t int64) chunkenc.ValueType {
	if it.i < 0 {
		it.i = 0
	}
	for it.i < len(it.vals) && it.t(it.i) < t {
		it.i++
	}
	return it.typ()
}

func (it *stepIterator) At() (int64, float64) { return it.t(it.i), it.vals[it.i] }

func (it *stepIterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return it.t(it.i), nil
}

// AtFloatHistogram returns a copy (into fh when given): the engine may
// change the histogram it is handed, and a series may be read again.
func (it *stepIterator) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	if it.hists == nil || it.hists[it.i] == nil {
		return it.t(it.i), nil
	}
	if fh == nil {
		return it.t(it.i), it.hists[it.i].Copy()
	}
	it.hists[it.i].CopyTo(fh)
	return it.t(it.i), fh
}

func (it *stepIterator) AtT() int64  { return it.t(it.i) }
func (it *stepIterator) AtST() int64 { return 0 }
func (it *stepIterator) Err() error  { return it.err }
