package encoding

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// bitWriter appends bit fields, most significant bit first, to a byte buffer.
//
// Bits gather in a 64-bit accumulator and reach the buffer a whole word at
// a time, so most fields touch only the writer itself: on the storage write
// path, where each sample goes to a different series, the buffer's tail is
// a cache miss that now comes once per word rather than once per sample.
//
// The writer is 24 bytes, not a slice header's 24 plus its own 16: it is
// inline in every in-memory series (storage.Series), where 16 bytes decide
// the series' size class. So the buffer is a pointer, a 32-bit length and a
// one-byte capacity code: capacities are 2^e or 3*2^(e-1), Go size classes
// all of them, so an allocation wastes no rounding. A buffer starts at 32
// bytes, grows to 48 (a 4-sample stream of noisy floats takes 48 bytes, not
// the 64 that doubling from 32 gave), then doubles. Owners keep streams under
// maxStreamBytes (ErrTooManySamples), far from the 32-bit length.
type bitWriter struct {
	p    *byte  // the buffer, capOf(capc) bytes; nil before the first reset
	acc  uint64 // pending bits, most significant first
	n    uint32 // bytes written to the buffer: whole words and any header bytes
	nacc uint8  // pending bits in acc, < 64
	capc uint8  // the buffer's capacity code, see capOf
}

// maxStreamBytes bounds what an encoder appends to one stream (it answers
// ErrTooManySamples past it): one more sample of any kind stays well
// below the writer's 32-bit length.
const maxStreamBytes = 1 << 31

// minBufCode is the capacity code of a new buffer: 32 bytes, what a short
// stream (a series' first few samples) needs.
const minBufCode = 10

// capOf is the capacity of code c: 2^(c/2) for even c, 3*2^(c/2-1) for
// odd c (16, 24, 32, 48, 64, 96, ...).
func capOf(c uint8) int { return (2 | int(c&1)) << (c>>1 - 1) }

// cap is the buffer's capacity.
func (w *bitWriter) cap() int {
	if w.p == nil {
		return 0
	}
	return capOf(w.capc)
}

// buf is the buffer's written bytes, with the buffer's capacity.
func (w *bitWriter) buf() []byte {
	if w.p == nil {
		return nil
	}
	return unsafe.Slice(w.p, w.cap())[:w.n]
}

// grow makes room for extra more bytes, copying the written ones.
func (w *bitWriter) grow(extra int) {
	need := int(w.n) + extra
	if need > math.MaxUint32 {
		// The encoders stop at maxStreamBytes; reaching this is a bug.
		panic("encoding: bit stream over 4 GiB")
	}
	c := uint8(minBufCode)
	switch {
	case w.p == nil:
	case w.capc == minBufCode:
		c++ // 32 to 48: what 4 samples of a noisy float need
	default:
		c = w.capc + 2 // doubling: as few copies (and as little garbage) as append's
	}
	for capOf(c) < need {
		c++
	}
	b := make([]byte, capOf(c))
	copy(b, w.buf())
	w.p, w.capc = &b[0], c
}

// reset empties w, keeping its buffer, and reserves header bytes (zero) in
// front.
func (w *bitWriter) reset(headerBytes int) {
	if w.cap() < max(capOf(minBufCode), headerBytes+8) {
		w.p, w.n = nil, 0
		w.grow(max(capOf(minBufCode), headerBytes+8))
	}
	clear(unsafe.Slice(w.p, headerBytes))
	w.n, w.acc, w.nacc = uint32(headerBytes), 0, 0
}

// bytes returns the written bits, the last byte zero-padded. It stores the
// pending bits into the buffer's spare capacity, so like a write it needs
// exclusive access; the result is valid until the next write or reset. Its
// capacity is clipped so that a caller's append cannot overwrite anything.
// With fewer than 8 spare bytes it stores only the bytes the pending bits
// need, so that a short stream (a series' first samples) reading its bytes
// does not grow its buffer.
func (w *bitWriter) bytes() []byte {
	n := int(w.n)
	if w.nacc == 0 {
		return w.buf()[:n:n]
	}
	k := n + int(w.nacc+7)/8
	if w.cap()-n >= 8 {
		b := w.buf()[:n+8]
		binary.BigEndian.PutUint64(b[n:], w.acc)
		return b[:k:k]
	}
	if w.cap() < k {
		w.grow(k - n)
	}
	b := w.buf()[:k]
	for i := n; i < k; i++ {
		b[i] = byte(w.acc >> (56 - 8*uint(i-n)))
	}
	return b[:k:k]
}

// size is len(bytes()), without writing anything: what a caller that only
// counts bytes (memory statistics, every series at every tick) must use,
// since bytes() may grow a short stream's buffer.
func (w *bitWriter) size() int { return int(w.n) + int(w.nacc+7)/8 }

// writeBits appends the low n bits of v, n <= 64. Bits of v above n must
// be zero.
func (w *bitWriter) writeBits(v uint64, n uint) {
	if free := 64 - uint(w.nacc); n < free {
		w.acc |= v << (free - n)
		w.nacc += uint8(n)
		return
	}
	// Fill the word with v's top bits, write it, keep the rest. Shifts by
	// 64 give 0 in Go, which is what rest == 0 needs.
	rest := n - (64 - uint(w.nacc))
	w.appendWord(w.acc | v>>rest)
	w.acc = v << (64 - rest)
	w.nacc = uint8(rest)
}

// appendWord appends a whole word to the buffer.
func (w *bitWriter) appendWord(x uint64) {
	if int(w.n)+8 > w.cap() {
		w.grow(8)
	}
	binary.BigEndian.PutUint64((*[8]byte)(unsafe.Add(unsafe.Pointer(w.p), w.n))[:], x)
	w.n += 8
}

// bitReader reads what a bitWriter wrote.
type bitReader struct {
	b   []byte
	pos uint64 // next bit
	end uint64 // len(b)*8
}

func newBitReader(b []byte, startByte int) bitReader {
	return bitReader{b: b, pos: uint64(startByte) * 8, end: uint64(len(b)) * 8}
}

// peek returns the next 64 bits starting at pos, left aligned; at least 57 of
// them are meaningful, bits past the end of the data read as zero. Callers
// consume with skip and check overrun once with ok.
func (r *bitReader) peek() uint64 {
	i := r.pos >> 3
	var word uint64
	if i+8 <= uint64(len(r.b)) {
		word = binary.BigEndian.Uint64(r.b[i:])
	} else {
		word = r.peekTail(i)
	}
	return word << (r.pos & 7)
}

// peekTail assembles the last, short word of the data, zero padded.
func (r *bitReader) peekTail(i uint64) uint64 {
	var word uint64
	for k := uint64(0); k < 8; k++ {
		word <<= 8
		if i+k < uint64(len(r.b)) {
			word |= uint64(r.b[i+k])
		}
	}
	return word
}

// skip consumes n bits.
func (r *bitReader) skip(n uint) { r.pos += uint64(n) }

// ok reports whether everything consumed so far was inside the data.
func (r *bitReader) ok() bool { return r.pos <= r.end }

// readBits consumes and returns n bits, n <= 56. Past the end it returns
// zeros and ok turns false.
func (r *bitReader) readBits(n uint) uint64 {
	v := r.peek() >> (64 - n) // n == 0 shifts by 64: zero
	r.pos += uint64(n)
	return v
}

// readBits64 consumes n <= 64 bits.
func (r *bitReader) readBits64(n uint) uint64 {
	if n > 56 {
		hi := r.readBits(n - 32)
		return hi<<32 | r.readBits(32)
	}
	return r.readBits(n)
}

// stream is an encoder's Bytes, for either stream form: empty (the form's
// header with no sample) when count is 0, else the written bits with
// count put into the header at countAt.
func (w *bitWriter) stream(count uint32, countAt int, empty []byte) []byte {
	if count == 0 {
		return empty
	}
	binary.LittleEndian.PutUint32(w.buf()[countAt:countAt+4], count)
	return w.bytes()
}

// streamSize is len(stream(...)) without writing anything.
func (w *bitWriter) streamSize(count uint32, empty []byte) int {
	if count == 0 {
		return len(empty)
	}
	return w.size()
}
