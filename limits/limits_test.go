package limits

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/uber-go/tally/v4"
)

func pairs(kv ...string) []ident.Pair {
	var out []ident.Pair
	for i := 0; i < len(kv); i += 2 {
		out = append(out, ident.Pair{Name: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return out
}

// TestLabelsAndIDAgree: the HTTP path checks decoded labels, the RPC path
// encoded IDs; both must give the same verdict and message.
func TestLabelsAndIDAgree(t *testing.T) {
	l := New(Config{MaxLabelNameLength: 8, MaxLabelValueLength: 8, MaxLabelNamesPerSeries: 3}, nil)
	for _, tc := range []struct {
		name  string
		pairs []ident.Pair
		limit string
		want  string
	}{
		{"ok", pairs("__name__", "up", "job", "x"), "", ""},
		{"no labels", nil, "", "series has no labels"},
		{"no name", pairs("job", "x"), "", "series has no __name__ label"},
		{"empty name value", pairs("__name__", "", "job", "x"), "", "series has no __name__ label"},
		{"empty label name", pairs("", "x", "__name__", "up"), "", "empty label name"},
		{"bad utf8", pairs("__name__", "up", "job", "\xff"), "", "not valid UTF-8"},
		{"duplicate", pairs("__name__", "up", "job", "a", "job", "b"), "", `duplicate label name "job"`},
		{"name length", pairs("__name__", "up", "jobbyjobb", "a"), LabelNameLength, "label name of 9 bytes \"jobbyjobb\" exceeds limits.maxLabelNameLength=8"},
		{"value length", pairs("__name__", "up", "job", "123456789"), LabelValueLength, "value of label \"job\" of 9 bytes exceeds limits.maxLabelValueLength=8"},
		{"labels", pairs("__name__", "up", "a", "1", "b", "2", "c", "3"), LabelNamesPerSeries, "series with 4 labels exceeds limits.maxLabelNamesPerSeries=3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errL := l.CheckLabels(tc.pairs)
			errID := l.CheckID(ident.AppendSortedPairs(nil, tc.pairs))
			if tc.want == "" {
				require.NoError(t, errL)
				require.NoError(t, errID)
				return
			}
			require.ErrorContains(t, errL, tc.want)
			require.Equal(t, errL.Error(), errID.Error())
			e := errL.(*Error)
			require.Equal(t, tc.limit, e.Limit)
			require.Equal(t, http.StatusBadRequest, e.Status)
		})
	}
}

func TestRefusalsCounted(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	l := New(Config{MaxLabelValueLength: 2, MaxSeriesPerRequest: 1, MaxFetchedSeriesPerQuery: 1, MaxQueryLength: time.Hour,
		MaxSeriesPerFetch: 1, MaxMetadataLength: 1}, scope)
	_ = l.CheckLabels(pairs("__name__", "long"))
	_ = l.CheckFetchIDs(2)
	require.NoError(t, l.CheckFetchIDs(1))
	_ = l.CheckMetadata("m", "help", "")
	require.NoError(t, l.CheckMetadata("m", "h", "u"))
	_ = l.CheckRequest(2, 2)
	_ = l.CheckFetchedSeries(2)
	now := time.Now()
	_ = l.CheckQueryRange("q", now.Add(-2*time.Hour), now, now)
	require.NoError(t, l.CheckQueryRange("q", now.Add(-time.Hour), now, now))
	got := map[string]int64{}
	for _, c := range scope.Snapshot().Counters() {
		got[c.Tags()["limit"]] += c.Value()
	}
	require.Equal(t, map[string]int64{
		LabelValueLength: 1, SeriesPerRequest: 1, FetchedSeriesPerQuery: 1, QueryLength: 1,
		LabelNameLength: 0, LabelNamesPerSeries: 0, SamplesPerRequest: 0, ActiveSeries: 0, QueryLookback: 0, QuerySamples: 0,
		QueryExpressionBytes: 0, QueryExpressionDepth: 0,
		SeriesPerFetch: 1, MetadataLength: 1,
	}, got)
}

// A refused value of megabytes makes a message of one readable line.
func TestMessagesStayShort(t *testing.T) {
	l := New(Config{MaxLabelValueLength: 10}, nil)
	err := l.CheckLabels(pairs("__name__", "up", "v", strings.Repeat("x", 16<<20)))
	require.ErrorContains(t, err, "of 16777216 bytes exceeds limits.maxLabelValueLength=10")
	require.Less(t, len(err.Error()), 600)
	// With no limits, Prometheus' ceiling still holds.
	err = (*Limits)(nil).CheckLabels(pairs("__name__", "up", "v", strings.Repeat("x", 16<<20)))
	require.ErrorContains(t, err, "name or value of more than 16777215 bytes")
}

// FuzzCheckID: any bytes are refused or accepted without panicking, and an
// accepted ID is canonical: it decodes to labels that encode back to it.
func FuzzCheckID(f *testing.F) {
	f.Add(ident.AppendSortedPairs(nil, pairs("__name__", "up", "job", "x")))
	f.Add([]byte{0xff})
	f.Add([]byte("\x01b\x011\x01a\x012"))
	l := New(Config{MaxLabelNameLength: 64, MaxLabelValueLength: 64, MaxLabelNamesPerSeries: 8}, nil)
	f.Fuzz(func(t *testing.T, id []byte) {
		if l.CheckID(id) != nil {
			return
		}
		lset, err := ident.Labels(id)
		require.NoError(t, err)
		require.True(t, bytes.Equal(id, ident.FromLabels(lset)), "accepted a non-canonical ID %q", id)
		require.True(t, lset.Has("__name__"))
	})
}
