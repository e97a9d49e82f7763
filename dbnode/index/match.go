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
				res = b.postingsFor(s, series)
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
			b.subtractNonMatching(res, s, series)
		default:
			res.And(b.postingsFor(s, series))
		}
	}
	if res == nil { // no steps, or only match-all ones
		res = b.all.Clone()
	}
	return res
}

// postingsFor returns the series whose value of the step's label matches,
// for an intersecting step.
func (b *block) postingsFor(s step, series *seriesTable) *roaring.Bitmap {
	vals := b.names[s.m.Name]
	var u union
	if vals == nil {
		return u.build()
	}
	if s.lookup != nil {
		for _, v := range s.lookup {
			if p, ok := vals.get(v, series); ok {
				u.add(p)
			}
		}
		return u.build()
	}
	vals.each(series, func(v string, p postings) {
		if s.m.Matches(v) {
			u.add(p)
		}
	})
	return u.build()
}

// subtractNonMatching removes from res the series whose value of the step's
// label does not match, for a subtracting step (series without the label
// stay: the matcher accepts "").
func (b *block) subtractNonMatching(res *roaring.Bitmap, s step, series *seriesTable) {
	vals := b.names[s.m.Name]
	if vals == nil {
		return
	}
	if s.lookup != nil {
		for _, v := range s.lookup {
			if p, ok := vals.get(v, series); ok {
				p.removeFrom(res)
			}
		}
		return
	}
	vals.each(series, func(v string, p postings) {
		if !s.m.Matches(v) {
			p.removeFrom(res)
		}
	})
}

// cheaperToFilter reports whether testing each candidate's own label value
// beats testing every value of the label: true when a step needs a full
// scan of a label with many more values than there are candidates left (a
// regexp on instance or pod after {__name__="x", job="y"}).
func (b *block) cheaperToFilter(res *roaring.Bitmap, s step) bool {
	if s.lookup != nil {
		return false
	}
	vals := b.names[s.m.Name]
	return vals != nil && res.GetCardinality()*4 < uint64(vals.len())
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
