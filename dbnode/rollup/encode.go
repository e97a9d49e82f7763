package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Version is the first byte of every encoding this package writes
// (docs/format/rollup.md); Decode refuses any other.
const Version = 1

// Window flags (docs/format/rollup.md).
const (
	flagStale     = 1 << 0 // Stale
	flagSingle    = 1 << 1 // Count 1: First == Last, Min, Max, Sum are First.V's bits, Resets +0
	flagMinFirst  = 1 << 2 // Min has First.V's bits
	flagMaxLast   = 1 << 3 // Max has Last.V's bits
	flagNoResets  = 1 << 4 // Resets is +0
	flagsKnown    = flagStale | flagSingle | flagMinFirst | flagMaxLast | flagNoResets
	minWindowSize = 3 // End delta, flags, count: one byte each at least
)

// ErrCorrupt is wrapped by every Decode error: the bytes are not a rollup
// encoding this version writes.
var ErrCorrupt = errors.New("rollup: corrupt encoding")

// valueState is the previous window's value of each float field: each
// field is XORed with its own predecessor, since a counter's First, Last
// and Sum move apart but each moves smoothly.
type valueState [6]uint64

const (
	fFirst = iota
	fLast
	fMin
	fMax
	fSum
	fResets
)

func (s *valueState) update(w Window) {
	*s = valueState{
		math.Float64bits(w.First.V), math.Float64bits(w.Last.V), math.Float64bits(w.Min),
		math.Float64bits(w.Max), math.Float64bits(w.Sum), math.Float64bits(w.Resets),
	}
}

// floatCodec is the float windows' part of the shared stream.
var floatCodec = codec{version: Version, window: "window", versionFault: "version %d, this build reads %d"}

// Encode appends the encoding of one series' windows of resolution res
// (ms) to dst. The windows must be what Compute, Merge or Coarsen produce
// for that resolution: strictly increasing End multiples of res, samples
// inside their window; anything else is refused, so every encoding decodes.
func Encode(dst []byte, res int64, ws []Window) ([]byte, error) {
	var prev valueState
	return encodeWindows(dst, floatCodec, res, ws, func(dst []byte, w *Window) []byte { return appendWindow(dst, w, &prev) })
}

// appendWindow writes a float window from its flags on, each value XORed
// with the same field of the previous window with samples (prev).
func appendWindow(dst []byte, w *Window, prev *valueState) []byte {
	flags := byte(0)
	if w.Stale {
		flags |= flagStale
	}
	first := math.Float64bits(w.First.V)
	single := isSingle(*w)
	switch {
	case w.Count == 0:
	case single:
		flags |= flagSingle
	default:
		if math.Float64bits(w.Min) == first {
			flags |= flagMinFirst
		}
		if math.Float64bits(w.Max) == math.Float64bits(w.Last.V) {
			flags |= flagMaxLast
		}
		if math.Float64bits(w.Resets) == 0 {
			flags |= flagNoResets
		}
	}
	dst = appendHead(dst, flags, w.Count)
	if w.Count == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(w.End-w.First.T))
	dst = appendXOR(dst, first, prev[fFirst])
	if !single {
		dst = binary.AppendUvarint(dst, uint64(w.End-w.Last.T))
		dst = appendXOR(dst, math.Float64bits(w.Last.V), prev[fLast])
		if flags&flagMinFirst == 0 {
			dst = appendXOR(dst, math.Float64bits(w.Min), prev[fMin])
		}
		if flags&flagMaxLast == 0 {
			dst = appendXOR(dst, math.Float64bits(w.Max), prev[fMax])
		}
		dst = appendXOR(dst, math.Float64bits(w.Sum), prev[fSum])
		if flags&flagNoResets == 0 {
			dst = appendXOR(dst, math.Float64bits(w.Resets), prev[fResets])
		}
	}
	prev.update(*w)
	return dst
}

// isSingle reports whether the window is one sample whose every value
// field has that sample's bits: the flagSingle short form.
func isSingle(w Window) bool {
	v := math.Float64bits(w.First.V)
	return w.Count == 1 && w.Last.T == w.First.T && math.Float64bits(w.Last.V) == v &&
		math.Float64bits(w.Min) == v && math.Float64bits(w.Max) == v &&
		math.Float64bits(w.Sum) == v && math.Float64bits(w.Resets) == 0
}

// check is what Encode requires of a window and Decode checks of what it
// read: a float window's values need no rule beyond its span's.
func (w *Window) check(res int64) error { return checkSpan(w.span(), res) }

// appendXOR writes v XOR prev as a header byte 0 (equal), or 1+8*lz+tz
// (lz leading and tz trailing zero bytes of the XOR, lz+tz <= 7) and the
// 8-lz-tz bytes between them, most significant first.
func appendXOR(dst []byte, v, prev uint64) []byte {
	x := v ^ prev
	if x == 0 {
		return append(dst, 0)
	}
	lz, tz := bits.LeadingZeros64(x)/8, bits.TrailingZeros64(x)/8
	dst = append(dst, byte(1+8*lz+tz))
	for i := 7 - lz; i >= tz; i-- {
		dst = append(dst, byte(x>>(8*i)))
	}
	return dst
}

// reader reads an encoding, remembering the first thing found wrong.
type reader struct {
	b   []byte
	off int
}

func (r *reader) fail(what string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrCorrupt, r.off, fmt.Sprintf(what, args...))
}

func (r *reader) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(r.b[r.off:])
	return v, r.advance(what, n)
}

func (r *reader) varint(what string) (int64, error) {
	v, n := binary.Varint(r.b[r.off:])
	return v, r.advance(what, n)
}

// advance moves past a varint of n bytes (binary.Uvarint's n), refusing
// one that is truncated, overflows, or is longer than it need be.
func (r *reader) advance(what string, n int) error {
	if n <= 0 {
		return r.fail("%s: truncated or overlong varint", what)
	}
	if n > 1 && r.b[r.off+n-1] == 0 {
		return r.fail("%s: varint with a needless zero byte", what)
	}
	r.off += n
	return nil
}

func (r *reader) byte(what string) (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.fail("%s: truncated", what)
	}
	r.off++
	return r.b[r.off-1], nil
}

func (r *reader) xor(what string, prev uint64) (float64, error) {
	h, err := r.byte(what)
	if err != nil {
		return 0, err
	}
	if h == 0 {
		return math.Float64frombits(prev), nil
	}
	lz, tz := int(h-1)/8, int(h-1)%8
	if h > 64 || lz+tz > 7 {
		return 0, r.fail("%s: XOR header %d names %d leading and %d trailing zero bytes", what, h, lz, tz)
	}
	n := 8 - lz - tz
	if len(r.b)-r.off < n {
		return 0, r.fail("%s: %d XOR bytes announced, %d left", what, n, len(r.b)-r.off)
	}
	mid := r.b[r.off : r.off+n]
	if mid[0] == 0 || mid[n-1] == 0 {
		return 0, r.fail("%s: XOR bytes have a zero byte the header should have counted", what)
	}
	var x uint64
	for _, c := range mid {
		x = x<<8 | uint64(c)
	}
	r.off += n
	return math.Float64frombits(prev ^ x<<(8*tz)), nil
}

// offset reads a sample's distance back from its window's End.
func (r *reader) offset(what string, end, res int64) (int64, error) {
	d, err := r.uvarint(what)
	if err != nil {
		return 0, err
	}
	if d >= uint64(res) {
		return 0, r.fail("%s: %d ms before the window end, the window is %d ms", what, d, res)
	}
	return end - int64(d), nil
}

// Decode reads one series' windows written by Encode and the resolution
// they were computed at. Any bytes Encode would not write are an error
// wrapping ErrCorrupt that says where and what; Decode never panics and
// allocates in proportion to its input.
func Decode(b []byte) (res int64, ws []Window, err error) {
	var prev valueState
	return decodeWindows(b, floatCodec, flagsKnown, func(r *reader, h head, res int64) (Window, error) {
		return decodeWindow(r, h, res, &prev)
	})
}

// decodeWindow reads a float window after its head.
func decodeWindow(r *reader, h head, res int64, prev *valueState) (Window, error) {
	var err error
	w := Window{End: h.End, Count: h.Count, Stale: h.Flags&flagStale != 0}
	flags := h.Flags
	valueFlags := flags &^ flagStale
	switch {
	case w.Count == 0:
		if valueFlags != 0 {
			return w, r.fail("flags %#x on a window without samples", flags)
		}
		if err := w.check(res); err != nil {
			return w, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return w, nil
	case w.Count > 1 && valueFlags&flagSingle != 0:
		return w, r.fail("single flag on %d samples", w.Count)
	case valueFlags&flagSingle != 0 && valueFlags != flagSingle:
		return w, r.fail("single flag with other value flags (flags %#x)", flags)
	}
	if w.First.T, err = r.offset("first timestamp", w.End, res); err != nil {
		return w, err
	}
	if w.First.V, err = r.xor("first value", prev[fFirst]); err != nil {
		return w, err
	}
	if valueFlags == flagSingle {
		w.Last, w.Min, w.Max, w.Sum = w.First, w.First.V, w.First.V, w.First.V
	} else {
		if w.Last.T, err = r.offset("last timestamp", w.End, res); err != nil {
			return w, err
		}
		if w.Last.V, err = r.xor("last value", prev[fLast]); err != nil {
			return w, err
		}
		w.Min, w.Max = w.First.V, w.Last.V
		if flags&flagMinFirst == 0 {
			if w.Min, err = r.xor("min", prev[fMin]); err != nil {
				return w, err
			}
		}
		if flags&flagMaxLast == 0 {
			if w.Max, err = r.xor("max", prev[fMax]); err != nil {
				return w, err
			}
		}
		if w.Sum, err = r.xor("sum", prev[fSum]); err != nil {
			return w, err
		}
		if flags&flagNoResets == 0 {
			if w.Resets, err = r.xor("resets", prev[fResets]); err != nil {
				return w, err
			}
		}
		// Encode sets each of these flags whenever it may, so one left
		// clear with the value it would stand for is not Encode's output.
		if flags&flagMinFirst == 0 && math.Float64bits(w.Min) == math.Float64bits(w.First.V) {
			return w, r.fail("min equals first but its flag is clear")
		}
		if flags&flagMaxLast == 0 && math.Float64bits(w.Max) == math.Float64bits(w.Last.V) {
			return w, r.fail("max equals last but its flag is clear")
		}
		if flags&flagNoResets == 0 && math.Float64bits(w.Resets) == 0 {
			return w, r.fail("resets is zero but its flag is clear")
		}
		if isSingle(w) {
			return w, r.fail("one sample in the long form instead of the single flag")
		}
	}
	if err := w.check(res); err != nil {
		return w, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	prev.update(w)
	return w, nil
}
