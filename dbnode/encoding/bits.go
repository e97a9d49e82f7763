package encoding

import "encoding/binary"

// bitWriter appends bit fields, most significant bit first, to a byte slice.
//
// It writes whole 64-bit words at the current byte so that one field costs
// one load and one store, and it keeps at least 8 zero bytes of slack after
// the last written bit so those words never run past the slice. Bits after
// the last one written are always zero, so bytes() needs no flushing and never
// mutates: a reader may hold bytes() while nothing else is written.
type bitWriter struct {
	buf  []byte // written bits followed by zero slack; len(buf) >= bytes()+8
	nbit uint64 // bits written
}

// reset empties w, keeping its buffer, and reserves header bytes in front.
func (w *bitWriter) reset(headerBytes int) {
	clear(w.buf)
	if len(w.buf) < headerBytes+8 {
		w.buf = make([]byte, max(64, headerBytes+8))
	}
	w.nbit = uint64(headerBytes) * 8
}

// bytes returns the written bits, the last byte zero-padded. Its capacity is
// clipped so that a caller's append cannot overwrite the slack.
func (w *bitWriter) bytes() []byte {
	n := (w.nbit + 7) / 8
	return w.buf[:n:n]
}

// grow makes room for at least one more 64-bit word after the current byte.
func (w *bitWriter) grow() {
	nb := make([]byte, 2*len(w.buf)+64)
	copy(nb, w.buf)
	w.buf = nb
}

// writeBits appends the low n bits of v, n <= 56. Bits of v above n must be
// zero.
func (w *bitWriter) writeBits(v uint64, n uint) {
	i := w.nbit >> 3
	if i+8 > uint64(len(w.buf)) {
		w.grow()
	}
	off := w.nbit & 7
	p := w.buf[i : i+8]
	word := binary.BigEndian.Uint64(p)
	word |= v << (64 - n) >> off
	binary.BigEndian.PutUint64(p, word)
	w.nbit += uint64(n)
}

// writeBits64 appends the low n bits of v for any n <= 64 (bits above n zero).
func (w *bitWriter) writeBits64(v uint64, n uint) {
	if n > 56 {
		w.writeBits(v>>32, n-32)
		v &= 1<<32 - 1
		n = 32
	}
	w.writeBits(v, n)
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
