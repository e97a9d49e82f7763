package remote

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/limits"
)

// v2Series builds a 2.0 TimeSeries of ls through the symbols table, the
// way Prometheus' sender does.
func v2Series(st *writev2.SymbolsTable, ls labels.Labels, samples ...writev2.Sample) writev2.TimeSeries {
	return writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(ls, nil), Samples: samples}
}

func marshalV2(t testing.TB, st *writev2.SymbolsTable, series ...writev2.TimeSeries) []byte {
	b, err := (&writev2.Request{Symbols: st.Symbols(), Timeseries: series}).Marshal()
	require.NoError(t, err)
	return b
}

func TestDecodeV2MatchesV2Types(t *testing.T) {
	st := writev2.NewSymbolTable()
	stale := math.Float64frombits(0x7ff0000000000002)
	up := labels.FromStrings("__name__", "up", "job", "node")
	x := labels.FromStrings("__name__", "x", "a", "é")
	withMeta := v2Series(&st, x, writev2.Sample{Value: -1.5, Timestamp: -5, StartTimestamp: -100})
	withMeta.Metadata = writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize("help of x"), UnitRef: st.Symbolize("seconds")}
	body := marshalV2(t, &st,
		v2Series(&st, up, writev2.Sample{Value: 1, Timestamp: 1000}, writev2.Sample{Value: stale, Timestamp: 2000}),
		withMeta)

	var d WriteDecoderV2
	for range 2 { // buffers are reused: a second decode gives the same answer
		require.NoError(t, d.Decode(body))
		require.Len(t, d.Series, 2)
		require.Equal(t, 3, d.NumSamples)
		require.Equal(t, ident.FromLabels(up), d.Series[0].ID)
		require.Equal(t, ident.FromLabels(x), d.Series[1].ID)
		require.Equal(t, d.Series[1].ID, d.Keys[1].Raw)
		require.Equal(t, KeyHash(d.Series[1].ID), d.Keys[1].Hash)
		require.Equal(t, []Sample{{T: 1000, V: 1}}, d.Series[0].Samples[:1])
		require.Equal(t, uint64(0x7ff0000000000002), math.Float64bits(d.Series[0].Samples[1].V))
		require.Equal(t, []Sample{{T: -5, V: -1.5}}, d.Series[1].Samples)
		require.Equal(t, []Metadata{{Series: 1, Type: 1, Name: []byte("x"), Unit: []byte("seconds"), Help: []byte("help of x")}}, d.Meta)
		require.Equal(t, 0, d.NumHistograms)
		require.Equal(t, -1, d.FirstHistogram)
	}
}

func TestDecodeV2HistogramsAndExemplars(t *testing.T) {
	st := writev2.NewSymbolTable()
	f := v2Series(&st, labels.FromStrings("__name__", "f"), writev2.Sample{Value: 1, Timestamp: 1})
	h := v2Series(&st, labels.FromStrings("__name__", "h"))
	h.Histograms = []writev2.Histogram{writev2.FromIntHistogram(0, 1, &histogram.Histogram{Count: 1, Sum: 1,
		PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{1}})}
	e := v2Series(&st, labels.FromStrings("__name__", "e"), writev2.Sample{Value: 2, Timestamp: 2})
	e.Exemplars = []writev2.Exemplar{{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("trace_id", "t"), nil), Value: 2, Timestamp: 2}, {Value: 3, Timestamp: 2}}
	var d WriteDecoderV2
	require.NoError(t, d.Decode(marshalV2(t, &st, f, h, e)))
	require.Equal(t, 2, d.NumSamples)
	require.Equal(t, 1, d.NumHistograms)
	require.Equal(t, []Exemplar{{Series: 2, From: 0, To: 1, V: 2, T: 2}, {Series: 2, From: 1, To: 1, V: 3, T: 2}}, d.Exemplars)
	require.Equal(t, []ident.Pair{{Name: []byte("trace_id"), Value: []byte("t")}}, d.ExemplarPairs)
	require.Equal(t, 1, d.FirstHistogram)
	require.Len(t, d.Series, 3)
	require.Empty(t, d.Series[1].Samples)
}

func TestDecodeV2RejectsBadInput(t *testing.T) {
	st := writev2.NewSymbolTable()
	good := v2Series(&st, labels.FromStrings("__name__", "up"), writev2.Sample{Value: 1, Timestamp: 1})
	req := func(syms []string, ts ...writev2.TimeSeries) []byte {
		b, err := (&writev2.Request{Symbols: syms, Timeseries: ts}).Marshal()
		require.NoError(t, err)
		return b
	}
	odd := good
	odd.LabelsRefs = []uint32{1, 2, 1}
	past := good
	past.LabelsRefs = []uint32{1, 99}
	badMeta := good
	badMeta.Metadata = writev2.Metadata{HelpRef: 77}
	v1, err := (&writev2.Request{}).Marshal()
	require.NoError(t, err)
	v1 = append(v1, 0x0a, 0x00) // field 1: a 1.0 timeseries
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"garbage", []byte{0xff, 0xff, 0xff}, "bad protobuf"},
		{"1.0 body", v1, "remote write 1.0 body sent as 2.0"},
		{"odd refs", req(st.Symbols(), odd), "odd number (3) of label references"},
		{"ref past symbols", req(st.Symbols(), past), "label reference 99 past the"},
		{"bad metadata ref", req(st.Symbols(), badMeta), "symbol reference 77 past the"},
		{"no name", req([]string{"", "job", "x"}, writev2.TimeSeries{LabelsRefs: []uint32{1, 2}}), "no __name__"},
		{"bad utf8 symbol", req([]string{"", "__name__", "\xff"}, writev2.TimeSeries{LabelsRefs: []uint32{1, 2}}), "not valid UTF-8"},
		{"duplicate", req([]string{"", "__name__", "a"}, writev2.TimeSeries{LabelsRefs: []uint32{1, 2, 1, 2}}), "duplicate label name"},
		{"symbols[0] not empty", req([]string{"x", "__name__", "a"}, writev2.TimeSeries{LabelsRefs: []uint32{1, 2}}), `symbols[0] is "x": remote write 2.0 requires the first symbol to be the empty string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d WriteDecoderV2
			err := d.Decode(tc.body)
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			require.Contains(t, err.Error(), tc.want)
			// With the label checks left to CheckSeries the request is
			// refused the same way, by Decode or by CheckSeries.
			d2 := WriteDecoderV2{DeferLabelChecks: true}
			err = d2.Decode(tc.body)
			for i := range d2.Series {
				if err != nil {
					break
				}
				err = d2.CheckSeries(i)
			}
			require.ErrorAs(t, err, &ie)
			require.Equal(t, d.Decode(tc.body).Error(), err.Error())
			// So is it with the IDs left to BuildID (every series a
			// cache miss).
			d3 := WriteDecoderV2{DeferLabelChecks: true, DeferIDs: true}
			err = d3.Decode(tc.body)
			for i := range d3.Series {
				if err != nil {
					break
				}
				d3.BuildID(i)
				err = d3.CheckSeries(i)
			}
			require.ErrorAs(t, err, &ie)
			require.Equal(t, d.Decode(tc.body).Error(), err.Error())
		})
	}
}

// With DeferIDs a series is told from a cached ID by its label strings,
// whatever symbols they were sent as: equal strings hash and match alike,
// unequal ones never match, and labels sent out of order hash alike but
// do not match (their ID is built, and is the same ID).
func TestDecodeV2DeferIDsMatchByStrings(t *testing.T) {
	syms := []string{"", "__name__", "up", "job", "a", "__name__", "up", "b", "job", "zz"}
	smp := []writev2.Sample{{Value: 1, Timestamp: 1}}
	body, err := (&writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: smp},       // 0: {__name__=up, job=a}
		{LabelsRefs: []uint32{5, 6, 8, 4}, Samples: smp},       // 1: the same strings, other refs
		{LabelsRefs: []uint32{1, 2, 3, 7}, Samples: smp},       // 2: job=b
		{LabelsRefs: []uint32{3, 4, 1, 2}, Samples: smp},       // 3: 0's labels, unsorted
		{LabelsRefs: []uint32{1, 2, 3, 4, 9, 0}, Samples: smp}, // 4: 0 with zz="" (absent)
		{LabelsRefs: []uint32{1, 2}, Samples: smp},             // 5: {__name__=up}, a prefix of 0
		{LabelsRefs: []uint32{1, 6, 3, 4}, Samples: smp},       // 6: 0 again, mixed refs
	}}).Marshal()
	require.NoError(t, err)
	var full WriteDecoderV2
	require.NoError(t, full.Decode(body))
	d := WriteDecoderV2{DeferLabelChecks: true, DeferIDs: true}
	require.NoError(t, d.Decode(body))
	require.Len(t, d.Series, 7)
	for i := range d.Series {
		require.Nil(t, d.Series[i].ID)
		require.Nil(t, d.Keys[i].Raw)
	}
	id0 := full.Series[0].ID
	for i, want := range []bool{true, true, false, false, true, false, true} {
		require.Equal(t, want, d.MatchesID(i, id0), "series %d against %s", i, id0)
	}
	require.False(t, d.MatchesID(0, full.Series[5].ID), "a longer series does not match its prefix")
	require.False(t, d.MatchesID(0, full.Series[2].ID))
	for _, i := range []int{1, 3, 4, 6} {
		require.Equal(t, d.Keys[0].Hash, d.Keys[i].Hash, "series %d: the same labels hash alike", i)
	}
	require.NotEqual(t, d.Keys[0].Hash, d.Keys[2].Hash)
	require.NotEqual(t, d.Keys[0].Hash, d.Keys[5].Hash)
	for i := range d.Series {
		d.BuildID(i)
		require.Equal(t, full.Series[i].ID, d.Series[i].ID, "series %d", i)
		require.Equal(t, d.Series[i].ID, d.Keys[i].Raw)
		require.Equal(t, i != 3, d.MatchesID(i, d.Series[i].ID), "series %d against its own ID: only labels sent sorted match", i)
	}
}

// Against the ID-building decoder on random requests: MatchesID never
// says yes to another series' ID, says yes to its own when the labels came
// sorted, and equal IDs hash alike.
func TestDecodeV2DeferIDsAgreesWithIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	strs := []string{"__name__", "up", "job", "a", "b", "", "instance", "x", "instance_name", "tessera_bench_series_0", strings.Repeat("h", 200), "host-12.example:9100"}
	for range 300 {
		syms := []string{""}
		for range 1 + rng.IntN(10) {
			syms = append(syms, strs[rng.IntN(len(strs))])
		}
		var series []writev2.TimeSeries
		for range 1 + rng.IntN(8) {
			refs := make([]uint32, 2*rng.IntN(4))
			for j := range refs {
				refs[j] = uint32(rng.IntN(len(syms)))
			}
			// Metadata repeated on series or not, as a sender repeats it.
			md := writev2.Metadata{Type: writev2.Metadata_MetricType(rng.IntN(3)), HelpRef: uint32(rng.IntN(2))}
			series = append(series, writev2.TimeSeries{LabelsRefs: refs, Metadata: md})
		}
		body, err := (&writev2.Request{Symbols: syms, Timeseries: series}).Marshal()
		require.NoError(t, err)
		checkDeferIDs(t, body)
	}
}

// checkDeferIDs checks a DeferIDs decode of body against an ID-building
// one (both leaving the label checks, so that any labels decode).
func checkDeferIDs(t *testing.T, body []byte) {
	ids := WriteDecoderV2{DeferLabelChecks: true}
	d := WriteDecoderV2{DeferLabelChecks: true, DeferIDs: true}
	err, derr := ids.Decode(body), d.Decode(body)
	if err != nil || derr != nil {
		require.Equal(t, fmt.Sprint(err), fmt.Sprint(derr))
		return
	}
	require.Len(t, d.Series, len(ids.Series))
	// The same metadata, names included, unless a series has two names
	// (then which one names it depends on the labels' order).
	twoNames := false
	for i := range d.Series {
		names := 0
		for k, r := range d.refs[2*d.spans[i] : 2*d.spans[i+1]] {
			if k%2 == 0 && string(d.symbols[r]) == "__name__" {
				names++
			}
		}
		twoNames = twoNames || names > 1
	}
	if !twoNames {
		require.Equal(t, ids.Meta, d.Meta)
	}
	n := min(len(ids.Series), 64)
	for i := range n {
		refs := d.refs[2*d.spans[i] : 2*d.spans[i+1]]
		sorted := true
		for k := 2; k < len(refs); k += 2 {
			sorted = sorted && bytes.Compare(d.symbols[refs[k-2]], d.symbols[refs[k]]) <= 0
		}
		for j := range n {
			same := bytes.Equal(ids.Series[i].ID, ids.Series[j].ID)
			if d.MatchesID(i, ids.Series[j].ID) && !same {
				t.Fatalf("series %d matches the ID %q of series %d, its own is %q", i, ids.Series[j].ID, j, ids.Series[i].ID)
			}
			if same && sorted && !d.MatchesID(i, ids.Series[j].ID) {
				t.Fatalf("series %d, sent sorted, does not match its ID %q", i, ids.Series[j].ID)
			}
			if same && d.Keys[i].Hash != d.Keys[j].Hash {
				t.Fatalf("series %d and %d: one ID %q, two hashes", i, j, ids.Series[i].ID)
			}
		}
	}
	for i := range d.Series {
		d.BuildID(i)
		require.Equal(t, ids.Series[i].ID, d.Series[i].ID)
	}
}

func FuzzWriteDecoderV2(f *testing.F) {
	st := writev2.NewSymbolTable()
	s := v2Series(&st, labels.FromStrings("__name__", "up", "job", "a"), writev2.Sample{Value: 1, Timestamp: 1, StartTimestamp: 1})
	s.Metadata = writev2.Metadata{Type: 2, HelpRef: st.Symbolize("h")}
	s.Exemplars = []writev2.Exemplar{{Value: 1, Timestamp: 1}}
	f.Add(marshalV2(f, &st, s))
	f.Add([]byte{0x22, 0x00, 0x2a, 0x02, 0x08, 0x00})
	h := v2Series(&st, labels.FromStrings("__name__", "lat"))
	h.Histograms = []writev2.Histogram{writev2.FromFloatHistogram(0, 1, &histogram.FloatHistogram{Count: 1,
		PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []float64{1}})}
	f.Add(marshalV2(f, &st, h))
	f.Fuzz(func(t *testing.T, b []byte) {
		hd := WriteDecoderV2{AcceptHistograms: true}
		if hd.Decode(b) == nil {
			require.Len(t, hd.Histograms, hd.NumHistograms)
			for _, h := range hd.Histograms {
				require.True(t, (h.H == nil) != (h.FH == nil))
				require.Less(t, h.Series, len(hd.Series))
			}
		}
		checkDeferIDs(t, b)
		var d WriteDecoderV2
		if err := d.Decode(b); err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error is not an InputError: %v", err)
			}
			return
		}
		// Whatever decodes must agree with the v2 Go types.
		var req writev2.Request
		if req.Unmarshal(b) != nil {
			return
		}
		if len(req.Timeseries) != len(d.Series) {
			t.Fatalf("decoded %d series, v2 types %d", len(d.Series), len(req.Timeseries))
		}
		n := 0
		var sb labels.ScratchBuilder
		for i, ts := range req.Timeseries {
			n += len(ts.Samples)
			ls, err := ts.ToLabels(&sb, req.Symbols)
			if err != nil {
				t.Fatalf("series %d: v2 types cannot read labels we decoded: %v", i, err)
			}
			sb.Reset()
			if string(ident.FromLabels(ls)) != string(d.Series[i].ID) {
				// Duplicate names collapse differently; we refuse those.
				t.Fatalf("series %d: ID differs from the v2 types' labels %s", i, ls)
			}
		}
		if n != d.NumSamples {
			t.Fatalf("decoded %d samples, v2 types %d", d.NumSamples, n)
		}
	})
}

func BenchmarkDecodeV2(b *testing.B) {
	st := writev2.NewSymbolTable()
	var series []writev2.TimeSeries
	for i := 0; i < 2000; i++ {
		ls := labels.FromStrings("__name__", "node_cpu_seconds_total", "cpu", "3", "instance", "host-0001:9100",
			"job", "node", "mode", "idle", "series", strconv.Itoa(i))
		s := v2Series(&st, ls, writev2.Sample{Timestamp: int64(i), Value: float64(i)})
		s.Metadata = writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize("Seconds the CPUs spent in each mode.")}
		series = append(series, s)
	}
	body := marshalV2(b, &st, series...)
	var d WriteDecoderV2
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2000), "ns/sample")
}

// A 2.0 request repeats a metric's metadata on each of its series: Meta
// keeps it once (per run of repeats), with the first series' index.
func TestDecodeV2MetadataOncePerMetric(t *testing.T) {
	st := writev2.NewSymbolTable()
	var series []writev2.TimeSeries
	for i := range 6 {
		s := v2Series(&st, labels.FromStrings("__name__", "m"+strconv.Itoa(i%2), "i", strconv.Itoa(i)), writev2.Sample{Value: 1, Timestamp: 1})
		s.Metadata = writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("help " + strconv.Itoa(i%2))}
		series = append(series, s)
	}
	var d WriteDecoderV2
	require.NoError(t, d.Decode(marshalV2(t, &st, series...)))
	require.Equal(t, []Metadata{
		{Series: 0, Type: 2, Name: []byte("m0"), Help: []byte("help 0")},
		{Series: 1, Type: 2, Name: []byte("m1"), Help: []byte("help 1")},
	}, d.Meta)
}

// A series over the label count limit is refused by Decode with the same
// error whether its IDs are built or left to BuildID; labels of empty
// value are not counted either way.
func TestDecodeV2DeferIDsLabelCount(t *testing.T) {
	l := limits.New(limits.Config{MaxLabelNamesPerSeries: 2}, nil)
	syms := []string{"", "__name__", "up", "job", "a", "zone", ""}
	for _, tc := range []struct {
		refs []uint32
		ok   bool
	}{
		{[]uint32{1, 2, 3, 4}, true},
		{[]uint32{1, 2, 3, 4, 5, 6}, true}, // zone="" is absent
		{[]uint32{3, 4, 1, 2, 5, 4}, false},
	} {
		body, err := (&writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{{LabelsRefs: tc.refs}}}).Marshal()
		require.NoError(t, err)
		ids := WriteDecoderV2{Limits: l, DeferLabelChecks: true}
		d := WriteDecoderV2{Limits: l, DeferLabelChecks: true, DeferIDs: true}
		want, got := ids.Decode(body), d.Decode(body)
		require.Equal(t, tc.ok, want == nil, "%v: %v", tc.refs, want)
		require.Equal(t, fmt.Sprint(want), fmt.Sprint(got))
	}
}

// BenchmarkDecodeV2Steady is the decoder's part of a steady 2.0 write as
// the node runs it (DeferIDs): Decode of a request shaped as `tessera
// bench` sends it (5 labels, 4 metrics, metadata on every series), then
// every series compared with its ID (MatchesID), as the series cache
// does on a hit.
func BenchmarkDecodeV2Steady(b *testing.B) {
	const n = 5000
	st := writev2.NewSymbolTable()
	var series []writev2.TimeSeries
	var ids [][]byte
	for i := range n {
		ls := labels.FromStrings("__name__", "tessera_bench_"+strconv.Itoa(i%4), "group", strconv.Itoa(i/100),
			"instance", "host-"+strconv.Itoa(i%50)+":9100", "job", "bench", "series", strconv.Itoa(i))
		s := v2Series(&st, ls, writev2.Sample{Timestamp: 1_700_000_000_000 + int64(i), Value: float64(i)})
		s.Metadata = writev2.Metadata{Type: writev2.Metadata_MetricType(1 + i%4/3), HelpRef: st.Symbolize("Tessera bench series of kind " + strconv.Itoa(i%4) + ".")}
		series = append(series, s)
		var pairs []ident.Pair
		ls.Range(func(l labels.Label) { pairs = append(pairs, ident.Pair{Name: []byte(l.Name), Value: []byte(l.Value)}) })
		ids = append(ids, ident.AppendSortedPairs(nil, pairs))
	}
	body := marshalV2(b, &st, series...)
	d := WriteDecoderV2{DeferLabelChecks: true, DeferIDs: true}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := d.Decode(body); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if !d.MatchesID(i, ids[i]) {
				b.Fatalf("series %d does not match its ID", i)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
}
