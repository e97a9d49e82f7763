package encoding

import (
	"encoding/binary"
	"fmt"
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
	r       bitReader
	left    uint32 // samples still to decode
	read    uint32 // samples decoded
	tc      tsCoder
	v       float64
	vc      valueCoder
	err     error
	checked bool // end of data verified
}

// NewIterator returns an iterator over a stream produced by Encoder.Bytes
// (or a copy of it). An empty slice is an empty stream.
func NewIterator(stream []byte) Iterator {
	if len(stream) == 0 {
		return errIterator{}
	}
	if len(stream) < streamHeaderLen {
		return errIterator{corruptf("stream of %d bytes is shorter than its header", len(stream))}
	}
	if stream[0] != streamFormat {
		return errIterator{corruptf("unknown stream format %#x", stream[0])}
	}
	return &streamIterator{
		r:    newBitReader(stream, streamHeaderLen),
		left: binary.LittleEndian.Uint32(stream[1:5]),
	}
}

func (it *streamIterator) Next() bool {
	if it.left == 0 {
		if !it.checked {
			it.checked = true
			it.checkEnd()
		}
		return false
	}
	if it.err != nil {
		return false
	}
	ok := true
	if it.read == 0 {
		it.tc = tsCoder{t: int64(it.r.readBits64(64))}
		it.v, ok = it.vc.decodeFirst(&it.r)
	} else {
		if t, inOrder := it.tc.decode(&it.r); !inOrder {
			return it.fail(corruptf("sample %d: timestamp %d not after %d", it.read, t, it.tc.t))
		}
		it.v, ok = it.vc.decode(&it.r)
	}
	if !it.r.ok() {
		return it.fail(corruptf("stream truncated at sample %d of %d", it.read, it.read+it.left))
	}
	if !ok {
		return it.fail(corruptf("sample %d: malformed value code", it.read))
	}
	it.read++
	it.left--
	return true
}

// checkEnd rejects bytes after the last sample: a stream that does not end
// where its count says was cut or overwritten.
func (it *streamIterator) checkEnd() {
	r := &it.r
	if r.end-r.pos >= 8 || (r.pos&7 != 0 && r.readBits(uint(8-r.pos&7)) != 0) {
		it.err = corruptf("%d bits after the last of %d samples", r.end-r.pos, it.read)
	}
}

func (it *streamIterator) fail(err error) bool {
	it.err = err
	it.left = 0
	it.checked = true
	return false
}

func (it *streamIterator) At() (int64, float64) { return it.tc.t, it.v }
func (it *streamIterator) Err() error           { return it.err }
