// Package decbuf reads the little-endian and varint fields that Tessera's
// own file formats share (fileset sections, backup parts, restart
// snapshots). It keeps the first failure and answers zero values after it,
// so a format's decoder reads a whole record and checks once, every field
// bounds-checked: hostile or torn input gets an error, never a panic or an
// allocation sized by a corrupt length.
package decbuf

import "encoding/binary"

// Buf is the unread rest of an input and the first failure reading it.
type Buf struct {
	B   []byte
	Err error
	// Fail builds the error for the first field that is missing or
	// malformed; each format words its own (its ErrCorrupt wrapped, or a
	// plain message), so errors keep saying which file kind failed.
	Fail func(what string) error
}

// Failf records what as the failure unless one is recorded already, and
// drops the rest of the input.
func (d *Buf) Failf(what string) {
	if d.Err == nil {
		d.Err = d.Fail(what)
	}
	d.B = nil
}

// Take returns the next n bytes (capacity n: appending to them cannot
// reach the input), or nil if fewer remain or a read failed before.
func (d *Buf) Take(n int, what string) []byte {
	if d.Err != nil || n < 0 || n > len(d.B) {
		d.Failf(what)
		return nil
	}
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}

// U16 reads a little-endian uint16.
func (d *Buf) U16(what string) uint16 {
	if v := d.Take(2, what); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

// U32 reads a little-endian uint32.
func (d *Buf) U32(what string) uint32 {
	if v := d.Take(4, what); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

// U64 reads a little-endian uint64.
func (d *Buf) U64(what string) uint64 {
	if v := d.Take(8, what); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// Uvarint reads an unsigned varint.
func (d *Buf) Uvarint(what string) uint64 { return d.uvarint(what, "") }

// uvarint is Uvarint of a field named what+suffix: the name is built
// only on failure (Bytes reads millions of fields at a restart, and
// building "series ID length" for each was 5% of a snapshot load's CPU).
func (d *Buf) uvarint(what, suffix string) uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Failf(what + suffix)
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Bytes reads a varint length and that many bytes.
func (d *Buf) Bytes(what string) []byte {
	n := d.uvarint(what, " length")
	if d.Err == nil && n > uint64(len(d.B)) {
		d.Failf(what)
		return nil
	}
	return d.Take(int(n), what)
}
