package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
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
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], x)
	return append(append(dst, byte(1+8*lz+tz)), b[lz:8-tz]...)
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
	return AppendDecode(nil, b)
}

// AppendDecode is Decode appending the windows to dst (a reader's buffer
// reused across series); on an error the windows appended so far are not
// returned.
func AppendDecode(dst []Window, b []byte) (res int64, ws []Window, err error) {
	if res, ws, ok := fastDecode(dst, b); ok {
		return res, ws, nil
	}
	// Something is wrong with b (or unusual enough for the fast loop to
	// give up): the checked decoder below says what.
	var prev valueState
	return decodeWindows(dst, b, floatCodec, flagsKnown, func(r *reader, h head, res int64) (Window, error) {
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

// fastDecode is Decode's loop for the reads of a query: the same checks
// in one function without per-field calls, closures or error values. ok
// is false for anything it does not accept, which includes everything
// the checked decoder refuses (it may give up on more: AppendDecode then
// runs the checked decoder, which decides). The windows appended to dst
// are valid only when ok.
func fastDecode(dst []Window, b []byte) (res int64, ws []Window, ok bool) {
	if len(b) == 0 || b[0] != Version {
		return 0, nil, false
	}
	off := 1
	ures, off, ok := fastUvarint(b, off)
	if !ok || ures == 0 || ures > math.MaxInt64/2 {
		return 0, nil, false
	}
	res = int64(ures)
	n, off, ok := fastUvarint(b, off)
	if !ok || n > uint64(len(b)-off)/minWindowSize {
		return 0, nil, false
	}
	ws = slices.Grow(dst, int(n))
	maxUnits, minUnits := int64(math.MaxInt64)/res, int64(math.MinInt64)/res+1
	var (
		units, delta int64
		prev         valueState
	)
	for i := uint64(0); i < n; i++ {
		ud, o, ok := fastUvarint(b, off)
		if !ok {
			return 0, nil, false
		}
		off = o
		d := int64(ud >> 1) // zigzag, as binary.Varint
		if ud&1 != 0 {
			d = ^d
		}
		if i == 0 {
			units, delta = d, 1
		} else {
			if d > maxUnits-delta || delta+d < 1 {
				return 0, nil, false
			}
			delta += d
			if units > 0 && delta > maxUnits-units {
				return 0, nil, false
			}
			units += delta
		}
		if units < minUnits || units > maxUnits || off >= len(b) {
			return 0, nil, false
		}
		flags := b[off]
		off++
		if flags&^flagsKnown != 0 {
			return 0, nil, false
		}
		count, o, ok := fastUvarint(b, off)
		if !ok {
			return 0, nil, false
		}
		off = o
		w := Window{End: units * res, Count: count, Stale: flags&flagStale != 0}
		valueFlags := flags &^ flagStale
		if count == 0 {
			if valueFlags != 0 || !w.Stale {
				return 0, nil, false
			}
			ws = append(ws, w)
			continue
		}
		single := valueFlags&flagSingle != 0
		if single && (count > 1 || valueFlags != flagSingle) {
			return 0, nil, false
		}
		var x uint64
		if w.First.T, off, ok = fastOffset(b, off, w.End, res); !ok {
			return 0, nil, false
		}
		if x, off, ok = fastXOR(b, off, prev[fFirst]); !ok {
			return 0, nil, false
		}
		prev[fFirst] = x
		w.First.V = math.Float64frombits(x)
		if single {
			w.Last, w.Min, w.Max, w.Sum = w.First, w.First.V, w.First.V, w.First.V
			prev[fLast], prev[fMin], prev[fMax], prev[fSum], prev[fResets] = x, x, x, x, 0
			ws = append(ws, w)
			continue
		}
		if w.Last.T, off, ok = fastOffset(b, off, w.End, res); !ok {
			return 0, nil, false
		}
		var last, sum uint64
		if last, off, ok = fastXOR(b, off, prev[fLast]); !ok {
			return 0, nil, false
		}
		mn, mx, rs := x, last, uint64(0)
		if flags&flagMinFirst == 0 {
			if mn, off, ok = fastXOR(b, off, prev[fMin]); !ok || mn == x {
				return 0, nil, false
			}
		}
		if flags&flagMaxLast == 0 {
			if mx, off, ok = fastXOR(b, off, prev[fMax]); !ok || mx == last {
				return 0, nil, false
			}
		}
		if sum, off, ok = fastXOR(b, off, prev[fSum]); !ok {
			return 0, nil, false
		}
		if flags&flagNoResets == 0 {
			if rs, off, ok = fastXOR(b, off, prev[fResets]); !ok || rs == 0 {
				return 0, nil, false
			}
		}
		w.Last.V, w.Min, w.Max, w.Sum, w.Resets = math.Float64frombits(last), math.Float64frombits(mn),
			math.Float64frombits(mx), math.Float64frombits(sum), math.Float64frombits(rs)
		// checkWindow's sample rules (the offsets already put both
		// samples inside the window), and isSingle's long form refused.
		switch {
		case count == 1 && (w.First.T != w.Last.T || isSingle(w)):
			return 0, nil, false
		case count > 1 && w.First.T >= w.Last.T:
			return 0, nil, false
		case count > uint64(w.Last.T-w.First.T)+1:
			return 0, nil, false
		}
		prev = valueState{x, last, mn, mx, sum, rs}
		ws = append(ws, w)
	}
	if off != len(b) {
		return 0, nil, false
	}
	return res, ws, true
}

// fastUvarint is reader.uvarint for fastDecode: a canonical uvarint at
// off, and the offset after it.
func fastUvarint(b []byte, off int) (uint64, int, bool) {
	if off < len(b) && b[off] < 0x80 {
		return uint64(b[off]), off + 1, true
	}
	if off >= len(b) {
		return 0, off, false
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 1 || b[off+n-1] == 0 {
		return 0, off, false
	}
	return v, off + n, true
}

// fastOffset is reader.offset for fastDecode.
func fastOffset(b []byte, off int, end, res int64) (int64, int, bool) {
	d, off, ok := fastUvarint(b, off)
	if !ok || d >= uint64(res) {
		return 0, off, false
	}
	return end - int64(d), off, true
}

// fastXOR is reader.xor for fastDecode, returning the value's bits.
func fastXOR(b []byte, off int, prev uint64) (uint64, int, bool) {
	if off >= len(b) {
		return 0, off, false
	}
	h := b[off]
	off++
	if h == 0 {
		return prev, off, true
	}
	lz, tz := int(h-1)/8, int(h-1)%8
	n := 8 - lz - tz
	if h > 64 || lz+tz > 7 || len(b)-off < n {
		return 0, off, false
	}
	mid := b[off : off+n]
	if mid[0] == 0 || mid[n-1] == 0 {
		return 0, off, false
	}
	var x uint64
	for _, c := range mid {
		x = x<<8 | uint64(c)
	}
	return prev ^ x<<(8*tz), off + n, true
}
