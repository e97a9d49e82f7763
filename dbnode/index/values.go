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
// The table is split into valueParts slots.Tables by hash, so growing a
// part re-places 1/16th of the entries (no long stall under the block's
// write lock at a million values); a part re-places its entries by their
// tags (the value hash's high 32 bits) without reading any ID. An entry's
// value is the ref+1 of the only series with the value, or valueMulti |
// an index into multi.
//
// Slots have no pointers, so the collector does not scan them either.
// All methods require the block's lock (add: write; the others: read).
type values struct {
	name  string // the label name, a substring of a stored ID
	parts [valueParts]slots.Table[uint32]
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

const (
	valuePartBits = 4
	valueParts    = 1 << valuePartBits

	// valueMulti marks an entry of a value of several series: the rest is
	// an index into values.multi. Refs stay below it (ErrFull).
	valueMulti = uint32(1) << 31
)

func newValues(name string) *values { return &values{name: name, singles: roaring.New()} }

// reserve sizes the table for n distinct values: each part for its
// share, with an eighth more for the hash's spread between parts.
func (vs *values) reserve(n int) {
	per := n/valueParts + n/valueParts/8 + 16
	for i := range vs.parts {
		vs.parts[i].Reserve(per)
	}
}

// valueHash splits the hash of a value into its part and its tag.
func valueHash(seed maphash.Seed, v string) (part int, tag uint32) {
	h := maphash.String(seed, v)
	return int(h & (valueParts - 1)), uint32(h >> 32)
}

// len returns the number of distinct values.
func (vs *values) len() int { return vs.n }

// valueOf returns the value of an entry: read from the ID of its only
// series, or the stored multi value.
func (vs *values) valueOf(e uint32, series *seriesTable) string {
	if e&valueMulti != 0 {
		return vs.multi[e&^valueMulti].value
	}
	return labelValue(series.id(e-1), vs.name)
}

func (vs *values) postingsOf(e uint32) postings {
	if e&valueMulti != 0 {
		return postings{bm: vs.multi[e&^valueMulti].bm}
	}
	return postings{one: e - 1}
}

// find returns the position in p of v's entry and whether v is there.
func (vs *values) find(p *slots.Table[uint32], tag uint32, v string, series *seriesTable) (int, bool) {
	return p.Find(tag, func(e uint32) bool { return vs.valueOf(e, series) == v })
}

// get returns the postings of v.
func (vs *values) get(v string, series *seriesTable) (postings, bool) {
	part, tag := valueHash(series.seed, v)
	p := &vs.parts[part]
	i, ok := vs.find(p, tag, v, series)
	if !ok {
		return postings{}, false
	}
	return vs.postingsOf(p.At(i)), true
}

// add records that series ref has value v (a substring of its stored ID)
// and reports whether v is new to the table.
func (vs *values) add(v string, ref uint32, series *seriesTable) bool {
	part, tag := valueHash(series.seed, v)
	return vs.addHashed(v, part, tag, ref, series)
}

// addHashed is add of a value whose hash valueHash split into part and
// tag already (PrepareNewTagged's).
func (vs *values) addHashed(v string, part int, tag uint32, ref uint32, series *seriesTable) bool {
	p := &vs.parts[part]
	i, ok := vs.find(p, tag, v, series)
	if !ok {
		p.Insert(tag, ref+1)
		vs.n++
		vs.singles.Add(ref)
		return true
	}
	e := p.At(i)
	if e&valueMulti != 0 {
		vs.multi[e&^valueMulti].bm.Add(ref)
		return false
	}
	if one := e - 1; one != ref {
		// multi is indexed below valueMulti: it cannot outgrow that, as
		// it holds fewer values than there are refs.
		idx := uint32(len(vs.multi))
		vs.multi = append(vs.multi, multiValue{value: v, bm: roaring.BitmapOf(one, ref)})
		p.Set(i, valueMulti|idx)
		vs.singles.Remove(one)
	}
	return false
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
