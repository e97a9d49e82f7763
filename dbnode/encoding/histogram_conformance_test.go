package encoding

import (
	"math"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// hsample is the reference model of a histogram stream: one of h or fh set,
// all samples of a stream the same type.
type hsample struct {
	t  int64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

func encodeHistStream(t tb, in []hsample) []byte {
	e := NewHistogramEncoder()
	appendHist(t, e, in)
	require.Equal(t, len(in), e.Len())
	return e.Bytes()
}

func appendHist(t tb, e *HistogramEncoder, in []hsample) {
	t.Helper()
	for _, s := range in {
		if s.h != nil {
			require.NoError(t, e.AppendHistogram(s.t, s.h))
		} else {
			require.NoError(t, e.AppendFloatHistogram(s.t, s.fh))
		}
	}
}

// histCodec is one way to encode and read back under the suite; reuse says
// whether At* is handed the same histogram every time.
type histCodec struct {
	name   string
	encode func(t tb, in []hsample) HistogramIterator
	reuse  bool
}

var histCodecs = []histCodec{
	{"stream", func(t tb, in []hsample) HistogramIterator {
		return NewHistogramIterator(encodeHistStream(t, in))
	}, false},
	{"stream-reused-target", func(t tb, in []hsample) HistogramIterator {
		return NewHistogramIterator(encodeHistStream(t, in))
	}, true},
	{"stream-copy-then-append", func(t tb, in []hsample) HistogramIterator {
		// Bytes taken mid-way decode as the prefix; appending afterwards
		// does not disturb a copy of them.
		e := NewHistogramEncoder()
		var snap []byte
		for i := range in {
			appendHist(t, e, in[i:i+1])
			if i == len(in)/2 {
				snap = slices.Clone(e.Bytes())
			}
		}
		if snap != nil {
			requireHistSamples(t, in[:len(in)/2+1], NewHistogramIterator(snap), false)
		}
		return NewHistogramIterator(slices.Clone(e.Bytes()))
	}, false},
	{"encoder-reset", func(t tb, in []hsample) HistogramIterator {
		// An encoder that held another stream, of the other type, leaks
		// nothing into the next.
		e := NewHistogramEncoder()
		other := histConformanceCases()["nhcb"]
		if len(in) > 0 && in[0].h != nil {
			other = histConformanceCases()["float schema changes"]
		}
		appendHist(t, e, other)
		_ = e.Bytes()
		e.Reset()
		var cnt int
		for _, s := range in {
			cnt++
			appendHist(t, e, []hsample{s})
		}
		require.Equal(t, cnt, e.Len())
		return NewHistogramIterator(e.Bytes())
	}, false},
}

// requireHistSamples drains it and compares every field bit for bit.
func requireHistSamples(t tb, want []hsample, it HistogramIterator, reuse bool) {
	t.Helper()
	got := drainHist(it, reuse)
	require.NoError(t, it.Err())
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].t, got[i].t, "timestamp of histogram %d", i)
		if want[i].h != nil {
			require.True(t, it.IsFloat() == false, "stream type")
			if !histEqual(want[i].h, got[i].h) {
				require.Equal(t, want[i].h.String(), got[i].h.String(), "histogram %d", i)
				require.Failf(t, "histogram differs", "histogram %d:\nwant %#v\n got %#v", i, want[i].h, got[i].h)
			}
		} else if !floatHistEqual(want[i].fh, got[i].fh) {
			require.Failf(t, "float histogram differs", "histogram %d:\nwant %#v\n got %#v", i, want[i].fh, got[i].fh)
		}
	}
}

func drainHist(it HistogramIterator, reuse bool) []hsample {
	var out []hsample
	var h *histogram.Histogram
	var fh *histogram.FloatHistogram
	for it.Next() {
		var s hsample
		if it.IsFloat() {
			s.t, s.fh = it.AtFloatHistogram(fh)
			if reuse {
				fh = s.fh
				s.fh = copyFloatHist(s.fh)
			}
		} else {
			s.t, s.h = it.AtHistogram(h)
			if reuse {
				h = s.h
				s.h = copyHist(s.h)
			}
		}
		out = append(out, s)
	}
	return out
}

// copyHist is a deep copy of every field (Prometheus' Copy drops custom
// values outside schema -53, which the encoding keeps).
func copyHist(h *histogram.Histogram) *histogram.Histogram {
	c := *h
	c.PositiveSpans, c.NegativeSpans = slices.Clone(h.PositiveSpans), slices.Clone(h.NegativeSpans)
	c.PositiveBuckets, c.NegativeBuckets = slices.Clone(h.PositiveBuckets), slices.Clone(h.NegativeBuckets)
	c.CustomValues = slices.Clone(h.CustomValues)
	return &c
}

func copyFloatHist(h *histogram.FloatHistogram) *histogram.FloatHistogram {
	c := *h
	c.PositiveSpans, c.NegativeSpans = slices.Clone(h.PositiveSpans), slices.Clone(h.NegativeSpans)
	c.PositiveBuckets, c.NegativeBuckets = slices.Clone(h.PositiveBuckets), slices.Clone(h.NegativeBuckets)
	c.CustomValues = slices.Clone(h.CustomValues)
	return &c
}

// histEqual compares every field, floats by bit pattern (NaN payloads
// included), treating nil and empty slices alike.
func histEqual(a, b *histogram.Histogram) bool {
	return a.CounterResetHint == b.CounterResetHint && a.Schema == b.Schema &&
		bitsEqual(a.ZeroThreshold, b.ZeroThreshold) && a.ZeroCount == b.ZeroCount &&
		a.Count == b.Count && bitsEqual(a.Sum, b.Sum) &&
		slices.Equal(a.PositiveSpans, b.PositiveSpans) && slices.Equal(a.NegativeSpans, b.NegativeSpans) &&
		slices.Equal(a.PositiveBuckets, b.PositiveBuckets) && slices.Equal(a.NegativeBuckets, b.NegativeBuckets) &&
		floatsEqual(a.CustomValues, b.CustomValues)
}

func floatHistEqual(a, b *histogram.FloatHistogram) bool {
	return a.CounterResetHint == b.CounterResetHint && a.Schema == b.Schema &&
		bitsEqual(a.ZeroThreshold, b.ZeroThreshold) && bitsEqual(a.ZeroCount, b.ZeroCount) &&
		bitsEqual(a.Count, b.Count) && bitsEqual(a.Sum, b.Sum) &&
		slices.Equal(a.PositiveSpans, b.PositiveSpans) && slices.Equal(a.NegativeSpans, b.NegativeSpans) &&
		floatsEqual(a.PositiveBuckets, b.PositiveBuckets) && floatsEqual(a.NegativeBuckets, b.NegativeBuckets) &&
		floatsEqual(a.CustomValues, b.CustomValues)
}

func bitsEqual(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

func floatsEqual(a, b []float64) bool {
	return slices.EqualFunc(a, b, bitsEqual)
}

// hAt builds integer samples 15 s apart.
func hAt(hs ...*histogram.Histogram) []hsample {
	out := make([]hsample, len(hs))
	for i, h := range hs {
		out[i] = hsample{t: 1_700_000_000_000 + int64(i)*15_000, h: h}
	}
	return out
}

func fhAt(hs ...*histogram.FloatHistogram) []hsample {
	out := make([]hsample, len(hs))
	for i, h := range hs {
		out[i] = hsample{t: 1_700_000_000_000 + int64(i)*15_000, fh: h}
	}
	return out
}

func hSeries(n int, f func(i int) *histogram.Histogram) []hsample {
	hs := make([]*histogram.Histogram, n)
	for i := range hs {
		hs[i] = f(i)
	}
	return hAt(hs...)
}

func fhSeries(n int, f func(i int) *histogram.FloatHistogram) []hsample {
	hs := make([]*histogram.FloatHistogram, n)
	for i := range hs {
		hs[i] = f(i)
	}
	return fhAt(hs...)
}

func spans(s ...int) []histogram.Span {
	var out []histogram.Span
	for i := 0; i+1 < len(s); i += 2 {
		out = append(out, histogram.Span{Offset: int32(s[i]), Length: uint32(s[i+1])})
	}
	return out
}

// latencyHistogram is sample i of a node_exporter-like latency histogram at
// schema 3: about 20 populated buckets in two spans, counts growing like a
// counter at a jittery rate.
func latencyHistogram(i int) *histogram.Histogram {
	const nb = 20
	abs := make([]int64, nb)
	var count uint64
	for b := range abs {
		// A bell of rates around bucket 9, with a deterministic jitter.
		rate := int64(40 - 4*absInt(b-9))
		if rate < 1 {
			rate = 1
		}
		jit := int64((i*7919 + b*104729) % 5)
		abs[b] = int64(i)*rate + int64(i)*jit/4 + int64(b)
		count += uint64(abs[b])
	}
	zero := uint64(i / 3)
	count += zero
	return &histogram.Histogram{
		Schema:          3,
		ZeroThreshold:   2.938735877055719e-39,
		ZeroCount:       zero,
		Count:           count,
		Sum:             float64(count)*0.0123 + float64(i%17)*0.001,
		PositiveSpans:   spans(-60, 12, 2, 8),
		PositiveBuckets: toDeltas(abs),
	}
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func toDeltas(abs []int64) []int64 {
	out := make([]int64, len(abs))
	var prev int64
	for i, a := range abs {
		out[i] = a - prev
		prev = a
	}
	return out
}

func histConformanceCases() map[string][]hsample {
	empty := &histogram.Histogram{}
	staleH := &histogram.Histogram{Sum: staleNaN}
	staleFH := &histogram.FloatHistogram{Sum: staleNaN}
	custom := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, math.Inf(1)}
	return map[string][]hsample{
		"empty stream":     nil,
		"empty histogram":  hAt(empty),
		"empty float":      fhAt(&histogram.FloatHistogram{}),
		"single latency":   hAt(latencyHistogram(7)),
		"latency counter":  hSeries(120, latencyHistogram),
		"long latency run": hSeries(720, latencyHistogram),
		"float from int": fhSeries(120, func(i int) *histogram.FloatHistogram {
			return latencyHistogram(i).ToFloat(nil)
		}),
		"stale markers": hAt(latencyHistogram(1), staleH, latencyHistogram(3), latencyHistogram(4), staleH, staleH),
		"float stale markers": fhAt(latencyHistogram(1).ToFloat(nil), staleFH,
			latencyHistogram(3).ToFloat(nil), staleFH),
		"nan sums": hAt(
			&histogram.Histogram{Count: 1, Sum: math.NaN(), PositiveSpans: spans(0, 1), PositiveBuckets: []int64{1}},
			&histogram.Histogram{Count: 2, Sum: math.Float64frombits(0x7ff8000000000001), PositiveSpans: spans(0, 1), PositiveBuckets: []int64{2}},
			&histogram.Histogram{Count: 3, Sum: math.Float64frombits(0xfff0000000000001), PositiveSpans: spans(0, 1), PositiveBuckets: []int64{3}},
			&histogram.Histogram{Count: 4, Sum: math.Inf(-1), PositiveSpans: spans(0, 1), PositiveBuckets: []int64{4}},
			&histogram.Histogram{Count: 5, Sum: math.Copysign(0, -1), PositiveSpans: spans(0, 1), PositiveBuckets: []int64{5}},
		),
		"schema changes": hSeries(60, func(i int) *histogram.Histogram {
			h := latencyHistogram(i)
			if i >= 20 && i < 40 {
				// Prometheus reduces resolution when a histogram grows too
				// many buckets.
				if err := h.ReduceResolution(1); err != nil {
					panic(err)
				}
			}
			if i >= 40 {
				h.Schema = int32(i%13 - 4)
			}
			return h
		}),
		"span layout changes": hSeries(80, func(i int) *histogram.Histogram {
			h := latencyHistogram(i)
			switch {
			case i%10 == 3: // a new bucket gets its first observation
				h.PositiveSpans = spans(-62, 1, 1, 12, 2, 8)
				h.PositiveBuckets = append([]int64{int64(i)}, h.PositiveBuckets...)
				h.PositiveBuckets[1] -= int64(i)
				h.Count += uint64(i)
			case i%10 == 7: // spans merged over an empty bucket
				h.PositiveSpans = spans(-60, 12, 0, 0, 2, 8)
			case i%10 == 8: // no buckets at all
				h.PositiveSpans, h.PositiveBuckets = nil, nil
			}
			return h
		}),
		"zero threshold changes": hSeries(30, func(i int) *histogram.Histogram {
			h := latencyHistogram(i)
			h.ZeroThreshold = []float64{0, 1e-128, 0.001, math.SmallestNonzeroFloat64, 2.938735877055719e-39}[i%5]
			return h
		}),
		"negative buckets": hSeries(50, func(i int) *histogram.Histogram {
			h := latencyHistogram(i)
			h.NegativeSpans = spans(-3, 4, 5, 2)
			h.NegativeBuckets = toDeltas([]int64{int64(i), int64(2 * i), 0, int64(i / 2), int64(i * 3), 1})
			h.Sum = -h.Sum
			return h
		}),
		"float negative buckets": fhSeries(40, func(i int) *histogram.FloatHistogram {
			return &histogram.FloatHistogram{
				Schema: 0, ZeroThreshold: 1e-3, ZeroCount: 0.5 * float64(i), Count: 3.25 * float64(i),
				Sum:             math.Sin(float64(i)) * 1e3,
				PositiveSpans:   spans(1, 2),
				PositiveBuckets: []float64{float64(i), 1.25 * float64(i)},
				NegativeSpans:   spans(-2, 1, 3, 1),
				NegativeBuckets: []float64{0.1 * float64(i), math.Pi * float64(i)},
			}
		}),
		"nhcb": hSeries(60, func(i int) *histogram.Histogram {
			abs := make([]int64, len(custom))
			for b := range abs {
				abs[b] = int64(i * (b + 1))
			}
			return &histogram.Histogram{
				Schema: histogram.CustomBucketsSchema, Count: uint64(i * 78), Sum: float64(i) * 1.5,
				PositiveSpans: spans(0, len(custom)), PositiveBuckets: toDeltas(abs), CustomValues: custom,
			}
		}),
		"nhcb bounds change": hSeries(20, func(i int) *histogram.Histogram {
			cv := custom
			if i >= 10 {
				cv = []float64{1, 2, 4, 8}
			}
			return &histogram.Histogram{
				Schema: histogram.CustomBucketsSchema, Count: uint64(i * 4), Sum: float64(i),
				PositiveSpans: spans(0, 3, 1, 1), PositiveBuckets: []int64{int64(i), 0, 0, 0}, CustomValues: cv,
			}
		}),
		"float nhcb": fhSeries(30, func(i int) *histogram.FloatHistogram {
			return &histogram.FloatHistogram{
				Schema: histogram.CustomBucketsSchema, Count: float64(i) * 10, Sum: float64(i) / 3,
				PositiveSpans: spans(0, 2, 3, 1), PositiveBuckets: []float64{float64(i), 2 * float64(i), 7},
				CustomValues: custom,
			}
		}),
		"counter reset hints": hSeries(40, func(i int) *histogram.Histogram {
			h := latencyHistogram(i % 10)
			h.CounterResetHint = histogram.CounterResetHint([]int{0, 0, 1, 2, 2, 3, 0, 3, 1, 1, 2}[i%11])
			return h
		}),
		"float counter reset hints": fhSeries(12, func(i int) *histogram.FloatHistogram {
			h := latencyHistogram(i).ToFloat(nil)
			h.CounterResetHint = histogram.CounterResetHint(i % 4)
			return h
		}),
		"gauge histogram": hSeries(50, func(i int) *histogram.Histogram {
			h := latencyHistogram((i * 37) % 50)
			h.CounterResetHint = histogram.GaugeType
			return h
		}),
		"extreme values": hAt(
			&histogram.Histogram{Schema: 8, ZeroThreshold: math.MaxFloat64, ZeroCount: math.MaxUint64, Count: math.MaxUint64,
				Sum: math.MaxFloat64, PositiveSpans: spans(math.MaxInt32, 1), PositiveBuckets: []int64{math.MaxInt64},
				NegativeSpans: spans(math.MinInt32, 2), NegativeBuckets: []int64{math.MinInt64, math.MaxInt64}},
			&histogram.Histogram{Schema: -4, ZeroThreshold: math.Inf(1), ZeroCount: 0, Count: 1,
				Sum: -math.MaxFloat64, PositiveSpans: spans(math.MinInt32, 1, math.MaxInt32, 1), PositiveBuckets: []int64{math.MinInt64, -1}},
			&histogram.Histogram{Schema: math.MaxInt32, Count: math.MaxUint64, Sum: math.SmallestNonzeroFloat64,
				PositiveSpans: spans(0, 0, 0, 0, 5, 0)},
			&histogram.Histogram{Schema: math.MinInt32, ZeroThreshold: math.NaN(), ZeroCount: 1 << 63, Sum: staleNaN},
			latencyHistogram(1000000),
		),
		"float extreme values": fhAt(
			&histogram.FloatHistogram{Schema: 8, ZeroThreshold: math.MaxFloat64, ZeroCount: math.Inf(1), Count: math.NaN(),
				Sum: math.MaxFloat64, PositiveSpans: spans(math.MaxInt32, 1), PositiveBuckets: []float64{math.Float64frombits(0x7fffffffffffffff)},
				NegativeSpans: spans(math.MinInt32, 2), NegativeBuckets: []float64{math.Copysign(0, -1), -math.SmallestNonzeroFloat64}},
			&histogram.FloatHistogram{Schema: -53, Count: 1e300, Sum: staleNaN, CustomValues: []float64{math.Inf(-1), math.NaN()}},
			&histogram.FloatHistogram{Count: 0.1, ZeroCount: 0.30000000000000004, Sum: 1e15 + 0.3},
		),
		"irregular timestamps": func() []hsample {
			in := hSeries(8, latencyHistogram)
			for i, ts := range []int64{math.MinInt64, -1, 0, 1, 10_001, 1 << 50, math.MaxInt64 - 1, math.MaxInt64} {
				in[i].t = ts
			}
			return in
		}(),
	}
}

func TestHistogramConformance(t *testing.T) {
	for _, c := range histCodecs {
		t.Run(c.name, func(t *testing.T) {
			for name, in := range histConformanceCases() {
				t.Run(name, func(t *testing.T) {
					it := c.encode(t, in)
					requireHistSamples(t, in, it, c.reuse)
					// Exhausted iterators stay exhausted.
					require.False(t, it.Next())
					require.NoError(t, it.Err())
				})
			}
		})
	}
}

// TestHistogramEncoderRefuses checks that what cannot be stored is refused
// with the encoder unchanged.
func TestHistogramEncoderRefuses(t *testing.T) {
	e := NewHistogramEncoder()
	require.ErrorIs(t, e.AppendHistogram(1, nil), ErrInvalidHistogram)
	require.ErrorIs(t, e.AppendHistogram(1, &histogram.Histogram{PositiveSpans: spans(0, 2), PositiveBuckets: []int64{1}}), ErrInvalidHistogram)
	require.ErrorIs(t, e.AppendHistogram(1, &histogram.Histogram{NegativeBuckets: []int64{1}}), ErrInvalidHistogram)
	require.ErrorIs(t, e.AppendHistogram(1, &histogram.Histogram{CounterResetHint: 4}), ErrInvalidHistogram)
	require.Equal(t, 0, e.Len())
	require.NoError(t, e.AppendHistogram(10, latencyHistogram(1)))
	require.ErrorIs(t, e.AppendHistogram(10, latencyHistogram(2)), ErrOutOfOrder)
	require.ErrorIs(t, e.AppendFloatHistogram(20, latencyHistogram(2).ToFloat(nil)), ErrHistogramKind)
	require.ErrorIs(t, e.AppendFloatHistogram(20, nil), ErrInvalidHistogram)
	require.NoError(t, e.AppendHistogram(20, latencyHistogram(2)))
	require.False(t, e.IsFloat())
	require.Equal(t, int64(20), e.LastTimestamp())
	requireHistSamples(t, []hsample{{t: 10, h: latencyHistogram(1)}, {t: 20, h: latencyHistogram(2)}},
		NewHistogramIterator(e.Bytes()), false)
}

// TestHistogramStreamsAreNotFloatStreams checks that the two stream forms
// reject each other's bytes rather than misreading them.
func TestHistogramStreamsAreNotFloatStreams(t *testing.T) {
	hs := encodeHistStream(t, hSeries(3, latencyHistogram))
	it := NewIterator(hs)
	require.False(t, it.Next())
	require.ErrorIs(t, it.Err(), ErrCorrupt)
	hit := NewHistogramIterator(encodeStream(t, at(1, 2, 3)))
	require.False(t, hit.Next())
	require.ErrorIs(t, hit.Err(), ErrCorrupt)
	// Cut streams and trailing bytes are corruption, not a shorter stream.
	hit = NewHistogramIterator(hs[:len(hs)-3])
	for hit.Next() {
	}
	require.ErrorIs(t, hit.Err(), ErrCorrupt)
	hit = NewHistogramIterator(append(slices.Clone(hs), 0, 0))
	for hit.Next() {
	}
	require.ErrorIs(t, hit.Err(), ErrCorrupt)
}

// genHistograms draws histogram streams that exercise every code path:
// layouts that change or stay, counts that grow or jump, special floats.
func genHistograms() *rapid.Generator[[]hsample] {
	float := rapid.OneOf(
		rapid.Map(rapid.Uint64(), math.Float64frombits),
		rapid.Map(rapid.Int64Range(-1000, 1000), func(n int64) float64 { return float64(n) }),
		rapid.Map(rapid.Int64Range(-1e9, 1e9), func(n int64) float64 { return float64(n) / 100 }),
		rapid.SampledFrom(specials),
		rapid.Float64(),
	)
	count := rapid.OneOf(rapid.Int64Range(-3, 3), rapid.Int64Range(0, 1000), rapid.Int64())
	genSpans := func(t *rapid.T, label string) []histogram.Span {
		n := rapid.IntRange(0, 4).Draw(t, label+"n")
		var out []histogram.Span
		for i := 0; i < n; i++ {
			out = append(out, histogram.Span{
				Offset: rapid.OneOf(rapid.Int32Range(-5, 5), rapid.Int32()).Draw(t, label+"off"),
				Length: rapid.Uint32Range(0, 6).Draw(t, label+"len"),
			})
		}
		return out
	}
	nb := func(s []histogram.Span) int { n, _ := bucketCount(s, nil); return int(n) }
	return rapid.Custom(func(t *rapid.T) []hsample {
		isFloat := rapid.Bool().Draw(t, "float")
		n := rapid.IntRange(0, 60).Draw(t, "n")
		ts := rapid.Int64().Draw(t, "t0")
		var out []hsample
		var schema int32
		var zt float64
		var pos, neg []histogram.Span
		var cv []float64
		var ib []int64
		var fb []float64
		for i := 0; i < n; i++ {
			if i == 0 || rapid.IntRange(0, 5).Draw(t, "relayout") == 0 {
				schema = rapid.OneOf(rapid.Int32Range(-4, 8), rapid.Just(int32(-53)), rapid.Int32()).Draw(t, "schema")
				zt = float.Draw(t, "zt")
				pos, neg = genSpans(t, "pos"), genSpans(t, "neg")
				cv = rapid.SliceOfN(float, 0, 5).Draw(t, "custom")
			}
			hint := histogram.CounterResetHint(rapid.IntRange(0, 3).Draw(t, "hint"))
			total := nb(pos) + nb(neg)
			if isFloat {
				if len(fb) != total || rapid.Bool().Draw(t, "newvals") {
					fb = make([]float64, total)
					for k := range fb {
						fb[k] = float.Draw(t, "b")
					}
				}
				out = append(out, hsample{t: ts, fh: &histogram.FloatHistogram{
					CounterResetHint: hint, Schema: schema, ZeroThreshold: zt,
					ZeroCount: float.Draw(t, "zc"), Count: float.Draw(t, "c"), Sum: float.Draw(t, "sum"),
					PositiveSpans: pos, NegativeSpans: neg, CustomValues: cv,
					PositiveBuckets: slices.Clone(fb[:nb(pos)]), NegativeBuckets: slices.Clone(fb[nb(pos):]),
				}})
			} else {
				if len(ib) != total {
					ib = make([]int64, total)
				}
				for k := range ib {
					ib[k] += count.Draw(t, "b")
				}
				out = append(out, hsample{t: ts, h: &histogram.Histogram{
					CounterResetHint: hint, Schema: schema, ZeroThreshold: zt,
					ZeroCount: uint64(count.Draw(t, "zc")), Count: uint64(count.Draw(t, "c")), Sum: float.Draw(t, "sum"),
					PositiveSpans: pos, NegativeSpans: neg, CustomValues: cv,
					PositiveBuckets: slices.Clone(ib[:nb(pos)]), NegativeBuckets: slices.Clone(ib[nb(pos):]),
				}})
			}
			g := rapid.OneOf(rapid.Just(int64(15_000)), rapid.Int64Range(1, math.MaxInt64)).Draw(t, "gap")
			if ts > math.MaxInt64-g {
				break
			}
			ts += g
		}
		return out
	})
}

// TestHistogramConformanceRandom is the property test: random histogram
// streams, encoded and decoded, equal the reference bit for bit.
func TestHistogramConformanceRandom(t *testing.T) {
	for _, c := range histCodecs {
		t.Run(c.name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				in := genHistograms().Draw(rt, "histograms")
				requireHistSamples(rt, in, c.encode(rt, in), c.reuse)
			})
		})
	}
}

// TestHistogramLayoutChangeKeepsBucketState checks what the per-bucket
// state remap is for: a bucket appearing in the tail of a steady histogram
// costs its layout and one fresh bucket, not a restart of every bucket.
func TestHistogramLayoutChangeKeepsBucketState(t *testing.T) {
	steady := hSeries(120, latencyHistogram)
	grown := hSeries(120, func(i int) *histogram.Histogram {
		h := latencyHistogram(i)
		if i >= 60 { // a bucket past the last one gets observations
			h.PositiveSpans = spans(-60, 12, 2, 9)
			var last int64 // absolute count of the last old bucket
			for _, d := range h.PositiveBuckets {
				last += d
			}
			h.PositiveBuckets = append(h.PositiveBuckets, int64(i-59)-last)
			h.Count += uint64(i - 59)
		}
		return h
	})
	a, b := len(encodeHistStream(t, steady)), len(encodeHistStream(t, grown))
	requireHistSamples(t, grown, NewHistogramIterator(encodeHistStream(t, grown)), false)
	// The layout is ~110 bits; the new bucket's 60 samples a few bits
	// each. A restart of the 20 old buckets would cost hundreds of bytes.
	require.Less(t, b-a, 100, "steady %d bytes, with a new bucket %d", a, b)
}

// HistogramEncoder.Size is the length Bytes returns, without growing the
// buffer.
func TestHistogramEncoderSize(t *testing.T) {
	e := NewHistogramEncoder()
	require.Equal(t, len(e.Bytes()), e.Size())
	for i := range 50 {
		require.NoError(t, e.AppendHistogram(int64(1000+i*15000), latencyHistogram(i)))
		c := e.w.cap()
		n := e.Size()
		require.Equal(t, c, e.w.cap(), "Size grew the buffer after %d samples", i+1)
		require.Equal(t, len(e.Bytes()), n, "after %d samples", i+1)
	}
}
