package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/xtime"
)

// Remote read stitched from rollups (issue 26, docs/rollups.md "Remote
// read"): a query without ?namespace= whose range starts before what
// the raw namespace surely still holds is answered from the rollups for
// that older part and from raw after it, per series one sample list in
// time order. The boundary is a window end B: every sample at or before
// B comes from a rollup's windows ending at or before B, every sample
// after it from raw (or the next finer rollup), so nothing is left out
// or counted twice. What the rollup part answers per window is
// remote.ShapeFor's choice from the read hints.

// RollupNamespace is a rollup of Options.Namespace (directly or through
// a chain), as remote read needs it.
type RollupNamespace struct {
	Name       string
	Resolution time.Duration
	Retention  time.Duration
	BlockSize  time.Duration
}

// RollupReader reads a rollup namespace's windows (the node's: through
// the cluster session, client.Session.QueryRollup).
type RollupReader interface {
	QueryRollup(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.RollupSeries, error)
}

// RollupHeader names, on a remote read answer, the rollups that answered
// part of it: per query that used one, "<query index>:<namespace>
// until=<ms> shape=<shape>" (samples at or before until came from it).
// RollupInexactHeader says why some of that is not Prometheus' answer
// over raw data. Remote read has no warnings field; these headers are
// the only sign, and Prometheus does not show them (docs/rollups.md).
const (
	RollupHeader        = "X-Tessera-Rollup"
	RollupInexactHeader = "X-Tessera-Rollup-Inexact"
)

// rollupNotes collects what the headers say, over a request's queries.
type rollupNotes struct {
	used, inexact []string
}

func (n *rollupNotes) set(w http.ResponseWriter) {
	if len(n.used) > 0 {
		w.Header().Set(RollupHeader, strings.Join(n.used, ", "))
	}
	if len(n.inexact) > 0 {
		w.Header().Set(RollupInexactHeader, strings.Join(n.inexact, "; "))
	}
}

func (n *rollupNotes) warn(why string) {
	if why != "" && !slices.Contains(n.inexact, why) {
		n.inexact = append(n.inexact, why)
	}
}

// readSegment is the part [from, to] of a query answered from rollup ns.
type readSegment struct {
	ns       string
	res      int64 // ms
	from, to int64
}

// rollupSegments splits [start, end] into the parts answered from
// rollups (oldest first) and the first millisecond raw answers (rawFrom
// > end: none). A namespace surely holds everything from the block after
// the one holding now-retention (expiry drops whole blocks). Rollups are
// tried finest first, so each part comes from the finest that still
// holds it; with hints naming a range or a step, only rollups whose
// resolution divides them (when there are any), so windows fit, and
// with a step only the coarsest of those (a rollup's retention is at
// least its source's).
func (a *API) rollupSegments(start, end int64, h *prompb.ReadHints) (segs []readSegment, rawFrom int64) {
	o := a.opts
	if len(o.Rollups) == 0 || o.RawRetention <= 0 || o.RawBlockSize <= 0 || o.RollupReader == nil {
		return nil, start
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	nowMs := now().UnixMilli()
	held := func(ret, bs time.Duration) int64 {
		b := bs.Milliseconds()
		return xtime.BlockStart(nowMs-ret.Milliseconds(), b) + b
	}
	rawHeld := held(o.RawRetention, o.RawBlockSize)
	if start >= rawHeld {
		return nil, start
	}
	levels := slices.Clone(o.Rollups)
	sort.Slice(levels, func(i, j int) bool { return levels[i].Resolution < levels[j].Resolution })
	if h != nil && (h.RangeMs > 0 || h.StepMs > 0) {
		fit := levels[:0:0]
		for _, l := range levels {
			r := l.Resolution.Milliseconds()
			if r > 0 && h.RangeMs%r == 0 && h.StepMs%r == 0 {
				fit = append(fit, l)
			}
		}
		switch {
		case len(fit) > 0 && h.StepMs > 0:
			// As the PromQL API chooses: the coarsest that fits, which
			// holds the longest and answers with the fewest samples.
			levels = fit[len(fit)-1:]
		case len(fit) > 0:
			levels = fit
		}
	}
	// A level that would hold nothing before its boundary with the finer
	// one (its blocks, rounded, reach back no further) is left out, and
	// the boundaries laid again without it.
	levels = slices.DeleteFunc(levels, func(l RollupNamespace) bool { return l.Resolution <= 0 || l.BlockSize <= 0 })
	for len(levels) > 0 {
		var useless int
		segs, rawFrom, useless = chainSegments(levels, held, rawHeld, start, end)
		if useless < 0 {
			slices.Reverse(segs)
			return segs, max(rawFrom, start)
		}
		levels = slices.Delete(levels, useless, useless+1)
	}
	return nil, start
}

// chainSegments lays the parts of levels (finest first) back from raw's
// boundary, newest first. Each boundary is a window end of both levels
// it joins, at or after what the finer one surely holds (held). useless
// is the index of a level whose part would be empty (-1: none).
func chainSegments(levels []RollupNamespace, held func(ret, bs time.Duration) int64, rawHeld, start, end int64) (segs []readSegment, rawFrom int64, useless int) {
	upper := ceilTo(rawHeld, levels[0].Resolution.Milliseconds())
	rawFrom = upper + 1
	for i, l := range levels {
		res := l.Resolution.Milliseconds()
		lower := start // this level answers [lower, upper]
		if lh := held(l.Retention, l.BlockSize); i+1 < len(levels) && lh > start {
			lower = ceilTo(lh, lcm(res, levels[i+1].Resolution.Milliseconds())) + 1
		}
		if lower > upper {
			return nil, 0, i
		}
		if from, to := max(lower, start), min(upper, end); from <= to {
			segs = append(segs, readSegment{ns: l.Name, res: res, from: from, to: to})
		}
		if lower <= start {
			break
		}
		upper = lower - 1
	}
	return segs, rawFrom, -1
}

func ceilTo(t, m int64) int64 {
	if m <= 1 {
		return t
	}
	q := t / m
	if t%m > 0 {
		q++
	}
	return q * m
}

func lcm(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return max(a, b, 1)
	}
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// query is one remote read query's series: from raw alone, or stitched
// from rollups and raw where raw no longer holds its start.
func (a *API) query(ctx context.Context, r *http.Request, backend Backend, qi int, q *prompb.Query, ms []*labels.Matcher, notes *rollupNotes) ([]storage.SeriesIterator, error) {
	ns := a.namespace(r)
	var segs []readSegment
	rawFrom := q.StartTimestampMs
	if r.URL.Query().Get("namespace") == "" {
		segs, rawFrom = a.rollupSegments(q.StartTimestampMs, q.EndTimestampMs, q.Hints)
	}
	if len(segs) == 0 {
		return backend.Query(ctx, ns, ms, q.StartTimestampMs, q.EndTimestampMs)
	}
	type part struct {
		id    []byte
		shard uint32
		fs    []prompb.Sample
		hs    []prompb.Histogram
		raw   *storage.SeriesIterator
	}
	var (
		parts   []*part
		byID    = map[string]*part{}
		partial *storage.PartialError
	)
	get := func(id []byte, shard uint32) *part {
		p := byID[string(id)]
		if p == nil {
			p = &part{id: id, shard: shard}
			byID[string(id)] = p
			parts = append(parts, p)
		}
		return p
	}
	for _, sg := range segs {
		shape, why := remote.ShapeFor(q.Hints, sg.res)
		notes.warn(why)
		notes.used = append(notes.used, fmt.Sprintf("%d:%s until=%d shape=%s", qi, sg.ns, sg.to, shape))
		rs, err := a.opts.RollupReader.QueryRollup(ctx, sg.ns, ms, sg.from, sg.to+sg.res)
		if err != nil {
			return nil, fmt.Errorf("remote read from rollup namespace %q: %w", sg.ns, err)
		}
		for _, s := range rs {
			p := get(s.ID, s.Shard)
			var inexact string
			p.fs, p.hs, inexact = remote.RollupSamples(p.fs, p.hs, s.Windows, s.HWindows, shape, sg.from, sg.to)
			notes.warn(inexact)
		}
	}
	if rawFrom <= q.EndTimestampMs {
		raw, err := backend.Query(ctx, ns, ms, rawFrom, q.EndTimestampMs)
		if err != nil && !errors.As(err, &partial) {
			return nil, err
		}
		for i := range raw {
			get(raw[i].ID, raw[i].Shard).raw = &raw[i]
		}
	}
	out := make([]storage.SeriesIterator, 0, len(parts))
	for _, p := range parts {
		if len(p.fs)+len(p.hs) == 0 && p.raw == nil {
			continue
		}
		s := storage.SeriesIterator{ID: p.id, Shard: p.shard}
		var rawV encoding.Iterator
		var rawH encoding.HistogramIterator
		if p.raw != nil {
			rawV, rawH = p.raw.Values, p.raw.Histograms
		}
		s.Values = &concatIter{first: p.fs, rest: rawV, i: -1}
		if len(p.hs) > 0 || rawH != nil {
			s.Histograms = &concatHistIter{first: p.hs, rest: rawH, i: -1}
		}
		out = append(out, s)
	}
	// Sorted by labels, as a raw answer is.
	keys := make([]labels.Labels, len(out))
	for i, s := range out {
		l, err := ident.Labels(s.ID)
		if err != nil {
			return nil, err
		}
		keys[i] = l
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(i, j int) bool { return labels.Compare(keys[idx[i]], keys[idx[j]]) < 0 })
	sorted := make([]storage.SeriesIterator, len(out))
	for i, k := range idx {
		sorted[i] = out[k]
	}
	if partial != nil {
		return sorted, partial
	}
	return sorted, nil
}

// concatIter is a rollup part's float samples, then a raw iterator's
// (rest, nil: none), all later.
type concatIter struct {
	first []prompb.Sample
	rest  encoding.Iterator
	i     int
}

func (it *concatIter) Next() bool {
	if it.i < len(it.first) {
		it.i++
		if it.i < len(it.first) {
			return true
		}
	}
	return it.rest != nil && it.rest.Next()
}

func (it *concatIter) At() (int64, float64) {
	if it.i < len(it.first) {
		s := it.first[it.i]
		return s.Timestamp, s.Value
	}
	return it.rest.At()
}

func (it *concatIter) Err() error {
	if it.rest != nil {
		return it.rest.Err()
	}
	return nil
}

// concatHistIter is concatIter for histograms: the rollup part's are
// float histograms, the raw part's whatever raw holds.
type concatHistIter struct {
	first []prompb.Histogram
	rest  encoding.HistogramIterator
	i     int
}

func (it *concatHistIter) Next() bool {
	if it.i < len(it.first) {
		it.i++
		if it.i < len(it.first) {
			return true
		}
	}
	return it.rest != nil && it.rest.Next()
}

func (it *concatHistIter) inFirst() bool { return it.i < len(it.first) }

func (it *concatHistIter) IsFloat() bool { return it.inFirst() || it.rest.IsFloat() }

func (it *concatHistIter) AtT() int64 {
	if it.inFirst() {
		return it.first[it.i].Timestamp
	}
	return it.rest.AtT()
}

func (it *concatHistIter) AtHistogram(h *histogram.Histogram) (int64, *histogram.Histogram) {
	if it.inFirst() {
		return it.first[it.i].Timestamp, it.first[it.i].ToIntHistogram()
	}
	return it.rest.AtHistogram(h)
}

func (it *concatHistIter) AtFloatHistogram(h *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	if it.inFirst() {
		return it.first[it.i].Timestamp, it.first[it.i].ToFloatHistogram()
	}
	return it.rest.AtFloatHistogram(h)
}

func (it *concatHistIter) Err() error {
	if it.rest != nil {
		return it.rest.Err()
	}
	return nil
}
