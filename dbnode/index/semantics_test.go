package index

import (
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/ident"
)

// fixture is a small namespace with blockSize 10: block -10 (old), 0, 10.
// Keys name the series in expectations.
var fixture = []struct {
	key    string
	labels []string
	blocks []int64
}{
	{"up-a", []string{"__name__", "up", "job", "node", "instance", "a"}, []int64{0}},
	{"up-b", []string{"__name__", "up", "job", "node", "instance", "b"}, []int64{0}},
	{"up-prom", []string{"__name__", "up", "job", "prom"}, []int64{0}},
	{"up-emptyjob", []string{"__name__", "up", "job", "", "instance", "c"}, []int64{0}}, // explicit empty value
	{"cpu-user", []string{"__name__", "node_cpu_seconds_total", "mode", "user", "cpu", "0", "instance", "a"}, []int64{0}},
	{"cpu-system", []string{"__name__", "node_cpu_seconds_total", "mode", "system", "cpu", "0", "instance", "a"}, []int64{0}},
	{"cpu-idle", []string{"__name__", "node_cpu_seconds_total", "mode", "idle", "cpu", "1", "instance", "a"}, []int64{0}},
	{"a-xy", []string{"__name__", "xy", "a", "xy"}, []int64{0}},
	{"a-x", []string{"__name__", "x", "a", "x"}, []int64{0, 0}}, // duplicate insert
	{"old", []string{"__name__", "old", "a", "x"}, []int64{-10}},
	{"new", []string{"__name__", "new", "a", "y"}, []int64{10}},
}

func loadFixture(t *testing.T) (*Index, *model, map[string]string) {
	ix, ref := New(10), newModel(10)
	keys := map[string]string{}
	for _, s := range fixture {
		id := sid(s.labels...)
		keys[s.key] = string(id)
		for _, b := range s.blocks {
			require.NoError(t, ix.Insert(id, b))
			ref.insert(id, b)
		}
	}
	return ix, ref, keys
}

var block0 = []string{"up-a", "up-b", "up-prom", "up-emptyjob", "cpu-user", "cpu-system", "cpu-idle", "a-xy", "a-x"}

func except(all []string, out ...string) []string {
	var r []string
	for _, k := range all {
		if !slices.Contains(out, k) {
			r = append(r, k)
		}
	}
	return r
}

func TestQuerySemantics(t *testing.T) {
	type m = [3]string
	cases := []struct {
		name       string
		matchers   []m
		start, end int64
		want       []string // keys; also checked against the brute-force model
	}{
		{"equal", []m{{"a", "=", "x"}}, 0, 9, []string{"a-x"}},
		{"not equal matches absent", []m{{"a", "!=", "x"}}, 0, 9, except(block0, "a-x")},
		{"equal empty is absent", []m{{"a", "=", ""}}, 0, 9, except(block0, "a-x", "a-xy")},
		{"not equal empty is present", []m{{"a", "!=", ""}}, 0, 9, []string{"a-xy", "a-x"}},
		{"regexp alternation anchored", []m{{"a", "=~", "x|y"}}, 0, 9, []string{"a-x"}},
		{"regexp literal anchored", []m{{"a", "=~", "x"}}, 0, 9, []string{"a-x"}},
		{"regexp prefix", []m{{"a", "=~", "x.+"}}, 0, 9, []string{"a-xy"}},
		{"regexp dot star matches absent", []m{{"a", "=~", ".*"}}, 0, 9, block0},
		{"regexp dot plus needs label", []m{{"a", "=~", ".+"}}, 0, 9, []string{"a-xy", "a-x"}},
		{"not regexp", []m{{"a", "!~", "x.*"}}, 0, 9, except(block0, "a-x", "a-xy")},
		{"regexp empty", []m{{"a", "=~", ""}}, 0, 9, except(block0, "a-x", "a-xy")},
		{"regexp with empty alternative", []m{{"a", "=~", "x|"}}, 0, 9, except(block0, "a-xy")},
		{"not regexp empty", []m{{"a", "!~", ""}}, 0, 9, []string{"a-xy", "a-x"}},
		{"explicit empty value equals absent", []m{{"job", "=", ""}}, 0, 9, []string{"up-emptyjob", "cpu-user", "cpu-system", "cpu-idle", "a-xy", "a-x"}},
		{"explicit empty value not present", []m{{"job", "!=", ""}}, 0, 9, []string{"up-a", "up-b", "up-prom"}},
		{"name and not equal", []m{{"__name__", "=", "up"}, {"job", "!=", "prom"}}, 0, 9, []string{"up-a", "up-b", "up-emptyjob"}},
		{"name regexp", []m{{"__name__", "=~", "u.*|x"}}, 0, 9, []string{"up-a", "up-b", "up-prom", "up-emptyjob", "a-x"}},
		{"name regexp case insensitive", []m{{"__name__", "=~", "(?i)UP"}}, 0, 9, []string{"up-a", "up-b", "up-prom", "up-emptyjob"}},
		{"cpu user or system", []m{{"__name__", "=~", "node_cpu_.*"}, {"mode", "=~", "user|system"}}, 0, 9, []string{"cpu-user", "cpu-system"}},
		{"cpu negatives", []m{{"__name__", "=", "node_cpu_seconds_total"}, {"mode", "!~", "idle|iowait"}, {"cpu", "!=", "1"}}, 0, 9, []string{"cpu-user", "cpu-system"}},
		{"missing label equal", []m{{"nope", "=", "v"}}, 0, 9, nil},
		{"missing label not equal", []m{{"nope", "!=", "v"}}, 0, 9, block0},
		{"only negative", []m{{"__name__", "!=", "up"}}, 0, 9, []string{"cpu-user", "cpu-system", "cpu-idle", "a-xy", "a-x"}},
		{"only negatives", []m{{"instance", "!~", "a|b"}, {"job", "!=", "node"}}, 0, 9, []string{"up-prom", "up-emptyjob", "a-xy", "a-x"}},
		{"contradiction", []m{{"a", "=~", "x"}, {"a", "!=", "x"}}, 0, 9, nil},
		{"set regexp with missing value", []m{{"__name__", "=", "up"}, {"instance", "=~", "a|c|z"}}, 0, 9, []string{"up-a", "up-emptyjob"}},
		{"no matchers", nil, 0, 9, block0},
		{"old block only", []m{{"a", "=", "x"}}, -10, -1, []string{"old"}},
		{"old and current block", []m{{"a", "=", "x"}}, -10, 9, []string{"old", "a-x"}},
		{"later block excludes older series", []m{{"a", "=~", "x|y"}}, 10, 19, []string{"new"}},
		{"range straddling blocks", []m{{"a", "=~", "x|y"}}, 5, 15, []string{"a-x", "new"}},
		{"inclusive end at block start", []m{{"a", "=", "y"}}, 0, 10, []string{"new"}},
		{"range after everything", []m{{"a", "!=", "q"}}, 20, 30, nil},
		{"inverted range", []m{{"a", "!=", "q"}}, 9, 0, nil},
	}
	ix, ref, keys := loadFixture(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ms []*labels.Matcher
			for _, x := range c.matchers {
				ms = append(ms, mt(t, x[0], x[1], x[2]))
			}
			want := []string{}
			for _, k := range c.want {
				id, ok := keys[k]
				require.True(t, ok, k)
				want = append(want, id)
			}
			slices.Sort(want)
			require.Equal(t, want, ref.query(t, ms, c.start, c.end), "expectation disagrees with the brute-force model")
			got, err := ix.Query(ms, c.start, c.end)
			require.NoError(t, err)
			require.Equal(t, want, asStrings(got))

			names, err := ix.LabelNames(ms, c.start, c.end)
			require.NoError(t, err)
			require.Equal(t, ref.labelNames(t, ms, c.start, c.end), names)
			for _, n := range []string{"__name__", "a", "job", "instance", "mode"} {
				vals, err := ix.LabelValues(n, ms, c.start, c.end)
				require.NoError(t, err)
				require.Equal(t, ref.labelValues(t, n, ms, c.start, c.end), vals, "values of %s", n)
			}
		})
	}
}

func TestLabelNamesAndValues(t *testing.T) {
	ix, _, _ := loadFixture(t)
	names, err := ix.LabelNames(nil, 0, 9)
	require.NoError(t, err)
	// job="" alone would not list job; here job has other values.
	require.Equal(t, []string{"__name__", "a", "cpu", "instance", "job", "mode"}, names)

	names, err = ix.LabelNames([]*labels.Matcher{mt(t, "__name__", "=", "up")}, 0, 9)
	require.NoError(t, err)
	require.Equal(t, []string{"__name__", "instance", "job"}, names)

	vals, err := ix.LabelValues("__name__", nil, -100, 100)
	require.NoError(t, err)
	require.Equal(t, []string{"new", "node_cpu_seconds_total", "old", "up", "x", "xy"}, vals)

	vals, err = ix.LabelValues("instance", []*labels.Matcher{mt(t, "job", "!=", "node")}, 0, 9)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "c"}, vals)

	vals, err = ix.LabelValues("nope", nil, 0, 9)
	require.NoError(t, err)
	require.Empty(t, vals)
}

func TestInsertRejectsMalformedIDs(t *testing.T) {
	ix := New(10)
	dup := append(sid("a", "1"), sid("a", "2")...)
	unsorted := append(sid("b", "1"), sid("a", "2")...)
	for name, id := range map[string][]byte{
		"empty":      nil,
		"truncated":  {0x05, 'a'},
		"bad varint": {0xff},
		"duplicate":  dup,
		"unsorted":   unsorted,
		"empty name": sid("", "x"),
	} {
		t.Run(name, func(t *testing.T) {
			err := ix.Insert(id, 0)
			require.ErrorIs(t, err, ident.ErrMalformedID)
		})
	}
	require.Zero(t, ix.NumSeries())
}

func TestInsertRoundsBlockStartAndIsIdempotent(t *testing.T) {
	ix := New(10)
	id := sid("__name__", "up")
	for _, ts := range []int64{13, 10, 19, 10} {
		require.NoError(t, ix.Insert(id, ts))
	}
	require.NoError(t, ix.Insert(id, -3)) // block -10
	require.Equal(t, 1, ix.NumSeries())
	got, err := ix.Query(nil, 10, 19)
	require.NoError(t, err)
	require.Equal(t, [][]byte{id}, got)
	got, err = ix.Query(nil, -10, -1)
	require.NoError(t, err)
	require.Equal(t, [][]byte{id}, got)
	got, err = ix.Query(nil, 0, 9)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestQueryRejectsBadMatchers(t *testing.T) {
	ix := New(10)
	_, err := ix.Query([]*labels.Matcher{nil}, 0, 1)
	require.ErrorContains(t, err, "nil matcher")
	_, err = ix.LabelNames([]*labels.Matcher{{Type: 9, Name: "a"}}, 0, 1)
	require.ErrorContains(t, err, "unknown match type")
	_, err = ix.LabelValues("a", []*labels.Matcher{{Type: labels.MatchRegexp, Name: "a", Value: "x"}}, 0, 1)
	require.ErrorContains(t, err, "unusable matcher")
}

// TestInsertNewStringMatchesInsert: the replay's insert builds what
// Insert builds, for new series, series already in the index (in the
// same block and in another), repeats and malformed IDs.
func TestInsertNewStringMatchesInsert(t *testing.T) {
	a, b := New(10), New(10)
	ins := []struct {
		id []byte
		bs int64
	}{
		{sid("__name__", "up", "job", "x"), 0},
		{sid("__name__", "up", "job", "y"), 0},
		{sid("__name__", "up", "job", "x"), 0},  // repeat
		{sid("__name__", "up", "job", "x"), 15}, // known series, new block
		{[]byte{0xff, 0xff}, 0},                 // malformed
	}
	for _, in := range ins {
		errA := a.Insert(in.id, in.bs)
		errB := b.InsertNewString(string(in.id), in.bs)
		require.Equal(t, errA == nil, errB == nil, "%q: %v / %v", in.id, errA, errB)
		if errB != nil {
			require.ErrorIs(t, errB, ident.ErrMalformedID)
		}
	}
	require.Equal(t, 2, b.NumSeries())
	require.Equal(t, a.NumSeries(), b.NumSeries())
	for _, r := range [][2]int64{{0, 9}, {10, 19}, {0, 19}} {
		for _, v := range []string{"x", "y"} {
			ms := []*labels.Matcher{mt(t, "job", "=", v)}
			want, err := a.Query(ms, r[0], r[1])
			require.NoError(t, err)
			got, err := b.Query(ms, r[0], r[1])
			require.NoError(t, err)
			require.Equal(t, asStrings(want), asStrings(got), "job=%s %v", v, r)
		}
		wv, err := a.LabelValues("job", nil, r[0], r[1])
		require.NoError(t, err)
		gv, err := b.LabelValues("job", nil, r[0], r[1])
		require.NoError(t, err)
		require.Equal(t, wv, gv)
	}
	got, err := b.Query([]*labels.Matcher{mt(t, "job", "=", "x")}, 10, 19)
	require.NoError(t, err)
	require.Equal(t, []string{string(sid("__name__", "up", "job", "x"))}, asStrings(got))
}
