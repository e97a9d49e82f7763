package index

import "github.com/RoaringBitmap/roaring/v2"

// match returns a fresh bitmap of the refs in b whose series satisfy every
// step of p. The caller holds b.mu.RLock.
func (b *block) match(p plan, series *seriesTable) *roaring.Bitmap {
	var res *roaring.Bitmap
	for _, s := range p {
		if s.matchAll {
			continue
		}
		if res == nil {
			if s.subtract {
				res = b.all.Clone()
			} else {
				res = b.postingsFor(s)
				continue
			}
		}
		if res.IsEmpty() {
			return res
		}
		switch {
		case b.cheaperToFilter(res, s):
			filter(res, s, series)
		case s.subtract:
			b.subtractNonMatching(res, s)
		default:
			res.And(b.postingsFor(s))
		}
	}
	if res == nil { // no steps, or only match-all ones
		res = b.all.Clone()
	}
	return res
}

// postingsFor returns the series whose value of the step's label matches,
// for an intersecting step.
func (b *block) postingsFor(s step) *roaring.Bitmap {
	vals := b.names[s.m.Name]
	var u union
	if s.lookup != nil {
		for _, v := range s.lookup {
			if p, ok := vals[v]; ok {
				u.add(p)
			}
		}
		return u.build()
	}
	for v, p := range vals {
		if s.m.Matches(v) {
			u.add(p)
		}
	}
	return u.build()
}

// subtractNonMatching removes from res the series whose value of the step's
// label does not match, for a subtracting step (series without the label
// stay: the matcher accepts "").
func (b *block) subtractNonMatching(res *roaring.Bitmap, s step) {
	vals := b.names[s.m.Name]
	if s.lookup != nil {
		for _, v := range s.lookup {
			if p, ok := vals[v]; ok {
				p.removeFrom(res)
			}
		}
		return
	}
	for v, p := range vals {
		if !s.m.Matches(v) {
			p.removeFrom(res)
		}
	}
}

// cheaperToFilter reports whether testing each candidate's own label value
// beats testing every value of the label: true when a step needs a full
// scan of a label with many more values than there are candidates left (a
// regexp on instance or pod after {__name__="x", job="y"}).
func (b *block) cheaperToFilter(res *roaring.Bitmap, s step) bool {
	if s.lookup != nil {
		return false
	}
	return res.GetCardinality()*4 < uint64(len(b.names[s.m.Name]))
}

// filter keeps in res only the series whose own label value satisfies the
// step's matcher (an absent label reads as "", as in Prometheus).
func filter(res *roaring.Bitmap, s step, series *seriesTable) {
	var drop []uint32
	series.each(res, func(ref uint32, id string) {
		if !s.m.Matches(labelValue(id, s.m.Name)) {
			drop = append(drop, ref)
		}
	})
	for _, ref := range drop {
		res.Remove(ref)
	}
}
