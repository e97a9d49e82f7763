package httpapi

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/ident"
)

// wireLabels is what Prometheus' marshaller writes for ls: the label
// fields of a TimeSeries.
func wireLabels(t testing.TB, ls ...prompb.Label) []byte {
	raw, err := (&prompb.TimeSeries{Labels: ls}).Marshal()
	require.NoError(t, err)
	return raw
}

func idOfLabels(ls ...prompb.Label) []byte {
	pairs := make([]ident.Pair, len(ls))
	for i, l := range ls {
		pairs[i] = ident.Pair{Name: []byte(l.Name), Value: []byte(l.Value)}
	}
	return ident.AppendPairs(nil, pairs)
}

// formCases are label sets whose comparison takes every path of
// labelsAreID: segments shorter than, exactly and longer than a word,
// compared in the word starting or ending at them or byte by byte (IDs
// shorter than a word), one-byte and two-byte lengths, and the varint path
// after the fast one.
var formCases = map[string][]prompb.Label{
	"bench":       {{Name: "__name__", Value: "tessera_bench_1"}, {Name: "group", Value: "1234"}, {Name: "instance", Value: "host-17:9100"}, {Name: "job", Value: "bench"}, {Name: "series", Value: "123456"}},
	"tiny":        {{Name: "a", Value: "b"}},
	"short":       {{Name: "__name__", Value: "up"}, {Name: "job", Value: "node"}},
	"one":         {{Name: "__name__", Value: "x"}},
	"word":        {{Name: "abcdefg", Value: "1234567"}, {Name: "abcdefgh", Value: "12345678"}},
	"words":       {{Name: "abcdefghijklmnop", Value: "0123456789abcdefg"}, {Name: "z", Value: "y"}},
	"long value":  {{Name: "__name__", Value: "up"}, {Name: "a", Value: strings.Repeat("v", 200)}, {Name: strings.Repeat("n", 130), Value: "x"}},
	"long first":  {{Name: strings.Repeat("a", 127), Value: "x"}, {Name: "b", Value: "y"}},
	"msg at 127":  {{Name: "a", Value: strings.Repeat("v", 122)}, {Name: "b", Value: "y"}},
	"msg at 128":  {{Name: "a", Value: strings.Repeat("v", 123)}, {Name: "b", Value: "y"}},
	"long last":   {{Name: "a", Value: "b"}, {Name: "c", Value: strings.Repeat("d", 300)}},
	"three bytes": {{Name: "a", Value: strings.Repeat("v", 20000)}},
}

// The sorted labels Prometheus sends are their ID's form, and the
// decoder's raw key for them is those bytes; any other bytes are not,
// even for the same labels: every truncation, extension and single-bit
// change is refused.
func TestLabelsAreID(t *testing.T) {
	for name, ls := range formCases {
		id, raw := idOfLabels(ls...), wireLabels(t, ls...)
		require.True(t, labelsAreID(raw, id), name)
		require.True(t, labelsAreIDVarint(raw, id), name)

		if ls[0].Name == "__name__" { // the decoder refuses series without a name
			var d remote.WriteDecoder
			req, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}}).Marshal()
			require.NoError(t, err)
			require.NoError(t, d.Decode(req), name)
			require.Equal(t, raw, d.Keys[0].Raw, name)
			require.Equal(t, id, d.Series[0].ID, name)
		}

		for i := range raw {
			require.False(t, labelsAreID(raw[:i], id), "%s: truncated at %d", name, i)
			for _, bit := range []byte{0x01, 0x80} {
				bad := append([]byte(nil), raw...)
				bad[i] ^= bit
				require.False(t, labelsAreID(bad, id), "%s: byte %d changed", name, i)
			}
		}
		for i := range id {
			bad := append([]byte(nil), id...)
			bad[i] ^= 0x01
			require.False(t, labelsAreID(raw, bad), "%s: ID byte %d changed", name, i)
			require.False(t, labelsAreID(raw, id[:i]), "%s: ID truncated at %d", name, i)
		}
		require.False(t, labelsAreID(append(append([]byte(nil), raw...), 0x0a, 0), id), name)
		require.False(t, labelsAreID(append(append([]byte(nil), raw...), raw...), id), name)
	}
	ls := []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "node"}}
	require.False(t, labelsAreID(wireLabels(t, ls[1], ls[0]), idOfLabels(ls...)), "unsorted: other bytes")
	// An empty value has no field 2 on the wire, and is no ID's form.
	empty := []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "e", Value: ""}}
	require.False(t, labelsAreID(wireLabels(t, empty...), idOfLabels(empty...)))
	// A length written with a longer varint than needed is other bytes.
	require.False(t, labelsAreID([]byte{0x0a, 0x86, 0x00, 0x0a, 0x01, 'a', 0x12, 0x01, 'b'}, idOfLabels(prompb.Label{Name: "a", Value: "b"})))
	require.False(t, labelsAreID([]byte{0x0a, 0x07, 0x0a, 0x81, 0x00, 'a', 0x12, 0x01, 'b'}, []byte{0x81, 0x00, 'a', 1, 'b'}), "a non-minimal length in the ID")
	require.True(t, labelsAreID([]byte{0x0a, 0x06, 0x0a, 0x01, 'a', 0x12, 0x01, 'b'}, idOfLabels(prompb.Label{Name: "a", Value: "b"})))
	require.True(t, labelsAreID(nil, nil), "no labels: no bytes")
}

// Labels of every short length, alone or after another label, take
// every way labelsAreID reads a name or value (the word ending at it, the
// word starting at it, one word or more, the varint comparison of IDs too
// short for a word): each is recognised, and a change of any bit of any
// byte of the wire form or of the ID is not.
func TestLabelsAreIDLengths(t *testing.T) {
	text := func(n int, c byte) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = c + byte(i)
		}
		return string(b)
	}
	for nl := 1; nl <= 20; nl++ {
		for vl := 1; vl <= 20; vl++ {
			l := prompb.Label{Name: text(nl, 'A'), Value: text(vl, 'a')}
			for _, ls := range [][]prompb.Label{{l}, {{Name: "0", Value: "v"}, l}, {l, {Name: "~", Value: "v"}}} {
				id, raw := idOfLabels(ls...), wireLabels(t, ls...)
				require.True(t, labelsAreID(raw, id), "%q", id)
				for i := range raw {
					for _, bit := range []byte{0x01, 0x80} {
						raw[i] ^= bit
						require.False(t, labelsAreID(raw, id), "%q: wire byte %d changed", id, i)
						raw[i] ^= bit
					}
				}
				for i := range id {
					id[i] ^= 0x01
					require.False(t, labelsAreID(raw, id), "%q: ID byte %d changed", id, i)
					id[i] ^= 0x01
				}
			}
		}
	}
}

// For one ID, at most one byte string is its form: whatever raw it
// accepts is the one the marshaller writes for the ID's labels (so a
// cache comparing a request's bytes with an ID's form compares them with
// the bytes the entry was decoded from). The word-at-a-time comparison
// and the varint one agree on everything.
func FuzzLabelsAreID(f *testing.F) {
	f.Add([]byte{0x0a, 0x06, 0x0a, 0x01, 'a', 0x12, 0x01, 'b'}, []byte{1, 'a', 1, 'b'})
	f.Add([]byte{0x0a, 0x86, 0x00, 0x0a, 0x01, 'a', 0x12, 0x01, 'b'}, []byte{1, 'a', 1, 'b'})
	f.Add([]byte{}, []byte{})
	for _, ls := range formCases {
		if raw := wireLabels(f, ls...); len(raw) < 1000 {
			f.Add(raw, idOfLabels(ls...))
		}
	}
	f.Fuzz(func(t *testing.T, raw, id []byte) {
		fast, slow := labelsAreID(raw, id), labelsAreIDVarint(raw, id)
		if fast != slow {
			t.Fatalf("labelsAreID(%x, %x) = %v, the varint comparison says %v", raw, id, fast, slow)
		}
		if !fast {
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

// BenchmarkLabelsAreID is the check a cache hit of remote write 1.0 pays,
// next to the comparison of a copy of the bytes it replaces.
func BenchmarkLabelsAreID(b *testing.B) {
	ls := formCases["bench"]
	id, raw := idOfLabels(ls...), wireLabels(b, ls...)
	kept := append([]byte(nil), raw...)
	b.Run("form", func(b *testing.B) {
		for b.Loop() {
			if !labelsAreID(raw, id) {
				b.Fatal("not the ID's form")
			}
		}
	})
	b.Run("varint", func(b *testing.B) {
		for b.Loop() {
			if !labelsAreIDVarint(raw, id) {
				b.Fatal("not the ID's form")
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			if string(raw) != string(kept) {
				b.Fatal("not equal")
			}
		}
	})
}
