package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// wireVersion is the first byte of every message. A decoder refuses any
// other value, so a future format can change anything after it.
const wireVersion = 1

// ErrMalformed is wrapped by every decoding error: the bytes are not a
// message of the expected type (truncated, trailing garbage, impossible
// lengths or counts, unknown version).
var ErrMalformed = errors.New("rpc: malformed message")

// Message is what the codec carries: a hand-written, compact binary form.
//
// MarshalAppend appends exactly Size() bytes to dst and returns the
// extended slice. Unmarshal replaces the receiver's contents with the
// message decoded from b; byte-slice fields (IDs, streams) alias b, so the
// caller must not modify b afterwards. Unmarshal never panics: bad bytes
// return an error wrapping ErrMalformed.
type Message interface {
	Size() int
	MarshalAppend(dst []byte) []byte
	Unmarshal(b []byte) error
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

func zigzag(x int64) uint64 { return uint64(x<<1) ^ uint64(x>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func varintLen(x int64) int { return uvarintLen(zigzag(x)) }

func bytesLen(n int) int { return uvarintLen(uint64(n)) + n }

func appendVarint(dst []byte, x int64) []byte { return binary.AppendUvarint(dst, zigzag(x)) }

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendFloat(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

// reader decodes one message. The first failure sticks: later reads return
// zero values, so decoders check r.err once per loop rather than per field.
type reader struct {
	msg string // message type, for errors
	b   []byte
	off int
	err error
}

func newReader(msg string, b []byte) *reader {
	r := &reader{msg: msg, b: b}
	if v := r.u8("version"); r.err == nil && v != wireVersion {
		r.fail("unknown version %d", v)
	}
	return r
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d: %s", ErrMalformed, r.msg, r.off, fmt.Sprintf(format, args...))
	}
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) u8(what string) uint8 {
	if r.err != nil {
		return 0
	}
	if r.remaining() < 1 {
		r.fail("%s: truncated", what)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("%s: bad varint", what)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint(what string) int64 { return unzigzag(r.uvarint(what)) }

func (r *reader) u32(what string) uint32 {
	v := r.uvarint(what)
	if v > math.MaxUint32 {
		r.fail("%s: %d overflows uint32", what, v)
		return 0
	}
	return uint32(v)
}

func (r *reader) float(what string) float64 {
	if r.err != nil {
		return 0
	}
	if r.remaining() < 8 {
		r.fail("%s: truncated", what)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.off:]))
	r.off += 8
	return v
}

// bytes returns a length-prefixed field aliasing the input, nil when empty.
func (r *reader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil {
		return nil
	}
	if n > uint64(r.remaining()) {
		r.fail("%s: length %d exceeds the %d bytes left", what, n, r.remaining())
		return nil
	}
	if n == 0 {
		return nil
	}
	b := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return b
}

func (r *reader) string(what string) string { return string(r.bytes(what)) }

// count reads an element count and checks that the bytes left can hold that
// many elements of at least minSize bytes each, so garbage cannot make the
// decoder allocate more than the message's own size.
func (r *reader) count(what string, minSize int) int {
	n := r.uvarint(what)
	if r.err != nil {
		return 0
	}
	if n > uint64(r.remaining()/minSize) {
		r.fail("%s: %d elements cannot fit in the %d bytes left", what, n, r.remaining())
		return 0
	}
	return int(n)
}

// done checks that the whole input was consumed.
func (r *reader) done() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("%d trailing bytes", len(r.b)-r.off)
	}
	return r.err
}

// count32 reads a non-negative int that fits in 32 bits (a tally, not a
// length: nothing is allocated from it).
func (r *reader) count32(what string) int {
	v := r.uvarint(what)
	if v > math.MaxInt32 {
		r.fail("%s: %d out of range", what, v)
		return 0
	}
	return int(v)
}
