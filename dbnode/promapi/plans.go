package promapi

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/prometheus/prometheus/model/labels"
)

// A rewritten selector carries its plan as a typed Go value, not as text:
// the rewrite (rewrite.go, fastbinop.go) appends to the selector a marker
// matcher it allocated itself and registers the plan under that
// matcher's pointer. The engine hands Querier.Select the selector's own
// matchers slice (populateSeries: n.LabelMatchers...), so the querier
// finds the plan by the last matcher's identity. A user's matcher can
// never be such a pointer, and a marker matcher that reaches Select
// without a plan is an error, never a plain selection.
//
// The registry is keyed by weak pointers and an entry is deleted when its
// matcher is garbage collected (runtime.AddCleanup), so a plan lives as
// long as the parsed query that holds it, whether or not it ran.

// plan is what a marker matcher stands for: exactly one of a per-series
// computation (sel, optionally aggregated) and a binary operator (bin).
type plan struct {
	sel *fastSpec
	bin *binPlan
}

var (
	plans   sync.Map // weak.Pointer[labels.Matcher] -> *plan
	planSeq atomic.Uint64
)

// planMatcher returns a new marker matcher standing for pl.
func (p fastParser) planMatcher(pl *plan) *labels.Matcher {
	m := labels.MustNewMatcher(labels.MatchEqual, p.marker, strconv.FormatUint(planSeq.Add(1), 10))
	k := weak.Make(m)
	plans.Store(k, pl)
	runtime.AddCleanup(m, func(k weak.Pointer[labels.Matcher]) { plans.Delete(k) }, k)
	return m
}

// planOf is the plan m stands for, nil when m is not a marker matcher
// the rewrite made.
func planOf(m *labels.Matcher) *plan {
	v, ok := plans.Load(weak.Make(m))
	if !ok {
		return nil
	}
	return v.(*plan)
}
