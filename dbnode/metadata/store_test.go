package metadata

import (
	"strconv"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
)

func md(name string, typ int32, help, unit string) remote.Metadata {
	return remote.Metadata{Name: []byte(name), Type: typ, Help: []byte(help), Unit: []byte(unit)}
}

func TestStoreKeepsDistinctEntriesNewestFirst(t *testing.T) {
	s := New(100)
	s.Add([]remote.Metadata{md("up", 2, "Up", ""), md("up", 2, "Up", ""), md("req", 1, "Requests", "")})
	s.Add([]remote.Metadata{md("up", 2, "Is it up", "")})
	s.Add([]remote.Metadata{md("up", 2, "Up", "")}) // back to the first: moved to the front, not repeated
	s.Add([]remote.Metadata{md("odd", 99, "", "")})
	require.Equal(t, map[string][]Entry{
		"up":  {{Type: model.MetricTypeGauge, Help: "Up"}, {Type: model.MetricTypeGauge, Help: "Is it up"}},
		"req": {{Type: model.MetricTypeCounter, Help: "Requests"}},
		"odd": {{Type: model.MetricTypeUnknown}},
	}, s.Query("", -1, -1))
	require.Equal(t, map[string][]Entry{"up": {{Type: model.MetricTypeGauge, Help: "Up"}}}, s.Query("up", -1, 1))
	require.Equal(t, map[string][]Entry{}, s.Query("nope", -1, -1))
	require.Len(t, s.Query("", 2, 0), 2)
	require.Empty(t, s.Query("", 0, 0))
	for i := range 3 * MaxPerMetric {
		s.Add([]remote.Metadata{md("churn", 1, strconv.Itoa(i), "")})
	}
	got := s.Query("churn", -1, -1)["churn"]
	require.Len(t, got, MaxPerMetric)
	require.Equal(t, strconv.Itoa(3*MaxPerMetric-1), got[0].Help)
}

func TestStoreIsBounded(t *testing.T) {
	s := New(10)
	for i := range 100 {
		s.Add([]remote.Metadata{md("m"+strconv.Itoa(i), 1, "", "")})
		// A name written again stays, however many others come.
		s.Add([]remote.Metadata{md("kept", 2, "", "")})
	}
	require.LessOrEqual(t, s.Len(), 10)
	require.Contains(t, s.Query("", -1, -1), "kept")
	require.Contains(t, s.Query("", -1, -1), "m99")
	require.NotContains(t, s.Query("", -1, -1), "m0")
}

func BenchmarkAddRepeated(b *testing.B) {
	// A 2.0 request: 5000 series of 4 metrics, metadata on each.
	ms := make([]remote.Metadata, 5000)
	for i := range ms {
		ms[i] = md("tessera_bench_"+strconv.Itoa(i%4), 2, "A benchmark gauge.", "")
	}
	s := New(10000)
	b.ReportAllocs()
	for b.Loop() {
		s.Add(ms)
	}
}
