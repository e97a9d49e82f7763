package encoding

import (
	"encoding/binary"
	"slices"
)

// bitWriter appends bit fields, most significant bit first, to a byte slice.
//
// Bits gather in a 64-bit accumulator and reach buf a whole word at a time,
// so most fields touch only the writer itself: on the storage write path,
// where each sample goes to a different series, the buffer's tail is a
// cache miss that now comes once per word rather than once per sample.
type bitWriter struct {
	buf  []byte // whole words (and any header bytes) written so far
	acc  uint64 // pending bits, most significant first
	nacc uint   // pending bits in acc, < 64
}

// reset empties w, keeping its buffer, and reserves header bytes (zero) in
// front.
func (w *bitWriter) reset(headerBytes int) {
	buf := w.buf[:0]
	if cap(buf) < max(32, headerBytes+8) {
		buf = make([]byte, 0, max(32, headerBytes+8))
	}
	for range headerBytes {
		buf = append(buf, 0)
	}
	w.buf, w.acc, w.nacc = buf, 0, 0
}

// bytes returns the written bits, the last byte zero-padded. It stores the
// pending bits into buf's spare capacity, so like a write it needs
// exclusive access; the result is valid until the next write or reset. Its
// capacity is clipped so that a caller's append cannot overwrite anything.
// With fewer than 8 spare bytes it stores only the bytes the pending bits
// need, so that a short stream (a series' first samples) reading its bytes
// does not double its buffer.
func (w *bitWriter) bytes() []byte {
	n := len(w.buf)
	if w.nacc == 0 {
		return w.buf[:n:n]
	}
	k := n + int(w.nacc+7)/8
	if cap(w.buf)-n >= 8 {
		b := w.buf[:n+8]
		binary.BigEndian.PutUint64(b[n:], w.acc)
		return b[:k:k]
	}
	if cap(w.buf) < k {
		w.buf = slices.Grow(w.buf, k-n)
	}
	b := w.buf[:k]
	for i := n; i < k; i++ {
		b[i] = byte(w.acc >> (56 - 8*uint(i-n)))
	}
	return b[:k:k]
}

// size is len(bytes()), without writing anything: what a caller that only
// counts bytes (memory statistics, every series at every tick) must use,
// since bytes() may grow a short stream's buffer.
func (w *bitWriter) size() int { return len(w.buf) + int(w.nacc+7)/8 }

// writeBits appends the low n bits of v, n <= 64. Bits of v above n must
// be zero.
func (w *bitWriter) writeBits(v uint64, n uint) {
	if free := 64 - w.nacc; n < free {
		w.acc |= v << (free - n)
		w.nacc += n
		return
	}
	// Fill the word with v's top bits, write it, keep the rest. Shifts by
	// 64 give 0 in Go, which is what rest == 0 needs.
	rest := n - (64 - w.nacc)
	w.buf = binary.BigEndian.AppendUint64(w.buf, w.acc|v>>rest)
	w.acc = v << (64 - rest)
	w.nacc = rest
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
