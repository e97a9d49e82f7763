package remote

import (
	"fmt"
	"testing"

	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// labelBytes returns the raw label fields the decoder keys a series by.
func labelBytes(t testing.TB, ls []prompb.Label) (raw, id []byte) {
	t.Helper()
	var d WriteDecoder
	require.NoError(t, d.Decode(marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}})))
	return append([]byte(nil), d.Keys[0].Raw...), append([]byte(nil), d.Series[0].ID...)
}

func TestLabelsMatchID(t *testing.T) {
	sorted := []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "node"}}
	raw, id := labelBytes(t, sorted)
	require.True(t, LabelsMatchID(raw, id))

	// Same labels in another order: same ID, but the bytes are not the
	// ID's order, so they never stand for it.
	rawRev, idRev := labelBytes(t, []prompb.Label{sorted[1], sorted[0]})
	require.Equal(t, id, idRev)
	require.False(t, LabelsMatchID(rawRev, id))

	other, otherID := labelBytes(t, []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "nodf"}})
	require.False(t, LabelsMatchID(other, id))
	require.False(t, LabelsMatchID(raw, otherID))
	require.False(t, LabelsMatchID(raw, id[:len(id)-1]), "ID cut short")
	require.False(t, LabelsMatchID(raw, append(id[:len(id):len(id)], 1, 'a', 1, 'b')), "ID with an extra label")
	require.False(t, LabelsMatchID(raw[:len(raw)-1], id), "labels cut short")
	require.False(t, LabelsMatchID(nil, id))
	require.True(t, LabelsMatchID(nil, nil))

	// A value of 128 bytes or more has a two-byte length: not the plain
	// form, never matched (decoded in full instead).
	long := make([]byte, 200)
	for i := range long {
		long[i] = 'a'
	}
	rawLong, idLong := labelBytes(t, []prompb.Label{{Name: "__name__", Value: string(long)}})
	require.False(t, LabelsMatchID(rawLong, idLong))
}

// Whenever LabelsMatchID(raw, id) holds for some label set, decoding raw
// yields exactly id (what a cache relies on).
func TestLabelsMatchIDProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "n")
		ls := []prompb.Label{{Name: "__name__", Value: rapid.StringMatching(`[a-z_]{1,10}`).Draw(t, "name")}}
		for i := range n {
			ls = append(ls, prompb.Label{Name: fmt.Sprintf("l%d", i), Value: rapid.OneOf(rapid.StringMatching(`[a-z0-9]{1,20}`), rapid.StringN(0, 140, -1)).Draw(t, "v")})
		}
		if rapid.Bool().Draw(t, "shuffle") {
			j := rapid.IntRange(0, len(ls)-1).Draw(t, "j")
			ls[0], ls[j] = ls[j], ls[0]
		}
		var d WriteDecoder
		body, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}}).Marshal()
		require.NoError(t, err)
		if err := d.Decode(body); err != nil {
			return // invalid label sets are refused before any cache
		}
		raw, id := d.Keys[0].Raw, d.Series[0].ID
		require.True(t, d.Series[0].Keyed)
		if !LabelsMatchID(raw, id) {
			return
		}
		// Matched: a decoder told the series is known gives the same
		// samples, and leaves the ID to the caller.
		var k WriteDecoder
		k.Known = func(keys []LabelKey, known []bool) {
			require.Len(t, keys, 1)
			require.Equal(t, raw, keys[0].Raw)
			known[0] = true
		}
		require.NoError(t, k.Decode(body))
		require.True(t, k.Series[0].Known)
		require.Nil(t, k.Series[0].ID)
		require.Equal(t, d.Series[0].Samples, k.Series[0].Samples)
	})
}

// FuzzLabelsMatchID checks soundness on arbitrary bytes: if raw matches
// id, a TimeSeries made of raw and a sample decodes, without help, to id.
func FuzzLabelsMatchID(f *testing.F) {
	raw, id := labelBytes(f, []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "node"}})
	f.Add(raw, id)
	f.Add(raw[:len(raw)-2], id)
	f.Fuzz(func(t *testing.T, raw, id []byte) {
		if !LabelsMatchID(raw, id) {
			return
		}
		msg := append([]byte(nil), raw...)
		msg = append(msg, 0x12, 11, 0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 1) // sample {1.0, 1}
		body := append([]byte{0x0a}, byte(len(msg)))
		if len(msg) >= 0x80 {
			body = append([]byte{0x0a}, byte(len(msg))|0x80, byte(len(msg)>>7))
		}
		body = append(body, msg...)
		var d WriteDecoder
		if err := d.Decode(body); err != nil {
			// The raw labels matched an ID the decoder would refuse (no
			// __name__, bad UTF-8...): such an ID is never cached, since
			// only decoded IDs are.
			return
		}
		require.Equal(t, id, d.Series[0].ID)
	})
}

// A known series whose label fields do not all come first (a label after
// a sample) is decoded in full: the leading labels were not the series.
func TestKnownFallsBackWhenLabelsAreSplit(t *testing.T) {
	_, firstID := labelBytes(t, []prompb.Label{{Name: "__name__", Value: "up"}})
	// TimeSeries: label __name__=up, sample, label job=x.
	lbl := func(n, v string) []byte {
		m := append([]byte{0x0a, byte(len(n))}, n...)
		m = append(m, 0x12, byte(len(v)))
		m = append(m, v...)
		return append([]byte{0x0a, byte(len(m))}, m...)
	}
	msg := lbl("__name__", "up")
	msg = append(msg, 0x12, 11, 0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 1)
	msg = append(msg, lbl("job", "x")...)
	body := append([]byte{0x0a, byte(len(msg))}, msg...)

	calls := 0
	d := WriteDecoder{Known: func(keys []LabelKey, known []bool) {
		calls++
		for i, k := range keys {
			known[i] = LabelsMatchID(k.Raw, firstID)
		}
	}}
	require.NoError(t, d.Decode(body))
	require.Equal(t, 1, calls)
	require.False(t, d.Series[0].Known)
	require.False(t, d.Series[0].Keyed, "split labels are no cache key")
	_, want := labelBytes(t, []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "x"}})
	require.Equal(t, want, d.Series[0].ID)
	require.Len(t, d.Series[0].Samples, 1)
}
