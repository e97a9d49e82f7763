package encoding

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// sample is the reference model: what went in must come out, bit for bit.
type sample struct {
	t int64
	v float64
}

// tb is what both *testing.T and *rapid.T provide.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
}

// codec is one encoder/decoder pair under the conformance suite.
type codec struct {
	name string
	// encode turns samples into bytes and returns an iterator over them.
	encode func(t tb, in []sample) Iterator
}

func encodeStream(t tb, in []sample) []byte {
	e := NewEncoder()
	for _, s := range in {
		require.NoError(t, e.Append(s.t, s.v))
	}
	require.Equal(t, len(in), e.Len())
	return e.Bytes()
}

// codecs lists every pair: the conformance suite runs over all of them.
var codecs = []codec{
	{"stream", func(t tb, in []sample) Iterator {
		return NewIterator(encodeStream(t, in))
	}},
	{"stream-copy-then-append", func(t tb, in []sample) Iterator {
		// Bytes taken mid-way decode as the prefix, and appending
		// afterwards does not disturb a copy of them.
		e := NewEncoder()
		var snap []byte
		for i, s := range in {
			require.NoError(t, e.Append(s.t, s.v))
			if i == len(in)/2 {
				snap = slices.Clone(e.Bytes())
			}
		}
		if snap != nil {
			requireSamples(t, in[:len(in)/2+1], NewIterator(snap))
		}
		return NewIterator(slices.Clone(e.Bytes()))
	}},
	{"sealed", func(t tb, in []sample) Iterator {
		sealed, err := Seal(encodeStream(t, in))
		require.NoError(t, err)
		return NewSealedIterator(sealed)
	}},
	{"sealer-reused", func(t tb, in []sample) Iterator {
		// A Sealer that sealed something else before, appending after
		// existing bytes: no state may leak from one series to the next.
		var s Sealer
		other := encodeStream(t, at(specials...))
		dst, err := s.Seal([]byte("prefix"), other)
		require.NoError(t, err)
		n := len(dst)
		dst, err = s.Seal(dst, encodeStream(t, in))
		require.NoError(t, err)
		return NewSealedIterator(dst[n:])
	}},
	{"encode-drain", func(t tb, in []sample) Iterator {
		b, n, err := Encode(NewIterator(encodeStream(t, in)))
		require.NoError(t, err)
		require.Equal(t, len(in), n)
		return NewIterator(b)
	}},
	{"merge-single", func(t tb, in []sample) Iterator {
		return MergeIterators(NewIterator(nil), NewIterator(encodeStream(t, in)))
	}},
}

// requireSamples drains it and compares bit patterns with want.
func requireSamples(t tb, want []sample, it Iterator) {
	t.Helper()
	got := drain(it)
	require.NoError(t, it.Err())
	require.Len(t, got, len(want))
	for i := range want {
		// Compare first, report through require only on a mismatch: this
		// runs per sample in fuzz targets.
		if want[i].t != got[i].t || math.Float64bits(want[i].v) != math.Float64bits(got[i].v) {
			require.Equal(t, want[i].t, got[i].t, "timestamp of sample %d", i)
			require.Equal(t, math.Float64bits(want[i].v), math.Float64bits(got[i].v),
				"value of sample %d: want %v got %v", i, want[i].v, got[i].v)
		}
	}
}

func drain(it Iterator) []sample {
	var out []sample
	for it.Next() {
		t, v := it.At()
		out = append(out, sample{t, v})
	}
	return out
}

// at builds samples 10 s apart from values.
func at(vs ...float64) []sample {
	out := make([]sample, len(vs))
	for i, v := range vs {
		out[i] = sample{1_700_000_000_000 + int64(i)*10_000, v}
	}
	return out
}

func series(n int, f func(i int) float64) []sample {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = f(i)
	}
	return at(vs...)
}

var (
	staleNaN = math.Float64frombits(0x7ff0000000000002)
	specials = []float64{
		math.NaN(), staleNaN, math.Float64frombits(0x7ff8000000000001),
		math.Float64frombits(0xfff0000000000001), math.Float64frombits(0x7fffffffffffffff),
		math.Float64frombits(0xffffffffffffffff), math.Copysign(0, -1), 0,
		math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
		math.Float64frombits(0x000fffffffffffff), math.Float64frombits(0x800fffffffffffff),
		math.MaxFloat64, -math.MaxFloat64, 0x1p-1022, 1, -1, 0x1p63, -0x1p63, 0x1p53 + 2,
		9007199254740993, 1e300, -1e-300, 0.1, 0.30000000000000004, 1e15 + 0.3,
	}
)

// conformanceCases is the table every codec must pass.
func conformanceCases() map[string][]sample {
	var cases = map[string][]sample{
		"empty":                nil,
		"single":               at(42),
		"single NaN":           at(staleNaN),
		"single negative zero": at(math.Copysign(0, -1)),
		"constant":             series(500, func(int) float64 { return 1 }),
		"constant float":       series(200, func(int) float64 { return math.Pi }),
		"integer counter":      series(720, func(i int) float64 { return float64(1e9 + i*i*37%1000 + i*1500) }),
		"integer gauge":        series(720, func(i int) float64 { return float64((i*7919)%4096) * 1024 }),
		"cpu seconds":          series(720, func(i int) float64 { return float64(123456789+i*993+i%7) / 100 }),
		"load average":         series(720, func(i int) float64 { return float64(i*37%500) / 100 }),
		"millidegrees":         series(300, func(i int) float64 { return float64(42000+i%13*7) / 1000 }),
		"float gauge":          series(720, func(i int) float64 { return math.Sin(float64(i)) * 1e3 }),
		"mode switches": at(1, 2, 3, 3.5, 3.25, 3.125, 0.001, 1e-6, math.Pi, 4, math.E, 5, 5,
			staleNaN, 6, 7e-7, 8, -0.5, math.Inf(1), 9, 10, 10.01, 10.02, 1e20, 11),
		"specials": at(specials...),
		"counter then staleness": append(series(100, func(i int) float64 { return float64(i * 1000) }),
			sample{1_700_000_000_000 + 100*10_000, staleNaN}),
		"staleness in the middle": series(200, func(i int) float64 {
			if i%50 == 49 {
				return staleNaN
			}
			return float64(i) / 10
		}),
		"large value jumps":       at(0, 1e18, -1e18, 0x1p62, -0x1p62, 0x1p63-1024, -0x1p63, 3, 0x1p52+0.5, 1, -9.2e18, 9.2e18),
		"integers at int64 edges": at(-0x1p63, 0x1p63-1024, -0x1p63, 0x1p63-1024, 0, -0x1p63),
		"decimals near 2^53":      at(9007199254740.991, 9007199254740.992, 900719925474.0993, 90071992547409.93),
		"negative and huge timestamps": {
			{math.MinInt64, 1}, {math.MinInt64 + 1, 2}, {-1 << 40, 3}, {-1, 4}, {0, 5}, {1, 6},
			{1 << 40, 7}, {math.MaxInt64 - 1, 8}, {math.MaxInt64, 9},
		},
		"schedule changes": func() []sample {
			// 10 s scrapes, then 15 s, then the phase moves by 2.5 s,
			// with late scrapes throughout.
			var out []sample
			ts := int64(1_700_000_000_000)
			for i := 0; i < 300; i++ {
				step := int64(10_000)
				if i >= 100 {
					step = 15_000
				}
				if i == 200 {
					ts += 2_500
				}
				ts += step
				jit := int64(0)
				if i%7 == 3 {
					jit = int64(i%5) - 2
				}
				out = append(out, sample{ts + jit, float64(i)})
			}
			return out
		}(),
		"timestamp extremes only": {{math.MinInt64, 0.5}, {math.MaxInt64, -0.5}},
		"irregular timestamp gaps": {
			{0, 1}, {1, 1}, {10_001, 1}, {10_002, 1}, {10_003, 1}, {1 << 50, 1},
			{1<<50 + 17, 1}, {1<<50 + 18, 1}, {1 << 62, 1}, {1<<62 + 1<<61, 1},
		},
		"jittered scrapes": func() []sample {
			out := series(720, func(i int) float64 { return float64(i % 3) })
			for i := range out {
				out[i].t += int64((i*7)%11) - 5
			}
			return out
		}(),
	}
	return cases
}

func TestConformance(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			for name, in := range conformanceCases() {
				t.Run(name, func(t *testing.T) {
					it := c.encode(t, in)
					requireSamples(t, in, it)
					// Exhausted iterators stay exhausted.
					require.False(t, it.Next())
					require.NoError(t, it.Err())
				})
			}
		})
	}
}

// genSamples draws sample sequences that exercise every code path: value
// shapes mixed within a series, timestamps with any gaps.
func genSamples() *rapid.Generator[[]sample] {
	value := rapid.OneOf(
		rapid.Map(rapid.Uint64(), math.Float64frombits),
		rapid.Map(rapid.Int64Range(-1000, 1000), func(n int64) float64 { return float64(n) }),
		rapid.Map(rapid.Int64(), func(n int64) float64 { return float64(n) }),
		rapid.Map(rapid.Int64Range(-1e9, 1e9), func(n int64) float64 { return float64(n) / 100 }),
		rapid.Map(rapid.Int64Range(-1e12, 1e12), func(n int64) float64 { return float64(n) / 1e6 }),
		rapid.SampledFrom(specials),
		rapid.Float64(),
	)
	gap := rapid.OneOf(
		rapid.Just(int64(10_000)),
		rapid.Int64Range(1, 20_000),
		rapid.Int64Range(1, math.MaxInt64),
	)
	return rapid.Custom(func(t *rapid.T) []sample {
		n := rapid.IntRange(0, 300).Draw(t, "n")
		out := make([]sample, 0, n)
		ts := rapid.Int64().Draw(t, "t0")
		// Series tend to keep a shape: repeat the last value sometimes.
		for i := 0; i < n; i++ {
			v := value.Draw(t, "v")
			if i > 0 && rapid.IntRange(0, 3).Draw(t, "repeat") == 0 {
				v = out[i-1].v
			}
			out = append(out, sample{ts, v})
			g := gap.Draw(t, "gap")
			if ts > math.MaxInt64-g {
				break
			}
			ts += g
		}
		return out
	})
}

func TestConformanceRandom(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				in := genSamples().Draw(rt, "samples")
				requireSamples(rt, in, c.encode(rt, in))
			})
		})
	}
}
