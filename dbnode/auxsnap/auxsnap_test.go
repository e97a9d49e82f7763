package auxsnap

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/ident"
)

func testItems() []exemplars.Item {
	var out []exemplars.Item
	for i := range 10 {
		ls := labels.FromStrings("__name__", "req_total", "pod", string(rune('a'+i%3)))
		out = append(out, exemplars.Item{SeriesID: ident.FromLabels(ls),
			Labels: labels.FromStrings("trace_id", "t"+string(rune('0'+i)), "span_id", "s"), V: float64(i) / 3, T: int64(i) * 1000})
	}
	out = append(out, exemplars.Item{SeriesID: ident.FromLabels(labels.FromStrings("__name__", "x")), V: math.Inf(-1), T: math.MinInt64})
	return out
}

func testRecords() []metadata.Record {
	return []metadata.Record{
		{Metric: "req_total", Entry: metadata.Entry{Type: model.MetricTypeCounter, Help: "Requests."}},
		{Metric: "req_total", Entry: metadata.Entry{Type: model.MetricTypeCounter, Help: "Requests served."}},
		{Metric: "mem", Entry: metadata.Entry{Type: model.MetricTypeGauge, Unit: "bytes"}},
	}
}

func TestRoundTrip(t *testing.T) {
	items, err := DecodeExemplars(EncodeExemplars(testItems()))
	require.NoError(t, err)
	require.Equal(t, testItems(), items)
	rs, err := DecodeMetadata(EncodeMetadata(testRecords()))
	require.NoError(t, err)
	require.Equal(t, testRecords(), rs)

	empty, err := DecodeExemplars(nil)
	require.NoError(t, err)
	require.Empty(t, empty)
	_, err = DecodeMetadata(EncodeExemplars(testItems()))
	require.ErrorAs(t, err, new(*DamageError), "a file of the other kind is refused")
}

func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "aux", "metadata.snap")
	b, err := Load(vfs.OS(), path)
	require.NoError(t, err, "no snapshot yet is an empty one")
	require.Nil(t, b)
	require.NoError(t, Save(vfs.OS(), path, EncodeMetadata(testRecords())))
	b, err = Load(vfs.OS(), path)
	require.NoError(t, err)
	rs, err := DecodeMetadata(b)
	require.NoError(t, err)
	require.Equal(t, testRecords(), rs)
}

// TestDamageCostsOnlyTheRest flips every bit and cuts at every length:
// decoding never panics, keeps exactly the records before the damage
// (each one equal to what was written) and reports it.
func TestDamageCostsOnlyTheRest(t *testing.T) {
	want := testItems()
	good := EncodeExemplars(want)
	check := func(b []byte, what string) {
		items, err := DecodeExemplars(b)
		require.LessOrEqual(t, len(items), len(want), what)
		if len(items) > 0 {
			require.Equal(t, want[:len(items)], items, what)
		}
		var de *DamageError
		if err != nil {
			require.True(t, errors.As(err, &de), what)
			require.Equal(t, len(items), de.Kept, what)
		}
	}
	for i := range len(good) * 8 {
		b := append([]byte(nil), good...)
		b[i/8] ^= 1 << (i % 8)
		check(b, "bit flipped")
		items, err := DecodeExemplars(b)
		if i/8 >= len(magic)+1 {
			require.Error(t, err, "bit %d flipped undetected", i)
			require.Less(t, len(items), len(want))
		}
	}
	for n := range len(good) {
		check(good[:n], "cut")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(EncodeExemplars(testItems()))
	f.Add(EncodeMetadata(testRecords()))
	f.Add([]byte(magic + "E\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := DecodeExemplars(b)
		if err == nil {
			// What decodes whole encodes back to the same bytes.
			if len(b) > 0 {
				require.Equal(t, b, EncodeExemplars(items))
			}
		}
		rs, err := DecodeMetadata(b)
		if err == nil && len(b) > 0 {
			require.Equal(t, b, EncodeMetadata(rs))
		}
	})
}
