// Package query is the seam between the PromQL engine and the data: the
// read half of a backend (Reader), and the typed request (Request) in
// which the engine's adapter (promapi) asks for a selector's values
// already computed per series at the query's steps and, optionally,
// partially aggregated across series.
//
// It sits below both the HTTP API (httpapi, whose Backend embeds Reader)
// and the engine adapter (promapi), so that neither imports the other.
// A Request is plain data: it is chosen from the parsed query by the
// adapter's planner (never carried as text in a label matcher) and is
// meant to cross the node RPC unchanged, so that a replica can answer it
// where the data lives.
package query

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// Reader is where the engine reads: this node's database or, in a
// cluster, the client session. Query's iterators are owned by the
// caller; LabelNames and LabelValues answer sorted.
type Reader interface {
	Query(ctx context.Context, namespace string, matchers []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error)
	LabelNames(ctx context.Context, namespace string, matchers []*labels.Matcher, start, end int64) ([]string, error)
	LabelValues(ctx context.Context, namespace, name string, matchers []*labels.Matcher, start, end int64) ([]string, error)
}

// StreamReader is a Reader that can answer a query with each series'
// samples as its encoded stream where they are one (storage.QueryOptions.
// Streams): the local database. Its caller reads every SeriesIterator
// through Floats (or decodes Stream itself). A reader that is not one
// answers through Query.
//
// With unsorted the answer may come in any order (storage.QueryOptions.
// Unsorted), for a caller whose answer does not depend on it; a reader
// that is not a StreamReader answers in Query's order.
type StreamReader interface {
	QueryStreams(ctx context.Context, namespace string, matchers []*labels.Matcher, start, end int64, unsorted bool) ([]storage.SeriesIterator, error)
}

// QueryStreams reads through r's QueryStreams when it has one, else its
// Query.
func QueryStreams(ctx context.Context, r Reader, namespace string, matchers []*labels.Matcher, start, end int64, unsorted bool) ([]storage.SeriesIterator, error) {
	if sr, ok := r.(StreamReader); ok {
		return sr.QueryStreams(ctx, namespace, matchers, start, end, unsorted)
	}
	return r.Query(ctx, namespace, matchers, start, end)
}

// Func is what a Request computes per series at each step: a range
// function over a window of Range ending at the step, or (FuncSelect) the
// selector's own value at the step, looked back for as the engine does.
type Func uint8

const (
	FuncSelect Func = iota
	FuncRate
	FuncIncrease
	FuncDelta
	FuncIrate
	FuncIdelta
	FuncAvgOverTime
	FuncSumOverTime
	FuncCountOverTime
	FuncMinOverTime
	FuncMaxOverTime
	numFuncs
)

// funcNames are the PromQL names of the functions; FuncSelect has none.
var funcNames = [numFuncs]string{
	FuncSelect:        "",
	FuncRate:          "rate",
	FuncIncrease:      "increase",
	FuncDelta:         "delta",
	FuncIrate:         "irate",
	FuncIdelta:        "idelta",
	FuncAvgOverTime:   "avg_over_time",
	FuncSumOverTime:   "sum_over_time",
	FuncCountOverTime: "count_over_time",
	FuncMinOverTime:   "min_over_time",
	FuncMaxOverTime:   "max_over_time",
}

// String is the function's PromQL name, "select" for FuncSelect.
func (f Func) String() string {
	switch {
	case f == FuncSelect:
		return "select"
	case f < numFuncs:
		return funcNames[f]
	}
	return fmt.Sprintf("Func(%d)", uint8(f))
}

// FuncByName returns the Func of a PromQL range function, false for a
// function a Request does not compute.
func FuncByName(name string) (Func, bool) {
	if name == "" {
		return 0, false
	}
	i := slices.Index(funcNames[:], name)
	return Func(i), i > 0
}

// Agg is the partial aggregation across series a Request asks for: one
// whose partial results merge exactly (counts) or in a stated order
// (sums, avg as sum and count).
type Agg uint8

const (
	AggNone Agg = iota
	AggSum
	AggCount
	AggAvg
	// AggGroup is count's partials read as 1 where the count is not 0:
	// on the wire it is asked as AggCount (Request.Wire), which every
	// node that pushes down computes.
	AggGroup
	// AggMin and AggMax merge exactly: the engine's comparison (a NaN is
	// replaced by any value) applied to the parts' values. Nodes that
	// predate them refuse them (InvalidArgument; Agg.Newer).
	AggMin
	AggMax
	// AggCountValues is count_values: per group of Grouping and per
	// distinct value (its text, in the label ValueLabel), the number of
	// series with that value at each step; counts merge exactly.
	AggCountValues
	numAggs
)

var aggNames = [numAggs]string{AggNone: "", AggSum: "sum", AggCount: "count", AggAvg: "avg", AggGroup: "group",
	AggMin: "min", AggMax: "max", AggCountValues: "count_values"}

// Newer reports a request kind that nodes from before it was pushed down
// refuse as invalid (InvalidArgument) rather than decline: without an
// aggregation, min, max and count_values. A coordinator reads such a
// query raw.
func (a Agg) Newer() bool {
	return a == AggNone || a == AggMin || a == AggMax || a == AggCountValues
}

// String is the aggregation's PromQL name, "" for AggNone.
func (a Agg) String() string {
	if a < numAggs {
		return aggNames[a]
	}
	return fmt.Sprintf("Agg(%d)", uint8(a))
}

// AggByName returns the Agg of a PromQL aggregation operator's name, false
// for one a Request does not compute.
func AggByName(name string) (Agg, bool) {
	if name == "" {
		return 0, false
	}
	i := slices.Index(aggNames[:], name)
	return Agg(i), i > 0
}

// Pushdown is the part of a query a Request computes below the engine:
// Func over a window of Range per selected series (Range 0 for
// FuncSelect), then, unless Agg is AggNone, Agg across the series by the
// Grouping labels (sorted, as the engine sorts them; empty: one group).
type Pushdown struct {
	Func     Func
	Range    time.Duration
	Agg      Agg
	Grouping []string
	// K, without an aggregation, asks only for topk (bottomk when Bottom)
	// candidates: at each step, per group of Grouping, the values of the
	// series fewer than K others of the group beat (the engine's order:
	// a NaN below every number), so that topk over every part's candidates
	// is topk over all the series. 0: every series' values. A node that
	// predates it answers every series' values, which serves as well.
	K      int
	Bottom bool
	// ValueLabel is count_values' label (AggCountValues only): each
	// group's labels are its Grouping labels and ValueLabel set to the
	// value, formatted as the engine formats it.
	ValueLabel string
}

// Validate reports a Pushdown no evaluator can compute.
func (p Pushdown) Validate() error {
	if p.Func >= numFuncs {
		return fmt.Errorf("pushdown: unknown function %d", p.Func)
	}
	if p.Agg >= numAggs {
		return fmt.Errorf("pushdown: unknown aggregation %d", p.Agg)
	}
	if (p.Func == FuncSelect) != (p.Range == 0) {
		return fmt.Errorf("pushdown: %s with range %s", p.Func, p.Range)
	}
	if p.Range < 0 {
		return fmt.Errorf("pushdown: negative range %s", p.Range)
	}
	if !slices.IsSorted(p.Grouping) {
		return fmt.Errorf("pushdown: grouping %q not sorted", p.Grouping)
	}
	if p.Agg == AggNone && len(p.Grouping) > 0 && p.K == 0 {
		return fmt.Errorf("pushdown: grouping %q without an aggregation", p.Grouping)
	}
	if (p.Agg == AggCountValues) != (p.ValueLabel != "") {
		return fmt.Errorf("pushdown: value label %q with aggregation %q", p.ValueLabel, p.Agg)
	}
	if p.K < 0 || (p.K > 0 && p.Agg != AggNone) || (p.Bottom && p.K == 0) {
		return fmt.Errorf("pushdown: %d candidates (bottom %v) with aggregation %q", p.K, p.Bottom, p.Agg)
	}
	return nil
}

// Steps are the evaluation times of a query: Start, Start+Step, ... up to
// End (ms, inclusive; Step 0 for an instant query at Start), and the
// engine's lookback delta for FuncSelect.
type Steps struct {
	Start, End, Step int64
	Lookback         int64
}

// Count is the number of steps.
func (s Steps) Count() int {
	if s.Step <= 0 {
		return 1
	}
	return int((s.End-s.Start)/s.Step) + 1
}

// Validate reports steps no evaluator can walk.
func (s Steps) Validate() error {
	if s.End < s.Start || s.Step < 0 || s.Lookback < 0 {
		return fmt.Errorf("steps: start %d end %d step %d lookback %d", s.Start, s.End, s.Step, s.Lookback)
	}
	return nil
}

// Request asks the data for Pushdown over the series matching Matchers at
// Steps.
type Request struct {
	Namespace string
	Matchers  []*labels.Matcher
	Steps     Steps
	Pushdown
	// DigestOnly asks for the Result's digest (and its series count)
	// without its groups or annotations: where the read level needs
	// several replicas of a part, one answers in full and the others only
	// what their answers are compared by, a digest of the samples read,
	// computing nothing from them.
	DigestOnly bool
}

// Wire is the request as it is asked of a replica: group as count (its
// partials are counts; Partial.Value reads them as group).
func (r *Request) Wire() *Request {
	if r.Agg != AggGroup {
		return r
	}
	w := *r
	w.Agg = AggCount
	return &w
}

// Validate reports a request no evaluator can compute, naming why.
func (r *Request) Validate() error {
	if err := r.Steps.Validate(); err != nil {
		return err
	}
	return r.Pushdown.Validate()
}

// FetchRange is the time range (ms, inclusive) whose samples the request
// reads: the first step's window or lookback up to the last step. The
// engine's windows are left-open, so the caller drops a sample exactly at
// the start of a window (FetchRange's first millisecond).
func (r *Request) FetchRange() (start, end int64) {
	back := r.Steps.Lookback
	if r.Func != FuncSelect {
		back = r.Range.Milliseconds()
	}
	return r.Steps.Start - back, r.Steps.End
}
