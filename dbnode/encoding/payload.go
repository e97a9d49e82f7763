package encoding

import (
	"encoding/binary"
	"fmt"
)

// A block payload is what a fileset stores for one series of one block
// (docs/format/encoding.md, "Block payload"). Its first byte says what it
// is, so filesets written before histograms existed read unchanged:
//
//	0x02  the sealed float form alone (every payload before histograms)
//	0x83  a container: uvarint(len F) F, uvarint(n), n x (uvarint(len) H):
//	      F the sealed float form (len 0: no float samples), each H a
//	      histogram stream (histogram.md); the streams are in time order
//	      and do not overlap (a new one starts where the kind changes)
const payloadContainer = 0x83

// minHistStreamBytes is the least a non-empty histogram stream takes: a
// stream count larger than the bytes left allow is corruption, found
// before anything is allocated for it.
const minHistStreamBytes = histStreamHeaderLen + 1

// AppendPayload appends a block payload holding the sealed float form
// sealed (nil or empty: no floats) and the histogram streams hist to dst.
// Without histograms the payload is sealed itself, byte for byte.
func AppendPayload(dst, sealed []byte, hist [][]byte) []byte {
	if len(hist) == 0 {
		if len(sealed) == 0 {
			sealed = emptySealed
		}
		return append(dst, sealed...)
	}
	dst = append(dst, payloadContainer)
	dst = binary.AppendUvarint(dst, uint64(len(sealed)))
	dst = append(dst, sealed...)
	dst = binary.AppendUvarint(dst, uint64(len(hist)))
	for _, h := range hist {
		dst = binary.AppendUvarint(dst, uint64(len(h)))
		dst = append(dst, h...)
	}
	return dst
}

// emptySealed is the sealed form of no samples.
var emptySealed = []byte{sealedFormat, 0}

// IsPayloadContainer reports whether a block payload is the container
// (it holds native histograms) rather than the sealed float form alone.
func IsPayloadContainer(p []byte) bool { return len(p) > 0 && p[0] == payloadContainer }

// SplitPayload returns the parts of a block payload without decoding
// them: the sealed float form (nil when the payload holds no floats) and
// the histogram streams (aliasing p). A malformed container wraps
// ErrCorrupt; the parts themselves are checked by their iterators.
func SplitPayload(p []byte) (sealed []byte, hist [][]byte, err error) {
	if len(p) == 0 || p[0] != payloadContainer {
		return p, nil, nil
	}
	r := byteReader{b: p[1:]}
	n := r.uvarint()
	sealed = r.bytes(n)
	if r.bad {
		return nil, nil, corruptf("block payload: truncated float part")
	}
	if n == 0 {
		sealed = nil
	}
	k := r.uvarint()
	if r.bad || k == 0 || k > uint64(len(r.b))/minHistStreamBytes {
		return nil, nil, corruptf("block payload: bad histogram stream count")
	}
	hist = make([][]byte, 0, k)
	for i := uint64(0); i < k; i++ {
		l := r.uvarint()
		h := r.bytes(l)
		if r.bad {
			return nil, nil, corruptf("block payload: histogram stream %d truncated", i)
		}
		hist = append(hist, h)
	}
	if len(r.b) != 0 {
		return nil, nil, corruptf("block payload: %d bytes after the last histogram stream", len(r.b))
	}
	return sealed, hist, nil
}

// PayloadIterators returns iterators over a block payload's float and
// histogram samples; either is nil when the payload has none of that type.
// A malformed container gives a float iterator failing with the error.
func PayloadIterators(p []byte) (Iterator, HistogramIterator) {
	sealed, hist, err := SplitPayload(p)
	if err != nil {
		return errIterator{fmt.Errorf("%w", err)}, nil
	}
	var fl Iterator
	if sealed != nil {
		fl = NewSealedIterator(sealed)
	}
	if len(hist) == 0 {
		return fl, nil
	}
	its := make([]HistogramIterator, len(hist))
	for i, h := range hist {
		its[i] = NewHistogramIterator(h)
	}
	return fl, MergeHistogramIterators(its...)
}
