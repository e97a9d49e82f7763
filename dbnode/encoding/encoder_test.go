package encoding

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestEncoderOutOfOrder(t *testing.T) {
	e := NewEncoder()
	require.NoError(t, e.Append(100, 1))
	require.NoError(t, e.Append(200, 2))
	before := slices.Clone(e.Bytes())
	for _, ts := range []int64{200, 199, math.MinInt64} {
		require.ErrorIs(t, e.Append(ts, 3), ErrOutOfOrder)
	}
	require.Equal(t, before, e.Bytes(), "a rejected sample leaves the stream unchanged")
	require.Equal(t, 2, e.Len())
	require.Equal(t, int64(200), e.LastTimestamp())
	require.NoError(t, e.Append(201, 3))
	requireSamples(t, []sample{{100, 1}, {200, 2}, {201, 3}}, NewIterator(e.Bytes()))
}

func TestEncoderEmptyAndReset(t *testing.T) {
	e := NewEncoder()
	require.Equal(t, 0, e.Len())
	requireSamples(t, nil, NewIterator(e.Bytes()))
	requireSamples(t, nil, NewIterator(nil))

	require.NoError(t, e.Append(5, 1.5))
	require.NoError(t, e.Append(6, 2.5))
	e.Reset()
	require.Equal(t, 0, e.Len())
	requireSamples(t, nil, NewIterator(e.Bytes()))
	// After Reset any timestamp is accepted again, and the old samples
	// are gone even though the buffer is reused.
	require.NoError(t, e.Append(1, 7))
	require.Equal(t, int64(1), e.LastTimestamp())
	requireSamples(t, []sample{{1, 7}}, NewIterator(e.Bytes()))
}

// TestBytesDoesNotAliasCallerAppends checks that appending to the slice
// Bytes returned cannot scribble over the encoder's buffer.
func TestBytesDoesNotAliasCallerAppends(t *testing.T) {
	e := NewEncoder()
	in := at(1, 2, 3)
	for _, s := range in {
		require.NoError(t, e.Append(s.t, s.v))
	}
	b := e.Bytes()
	_ = append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	require.NoError(t, e.Append(1_700_000_030_000, 4))
	requireSamples(t, append(in, sample{1_700_000_030_000, 4}), NewIterator(e.Bytes()))
}

// TestBytesEveryStep decodes Bytes after every Append of a long, mixed
// series: the stream is complete at every point, not only at the end.
func TestBytesEveryStep(t *testing.T) {
	in := conformanceCases()["mode switches"]
	in = append(in, conformanceCases()["specials"]...)
	for i := range in {
		in[i].t = int64(i) * 1000
	}
	e := NewEncoder()
	for i, s := range in {
		require.NoError(t, e.Append(s.t, s.v))
		requireSamples(t, in[:i+1], NewIterator(e.Bytes()))
	}
}

func TestFindScale(t *testing.T) {
	for _, tc := range []struct {
		v     float64
		n     int64
		scale uint8
		ok    bool
	}{
		{0, 0, 0, true},
		{math.Copysign(0, -1), 0, 0, false},
		{12345, 12345, 0, true},
		{-7, -7, 0, true},
		{0.5, 5, 1, true},
		{12345.67, 1234567, 2, true},
		{0.001, 1, 3, true},
		{1e-6, 1, 6, true},
		{1e-7, 0, 0, false},
		{math.Pi, 0, 0, false},
		{0.30000000000000004, 0, 0, false},
		{math.NaN(), 0, 0, false},
		{math.Inf(1), 0, 0, false},
		{0x1p63, 0, 0, false},
		{-0x1p63, 0, 0, false}, // fits int64, but not the open range toInt checks
		{float64(math.MaxInt64 - 1023), math.MaxInt64 - 1023, 0, true},
	} {
		n, s, ok := findScale(tc.v)
		require.Equal(t, tc.ok, ok, "%v", tc.v)
		if ok {
			require.Equal(t, tc.n, n, "%v", tc.v)
			require.Equal(t, tc.scale, s, "%v", tc.v)
			require.Equal(t, math.Float64bits(tc.v), math.Float64bits(fromInt(n, s)))
		}
	}
}

func TestRiceRoundTrip(t *testing.T) {
	zs := []uint64{0, 1, 2, 3, 100, 1 << 20, 1<<63 + 5, math.MaxUint64, 7, 0}
	for k := uint(0); k <= 62; k++ {
		var w bitWriter
		w.reset(0)
		for _, z := range zs {
			writeRice(&w, z, k)
		}
		r := newBitReader(w.bytes(), 0)
		for _, z := range zs {
			require.Equal(t, z, readRice(&r, k), "k=%d", k)
		}
		require.True(t, r.ok())
	}
}

// TestStreamCosts pins the sizes that the mode logic is there for, so that
// a change that still round-trips but loses compression fails too.
func TestStreamCosts(t *testing.T) {
	size := func(in []sample) int { return len(encodeStream(t, in)) }
	counter := series(720, func(i int) float64 { return float64(1e9 + i*1500) })
	constant := series(720, func(int) float64 { return 1 })

	// Header 5 bytes, first timestamp and value, first delta, then a bit
	// for the timestamp and a bit for the value per sample.
	require.LessOrEqual(t, size(constant), 5+16+2*720/8)
	require.LessOrEqual(t, size(counter), 5+24+2*720/8)

	// A staleness marker in a counter: the NaN itself, and the way back
	// continues the counter's integer state.
	stale := slices.Clone(counter)
	stale[360].v = staleNaN
	require.LessOrEqual(t, size(stale)-size(counter), 30)

	// Memory in kB*1024, moving by pages: delta-of-deltas lose their 12
	// zero bits after a warm-up window of shiftWindow values.
	pages := series(720, func(i int) float64 { return float64(4e6+(i*7919)%500*4) * 1024 })
	plain := series(720, func(i int) float64 { return float64(4e6*4096 + (i*7919)%500*4) })
	require.LessOrEqual(t, size(pages), size(plain)+16)

	// A clock in seconds with sub-microsecond digits is a 6-digit decimal
	// now and then; the encoder must not flap into integer mode for it.
	clock := series(720, func(i int) float64 { return float64(1.7e18+float64(i)*1e10+float64(i*i*7919%1e9)) / 1e9 })
	xor := 0
	{
		var c valueCoder
		var w bitWriter
		w.reset(0)
		c.reset()
		var run uint8
		c.enterFloat(&w, clock[0].v, &run)
		for _, s := range clock[1:] {
			c.writeXOR(&w, math.Float64bits(s.v))
		}
		xor = len(w.bytes())
	}
	// Timestamps take 102 bytes; allow a couple of switches.
	require.LessOrEqual(t, size(clock), 5+xor+102+32)
}

func TestMedian(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		xs := rapid.SliceOfN(rapid.Int64Range(-5, 5), 1, 50).Draw(rt, "xs")
		sorted := slices.Clone(xs)
		slices.Sort(sorted)
		require.Equal(rt, sorted[len(sorted)/2], median(xs))
	})
}

// Size is the length Bytes returns, at every length of a stream, and
// reading it leaves the buffer as it was (Bytes may grow a short one: a
// statistic over every series must not).
func TestEncoderSize(t *testing.T) {
	e := NewEncoder()
	require.Equal(t, len(e.Bytes()), e.Size())
	for i := range 200 {
		require.NoError(t, e.Append(int64(1000+i*15000+i%3), float64(i*i)+0.5))
		c := e.w.cap()
		n := e.Size()
		require.Equal(t, c, e.w.cap(), "Size grew the buffer after %d samples", i+1)
		require.Equal(t, len(e.Bytes()), n, "after %d samples", i+1)
	}
}

// TestEncoderStateSize pins the encoder's state at 104 bytes: storage
// keeps one inline in every in-memory series, and a word more takes
// storage.Series out of its size class (storage.TestSeriesLayout).
func TestEncoderStateSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is for 64-bit platforms")
	}
	require.Equal(t, uintptr(24), unsafe.Sizeof(bitWriter{}))
	require.Equal(t, uintptr(40), unsafe.Sizeof(tsCoder{}))
	require.Equal(t, uintptr(32), unsafe.Sizeof(valueCoder{}))
	require.Equal(t, uintptr(104), unsafe.Sizeof(Encoder{}))
}

// A stream stops taking samples at maxStreamBytes, well before the
// writer's 32-bit length could wrap, and a refused sample changes nothing.
func TestEncoderStreamBytesLimit(t *testing.T) {
	e := NewEncoder()
	require.NoError(t, e.Append(1000, 1))
	want := append([]byte(nil), e.Bytes()...)
	n := e.w.n
	e.w.n = maxStreamBytes // as if the stream were that long
	require.ErrorIs(t, e.Append(2000, 2), ErrTooManySamples)
	require.Equal(t, 1, e.Len())
	e.w.n = n
	require.Equal(t, want, e.Bytes())
	require.NoError(t, e.Append(2000, 2))
}

// Buffers grow through Go's size classes, 32 to 48 then doubling, and
// keep what was written.
func TestBitWriterGrowth(t *testing.T) {
	var w bitWriter
	w.reset(streamHeaderLen)
	caps := []int{w.cap()}
	var want []byte
	for i := range 200 {
		w.writeBits(uint64(i)*0x0101010101010101, 64)
		want = binary.BigEndian.AppendUint64(want, uint64(i)*0x0101010101010101)
		if c := w.cap(); c != caps[len(caps)-1] {
			caps = append(caps, c)
		}
	}
	require.Equal(t, []int{32, 48, 96, 192, 384, 768, 1536, 3072}, caps)
	require.Equal(t, append(make([]byte, streamHeaderLen), want...), w.bytes())
}
