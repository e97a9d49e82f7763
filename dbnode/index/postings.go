package index

import "github.com/RoaringBitmap/roaring/v2"

// postings is the set of series refs carrying one label pair in one block.
//
// Most label pairs of a real workload are rare (an instance, a pod, a
// request path seen by one series), and an empty roaring bitmap with one
// container costs ~150 bytes of small allocations. So a pair seen by a single
// series keeps its ref inline (in its value table's slot: values.go) and
// only grows a bitmap at the second series.
type postings struct {
	bm  *roaring.Bitmap // nil: the set is exactly {one}
	one uint32
}

// intersects reports whether p and set share a ref.
func (p postings) intersects(set *roaring.Bitmap) bool {
	if p.bm == nil {
		return set.Contains(p.one)
	}
	return p.bm.Intersects(set)
}

// removeFrom removes p's refs from set in place.
func (p postings) removeFrom(set *roaring.Bitmap) {
	if p.bm == nil {
		set.Remove(p.one)
		return
	}
	set.AndNot(p.bm)
}

// union accumulates postings and builds their union as a fresh bitmap that
// shares no memory with the index, so callers may modify it after the block
// lock is released.
type union struct {
	bms     []*roaring.Bitmap
	singles []uint32
}

func (u *union) add(p postings) {
	if p.bm == nil {
		u.singles = append(u.singles, p.one)
		return
	}
	u.bms = append(u.bms, p.bm)
}

func (u *union) build() *roaring.Bitmap {
	var out *roaring.Bitmap
	if len(u.bms) == 0 {
		out = roaring.New()
	} else {
		out = roaring.FastOr(u.bms...) // clones when given one bitmap
	}
	if len(u.singles) > 0 {
		out.AddMany(u.singles)
	}
	return out
}
