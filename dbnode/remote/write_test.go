package remote

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/retain"
	"github.com/tessera-tsdb/tessera/limits"
)

func marshal(t testing.TB, req *prompb.WriteRequest) []byte {
	b, err := req.Marshal()
	require.NoError(t, err)
	return b
}

func TestDecodeMatchesPrompb(t *testing.T) {
	stale := math.Float64frombits(0x7ff0000000000002)
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{
			Labels:  []prompb.Label{{Name: "job", Value: "node"}, {Name: "__name__", Value: "up"}},
			Samples: []prompb.Sample{{Timestamp: 1000, Value: 1}, {Timestamp: 2000, Value: stale}},
		},
		{
			Labels:  []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "a", Value: "é"}},
			Samples: []prompb.Sample{{Timestamp: -5, Value: -1.5}},
		},
	}}
	var d WriteDecoder
	require.NoError(t, d.Decode(marshal(t, req)))
	require.Len(t, d.Series, 2)
	require.Equal(t, 3, d.NumSamples)
	require.Equal(t, ident.FromLabels(labels.FromStrings("__name__", "up", "job", "node")), d.Series[0].ID)
	require.Equal(t, ident.FromLabels(labels.FromStrings("__name__", "x", "a", "é")), d.Series[1].ID)
	require.Equal(t, int64(2000), d.Series[0].Samples[1].T)
	require.Equal(t, uint64(0x7ff0000000000002), math.Float64bits(d.Series[0].Samples[1].V))
	require.Equal(t, int64(-5), d.Series[1].Samples[0].T)
	require.Equal(t, -1.5, d.Series[1].Samples[0].V)

	// Buffers are reused: a second decode gives the same answer.
	require.NoError(t, d.Decode(marshal(t, req)))
	require.Len(t, d.Series, 2)
}

func TestDecodeRejectsBadInput(t *testing.T) {
	series := func(ls ...prompb.Label) []byte {
		return marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}})
	}
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"garbage", []byte{0xff, 0xff, 0xff}, "bad protobuf"},
		{"truncated", series(prompb.Label{Name: "__name__", Value: "up"})[:5], "bad protobuf"},
		{"no name", series(prompb.Label{Name: "job", Value: "x"}), "no __name__"},
		{"empty name value", series(prompb.Label{Name: "__name__", Value: ""}), "series has no labels (a label with an empty value is no label"},
		{"empty label name", series(prompb.Label{Name: "__name__", Value: "up"}, prompb.Label{Name: "", Value: "x"}), "empty label name"},
		{"duplicate", series(prompb.Label{Name: "__name__", Value: "up"}, prompb.Label{Name: "a", Value: "1"}, prompb.Label{Name: "a", Value: "2"}), "duplicate label name"},
		{"bad utf8 value", series(prompb.Label{Name: "__name__", Value: "up"}, prompb.Label{Name: "a", Value: "\xff"}), "not valid UTF-8"},
		{"bad utf8 name", series(prompb.Label{Name: "__name__", Value: "up"}, prompb.Label{Name: "\xc3", Value: "x"}), "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d WriteDecoder
			err := d.Decode(tc.body)
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestDecodeRefusesWhatItDoesNotStore: a request carrying native
// histograms is refused whole with a reason, floats
// included, whether or not its series are known.
func TestDecodeRefusesWhatItDoesNotStore(t *testing.T) {
	floats := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "up"}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}
	hist := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "lat"}, {Name: "job", Value: "a"}},
		Histograms: []prompb.Histogram{prompb.FromIntHistogram(5, &histogram.Histogram{Count: 3, Sum: 2, Schema: 0,
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{3}})}}
	for _, tc := range []struct {
		name, reason, want string
		req                *prompb.WriteRequest
	}{
		{"histograms only", ReasonHistograms, `timeseries 0 {__name__="lat", job="a"} carries native histogram samples: not supported yet`,
			&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{hist}}},
		{"floats then histograms", ReasonHistograms, "timeseries 1 {__name__=\"lat\", job=\"a\"} carries native histogram samples",
			&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{floats, hist}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := marshal(t, tc.req)
			for _, known := range []bool{false, true} {
				d := WriteDecoder{}
				if known {
					d.Known = func(_ []LabelKey, k []bool) {
						for i := range k {
							k[i] = true
						}
					}
				}
				err := d.Decode(body)
				var ie *InputError
				require.ErrorAs(t, err, &ie)
				require.Equal(t, tc.reason, ie.Reason)
				require.Contains(t, err.Error(), tc.want)
				require.Contains(t, err.Error(), "nothing was written")
			}
		})
	}
}

func TestDecodeExemplarsV1(t *testing.T) {
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "up"}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "req"}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}},
			Exemplars: []prompb.Exemplar{
				{Labels: []prompb.Label{{Name: "trace_id", Value: "abc"}, {Name: "span_id", Value: "1"}}, Value: 0.5, Timestamp: 7},
				{Value: 2, Timestamp: 8},
			}},
	}}
	// Known or not, a series with exemplars has them decoded.
	for _, known := range []bool{false, true} {
		d := WriteDecoder{}
		if known {
			d.Known = func(_ []LabelKey, k []bool) { clear(k); k[1] = true }
		}
		require.NoError(t, d.Decode(marshal(t, req)))
		require.Equal(t, []Exemplar{{Series: 1, From: 0, To: 2, V: 0.5, T: 7}, {Series: 1, From: 2, To: 2, V: 2, T: 8}}, d.Exemplars)
		require.Equal(t, []ident.Pair{{Name: []byte("trace_id"), Value: []byte("abc")}, {Name: []byte("span_id"), Value: []byte("1")}}, d.ExemplarPairs)
		require.False(t, d.Series[1].Known)
		require.NotNil(t, d.Series[1].ID)
	}
	req.Timeseries[1].Exemplars[1].Labels = []prompb.Label{{Name: "trace_id", Value: strings.Repeat("x", 121)}}
	var d WriteDecoder
	require.ErrorContains(t, d.Decode(marshal(t, req)), "timeseries 1: exemplar labels are 129 UTF-8 characters long, over the limit of 128")
}

func TestDecodeMetadataV1(t *testing.T) {
	req := &prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "up"}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}},
		Metadata: []prompb.MetricMetadata{
			{MetricFamilyName: "up", Type: prompb.MetricMetadata_GAUGE, Help: "Is it up"},
			{MetricFamilyName: "req_seconds", Type: prompb.MetricMetadata_HISTOGRAM, Help: "Latency", Unit: "seconds"},
		}}
	var d WriteDecoder
	require.NoError(t, d.Decode(marshal(t, req)))
	require.Equal(t, 1, d.NumSamples)
	require.Equal(t, []Metadata{
		{Series: -1, Type: 2, Name: []byte("up"), Help: []byte("Is it up")},
		{Series: -1, Type: 3, Name: []byte("req_seconds"), Help: []byte("Latency"), Unit: []byte("seconds")},
	}, d.Meta)
	req.Metadata = append(req.Metadata, prompb.MetricMetadata{Help: "no name"})
	err := d.Decode(marshal(t, req))
	require.ErrorContains(t, err, "bad metadata 2: no metric_family_name")
}

func FuzzWriteDecoder(f *testing.F) {
	f.Add(marshal(f, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "up"}},
		Samples: []prompb.Sample{{Timestamp: 1, Value: 1}},
	}}}))
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Add(marshal(f, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels: []prompb.Label{{Name: "__name__", Value: "lat"}},
		Histograms: []prompb.Histogram{prompb.FromIntHistogram(1, &histogram.Histogram{Count: 1,
			PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{1}})},
	}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Accepting histograms: whatever decodes agrees with prompb on
		// the histogram count, and each has exactly one of H and FH.
		hd := WriteDecoder{AcceptHistograms: true}
		if hd.Decode(b) == nil {
			var req prompb.WriteRequest
			if req.Unmarshal(b) == nil {
				n := 0
				for _, ts := range req.Timeseries {
					n += len(ts.Histograms)
				}
				require.Len(t, hd.Histograms, n)
			}
			for _, h := range hd.Histograms {
				require.True(t, (h.H == nil) != (h.FH == nil))
				require.Less(t, h.Series, len(hd.Series))
			}
		}
		var d WriteDecoder
		if err := d.Decode(b); err != nil {
			return
		}
		// Whatever decodes must agree with prompb on sample count.
		var req prompb.WriteRequest
		if req.Unmarshal(b) != nil {
			return
		}
		n := 0
		for _, ts := range req.Timeseries {
			n += len(ts.Samples)
		}
		if n != d.NumSamples {
			t.Fatalf("decoded %d samples, prompb %d", d.NumSamples, n)
		}
		// Told every series is known, a decoder must not fail where a full
		// decode succeeded, and must find the same samples (a series whose
		// key turns out not to be its labels is decoded in full).
		k := WriteDecoder{Known: func(_ []LabelKey, known []bool) {
			for i := range known {
				known[i] = true
			}
		}}
		if err := k.Decode(b); err != nil {
			t.Fatalf("known decode failed where full decode did not: %v", err)
		}
		if len(k.Series) != len(d.Series) {
			t.Fatalf("known decode: %d series, full %d", len(k.Series), len(d.Series))
		}
		for i := range d.Series {
			if !slices.EqualFunc(k.Series[i].Samples, d.Series[i].Samples, func(a, b Sample) bool {
				return a.T == b.T && math.Float64bits(a.V) == math.Float64bits(b.V)
			}) {
				t.Fatalf("series %d: known decode samples %v, full %v", i, k.Series[i].Samples, d.Series[i].Samples)
			}
			if !k.Series[i].Known && !bytes.Equal(k.Series[i].ID, d.Series[i].ID) {
				t.Fatalf("series %d: fallback ID differs", i)
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	req := &prompb.WriteRequest{}
	for i := 0; i < 2000; i++ {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels: []prompb.Label{
				{Name: "__name__", Value: "node_cpu_seconds_total"}, {Name: "cpu", Value: "3"},
				{Name: "instance", Value: "host-0001:9100"}, {Name: "job", Value: "node"}, {Name: "mode", Value: "idle"},
				{Name: "series", Value: string(rune('a' + i%26))},
			},
			Samples: []prompb.Sample{{Timestamp: int64(i), Value: float64(i)}},
		})
	}
	body := marshal(b, req)
	var d WriteDecoder
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2000), "ns/sample")
}

func TestDecoderReuseGivesSameIDsAndStillValidates(t *testing.T) {
	var d WriteDecoder
	ok := marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "a"}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}},
		{Labels: []prompb.Label{{Name: "job", Value: "b"}, {Name: "__name__", Value: "up"}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 2}}},
	}})
	require.NoError(t, d.Decode(ok))
	first := [][]byte{append([]byte(nil), d.Series[0].ID...), append([]byte(nil), d.Series[1].ID...)}
	for i := 0; i < 3; i++ {
		require.NoError(t, d.Decode(ok))
		require.Equal(t, first[0], d.Series[0].ID)
		require.Equal(t, first[1], d.Series[1].ID)
		require.Equal(t, 2.0, d.Series[1].Samples[0].V)
	}
	require.Equal(t, ident.FromLabels(labels.FromStrings("__name__", "up", "job", "b")), first[1])
	bad := marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "job", Value: "a"}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}},
	}})
	require.Error(t, d.Decode(bad))
}

// TestEmptyLabelValuesDropped: a label with an empty value is no label,
// as in Prometheus (its head drops them before hashing), in both remote
// write versions: {__name__="up", job=""} is the series {__name__="up"},
// with its ID. A series left without __name__ is refused naming that.
func TestEmptyLabelValuesDropped(t *testing.T) {
	want := ident.FromLabels(labels.FromStrings("__name__", "up", "zone", "a"))
	v1 := marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "job", Value: ""}, {Name: "__name__", Value: "up"}, {Name: "a", Value: ""}, {Name: "zone", Value: "a"}},
		Samples: []prompb.Sample{{Timestamp: 1, Value: 1}},
	}}})
	var d WriteDecoder
	require.NoError(t, d.Decode(v1))
	require.Equal(t, want, d.Series[0].ID, "1.0")

	st := writev2.NewSymbolTable()
	v2 := marshalV2(t, &st, writev2.TimeSeries{
		LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "up", "job", "", "zone", "a"), nil),
		Samples:    []writev2.Sample{{Value: 1, Timestamp: 1}}})
	var d2 WriteDecoderV2
	require.NoError(t, d2.Decode(v2))
	require.Equal(t, want, d2.Series[0].ID, "2.0")

	allEmpty := marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels: []prompb.Label{{Name: "__name__", Value: ""}, {Name: "job", Value: ""}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}})
	require.ErrorContains(t, d.Decode(allEmpty), "timeseries 0: series has no labels (a label with an empty value is no label, as in Prometheus)")
	emptyMetric := marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels: []prompb.Label{{Name: "__name__", Value: ""}, {Name: "job", Value: "x"}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}})
	require.ErrorContains(t, d.Decode(emptyMetric), `timeseries 0: series has no __name__ label, or an empty one (labels: {job="x"})`)
	emptyName := marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels: []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "", Value: ""}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}})
	require.ErrorContains(t, d.Decode(emptyName), "empty label name", "an empty name is refused, not dropped")
}

// TestReleaseBoundsPooledBuffers: a decoder that decoded one series of
// 100,000 labels keeps none of the buffers that grew for it
// past retain.MaxBytes; one that decoded a small request keeps them all.
func TestReleaseBoundsPooledBuffers(t *testing.T) {
	ls := []prompb.Label{{Name: "__name__", Value: "wide"}}
	for i := range 100_000 {
		ls = append(ls, prompb.Label{Name: fmt.Sprintf("l%06d", i), Value: "v"})
	}
	wide := marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}})
	var d WriteDecoder
	require.NoError(t, d.Decode(wide), "no label limit set")
	require.Greater(t, cap(d.pairs)*int(unsafe.Sizeof(ident.Pair{})), retain.MaxBytes)
	require.True(t, d.Release())
	require.Nil(t, d.pairs)

	small := marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls[:3], Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}})
	require.NoError(t, d.Decode(small))
	require.False(t, d.Release())
	require.NotNil(t, d.pairs, "a small request's buffers are reused")

	st := writev2.NewSymbolTable()
	refs := make([]uint32, 0, 2*len(ls))
	for _, l := range ls {
		refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
	}
	var d2 WriteDecoderV2
	require.NoError(t, d2.Decode(marshalV2(t, &st, writev2.TimeSeries{LabelsRefs: refs, Samples: []writev2.Sample{{Value: 1, Timestamp: 1}}})), "no label limit set")
	require.True(t, d2.Release())
	require.Nil(t, d2.pairs)
}

// A request of more series than limits.maxSeriesPerRequest is refused
// before any series is decoded: the broken last series is never reached.
func TestSeriesCountRefusedBeforeDecoding(t *testing.T) {
	l := limits.New(limits.Config{MaxSeriesPerRequest: 2}, nil)
	ts := func(name string) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}
	}
	body := marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts("a"), ts("b"), ts("")}})
	d := WriteDecoder{Limits: l}
	err := d.Decode(body)
	var le *limits.Error
	require.ErrorAs(t, err, &le)
	require.Equal(t, limits.SeriesPerRequest, le.Limit)

	st := writev2.NewSymbolTable()
	var series []writev2.TimeSeries
	for _, n := range []string{"a", "b", ""} {
		series = append(series, writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", n), nil), Samples: []writev2.Sample{{Value: 1, Timestamp: 1}}})
	}
	d2 := WriteDecoderV2{Limits: l}
	require.ErrorAs(t, d2.Decode(marshalV2(t, &st, series...)), &le)
	require.Equal(t, limits.SeriesPerRequest, le.Limit)
}
