package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The parts of the encoding float and histogram windows share
// (docs/format/rollup.md): the stream header (version, resolution, window
// count), each window's End as a delta-of-delta of End/resolution, and the
// window head (flags, count). Each kind of window brings only its own
// flags and values, so the two formats cannot drift apart where the
// format doc says they are one.

// codec names one kind of window for the shared loops: its version byte
// and how its errors speak of it.
type codec struct {
	version byte
	window  string // "window" or "histogram window", in errors
	// versionFault is the format of the error for a version byte that
	// is not this codec's; its arguments are that byte and version.
	versionFault string
}

// encodeWindows appends the stream header and each window to dst: the
// shared End codec, then what body (the window's own part, from its flags
// on) writes.
func encodeWindows[W any, P windowRef[W]](dst []byte, c codec, res int64, ws []W, body func([]byte, *W) []byte) ([]byte, error) {
	if res <= 0 || res > math.MaxInt64/2 {
		return dst, fmt.Errorf("rollup: encode: resolution must be 1 .. 2^62-1 ms, got %d", res)
	}
	dst = append(dst, c.version)
	dst = binary.AppendUvarint(dst, uint64(res))
	dst = binary.AppendUvarint(dst, uint64(len(ws)))
	var prevUnits, prevDelta int64
	for i := range ws {
		w := &ws[i]
		if err := P(w).check(res); err != nil {
			return dst, fmt.Errorf("rollup: encode %s %d: %w", c.window, i, err)
		}
		end := P(w).end()
		units := end / res
		if i == 0 {
			dst = binary.AppendVarint(dst, units)
			prevDelta = 1
		} else {
			delta := units - prevUnits
			if delta < 1 {
				return dst, fmt.Errorf("rollup: encode %s %d: End %d not after the previous window's End %d", c.window, i, end, prevUnits*res)
			}
			dst = binary.AppendVarint(dst, delta-prevDelta)
			prevDelta = delta
		}
		prevUnits = units
		dst = body(dst, w)
	}
	return dst, nil
}

// appendHead writes a window's flags and sample count.
func appendHead(dst []byte, flags byte, count uint64) []byte {
	return binary.AppendUvarint(append(dst, flags), count)
}

// head is what every window starts with, as decodeWindows hands it to
// the kind's own decoder.
type head struct {
	End   int64
	Flags byte
	Count uint64
}

// decodeWindows reads the stream header and each window: the shared End
// codec and head, then what body reads (the rest of the window, from
// what follows its count). known is the kind's set of flags: any other is
// refused before body sees them.
func decodeWindows[W any](b []byte, c codec, known byte, body func(r *reader, h head, res int64) (W, error)) (res int64, ws []W, err error) {
	r := &reader{b: b}
	v, err := r.byte("version")
	if err != nil {
		return 0, nil, err
	}
	if v != c.version {
		return 0, nil, r.fail(c.versionFault, v, c.version)
	}
	ures, err := r.uvarint("resolution")
	if err != nil {
		return 0, nil, err
	}
	if ures == 0 || ures > math.MaxInt64/2 {
		return 0, nil, r.fail("resolution %d ms out of range", ures)
	}
	res = int64(ures)
	n, err := r.uvarint("window count")
	if err != nil {
		return 0, nil, err
	}
	if n > uint64(len(b)-r.off)/minWindowSize {
		return 0, nil, r.fail("%d windows announced, %d bytes left", n, len(b)-r.off)
	}
	ws = make([]W, 0, n)
	ends := endReader{maxUnits: math.MaxInt64 / res, minUnits: math.MinInt64/res + 1}
	for i := uint64(0); i < n; i++ {
		h, err := r.head(&ends, i == 0, res, known)
		var w W
		if err == nil {
			w, err = body(r, h, res)
		}
		if err != nil {
			return 0, nil, fmt.Errorf("%s %d: %w", c.window, i, err)
		}
		ws = append(ws, w)
	}
	if r.off != len(b) {
		return 0, nil, r.fail("%d bytes after the last window", len(b)-r.off)
	}
	return res, ws, nil
}

// endReader undoes the End delta-of-delta: units is the last End read
// over the resolution, delta the step to it.
type endReader struct {
	units, delta       int64
	minUnits, maxUnits int64
}

// head reads a window's End, flags and count.
func (r *reader) head(e *endReader, first bool, res int64, known byte) (head, error) {
	var h head
	d, err := r.varint("End")
	if err != nil {
		return h, err
	}
	if first {
		e.units, e.delta = d, 1
	} else {
		// delta + d and units + delta are bounded before they are summed.
		if d > e.maxUnits-e.delta || e.delta+d < 1 {
			return h, r.fail("End delta-of-delta %d makes windows not strictly increasing", d)
		}
		e.delta += d
		if e.units > 0 && e.delta > e.maxUnits-e.units {
			return h, r.fail("End overflows")
		}
		e.units += e.delta
	}
	if e.units < e.minUnits || e.units > e.maxUnits {
		return h, r.fail("End %d windows of %d ms overflows", e.units, res)
	}
	h.End = e.units * res
	if h.Flags, err = r.byte("flags"); err != nil {
		return h, err
	}
	if h.Flags&^known != 0 {
		return h, r.fail("unknown flags %#x", h.Flags&^known)
	}
	h.Count, err = r.uvarint("count")
	return h, err
}

// checkSpan is the rule every kind of window keeps, whatever its values:
// End a multiple of the resolution, and samples that fit the window.
func checkSpan(s span, res int64) error {
	if s.End%res != 0 {
		return fmt.Errorf("End %d is not a multiple of the resolution %d", s.End, res)
	}
	if s.End/res < math.MinInt64/res+1 {
		return fmt.Errorf("End %d is out of range", s.End)
	}
	if s.Count == 0 {
		if !s.Stale {
			return errors.New("no samples and no stale marker: such a window is never emitted")
		}
		return nil
	}
	lo := s.End - res
	for _, x := range []struct {
		name string
		t    int64
	}{{"first", s.FirstT}, {"last", s.LastT}} {
		if x.t <= lo || x.t > s.End {
			return fmt.Errorf("%s sample at %d is outside the window (%d, %d]", x.name, x.t, lo, s.End)
		}
	}
	switch {
	case s.Count == 1 && s.FirstT != s.LastT:
		return fmt.Errorf("one sample but first at %d and last at %d", s.FirstT, s.LastT)
	case s.Count > 1 && s.FirstT >= s.LastT:
		return fmt.Errorf("%d samples but first at %d is not before last at %d", s.Count, s.FirstT, s.LastT)
	case s.Count > uint64(s.LastT-s.FirstT)+1:
		return fmt.Errorf("%d samples do not fit between %d and %d at one per millisecond", s.Count, s.FirstT, s.LastT)
	}
	return nil
}
