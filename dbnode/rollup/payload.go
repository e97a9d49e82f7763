package rollup

import (
	"encoding/binary"
	"fmt"
)

// PayloadKind is the first byte of a rollup namespace's fileset data
// entry (one series, one rollup block): raw block payloads start with
// 0x02 or 0x83 (dbnode/encoding), so a raw reader handed a rollup entry
// fails on the first byte instead of misreading it.
const PayloadKind = 0x84

// AppendPayload appends the fileset data entry of one series of a rollup
// block to dst: PayloadKind, uvarint(len F), F, H, where F is the
// Encode'd float windows (empty: none) and H the EncodeHistograms'd
// histogram windows (empty: none), running to the end of the entry. The
// fileset's own checksums cover it; equal windows give equal bytes.
func AppendPayload(dst []byte, res int64, ws []Window, hs []HWindow) ([]byte, error) {
	dst = append(dst, PayloadKind)
	var f []byte
	if len(ws) > 0 {
		var err error
		if f, err = Encode(nil, res, ws); err != nil {
			return nil, err
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(f)))
	dst = append(dst, f...)
	if len(hs) > 0 {
		var err error
		if dst, err = EncodeHistograms(dst, res, hs); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// DecodePayload is AppendPayload's inverse. res is the windows'
// resolution (0 when the entry holds no windows at all).
func DecodePayload(p []byte) (res int64, ws []Window, hs []HWindow, err error) {
	if len(p) == 0 || p[0] != PayloadKind {
		return 0, nil, nil, fmt.Errorf("%w: rollup payload: not a rollup entry", ErrCorrupt)
	}
	n, k := binary.Uvarint(p[1:])
	if k <= 0 || n > uint64(len(p)-1-k) || (k > 1 && p[k] == 0) {
		return 0, nil, nil, fmt.Errorf("%w: rollup payload: bad float part length", ErrCorrupt)
	}
	f, h := p[1+k:1+k+int(n)], p[1+k+int(n):]
	if len(f) > 0 {
		if res, ws, err = Decode(f); err != nil {
			return 0, nil, nil, fmt.Errorf("rollup payload float windows: %w", err)
		}
	}
	if len(h) > 0 {
		hres, hws, err := DecodeHistograms(h)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("rollup payload histogram windows: %w", err)
		}
		if res != 0 && hres != res {
			return 0, nil, nil, fmt.Errorf("%w: rollup payload: float resolution %d, histogram resolution %d", ErrCorrupt, res, hres)
		}
		res, hs = hres, hws
	}
	return res, ws, hs, nil
}

// MergeEqualEnds merges, in windows sorted by End, the windows of equal
// End (the two halves of a window cut by a block edge, earlier first):
// what a reader does with the windows of adjacent rollup blocks. It
// merges in place: ws's elements are overwritten.
func MergeEqualEnds(ws []Window) ([]Window, error) {
	return mergeEqualEnds(ws, func(w Window) int64 { return w.End }, Merge)
}

// MergeEqualEndsHistograms is MergeEqualEnds for histogram windows.
func MergeEqualEndsHistograms(ws []HWindow) ([]HWindow, error) {
	return mergeEqualEnds(ws, func(w HWindow) int64 { return w.End }, MergeHistograms)
}

// mergeEqualEnds is MergeEqualEnds for either kind of window.
func mergeEqualEnds[W any](ws []W, end func(W) int64, merge func(a, b W) (W, error)) ([]W, error) {
	out := ws[:0] // in place: out never passes the window being read
	for _, w := range ws {
		if n := len(out); n > 0 && end(out[n-1]) == end(w) {
			m, err := merge(out[n-1], w)
			if err != nil {
				return nil, err
			}
			out[n-1] = m
			continue
		}
		out = append(out, w)
	}
	return out, nil
}

// CoarsenHistograms is Coarsen for histogram windows.
func CoarsenHistograms(windows []HWindow, res int64) ([]HWindow, error) {
	if res <= 0 {
		return nil, badResolution(res)
	}
	out := make([]HWindow, 0, len(windows))
	for i, w := range windows {
		if i > 0 && w.End < windows[i-1].End {
			return nil, fmt.Errorf("window %d: %w: ends at %d after a window ending %d", i, ErrOrder, w.End, windows[i-1].End)
		}
		w.End = windowEnd(w.End, res)
		out = append(out, w)
	}
	return MergeEqualEndsHistograms(out)
}
