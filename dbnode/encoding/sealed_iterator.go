package encoding

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// sealedIterator decodes the sealed form: timestamps and values are two
// separate sections read side by side.
type sealedIterator struct {
	count uint64
	read  uint64
	v     float64
	err   error
	done  bool // end of data verified

	// Timestamp section.
	ts     bitReader
	tsKind uint8
	tc     tsCoder
	t0     int64      // tsRuns: the first timestamp
	runs   runDecoder // tsRuns

	// Value section: stream codes or Rice residuals.
	vals bitReader
	kind uint8
	vc   valueCoder // stream kind

	// Integer kind.
	scale   uint8
	order   uint8
	k       uint
	g       uint64
	n       uint64 // last integer
	d       uint64 // last delta / g (order 2)
	bias    uint64 // order 1; for order 2 the first delta / g
	ints    uint64 // integers decoded
	excLeft uint64 // exceptions not yet reached
	excNext uint64 // index of the next exception
	exc     []byte // the rest of the exception list
}

// NewSealedIterator returns an iterator over the output of Seal.
func NewSealedIterator(sealed []byte) Iterator {
	it := &sealedIterator{}
	if err := it.parse(sealed); err != nil {
		return errIterator{err}
	}
	return it
}

func (it *sealedIterator) parse(b []byte) error {
	r := byteReader{b: b}
	if f := r.byte(); r.bad || f != sealedFormat {
		if r.bad {
			return corruptf("empty sealed block")
		}
		return corruptf("unknown sealed format %#x", f)
	}
	it.count = r.uvarint()
	if r.bad {
		return corruptf("sealed block: bad sample count")
	}
	if it.count == 0 {
		if len(r.b) != 0 {
			return corruptf("sealed block: %d bytes after an empty header", len(r.b))
		}
		return nil
	}
	tsLen := r.uvarint()
	tsBytes := r.bytes(tsLen)
	it.kind = r.byte()
	if r.bad {
		return corruptf("sealed block truncated in its header")
	}
	if err := it.parseTimestamps(tsBytes); err != nil {
		return err
	}
	switch it.kind {
	case valuesStream:
		it.vals = newBitReader(r.b, 0)
		return nil
	case valuesIntegers:
	default:
		return corruptf("sealed block: unknown value kind %d", it.kind)
	}
	it.scale, it.order, it.k = r.byte(), r.byte(), uint(r.byte())
	it.g = r.uvarint()
	it.excLeft = r.uvarint()
	if r.bad || it.scale > maxScale || it.order > orderDoD || it.k > 62 || it.g == 0 || it.excLeft >= it.count {
		return corruptf("sealed block: bad integer header")
	}
	// The exception list is variable length: check it now and find the
	// residuals after it; Next reads it again as it reaches each index.
	it.exc = r.b
	for i, idx := uint64(0), uint64(0); i < it.excLeft; i++ {
		gap := r.uvarint()
		r.bytes(8)
		if i > 0 && gap == 0 || gap >= it.count-idx {
			return corruptf("sealed block: bad exception index")
		}
		idx += gap
	}
	it.exc = it.exc[:len(it.exc)-len(r.b)]
	it.n = uint64(r.varint())
	it.bias = uint64(r.varint())
	if r.bad {
		return corruptf("sealed block: bad integer header")
	}
	it.vals = newBitReader(r.b, 0)
	it.excNext = math.MaxUint64
	if it.excLeft > 0 {
		it.nextException(0)
	}
	return nil
}

// parseTimestamps reads the header of the timestamp section.
func (it *sealedIterator) parseTimestamps(b []byte) error {
	r := byteReader{b: b}
	it.tsKind = r.byte()
	switch {
	case r.bad:
		return corruptf("sealed block: empty timestamp section")
	case it.tsKind == tsCodes:
		it.ts = newBitReader(r.b, 0)
		return nil
	case it.tsKind != tsRuns:
		return corruptf("sealed block: unknown timestamp kind %d", it.tsKind)
	}
	t0 := r.bytes(8)
	runs := r.uvarint()
	kr, ko := uint(r.byte()), uint(r.byte())
	if r.bad || runs >= it.count || it.count > maxRunSamples || kr > 62 || ko > 62 {
		return corruptf("sealed block: bad timestamp header")
	}
	it.t0 = int64(binary.LittleEndian.Uint64(t0))
	it.ts = newBitReader(r.b, 0)
	it.runs = runDecoder{runs: runs, kr: kr, ko: ko}
	it.runs.load(&it.ts)
	return nil
}

// nextException reads the index of the next exception, relative to prev.
// parse checked the list.
func (it *sealedIterator) nextException(prev uint64) {
	gap, n := binary.Uvarint(it.exc)
	it.exc = it.exc[n:]
	it.excNext = prev + gap
}

// Next has a fast path like streamIterator.Next: integer kind, a timestamp
// on schedule or a few milliseconds off, a Rice code without escape, no
// exception at this index. It commits nothing until the sample is known
// good; everything else goes through next.
func (it *sealedIterator) Next() bool {
	if it.kind != valuesIntegers || it.ints < 2 || it.read >= it.count || it.read == it.excNext || it.err != nil {
		return it.next()
	}
	var x uint64
	var n uint
	switch {
	case it.tsKind == tsRuns && it.runs.left > 0:
	case it.tsKind == tsRuns:
		return it.next()
	default:
		word := it.ts.peek()
		switch {
		case word>>63 == 0:
			n = 1
		case word>>62 == 0b10:
			x, n = signExtend(word<<2>>59, 5), 7
		default:
			return it.next()
		}
	}
	tc := &it.tc
	t := int64(tc.sched + tc.nominal + x)
	if t <= tc.t || it.ts.pos+uint64(n) > it.ts.end {
		return it.next()
	}
	var z uint64
	if it.order != orderConst {
		vw := it.vals.peek()
		q := uint(bits.LeadingZeros64(^vw))
		m := q + 1 + it.k
		if q >= riceEscape || m > 57 || it.vals.pos+uint64(m) > it.vals.end {
			return it.next()
		}
		z = uint64(q)<<it.k | vw<<(q+1)>>(64-it.k)
		it.vals.pos += uint64(m)
	}
	if it.tsKind == tsRuns {
		it.runs.left--
	}
	it.ts.pos += uint64(n)
	tc.advance(t, x)
	if it.order == orderDoD {
		it.d += uint64(unzigzag(z))
		it.n += it.d * it.g
	} else {
		it.n += (uint64(unzigzag(z)) + it.bias) * it.g
	}
	it.ints++
	it.v = fromInt(int64(it.n), it.scale)
	it.read++
	return true
}

// next decodes one sample along the general path.
func (it *sealedIterator) next() bool {
	if it.read >= it.count {
		if !it.done {
			it.done = true
			it.checkEnd()
		}
		return false
	}
	if it.err != nil {
		return false
	}
	switch {
	case it.read == 0 && it.tsKind == tsCodes:
		it.tc = newTSCoder(int64(it.ts.readBits64(64)))
	case it.read == 0:
		it.tc = newTSCoder(it.t0)
	default:
		var off uint64
		if it.tsKind == tsCodes {
			off = readTimestampCode(&it.ts)
		} else {
			off = it.runs.next(&it.ts)
		}
		if t, inOrder := it.tc.apply(off); !inOrder {
			return it.fail(corruptf("sealed sample %d: timestamp %d not after %d", it.read, t, it.tc.t))
		}
	}
	if !it.ts.ok() {
		return it.fail(corruptf("sealed timestamps truncated at sample %d of %d", it.read, it.count))
	}
	ok := true
	switch {
	case it.kind == valuesStream && it.read == 0:
		it.v, ok = it.vc.decodeFirst(&it.vals)
	case it.kind == valuesStream:
		it.v, ok = it.vc.decode(&it.vals)
	case it.read == it.excNext:
		it.v = math.Float64frombits(binary.LittleEndian.Uint64(it.exc))
		it.exc = it.exc[8:]
		it.excLeft--
		it.excNext = math.MaxUint64
		if it.excLeft > 0 {
			it.nextException(it.read)
		}
	default:
		it.v = it.nextInt()
	}
	if !it.vals.ok() {
		return it.fail(corruptf("sealed values truncated at sample %d of %d", it.read, it.count))
	}
	if !ok {
		return it.fail(corruptf("sealed sample %d: malformed value code", it.read))
	}
	it.read++
	return true
}

// nextInt decodes the next integer-kind value.
func (it *sealedIterator) nextInt() float64 {
	switch {
	case it.ints == 0:
		// n holds the first integer already.
	case it.order == orderConst:
		it.n += it.bias * it.g
	case it.order == orderDelta:
		d := uint64(unzigzag(readRice(&it.vals, it.k))) + it.bias
		it.n += d * it.g
	case it.ints == 1:
		it.d = it.bias
		it.n += it.d * it.g
	default:
		it.d += uint64(unzigzag(readRice(&it.vals, it.k)))
		it.n += it.d * it.g
	}
	it.ints++
	return fromInt(int64(it.n), it.scale)
}

// checkEnd rejects data left over after the last sample in either section.
func (it *sealedIterator) checkEnd() {
	for _, r := range []*bitReader{&it.ts, &it.vals} {
		if n, extra := trailingBits(r); extra {
			it.err = corruptf("sealed block: %d bits after the last of %d samples", n, it.count)
			return
		}
	}
	if it.excLeft != 0 {
		it.err = corruptf("sealed block: %d exceptions past the last sample", it.excLeft)
	}
	if it.tsKind == tsRuns && !it.runs.done() {
		it.err = corruptf("sealed block: timestamp runs past the last sample")
	}
}

func (it *sealedIterator) fail(err error) bool {
	it.err = err
	it.read = it.count
	it.done = true
	return false
}

func (it *sealedIterator) At() (int64, float64) { return it.tc.t, it.v }
func (it *sealedIterator) Err() error           { return it.err }
