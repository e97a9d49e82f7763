package index

import (
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tessera-tsdb/tessera/ident"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sid builds a series ID from name/value pairs.
func sid(kv ...string) []byte { return ident.FromLabels(labels.FromStrings(kv...)) }

// mt builds a matcher from its parts, failing the test on a bad regexp.
func mt(t testing.TB, name, op, value string) *labels.Matcher {
	t.Helper()
	types := map[string]labels.MatchType{"=": labels.MatchEqual, "!=": labels.MatchNotEqual, "=~": labels.MatchRegexp, "!~": labels.MatchNotRegexp}
	typ, ok := types[op]
	require.True(t, ok, "operator %q", op)
	m, err := labels.NewMatcher(typ, name, value)
	require.NoError(t, err)
	return m
}

// model is the brute-force reference: every series with its full label set
// and the blocks it was inserted into.
type model struct {
	blockSize int64
	series    map[string]map[int64]bool // ID -> block starts
}

func newModel(blockSize int64) *model {
	return &model{blockSize: blockSize, series: map[string]map[int64]bool{}}
}

func (m *model) insert(id []byte, blockStart int64) {
	bs := m.series[string(id)]
	if bs == nil {
		bs = map[int64]bool{}
		m.series[string(id)] = bs
	}
	bs[blockStart] = true
}

func (m *model) dropBefore(t int64) {
	for id, bs := range m.series {
		for s := range bs {
			if s+m.blockSize <= t {
				delete(bs, s)
			}
		}
		if len(bs) == 0 {
			delete(m.series, id)
		}
	}
}

// inRange reports whether the series has a block overlapping [start, end].
func (m *model) inRange(id string, start, end int64) bool {
	if start > end {
		return false
	}
	for s := range m.series[id] {
		if s <= end && s+m.blockSize-1 >= start {
			return true
		}
	}
	return false
}

// matches evaluates matchers literally over the full label set: a label the
// series lacks has the value "".
func matches(ls labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (m *model) selected(t require.TestingT, ms []*labels.Matcher, start, end int64) []labels.Labels {
	var out []labels.Labels
	for id := range m.series {
		if !m.inRange(id, start, end) {
			continue
		}
		ls, err := ident.Labels([]byte(id))
		require.NoError(t, err)
		if matches(ls, ms) {
			out = append(out, ls)
		}
	}
	return out
}

func (m *model) query(t require.TestingT, ms []*labels.Matcher, start, end int64) []string {
	out := []string{}
	for _, ls := range m.selected(t, ms, start, end) {
		out = append(out, string(ident.FromLabels(ls)))
	}
	slices.Sort(out)
	return out
}

func (m *model) labelNames(t require.TestingT, ms []*labels.Matcher, start, end int64) []string {
	set := map[string]struct{}{}
	for _, ls := range m.selected(t, ms, start, end) {
		ls.Range(func(l labels.Label) {
			if l.Value != "" {
				set[l.Name] = struct{}{}
			}
		})
	}
	return sortedKeys(set)
}

func (m *model) labelValues(t require.TestingT, name string, ms []*labels.Matcher, start, end int64) []string {
	set := map[string]struct{}{}
	for _, ls := range m.selected(t, ms, start, end) {
		if v := ls.Get(name); v != "" {
			set[v] = struct{}{}
		}
	}
	return sortedKeys(set)
}

func asStrings(ids [][]byte) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}
