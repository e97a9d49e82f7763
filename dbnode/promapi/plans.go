package promapi

import (
	"crypto/rand"
	"encoding/hex"
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

// markedPlans registers plans of one kind under the marker matchers
// standing for them; the fast path and the rollup rewrite each keep one.
type markedPlans[P any] struct {
	m   sync.Map // weak.Pointer[labels.Matcher] -> *P
	seq atomic.Uint64
}

// mark returns a new matcher on label marker standing for pl.
func (r *markedPlans[P]) mark(marker string, pl *P) *labels.Matcher {
	m := labels.MustNewMatcher(labels.MatchEqual, marker, strconv.FormatUint(r.seq.Add(1), 10))
	k := weak.Make(m)
	r.m.Store(k, pl)
	runtime.AddCleanup(m, func(k weak.Pointer[labels.Matcher]) { r.m.Delete(k) }, k)
	return m
}

// of is the plan m stands for, nil when m is not a marker matcher made
// by mark.
func (r *markedPlans[P]) of(m *labels.Matcher) *P {
	v, ok := r.m.Load(weak.Make(m))
	if !ok {
		return nil
	}
	return v.(*P)
}

// newMarker is a marker label name no user query can hold: prefix and
// random hex, a new one per parser.
func newMarker(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:]) + "__"
}

var plans markedPlans[plan]

// planMatcher returns a new marker matcher standing for pl.
func (p fastParser) planMatcher(pl *plan) *labels.Matcher { return plans.mark(p.marker, pl) }

// planOf is the plan m stands for, nil when m is not a marker matcher
// the rewrite made.
func planOf(m *labels.Matcher) *plan { return plans.of(m) }
