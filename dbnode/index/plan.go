package index

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
)

// step is one matcher prepared once per query, then evaluated per block.
//
// A matcher either narrows ("intersects": it does not match "", so only
// series that have the label can match) or trims ("subtracts": it matches
// "", so every series without the label matches and the answer is the
// candidates minus the series whose value does not match). That split is
// what makes {a!="x"}, {a=""}, {a=~".*"} and friends match series without
// the label, exactly as Prometheus does.
type step struct {
	m *labels.Matcher
	// subtract: m matches "" (see above).
	subtract bool
	// lookup, when non-nil, lists the values whose postings are the answer
	// directly: the matching values of an intersecting step, the
	// non-matching values of a subtracting one. Nil means every value of
	// the label has to be tested with m.Matches.
	lookup []string
	// matchAll: the matcher accepts every value (=~".*"), a no-op.
	matchAll bool
}

// plan is a query's steps: intersecting ones first, cheapest first, so the
// candidate set is small before the expensive steps run.
type plan []step

func newPlan(ms []*labels.Matcher) (plan, error) {
	p := make(plan, 0, len(ms))
	for i, m := range ms {
		if m == nil {
			return nil, fmt.Errorf("matcher %d: %w", i, errors.New("nil matcher"))
		}
		if m.Type < labels.MatchEqual || m.Type > labels.MatchNotRegexp {
			return nil, fmt.Errorf("matcher %d %q: unknown match type %d", i, m.Name, m.Type)
		}
		empty, err := matchesEmpty(m)
		if err != nil {
			return nil, fmt.Errorf("matcher %d %q: %w", i, m.Name, err)
		}
		s := step{m: m, subtract: empty}
		switch {
		case m.Type == labels.MatchRegexp && m.Value == ".*":
			s.matchAll = true
		case m.Type == labels.MatchEqual && !s.subtract, m.Type == labels.MatchNotEqual && s.subtract:
			s.lookup = []string{m.Value}
		case m.Type == labels.MatchRegexp && !s.subtract, m.Type == labels.MatchNotRegexp && s.subtract:
			// SetMatches is only non-nil when the regexp is exactly a
			// case-sensitive alternation of literals.
			s.lookup = m.SetMatches()
		}
		p = append(p, s)
	}
	slices.SortStableFunc(p, func(a, b step) int { return a.rank() - b.rank() })
	return p, nil
}

// matchesEmpty reports whether m accepts "". A regexp matcher built as a
// struct literal instead of with labels.NewMatcher has no compiled regexp
// and panics on use; that becomes an error here rather than a crashed node.
func matchesEmpty(m *labels.Matcher) (ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unusable matcher (not built with labels.NewMatcher?): %v", r)
		}
	}()
	return m.Matches(""), nil
}

func (s step) rank() int {
	r := 0
	if s.subtract {
		r += 4
	}
	switch {
	case s.lookup != nil && len(s.lookup) == 1:
	case s.lookup != nil:
		r++
	default:
		r += 2
	}
	return r
}
