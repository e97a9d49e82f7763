package remote

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
)

// wireLabels is what Prometheus' marshaller writes for ls: the label
// fields of a TimeSeries.
func wireLabels(t testing.TB, ls ...prompb.Label) []byte {
	raw, err := (&prompb.TimeSeries{Labels: ls}).Marshal()
	require.NoError(t, err)
	return raw
}

func idOf(ls ...prompb.Label) []byte {
	pairs := make([]ident.Pair, len(ls))
	for i, l := range ls {
		pairs[i] = ident.Pair{Name: []byte(l.Name), Value: []byte(l.Value)}
	}
	return ident.AppendPairs(nil, pairs)
}

// The sorted labels Prometheus sends are their ID's form, long names and
// values (two-byte lengths) included, and the decoder's raw key for them
// is those bytes; any other bytes are not, even for the same labels.
func TestLabelsAreID(t *testing.T) {
	long := strings.Repeat("v", 200)
	for name, ls := range map[string][]prompb.Label{
		"short": {{Name: "__name__", Value: "up"}, {Name: "job", Value: "node"}},
		"long":  {{Name: "__name__", Value: "up"}, {Name: "a", Value: long}, {Name: strings.Repeat("n", 130), Value: "x"}},
		"one":   {{Name: "__name__", Value: "x"}},
	} {
		id, raw := idOf(ls...), wireLabels(t, ls...)
		require.True(t, LabelsAreID(raw, id), name)

		var d WriteDecoder
		req := marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}})
		require.NoError(t, d.Decode(req), name)
		require.Equal(t, raw, d.Keys[0].Raw, name)
		require.Equal(t, id, d.Series[0].ID, name)

		// Every truncation, extension and single-byte change is refused.
		for i := range raw {
			require.False(t, LabelsAreID(raw[:i], id), "%s: truncated at %d", name, i)
			bad := append([]byte(nil), raw...)
			bad[i] ^= 0x01
			require.False(t, LabelsAreID(bad, id), "%s: byte %d changed", name, i)
		}
		require.False(t, LabelsAreID(append(append([]byte(nil), raw...), 0x0a, 0), id), name)
		require.False(t, LabelsAreID(raw, id[:len(id)-1]), name)
	}
	ls := []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "node"}}
	require.False(t, LabelsAreID(wireLabels(t, ls[1], ls[0]), idOf(ls...)), "unsorted: other bytes")
	// An empty value has no field 2 on the wire, and is no ID's form.
	empty := []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "e", Value: ""}}
	require.False(t, LabelsAreID(wireLabels(t, empty...), idOf(empty...)))
	// A length written with a longer varint than needed is other bytes.
	require.False(t, LabelsAreID([]byte{0x0a, 0x86, 0x00, 0x0a, 0x01, 'a', 0x12, 0x01, 'b'}, idOf(prompb.Label{Name: "a", Value: "b"})))
	require.True(t, LabelsAreID([]byte{0x0a, 0x06, 0x0a, 0x01, 'a', 0x12, 0x01, 'b'}, idOf(prompb.Label{Name: "a", Value: "b"})))
}

// For one ID, at most one byte string is its form: whatever raw it
// accepts is the one the marshaller writes for the ID's labels (so a
// cache comparing a request's bytes with an ID's form compares them with
// the bytes the entry was decoded from).
func FuzzLabelsAreID(f *testing.F) {
	f.Add([]byte{0x0a, 0x06, 0x0a, 0x01, 'a', 0x12, 0x01, 'b'}, []byte{1, 'a', 1, 'b'})
	f.Add([]byte{0x0a, 0x86, 0x00, 0x0a, 0x01, 'a', 0x12, 0x01, 'b'}, []byte{1, 'a', 1, 'b'})
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, raw, id []byte) {
		if !LabelsAreID(raw, id) {
			return
		}
		var ls []prompb.Label
		if err := ident.Range(id, func(name, value []byte) {
			ls = append(ls, prompb.Label{Name: string(name), Value: string(value)})
		}); err != nil {
			t.Fatalf("accepted %x for an ID that does not decode: %v", raw, err)
		}
		if want := wireLabels(t, ls...); string(raw) != string(want) {
			t.Fatalf("accepted %x for ID %x, whose labels marshal to %x", raw, id, want)
		}
	})
}

func BenchmarkLabelsAreID(b *testing.B) {
	ls := []prompb.Label{{Name: "__name__", Value: "tessera_bench_1"}, {Name: "group", Value: "1234"},
		{Name: "instance", Value: "host-17:9100"}, {Name: "job", Value: "bench"}, {Name: "series", Value: "123456"}}
	id, raw := idOf(ls...), wireLabels(b, ls...)
	b.ReportAllocs()
	for b.Loop() {
		if !LabelsAreID(raw, id) {
			b.Fatal("not the ID's form")
		}
	}
}
