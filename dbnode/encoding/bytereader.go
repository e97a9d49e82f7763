package encoding

import "encoding/binary"

// byteReader reads the byte-aligned header fields of the sealed form.
type byteReader struct {
	b   []byte
	bad bool
}

func (r *byteReader) byte() uint8 {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *byteReader) uvarint() uint64 {
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *byteReader) varint() int64 {
	x, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *byteReader) bytes(n uint64) []byte {
	if uint64(len(r.b)) < n {
		r.bad = true
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}
