package encoding

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// Iterator walks samples in increasing timestamp order.
//
// Next advances and reports whether there is a sample; At is valid after Next
// returned true; after Next returned false, Err is nil at the end of the data
// and non-nil (wrapping ErrCorrupt for bad bytes) if iteration stopped on an
// error. Iterators are not safe for concurrent use.
type Iterator interface {
	Next() bool
	At() (int64, float64)
	Err() error
}

// errIterator is an iterator that failed before its first sample.
type errIterator struct{ err error }

func (it errIterator) Next() bool           { return false }
func (it errIterator) At() (int64, float64) { return 0, 0 }
func (it errIterator) Err() error           { return it.err }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// streamIterator decodes the stream form.
type streamIterator struct {
	streamCursor
	v  float64
	vc valueCoder
}

// NewIterator returns an iterator over a stream produced by Encoder.Bytes
// (or a copy of it). An empty slice is an empty stream.
func NewIterator(stream []byte) Iterator {
	if len(stream) == 0 {
		return errIterator{}
	}
	it := &streamIterator{}
	if err := it.reset(stream); err != nil {
		return errIterator{err}
	}
	return it
}

// StreamLen is the sample count a stream's header claims, for sizing what
// will hold its samples; 0 for a stream too short or of another format. It
// is capped at what the stream's bytes could hold (every sample takes at
// least two bits), so a corrupt or hostile header cannot make a caller
// allocate more than a few times the stream's size.
func StreamLen(stream []byte) int {
	if len(stream) < streamHeaderLen || stream[0] != streamFormat {
		return 0
	}
	return min(int(binary.LittleEndian.Uint32(stream[1:5])), 1+4*(len(stream)-streamHeaderLen))
}

// StreamFirstTimestamp is the timestamp of a stream's first sample, read
// from its head without decoding (false for an empty, short or foreign
// stream), so a reader can tell whether the stream lies inside a range
// before deciding to filter it sample by sample.
func StreamFirstTimestamp(stream []byte) (int64, bool) {
	if len(stream) < streamHeaderLen+8 || stream[0] != streamFormat || binary.LittleEndian.Uint32(stream[1:5]) == 0 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(stream[streamHeaderLen:])), true
}

// reset points it at the start of a non-empty stream.
func (it *streamIterator) reset(stream []byte) error {
	*it = streamIterator{}
	if len(stream) < streamHeaderLen {
		return corruptf("stream of %d bytes is shorter than its header", len(stream))
	}
	if stream[0] != streamFormat {
		return corruptf("unknown stream format %#x", stream[0])
	}
	it.r = newBitReader(stream, streamHeaderLen)
	it.left = binary.LittleEndian.Uint32(stream[1:5])
	return nil
}

// Next has a fast path for the codes that make up almost every sample of a
// scraped series: a timestamp on schedule or off by a few milliseconds, and
// an integer-mode delta-of-delta of up to 20 bits. It inlines their decoding
// and commits nothing until the sample is known good; anything else, and
// every error, goes through next, which starts over from the same position.
func (it *streamIterator) Next() bool {
	if it.read == 0 || it.left == 0 || it.err != nil || !it.vc.intMode {
		return it.next()
	}
	r := &it.r
	word := r.peek()
	var x uint64
	var n uint
	switch {
	case word>>63 == 0:
		n = 1
	case word>>62 == 0b10:
		x, n = signExtend(word<<2>>59, 5), 7
	default:
		return it.next()
	}
	tc := &it.tc
	t := int64(tc.sched + tc.nominal + x)
	if t <= tc.t {
		return it.next()
	}
	w := word << n // at least 57-7 meaningful bits
	ones := uint(bits.LeadingZeros64(^w))
	var dod uint64
	switch ones {
	case 0:
		n++
	case 1, 2, 3:
		k := intPayload[ones]
		dod = signExtend(w<<(ones+1)>>(64-k), k) << it.vc.shift
		n += ones + 1 + k
	default:
		return it.next()
	}
	if r.pos+uint64(n) > r.end {
		return it.next()
	}
	r.pos += uint64(n)
	tc.advance(t, x)
	vc := &it.vc
	vc.delta += dod
	vc.n += vc.delta
	it.v = fromInt(int64(vc.n), vc.scale)
	vc.bits = math.Float64bits(it.v)
	it.read++
	it.left--
	return true
}

// next decodes one sample along the general path.
func (it *streamIterator) next() bool {
	if it.left == 0 {
		return it.end(sampleNoun)
	}
	first := it.read == 0
	if !it.timestamp(sampleNoun) {
		return false
	}
	var ok bool
	if first {
		it.v, ok = it.vc.decodeFirst(&it.r)
	} else {
		it.v, ok = it.vc.decode(&it.r)
	}
	return it.finish(ok, sampleNoun)
}

// sampleNoun names a float stream's samples in its errors.
const sampleNoun = "sample"

func (it *streamIterator) At() (int64, float64) { return it.tc.t, it.v }
func (it *streamIterator) Err() error           { return it.err }
