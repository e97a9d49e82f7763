package index

import (
	"encoding/binary"
	"hash/maphash"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/tessera-tsdb/tessera/internal/slots"
)

// values is one label name's value -> postings table in one block.
//
// Why not a map[string]postings: a label whose values are nearly all
// unique (a pod, a container, a request ID) has as many entries as the
// block has series, and a Go map entry of a string key and an inline
// postings costs 32 bytes of slot plus the map's control bytes and slack,
// ~55 bytes a series at a million series, half the index. Here a value
// seen by one series costs one 8-byte slot holding a hash tag and the
// series' ref: its bytes are not stored at all, they are read back from
// the series' ID (every ID is kept once in the series table) when a tag
// matches or when the values are listed. A value seen by two or more
// series moves to multi, with the value (a substring of a stored ID, as
// before) and a roaring bitmap.
//
// The table is split into valueParts open-addressing parts by hash, so
// growing a part rehashes 1/16th of the slots (no long stall under the
// block's write lock at a million values); a part re-places its slots by
// their tags without reading any ID.
//
// Slots have no pointers, so the collector does not scan them either.
// All methods require the block's lock (add: write; the others: read).
type values struct {
	name  string // the label name, a substring of a stored ID
	parts [valueParts]valuePart
	multi []multiValue // values of two or more series, addressed by slots
	n     int          // distinct values
	// singles holds the refs of the values seen by one series. Listing
	// values walks it in ref order rather than the slots in hash order:
	// ref order reads the ref -> ID pages sequentially and the IDs
	// mostly in allocation order, where hash order missed cache twice a
	// value (5x slower regexps over a unique label in
	// BenchmarkQueryUniqueLabel). Dense refs cost it about a bit each.
	singles *roaring.Bitmap
}

// multiValue is a value seen by at least two series of the block.
type multiValue struct {
	value string // substring of a stored ID
	bm    *roaring.Bitmap
}

type valuePart struct {
	slots []uint64 // len is 0 or a slots.Grow size; load at most 3/4
	n     int
}

const (
	valuePartBits = 4
	valueParts    = 1 << valuePartBits
	minValueSlots = 8

	// A slot is used | tag<<tagShift | multi<<32 | payload, zero when
	// empty. payload is the ref of the only series with the value, or an
	// index into values.multi when the multi bit is set.
	slotUsed   = uint64(1) << 63
	slotMulti  = uint64(1) << 32
	tagShift   = 33
	slotTagBit = 30 // tag bits kept in a slot
)

func newValues(name string) *values { return &values{name: name, singles: roaring.New()} }

// valueHash splits the hash of a value into its part and its tag.
func valueHash(seed maphash.Seed, v string) (part int, tag uint32) {
	h := maphash.String(seed, v)
	return int(h & (valueParts - 1)), uint32(h >> (64 - slotTagBit))
}

func slotTag(s uint64) uint32 { return uint32(s>>tagShift) & (1<<slotTagBit - 1) }

// len returns the number of distinct values.
func (vs *values) len() int { return vs.n }

// valueOf returns the value of the slot's entry: read from the ID of its
// only series, or the stored multi value.
func (vs *values) valueOf(s uint64, series *seriesTable) string {
	if s&slotMulti != 0 {
		return vs.multi[uint32(s)].value
	}
	return labelValue(series.id(uint32(s)), vs.name)
}

func (vs *values) postingsOf(s uint64) postings {
	if s&slotMulti != 0 {
		return postings{bm: vs.multi[uint32(s)].bm}
	}
	return postings{one: uint32(s)}
}

// find returns the index in p of v's slot, or of the empty slot where v
// would go, and whether v is there. p must have slots.
func (vs *values) find(p *valuePart, tag uint32, v string, series *seriesTable) (int, bool) {
	n := len(p.slots)
	for i := slots.Home(tag<<(32-slotTagBit), n); ; i = slots.Next(i, n) {
		s := p.slots[i]
		if s == 0 {
			return i, false
		}
		if slotTag(s) == tag && vs.valueOf(s, series) == v {
			return i, true
		}
	}
}

// get returns the postings of v.
func (vs *values) get(v string, series *seriesTable) (postings, bool) {
	part, tag := valueHash(series.seed, v)
	p := &vs.parts[part]
	if len(p.slots) == 0 {
		return postings{}, false
	}
	i, ok := vs.find(p, tag, v, series)
	if !ok {
		return postings{}, false
	}
	return vs.postingsOf(p.slots[i]), true
}

// add records that series ref has value v (a substring of its stored ID)
// and reports whether v is new to the table.
func (vs *values) add(v string, ref uint32, series *seriesTable) bool {
	part, tag := valueHash(series.seed, v)
	p := &vs.parts[part]
	if (p.n+1)*4 > len(p.slots)*3 {
		p.grow()
	}
	i, ok := vs.find(p, tag, v, series)
	if !ok {
		p.slots[i] = slotUsed | uint64(tag)<<tagShift | uint64(ref)
		p.n++
		vs.n++
		vs.singles.Add(ref)
		return true
	}
	s := p.slots[i]
	if s&slotMulti != 0 {
		vs.multi[uint32(s)].bm.Add(ref)
		return false
	}
	if one := uint32(s); one != ref {
		// multi is indexed by the low 32 bits of a slot: it cannot outgrow
		// them, as it holds fewer values than there are refs.
		idx := uint32(len(vs.multi))
		vs.multi = append(vs.multi, multiValue{value: v, bm: roaring.BitmapOf(one, ref)})
		p.slots[i] = slotUsed | uint64(tag)<<tagShift | slotMulti | uint64(idx)
		vs.singles.Remove(one)
	}
	return false
}

// grow enlarges the part's slots (slots.Grow), re-placing them by their
// tags.
func (p *valuePart) grow() {
	old := p.slots
	p.slots = make([]uint64, slots.Grow(len(old), minValueSlots))
	n := len(p.slots)
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := slots.Home(slotTag(s)<<(32-slotTagBit), n)
		for p.slots[i] != 0 {
			i = slots.Next(i, n)
		}
		p.slots[i] = s
	}
}

// each calls fn with every value and its postings: the values of several
// series first, then those of one series in ref order.
func (vs *values) each(series *seriesTable, fn func(v string, p postings)) {
	for _, m := range vs.multi {
		fn(m.value, postings{bm: m.bm})
	}
	it := vs.singles.Iterator()
	for it.HasNext() {
		ref := it.Next()
		fn(labelValue(series.id(ref), vs.name), postings{one: ref})
	}
}

// intersects reports whether some series with a value of this label is in
// set, without reading the values.
func (vs *values) intersects(set *roaring.Bitmap) bool {
	for _, m := range vs.multi {
		if m.bm.Intersects(set) {
			return true
		}
	}
	return vs.singles.Intersects(set)
}

// labelValue returns the value of label name in a stored ID, or "" if the
// series does not have it (Prometheus treats both the same). It walks the
// length-prefixed fields without decoding the others: the value tables
// call it for every value seen by one series when they list values.
func labelValue(id, name string) string {
	for i := 0; i < len(id); {
		n, ok := fieldAt(id, &i)
		if !ok {
			return ""
		}
		v, ok := fieldAt(id, &i)
		if !ok {
			return ""
		}
		if n == name {
			return v
		}
	}
	return ""
}

// fieldAt returns the uvarint-length-prefixed field of id at *i and moves
// *i past it; false if id is cut short (never for a validated ID).
func fieldAt(id string, i *int) (string, bool) {
	l, w := binary.Uvarint(bytesOf(id[*i:]))
	if w <= 0 || uint64(len(id)-*i-w) < l {
		return "", false
	}
	start := *i + w
	*i = start + int(l)
	return id[start:*i], true
}
