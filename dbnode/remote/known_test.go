package remote

import (
	"bytes"
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

// A decoder told a series is known decodes only its samples, the same
// samples as a full decode, and leaves the ID to the caller; the keys it
// hands Known are the label bytes, equal for equal label sets sent alike.
func TestKnownDecodesSamplesOnly(t *testing.T) {
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
		samples := []prompb.Sample{{Timestamp: 1, Value: 1}, {Timestamp: rapid.Int64().Draw(t, "t"), Value: rapid.Float64().Draw(t, "v")}}
		body, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: samples}}}).Marshal()
		require.NoError(t, err)
		var d WriteDecoder
		if err := d.Decode(body); err != nil {
			return // invalid label sets are refused before any cache
		}
		require.True(t, d.Series[0].Keyed)
		raw := append([]byte(nil), d.Keys[0].Raw...)
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

// A known series whose label fields do not all come first (a label after
// a sample) is decoded in full: the leading labels were not the series.
func TestKnownFallsBackWhenLabelsAreSplit(t *testing.T) {
	firstRaw, _ := labelBytes(t, []prompb.Label{{Name: "__name__", Value: "up"}})
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
			known[i] = bytes.Equal(k.Raw, firstRaw)
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
