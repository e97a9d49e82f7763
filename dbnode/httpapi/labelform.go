package httpapi

import (
	"encoding/binary"

	"github.com/tessera-tsdb/tessera/internal/unaligned"
)

// labelsAreID reports whether raw, the label fields of a remote write 1.0
// TimeSeries (a remote.LabelKey's Raw), are byte for byte the form of the
// series ID id: what Prometheus' marshaller writes for the ID's labels in
// ID order. Per label that is
//
//	0x0a len(msg) | 0x0a uvarint(len(name)) name | 0x12 uvarint(len(value)) value
//
// while the ID (package ident) holds uvarint(len(name)) name
// uvarint(len(value)) value: the wire form is the ID with three bytes
// inserted before each name and one before each value. Every length is a
// minimal varint, and an empty name or value (which the marshaller leaves
// out) is no ID's form.
//
// For one id exactly one raw satisfies it: the form is a function of the
// ID. So the series cache can stand for the label bytes an entry was
// decoded from with the ID it keeps anyway: when labelsAreID held for the
// bytes it was decoded from and holds for a request's bytes, the two are
// the same bytes, which decode to the same series.
//
// It runs on every cache hit of remote write 1.0, where comparing a
// copy of the bytes took one memequal of ~110 bytes (a few ns). A
// comparison per name and per value through memequal costs a call each
// (~50 ns for 5 labels, 11-13% more ingest CPU per sample when tried), so
// the common case (every length below 128) compares each segment with
// 8-byte words inline, masking the bytes outside the segment, and checks
// a label's 4 header bytes and its value's 2 with one comparison each.
// Longer labels go through labelsAreIDVarint.
func labelsAreID(raw, id []byte) bool {
	// The loop follows raw's label lengths: the next label's place depends
	// on one byte loaded (raw[i+1]), not on the two of the ID's name and
	// value lengths, so little of a label's work waits for the one before.
	// The ID's lengths are checked by comparing them with raw's: each
	// segment compared includes its length byte.
	// Bounds: each label's header is three bytes longer in raw than in
	// the ID, so at every segment i >= j+3; the unchecked word loads of
	// segmentEqual and shortSegmentEqual (unaligned.Load64, no bounds checks on
	// amd64/arm64) stay inside both buffers only because of that. A change
	// to the headers compared here must keep it.
	i, j := 0, 0 // raw[i:] and id[j:] are left to compare
	for i < len(raw) {
		if len(raw)-i < 8 {
			return false // shorter than the shortest label
		}
		m := int(raw[i+1]) // the Label message's length
		ie := i + 2 + m    // the label's end in raw
		je := j + m - 2    // and in the ID
		if m >= 0x80 || ie > len(raw) || je > len(id) {
			// a long label (a length of two bytes or more), or not the
			// form: the varint comparison tells
			return labelsAreIDVarint(raw[i:], id[j:])
		}
		nl := int(raw[i+3])
		vl := m - 4 - nl
		// 0x0a m 0x0a: the Label field, its length and the name field;
		// then the name's length, which leaves vl bytes for the value
		// field (0x12 vl).
		if vl < 1 || nl < 1 || unaligned.Load32(raw, i)&0xff00ff != 0x0a000a ||
			unaligned.Load16(raw, i+4+nl) != 0x12|uint16(vl)<<8 {
			return false
		}
		// The name with its length, raw[i+3:i+4+nl] against
		// id[j:j+1+nl], and the value with its length,
		// raw[i+5+nl:ie] against id[j+1+nl:je].
		// Most are compared inline, in one or two words ending at their
		// end (see segmentEqual).
		if j+1+nl >= 8 && nl < 16 {
			if !shortSegmentEqual(raw, id, i+3, j, nl+1) {
				return false
			}
		} else if !segmentEqual(raw, id, i+3, j, nl+1) {
			return false
		}
		if je >= 8 && vl < 16 {
			if !shortSegmentEqual(raw, id, i+5+nl, j+1+nl, vl+1) {
				return false
			}
		} else if !segmentEqual(raw, id, i+5+nl, j+1+nl, vl+1) {
			return false
		}
		i, j = ie, je
	}
	return j == len(id)
}

// shortSegmentEqual is segmentEqual for 2 <= n <= 16 and j+n >= 8, small
// enough to be inlined.
func shortSegmentEqual(raw, id []byte, i, j, n int) bool {
	x := unaligned.Load64(raw, i+n-8) ^ unaligned.Load64(id, j+n-8)
	if n <= 8 {
		return x>>(64-8*uint(n)) == 0
	}
	return x == 0 && unaligned.Load64(raw, i) == unaligned.Load64(id, j)
}

// segmentEqual reports whether raw[i:i+n] equals id[j:j+n], both in
// range, with 2 <= n < 0x80 and i >= j+3 (raw has more bytes before the
// segment: the labels' headers). It compares 8-byte words: a segment of
// up to a word is read in the word ending at it (which, the segment in
// its high bytes, has room in both when it has in the ID), or, near the
// ID's start, the word starting at it; up to two words in its first and
// last words; longer ones a word at a time.
func segmentEqual(raw, id []byte, i, j, n int) bool {
	switch e := j + n; {
	case n <= 8 && e >= 8:
		return (unaligned.Load64(raw, i+n-8)^unaligned.Load64(id, e-8))>>(64-8*uint(n)) == 0
	case n <= 8:
		if len(id) < j+8 || len(raw) < i+8 {
			return string(raw[i:i+n]) == string(id[j:j+n])
		}
		return (unaligned.Load64(raw, i)^unaligned.Load64(id, j))<<(64-8*uint(n)) == 0
	case n <= 16:
		return unaligned.Load64(raw, i) == unaligned.Load64(id, j) && unaligned.Load64(raw, i+n-8) == unaligned.Load64(id, e-8)
	}
	for ; n > 8; i, j, n = i+8, j+8, n-8 {
		if unaligned.Load64(raw, i) != unaligned.Load64(id, j) {
			return false
		}
	}
	return unaligned.Load64(raw, i+n-8) == unaligned.Load64(id, j+n-8)
}

// labelsAreIDVarint is labelsAreID for labels of any length: lengths are
// varints, and a length in the ID must be minimal (the marshaller writes
// minimal ones, so an ID with another encoding has no form).
func labelsAreIDVarint(raw, id []byte) bool {
	for len(id) > 0 {
		name, ok := idField(id)
		if !ok {
			return false
		}
		value, ok := idField(id[len(name):])
		if !ok {
			return false
		}
		id = id[len(name)+len(value):]

		// name and value are the fields after their tags, lengths included
		msgLen := 1 + len(name) + 1 + len(value)
		if len(raw) < 1 || raw[0] != 0x0a { // field 1, bytes: a Label
			return false
		}
		l, k := binary.Uvarint(raw[1:])
		if k <= 0 || l != uint64(msgLen) || k != uvarintLen(uint64(msgLen)) {
			return false
		}
		raw = raw[1+k:]
		if len(raw) < msgLen || raw[0] != 0x0a || raw[1+len(name)] != 0x12 ||
			string(raw[1:1+len(name)]) != string(name) || string(raw[2+len(name):msgLen]) != string(value) {
			return false
		}
		raw = raw[msgLen:]
	}
	return len(raw) == 0
}

// idField returns the first field of an ID, its minimal varint length
// included, if it is one and not empty.
func idField(id []byte) ([]byte, bool) {
	l, n := binary.Uvarint(id)
	if n <= 0 || l == 0 || uint64(len(id)-n) < l || n != uvarintLen(l) {
		return nil, false
	}
	return id[:n+int(l)], true
}

// uvarintLen is the length of v's minimal varint encoding.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
