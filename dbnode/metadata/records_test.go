package metadata

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
)

var (
	counter = Entry{Type: model.MetricTypeCounter, Help: "Requests."}
	gauge   = Entry{Type: model.MetricTypeGauge, Unit: "bytes"}
)

// TestMergeUnionPerMetric: the answers of several nodes become one set
// per metric, each entry once, then the limits apply by name.
func TestMergeUnionPerMetric(t *testing.T) {
	other := Entry{Type: model.MetricTypeCounter, Help: "Requests served."}
	dst := map[string][]Entry{"a": {counter}}
	Merge(dst, map[string][]Entry{"a": {other, counter}, "b": {gauge}})
	Merge(dst, map[string][]Entry{"b": {gauge}, "c": {gauge}})
	require.Equal(t, map[string][]Entry{"a": {counter, other}, "b": {gauge}, "c": {gauge}}, dst)
	require.Equal(t, map[string][]Entry{"a": {counter}, "b": {gauge}}, Limit(dst, 2, 1))
	require.Empty(t, Limit(map[string][]Entry{"a": {counter}}, 0, -1))
}

// TestSnapshotRebuildsStore: AddRecords of a snapshot gives the same
// answers, entries in the same order.
func TestSnapshotRebuildsStore(t *testing.T) {
	s := New(10)
	s.AddRecords([]Record{{"a", counter}, {"a", gauge}, {"b", gauge}})
	r := New(10)
	r.AddRecords(s.Snapshot())
	require.Equal(t, s.Query("", -1, -1), r.Query("", -1, -1))
	require.Equal(t, []Entry{gauge, counter}, r.Query("a", -1, -1)["a"])
}

// TestResendOnlyWhatIsDue: unchanged metadata is forwarded once per
// Every; a change is forwarded at once.
func TestResendOnlyWhatIsDue(t *testing.T) {
	r := &Resend{Every: time.Minute, Max: 10}
	ms := []remote.Metadata{
		{Name: []byte("a"), Type: 1, Help: []byte("Requests.")},
		{Name: []byte("a"), Type: 1, Help: []byte("Requests.")},
		{Name: []byte("b"), Type: 2, Unit: []byte("bytes")},
	}
	now := time.Unix(1000, 0)
	require.Equal(t, []Record{{"a", counter}, {"b", gauge}}, r.Due(ms, now, nil))
	require.Empty(t, r.Due(ms, now.Add(time.Second), nil))
	ms[2].Unit = []byte("kilobytes")
	require.Equal(t, []Record{{"b", Entry{Type: model.MetricTypeGauge, Unit: "kilobytes"}}}, r.Due(ms, now.Add(2*time.Second), nil))
	require.Len(t, r.Due(ms, now.Add(2*time.Minute), nil), 2)
}
